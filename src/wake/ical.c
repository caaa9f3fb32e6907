/*
 * ical.c: libical's functions, loaded on first use (ical.h says why it is not linked).
 */
#include "base/common.h"

#include "os/dl.h"
#include "wake/ical.h"

struct vg_libical vg_libical;

#define SYM(name)                                                                                  \
    {                                                                                              \
#name, (void **)&vg_libical.name                                                           \
    }
static const struct vg_dl_symbol symbols[] = {
    SYM(icalerror_clear_errno),
    SYM(icalerror_set_errors_are_fatal),
    SYM(icalrecur_iterator_new),
    SYM(icalrecur_iterator_next),
    SYM(icalrecur_iterator_set_start),
    SYM(icalrecur_iterator_free),
    SYM(icalrecurrencetype_day_position),
    SYM(icalrecurrencetype_from_string),
    SYM(icaltime_adjust),
    SYM(icaltime_as_timet),
    SYM(icaltime_as_timet_with_zone),
    SYM(icaltime_day_of_week),
    SYM(icaltime_days_in_month),
    SYM(icaltime_from_string),
    SYM(icaltime_from_timet_with_zone),
    SYM(icaltime_is_null_time),
    SYM(icaltime_normalize),
    SYM(icaltime_null_time),
    SYM(icaltimezone_get_builtin_timezone),
    SYM(icaltimezone_get_utc_timezone),
};
#undef SYM

static struct vg_dl_library libical = {
    .file = "libical.so.3", /* the soname of Debian 12's libical3 and Debian 13's libical3t64 */
    .env = "VIGIL_LIBICAL",
    .needed = "timers need libical",
    .package = "libical3, or libical3t64 on Debian 13",
    .symbols = symbols,
    .n_symbols = VG_ARRAY_LEN(symbols),
};

vigil_code vg_libical_load(vigil_error *err)
{
    return vg_dl_load(&libical, err);
}
