/*
 * ical.h: libical's functions, loaded when a timer first needs them (src/os/dl.h).
 *
 * vigil does not link libical: Debian's libical loads ICU and the C++ runtime, about 3 MB of
 * resident memory in every process, and only timers' calendar arithmetic uses it. The member
 * names are libical's own, so the calls read as in its documentation.
 */
#ifndef VG_WAKE_ICAL_H
#define VG_WAKE_ICAL_H

#include "base/common.h"

#include <libical/ical.h>

struct vg_libical {
    void (*icalerror_clear_errno)(void);
    void (*icalerror_set_errors_are_fatal)(int fatal);
    icalrecur_iterator *(*icalrecur_iterator_new)(struct icalrecurrencetype rule,
                                                  struct icaltimetype dtstart);
    struct icaltimetype (*icalrecur_iterator_next)(icalrecur_iterator *it);
    int (*icalrecur_iterator_set_start)(icalrecur_iterator *it, struct icaltimetype start);
    void (*icalrecur_iterator_free)(icalrecur_iterator *it);
    int (*icalrecurrencetype_day_position)(short day);
    struct icalrecurrencetype (*icalrecurrencetype_from_string)(const char *str);
    void (*icaltime_adjust)(struct icaltimetype *tt, const int days, const int hours,
                            const int minutes, const int seconds);
    time_t (*icaltime_as_timet)(const struct icaltimetype tt);
    time_t (*icaltime_as_timet_with_zone)(const struct icaltimetype tt, const icaltimezone *zone);
    int (*icaltime_day_of_week)(const struct icaltimetype t);
    int (*icaltime_days_in_month)(const int month, const int year);
    struct icaltimetype (*icaltime_from_string)(const char *str);
    struct icaltimetype (*icaltime_from_timet_with_zone)(const time_t tm, const int is_date,
                                                         const icaltimezone *zone);
    int (*icaltime_is_null_time)(const struct icaltimetype t);
    struct icaltimetype (*icaltime_normalize)(const struct icaltimetype tt);
    struct icaltimetype (*icaltime_null_time)(void);
    icaltimezone *(*icaltimezone_get_builtin_timezone)(const char *location);
    icaltimezone *(*icaltimezone_get_utc_timezone)(void);
};

/* The table, filled by the first successful vg_libical_load; not to be called before one. */
extern struct vg_libical vg_libical;

/* Loads libical into vg_libical once per process; VIGIL_EUNSUPPORTED when it cannot. The file
 * is `libical.so.3`, or the one named by the environment variable VIGIL_LIBICAL. */
vigil_code vg_libical_load(vigil_error *err);

#endif
