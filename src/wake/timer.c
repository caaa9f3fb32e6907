/*
 * timer.c: persisted timers. A timer keeps its intent - an RFC 5545 RRULE, a 5-field cron line
 * or a one-shot time - and an IANA zone; the next run is always computed from that intent in
 * local wall time with libical's zone data, so "07:00 Europe/Berlin" stays 07:00 local across
 * DST changes, and a zone change or a clock jump just recomputes it.
 *
 * Firing: every timer due at "now" enqueues ONE wake whose run key is H(agent, timer, the
 * persisted scheduled time); every firing missed during downtime is coalesced into it with
 * timer_catchup metadata; the timer advances in the same transaction.
 *
 * Sections: zones and local time; parsing; next run; records; firing.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "wake/ical.h"
#include "wake/wake_int.h"

/* libical's functions (wake/ical.h): the entry points that reach them load them first
 * (vg_timer_zone_valid, vg_timer_spec_parse, vg_timer_spec_next, vg_timer_set_zone). */
static const struct vg_libical *const ical = &vg_libical;

/* Occurrences examined at most when stepping through a rule (a guard against rules that would
 * otherwise iterate for a very long time, e.g. FREQ=SECONDLY over years). */
#define STEP_CAP 200000
/* Days examined at most when searching the next cron match. */
#define CRON_DAYS (366 * 9)

/* ---- zones and local time -------------------------------------------------------------------- */

static int tz_chars_ok(const char *tz)
{
    size_t n = strlen(tz);
    if (!n || n >= 64 || tz[0] == '/' || strstr(tz, ".."))
        return 0;
    for (const char *p = tz; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '/' || *p == '_' || *p == '-' || *p == '+'))
            return 0;
    return 1;
}

static icaltimezone *zone_get(const char *tz)
{
    static int quiet;
    if (!quiet) { /* bad input is an error we report, never an abort inside libical */
        ical->icalerror_set_errors_are_fatal(0);
        quiet = 1;
    }
    if (!tz || !strcmp(tz, "UTC") || !strcmp(tz, "Etc/UTC"))
        return ical->icaltimezone_get_utc_timezone();
    if (!tz_chars_ok(tz))
        return NULL;
    icaltimezone *z = ical->icaltimezone_get_builtin_timezone(tz);
    ical->icalerror_clear_errno();
    return z;
}

int vg_timer_zone_valid(const char *tz)
{
    return vg_libical_load(NULL) == VIGIL_OK && zone_get(tz) != NULL;
}

static struct icaltimetype to_local(int64_t ms, icaltimezone *z)
{
    time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    return ical->icaltime_from_timet_with_zone(t, 0, z);
}

static int same_wall(struct icaltimetype a, struct icaltimetype b)
{
    return a.year == b.year && a.month == b.month && a.day == b.day && a.hour == b.hour &&
           a.minute == b.minute && a.second == b.second;
}

/* Seconds since the epoch of a wall time read as if it were UTC (for wall-time differences). */
static int64_t naive(struct icaltimetype t)
{
    t.zone = NULL;
    return (int64_t)ical->icaltime_as_timet(t);
}

/*
 * Local wall time in zone z to ms since the epoch, as RFC 5545 3.3.5 reads it: a wall time that
 * does not exist (the spring-forward gap) means the instant that long after the gap's start, so
 * 02:30 on a 02:00->03:00 day is 03:30; one that exists twice (fall-back) means the first.
 */
static int64_t from_local(struct icaltimetype t, icaltimezone *z)
{
    t.is_date = 0;
    t.zone = NULL;
    int64_t ms = (int64_t)ical->icaltime_as_timet_with_zone(t, z) * 1000;
    struct icaltimetype back = to_local(ms, z);
    if (!same_wall(back, t)) /* in a gap: move by the wall time the zone skipped */
        return ms + (naive(t) - naive(back)) * 1000;
    static const int64_t shifts[] = {3600000, 1800000, 7200000};
    for (size_t i = 0; i < VG_ARRAY_LEN(shifts); i++)
        if (same_wall(to_local(ms - shifts[i], z), t))
            return ms - shifts[i]; /* the first of two occurrences */
    return ms;
}

static struct icaltimetype wall(int y, int mo, int d, int h, int mi, int s)
{
    struct icaltimetype t = ical->icaltime_null_time();
    t.year = y;
    t.month = mo;
    t.day = d;
    t.hour = h;
    t.minute = mi;
    t.second = s;
    return t;
}

/* ---- parsing --------------------------------------------------------------------------------- */

const char *vg_timer_kind_name(enum vg_timer_kind k)
{
    return k == VG_TIMER_RRULE ? "rrule" : k == VG_TIMER_CRON ? "cron" : "at";
}

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

static int parse_num(const char **p, int lo, const char *const *names, int n_names, int *out)
{
    const char *s = *p;
    if (names && ((s[0] | 32) >= 'a' && (s[0] | 32) <= 'z')) {
        for (int i = 0; i < n_names; i++)
            if ((s[0] | 32) == names[i][0] && (s[1] | 32) == names[i][1] &&
                (s[2] | 32) == names[i][2]) {
                *out = i + lo;
                *p = s + 3;
                return 0;
            }
        return -1;
    }
    if (*s < '0' || *s > '9')
        return -1;
    long v = 0;
    while (*s >= '0' && *s <= '9' && v < 1000)
        v = v * 10 + (*s++ - '0');
    *out = (int)v;
    *p = s;
    return 0;
}

/* One cron field into a bit set of [lo, hi]. */
static int parse_field(const char *f, int lo, int hi, const char *const *names, int n_names,
                       uint64_t *bits, int *any)
{
    const char *p = f;
    *bits = 0;
    *any = !strcmp(f, "*") || !strcmp(f, "?");
    for (;;) {
        int a, b, step = 1;
        if (*p == '*' || *p == '?') {
            a = lo;
            b = hi;
            p++;
        } else {
            if (parse_num(&p, names == day_names ? 0 : lo, names, n_names, &a))
                return -1;
            b = a;
            if (*p == '-') {
                p++;
                if (parse_num(&p, names == day_names ? 0 : lo, names, n_names, &b))
                    return -1;
            }
        }
        if (*p == '/') {
            p++;
            if (parse_num(&p, 0, NULL, 0, &step) || step < 1 || step > hi)
                return -1;
            if (a == b)
                b = names == day_names ? 6 : hi; /* "5/15": from 5 to the end, every 15 */
        }
        if (a < lo || b > (names == day_names ? 7 : hi) || a > b)
            return -1;
        for (int v = a; v <= b; v += step)
            *bits |= (uint64_t)1 << (names == day_names && v == 7 ? 0 : v);
        if (*p == ',') {
            p++;
            continue;
        }
        return *p ? -1 : 0;
    }
}

static vigil_code parse_cron(struct vg_timer_spec *s, const char *text, vigil_error *err)
{
    static const struct {
        const char *macro, *line;
    } macros[] = {{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
                  {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
                  {"@hourly", "0 * * * *"}};
    char buf[512], *f[6];
    int n = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(macros); i++)
        if (!strcmp(text, macros[i].macro))
            text = macros[i].line;
    snprintf(buf, sizeof buf, "%s", text);
    for (char *p = buf; *p && n < 6;) {
        while (*p == ' ' || *p == '\t')
            *p++ = '\0';
        if (!*p)
            break;
        f[n++] = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
    }
    if (n != 5)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "invalid cron expression \"%.80s\": use 5 fields (minute hour day month "
                       "weekday) or @daily, @hourly, @weekly, @monthly, @yearly",
                       text);
    uint64_t mi, h, dom, mo, dow;
    int any;
    if (parse_field(f[0], 0, 59, NULL, 0, &mi, &any) ||
        parse_field(f[1], 0, 23, NULL, 0, &h, &any) ||
        parse_field(f[2], 1, 31, NULL, 0, &dom, &s->dom_any) ||
        parse_field(f[3], 1, 12, month_names, 12, &mo, &any) ||
        parse_field(f[4], 0, 6, day_names, 7, &dow, &s->dow_any))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "invalid cron expression \"%.80s\": a field is out of "
                       "range or malformed",
                       text);
    s->minutes = mi;
    s->hours = (uint32_t)h;
    s->doms = (uint32_t)dom;
    s->months = (uint16_t)mo;
    s->dows = (uint8_t)dow;
    return VIGIL_OK;
}

/* "YYYY-MM-DDTHH:MM[:SS]" local wall time (no zone) into t; 0 on success. */
static int parse_local(const char *text, struct icaltimetype *t)
{
    int v[6] = {0};
    static const char seps[] = "--T::";
    const char *p = text;
    for (int i = 0; i < 6; i++) {
        int digits = 0, x = 0;
        while (*p >= '0' && *p <= '9' && digits < 4) {
            x = x * 10 + (*p++ - '0');
            digits++;
        }
        if (!digits)
            return -1;
        v[i] = x;
        if (!*p && i >= 4)
            break;
        if (i == 5 || (*p != seps[i] && !(i == 2 && *p == ' ')))
            return -1;
        p++;
    }
    if (*p || v[0] < 1970 || v[0] > 9999 || v[1] < 1 || v[1] > 12 || v[2] < 1 ||
        v[2] > ical->icaltime_days_in_month(v[1], v[0]) || v[3] > 23 || v[4] > 59 || v[5] > 59)
        return -1;
    *t = wall(v[0], v[1], v[2], v[3], v[4], v[5]);
    return 0;
}

static int list_used(const short *v)
{
    return v[0] != ICAL_RECURRENCE_ARRAY_MAX;
}

/*
 * Refuse rules libical would take unbounded time over: a minutely or hourly rule filtered by
 * month, day of month/year, week or set position steps through every minute or hour looking for
 * a match that may never come (FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=30 runs for minutes). Those
 * schedules are written as DAILY with BYHOUR/BYMINUTE lists, or as cron lines. Ordinal weekdays
 * (BYDAY=-1FR) only exist in monthly and yearly rules, within their range.
 */
static vigil_code rule_check(const struct icalrecurrencetype *r, const char *text, vigil_error *err)
{
    if (r->freq <= ICAL_HOURLY_RECURRENCE &&
        (list_used(r->by_month) || list_used(r->by_month_day) || list_used(r->by_year_day) ||
         list_used(r->by_week_no) || list_used(r->by_set_pos)))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "recurrence rule \"%.80s\": a minutely or hourly rule "
                       "cannot filter by month, day, week or position (use FREQ=DAILY with "
                       "BYHOUR/BYMINUTE, or a cron line)",
                       text);
    for (int i = 0; i < ICAL_BY_DAY_SIZE && r->by_day[i] != ICAL_RECURRENCE_ARRAY_MAX; i++) {
        int pos = ical->icalrecurrencetype_day_position(r->by_day[i]);
        int max = r->freq == ICAL_MONTHLY_RECURRENCE  ? 5
                  : r->freq == ICAL_YEARLY_RECURRENCE ? 53
                                                      : 0;
        if (pos < -max || pos > max)
            return VG_FAIL(err, VIGIL_EINVAL,
                           "recurrence rule \"%.80s\": weekday position %d "
                           "is out of range",
                           text, pos);
    }
    return VIGIL_OK;
}

vigil_code vg_timer_spec_parse(struct vg_timer_spec *s, enum vg_timer_kind kind, const char *text,
                               const char *tz, int64_t anchor_ms, vigil_error *err)
{
    icaltimezone *z;
    vigil_code rc;
    memset(s, 0, sizeof *s);
    s->kind = kind;
    if (!text || !*text || strlen(text) >= sizeof s->text)
        return VG_FAIL(err, VIGIL_EINVAL, "a timer needs a schedule of 1 to %d bytes",
                       (int)sizeof s->text - 1);
    if (!tz || !*tz)
        tz = "UTC";
    if ((rc = vg_libical_load(err)))
        return rc;
    if (!(z = zone_get(tz)))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown time zone \"%.64s\": use an IANA name such as "
                       "Europe/Berlin",
                       tz);
    snprintf(s->text, sizeof s->text, "%s", text);
    snprintf(s->tz, sizeof s->tz, "%s", tz);
    if (kind == VG_TIMER_CRON)
        return parse_cron(s, text, err);
    if (kind == VG_TIMER_AT) {
        struct icaltimetype t;
        if (!vg_time_parse_ms(text, &s->at_ms))
            return VIGIL_OK;
        if (parse_local(text, &t))
            return VG_FAIL(err, VIGIL_EINVAL,
                           "invalid time \"%.80s\": use RFC 3339 or "
                           "YYYY-MM-DDTHH:MM in the timer's zone",
                           text);
        s->at_ms = from_local(t, z);
        return VIGIL_OK;
    }
    const char *rule = !strncmp(text, "RRULE:", 6) ? text + 6 : text;
    for (const char *p = rule; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            return VG_FAIL(err, VIGIL_EINVAL, "invalid recurrence rule: unexpected character");
    /* RFC 7529's RSCALE (non-Gregorian calendars): libical keeps its value in memory it never
     * frees, on success and on some failures alike (found by fuzz_timer_spec), and a timer
     * computes its next run from the rule again and again. */
    for (const char *p = rule; *p; p++)
        if (!strncasecmp(p, "RSCALE", 6))
            return VG_FAIL(err, VIGIL_EINVAL,
                           "recurrence rule \"%.80s\": RSCALE (non-Gregorian calendars) is not "
                           "supported",
                           text);
    struct icalrecurrencetype r = ical->icalrecurrencetype_from_string(rule);
    ical->icalerror_clear_errno();
    if (r.freq == ICAL_NO_RECURRENCE)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "invalid recurrence rule \"%.80s\": expected RFC 5545 "
                       "like FREQ=DAILY;BYHOUR=7;BYMINUTE=0",
                       text);
    if (r.freq < ICAL_MINUTELY_RECURRENCE)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "recurrence rule \"%.80s\" repeats more often than "
                       "once a minute",
                       text);
    if ((rc = rule_check(&r, text, err)))
        return rc;
    /* DTSTART: local midnight of the anchor's day, so BYHOUR/BYMINUTE rules fire on time. */
    struct icaltimetype a = to_local(anchor_ms, z);
    snprintf(s->dtstart, sizeof s->dtstart, "%04d%02d%02dT000000", a.year, a.month, a.day);
    return VIGIL_OK;
}

/* ---- next run -------------------------------------------------------------------------------- */

static vigil_code next_rrule(const struct vg_timer_spec *s, icaltimezone *z, int64_t after,
                             int64_t *next, int *found, vigil_error *err)
{
    const char *rule = !strncmp(s->text, "RRULE:", 6) ? s->text + 6 : s->text;
    struct icalrecurrencetype r = ical->icalrecurrencetype_from_string(rule);
    struct icaltimetype start = ical->icaltime_from_string(s->dtstart);
    ical->icalerror_clear_errno();
    if (r.freq == ICAL_NO_RECURRENCE || ical->icaltime_is_null_time(start))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid recurrence rule \"%.80s\"", s->text);
    icalrecur_iterator *it = ical->icalrecur_iterator_new(r, start);
    ical->icalerror_clear_errno();
    if (!it)
        return VG_FAIL(err, VIGIL_EINVAL, "recurrence rule \"%.80s\" cannot be evaluated", s->text);
    int64_t start_ms = from_local(start, z);
    /* Jump close to `after` (less a margin for DST offsets), unless COUNT forbids jumping. */
    if (r.count == 0 && after - 3 * 3600000LL > start_ms)
        ical->icalrecur_iterator_set_start(it, to_local(after - 3 * 3600000LL, z));
    ical->icalerror_clear_errno();
    *found = 0;
    for (int i = 0; i < STEP_CAP; i++) {
        struct icaltimetype t = ical->icalrecur_iterator_next(it);
        if (ical->icaltime_is_null_time(t))
            break;
        int64_t ms = from_local(t, z);
        if (ms > after) {
            *next = ms;
            *found = 1;
            break;
        }
    }
    ical->icalrecur_iterator_free(it);
    ical->icalerror_clear_errno();
    return VIGIL_OK;
}

static int cron_day_ok(const struct vg_timer_spec *s, struct icaltimetype d)
{
    if (!(s->months & (1u << d.month)))
        return 0;
    int dom = (s->doms >> d.day) & 1;
    int dow = (s->dows >> (ical->icaltime_day_of_week(d) - 1)) & 1;
    if (s->dom_any && s->dow_any)
        return 1;
    if (s->dom_any)
        return dow;
    if (s->dow_any)
        return dom;
    return dom || dow; /* cron: both restricted means either */
}

static void next_cron(const struct vg_timer_spec *s, icaltimezone *z, int64_t after, int64_t *next,
                      int *found)
{
    struct icaltimetype day = to_local(after, z);
    day.hour = day.minute = day.second = 0;
    *found = 0;
    for (int i = 0; i < CRON_DAYS; i++) {
        struct icaltimetype d = wall(day.year, day.month, day.day, 0, 0, 0);
        if (i) {
            ical->icaltime_adjust(&d, i, 0, 0, 0);
            d = ical->icaltime_normalize(d);
        }
        if (!cron_day_ok(s, d))
            continue;
        for (int h = 0; h < 24; h++) {
            if (!(s->hours & (1u << h)))
                continue;
            for (int m = 0; m < 60; m++) {
                if (!(s->minutes & ((uint64_t)1 << m)))
                    continue;
                /* A wall time in a spring-forward gap maps past the gap; one in the repeated
                 * fall-back hour maps to one instant: it fires once. */
                int64_t ms = from_local(wall(d.year, d.month, d.day, h, m, 0), z);
                if (ms > after) {
                    *next = ms;
                    *found = 1;
                    return;
                }
            }
        }
    }
}

vigil_code vg_timer_spec_next(const struct vg_timer_spec *s, int64_t after_ms, int64_t *next,
                              int *found, vigil_error *err)
{
    vigil_code rc = vg_libical_load(err);
    if (rc)
        return rc;
    icaltimezone *z = zone_get(s->tz);
    if (!z)
        return VG_FAIL(err, VIGIL_EINVAL, "unknown time zone \"%.64s\"", s->tz);
    switch (s->kind) {
    case VG_TIMER_AT:
        *found = s->at_ms > after_ms;
        if (*found)
            *next = s->at_ms;
        return VIGIL_OK;
    case VG_TIMER_CRON:
        next_cron(s, z, after_ms, next, found);
        return VIGIL_OK;
    default:
        return next_rrule(s, z, after_ms, next, found, err);
    }
}

/* ---- records --------------------------------------------------------------------------------- */

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static int kind_parse(const char *name, enum vg_timer_kind *k)
{
    if (!strcmp(name, "rrule"))
        *k = VG_TIMER_RRULE;
    else if (!strcmp(name, "cron"))
        *k = VG_TIMER_CRON;
    else if (!strcmp(name, "at"))
        *k = VG_TIMER_AT;
    else
        return -1;
    return 0;
}

/* Rebuild a timer's spec from its record (the persisted intent). */
static vigil_code spec_of(json_t *t, const char *tz, struct vg_timer_spec *s, vigil_error *err)
{
    enum vg_timer_kind k;
    if (kind_parse(jstr(t, "kind"), &k))
        return VG_FAIL(err, VIGIL_ECORRUPT, "timer \"%s\" has an unknown kind", jstr(t, "id"));
    vigil_code rc = vg_timer_spec_parse(s, k, jstr(t, "spec"), tz ? tz : jstr(t, "tz"), 0, err);
    if (!rc && k == VG_TIMER_RRULE)
        snprintf(s->dtstart, sizeof s->dtstart, "%s", jstr(t, "dtstart"));
    return rc;
}

/* Whether the timer is another device's (multi-device sync): it fires only on its home, the
 * device that made it, and is held here (k1 "away") without firing, so that one due time is
 * one firing however many devices hold the timer (docs/sync.md). */
static int timer_away(struct vg_env *env, const json_t *t)
{
    const char *home = jstr((json_t *)t, "home"), *self = home ? vg_env_sync_host(env) : NULL;
    return home && self && strcmp(home, self);
}

/* Store the timer with next run `next` (found) or as done. */
static vigil_code timer_save(struct vg_env *env, json_t *t, int64_t rev, int found, int64_t next,
                             vigil_error *err)
{
    char at[32];
    vg_time_format_ms(at, found ? next : 0);
    if (json_object_set_new(t, "next_run_ms", found ? json_integer(next) : json_null()) ||
        json_object_set_new(t, "next_run_at", found ? json_string(at) : json_null()) ||
        json_object_set_new(t, "done", json_boolean(!found)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory saving a timer");
    const char *agent = jstr(t, "agent_id"), *id = jstr(t, "id"), *kind = jstr(t, "kind");
    int64_t seq = found ? next : INT64_MAX;
    const char *k1 = timer_away(env, t) ? "away" : found ? "on" : "done";
    if (rev == 0)
        return vg_env_put_json(env, "timer", id, agent, k1, kind, seq, t, 0, err);
    return vg_env_update_json(env, "timer", id, agent, k1, kind, seq, t, rev, err);
}

vigil_code vg_timer_add(struct vg_env *env, const char *agent_id, enum vg_timer_kind kind,
                        const char *text, const char *tz, char out_id[37], vigil_error *err)
{
    struct vg_timer_spec s;
    vigil_lifecycle lc;
    int64_t now = vg_env_now(env), next = 0;
    int found = 0, tagged;
    const char *saved;
    char id[37], at[32];
    vigil_code rc;
    if (!agent_id || !vg_id_valid(agent_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid agent id \"%s\"", agent_id ? agent_id : "");
    if ((rc = vg_timer_spec_parse(&s, kind, text, tz, now, err)) ||
        (rc = vg_timer_spec_next(&s, now, &next, &found, err)))
        return rc;
    if (!found)
        return VG_FAIL(err, VIGIL_EINVAL, "timer \"%.80s\" never fires after now", text);
    vg_ids_new(env->ids, id);
    vg_time_format_ms(at, now);
    json_t *t = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:n, s:i, s:s}", "id", id, "agent_id",
                          agent_id, "kind", vg_timer_kind_name(kind), "spec", text, "tz", s.tz,
                          "dtstart", s.dtstart, "last_scheduled_ms", "fired", 0, "created_at", at);
    if (!t)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding a timer");
    if ((rc = vg_wake_tx_begin(env, &tagged, &saved, err)))
        goto out;
    const char *home = vg_env_sync_host(env); /* read in the transaction: a join is seen */
    if (home && json_object_set_new(t, "home", json_string(home)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding a timer");
    if (!rc && !(rc = vg_agent_lifecycle(env, agent_id, &lc, err)))
        rc = timer_save(env, t, 0, 1, next, err);
    rc = vg_wake_tx_end(env, rc, tagged, saved, err);
    if (!rc && out_id)
        memcpy(out_id, id, sizeof id);
out:
    json_decref(t);
    return rc;
}

vigil_code vg_timer_remove(struct vg_env *env, const char *timer_id, vigil_error *err)
{
    struct vg_record *r = NULL;
    int tagged;
    const char *saved;
    vigil_code rc = vg_wake_tx_begin(env, &tagged, &saved, err);
    if (rc)
        return rc;
    rc = vg_store_get_copy(env->store, "timer", timer_id, &r, err);
    if (!rc)
        rc = vg_store_remove(env->store, "timer", timer_id, err);
    if (rc == VIGIL_ENOTFOUND)
        rc = VG_FAIL(err, VIGIL_ENOTFOUND, "no timer \"%s\"", timer_id);
    if (!rc) /* so that the deletion reaches the other devices (docs/sync.md) */
        rc = vg_tombstone_put(env, r->owner, "timer", timer_id, err);
    vg_free(r);
    return vg_wake_tx_end(env, rc, tagged, saved, err);
}

vigil_code vg_timer_list(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err)
{
    return vg_wake_list_kind(env, "timer", agent_id, out, err);
}

static int64_t jint(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* Recompute one timer's next run after max(now, its last scheduled firing). */
static vigil_code recompute(struct vg_env *env, const char *id, const char *new_tz,
                            int only_if_future, int *changed, vigil_error *err)
{
    json_t *t = NULL;
    int64_t rev = 0, now = vg_env_now(env), next = 0;
    int found = 0;
    struct vg_timer_spec s;
    vigil_code rc = vg_env_get_json(env, "timer", id, &t, &rev, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no timer \"%s\"", id);
    if (rc)
        return rc;
    *changed = 0;
    int64_t old = json_is_integer(json_object_get(t, "next_run_ms")) ? jint(t, "next_run_ms") : -1;
    /* An overdue timer keeps its persisted time: firing it coalesces what was missed. */
    if (only_if_future && old >= 0 && old <= now)
        goto out;
    if ((rc = spec_of(t, new_tz, &s, err)))
        goto out;
    int64_t after = VG_MAX(now, jint(t, "last_scheduled_ms"));
    if ((rc = vg_timer_spec_next(&s, after, &next, &found, err)))
        goto out;
    if (new_tz && json_object_set_new(t, "tz", json_string(s.tz))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory saving a timer");
        goto out;
    }
    if (new_tz || (found ? next : -1) != old) {
        rc = timer_save(env, t, rev, found, next, err);
        *changed = 1;
    }
out:
    json_decref(t);
    return rc;
}

vigil_code vg_timer_set_zone(struct vg_env *env, const char *timer_id, const char *tz,
                             vigil_error *err)
{
    int changed, tagged;
    const char *saved;
    vigil_code rc = vg_libical_load(err);
    if (rc)
        return rc;
    if (!zone_get(tz))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown time zone \"%.64s\": use an IANA name such as "
                       "Europe/Berlin",
                       tz ? tz : "");
    rc = vg_wake_tx_begin(env, &tagged, &saved, err);
    if (!rc)
        rc = recompute(env, timer_id, tz, 0, &changed, err);
    return vg_wake_tx_end(env, rc, tagged, saved, err);
}

vigil_code vg_timer_recompute_all(struct vg_env *env, int *n, vigil_error *err)
{
    struct vg_id_list c = {0};
    struct vg_query q = {.kind = "timer", .k1 = "on"};
    int tagged, count = 0;
    const char *saved;
    vigil_code rc = vg_wake_tx_begin(env, &tagged, &saved, err);
    if (rc)
        return rc;
    rc = vg_store_scan_ids(env->store, &q, &c, err);
    for (size_t i = 0; !rc && i < c.n; i++) {
        int changed = 0;
        rc = recompute(env, c.ids[i], NULL, 1, &changed, err);
        count += changed;
    }
    vg_id_list_release(&c);
    rc = vg_wake_tx_end(env, rc, tagged, saved, err);
    if (!rc && n)
        *n = count;
    return rc;
}

static int first_cb(void *user, const struct vg_record *r)
{
    *(int64_t *)user = r->seq;
    return 1;
}

vigil_code vg_timer_next_deadline(struct vg_env *env, int64_t *out, vigil_error *err)
{
    struct vg_query q = {.kind = "timer", .k1 = "on", .limit = 1};
    int64_t d = -1;
    vigil_code rc = vg_store_scan(env->store, &q, first_cb, &d, err);
    if (!rc)
        *out = d;
    return rc;
}

/* ---- firing ---------------------------------------------------------------------------------- */

/* A firing this late (or any missed one before it) makes the wake a catch-up. */
#define CATCHUP_LATE_MS 60000

static vigil_code fire_one(struct vg_wake *w, const char *id, int *fired, vigil_error *err)
{
    struct vg_env *env = w->env;
    json_t *t = NULL, *meta = NULL;
    int64_t rev = 0, now = vg_env_now(env), next = 0;
    int found = 0, capped = 0;
    struct vg_timer_spec s;
    int busy = 0;
    /* Daemons sharing a store (PostgreSQL) fire each timer once: the one that locks it fires
     * it (FOR UPDATE SKIP LOCKED), the others pass it by and then read it advanced. */
    vigil_code rc = vg_store_lock(env->store, "timer", id, 1, &busy, err);
    *fired = 0;
    if (rc || busy)
        return rc;
    rc = vg_env_get_json(env, "timer", id, &t, &rev, err);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK; /* removed meanwhile */
    if (rc)
        return rc;
    if (!json_is_integer(json_object_get(t, "next_run_ms")) || jint(t, "next_run_ms") > now)
        goto out;
    int64_t sched = jint(t, "next_run_ms"), last = sched, cur = sched;
    int64_t missed = 0;
    if ((rc = spec_of(t, NULL, &s, err)))
        goto out;
    /* Count every firing due up to now; they all coalesce into this one wake. */
    for (;;) {
        missed++;
        last = cur;
        if ((rc = vg_timer_spec_next(&s, cur, &next, &found, err)))
            goto out;
        if (!found || next > now)
            break;
        if (missed >= STEP_CAP) {
            capped = 1;
            if ((rc = vg_timer_spec_next(&s, now, &next, &found, err)))
                goto out;
            break;
        }
        cur = next;
    }
    char first_at[32], last_at[32];
    vg_time_format_ms(first_at, sched);
    vg_time_format_ms(last_at, last);
    if (missed > 1 || now - last > CATCHUP_LATE_MS)
        meta = json_pack("{s:{s:I, s:s, s:s, s:b}}", "timer_catchup", "missed", (json_int_t)missed,
                         "first_at", first_at, "last_at", last_at, "capped", capped);
    else
        meta = json_object();
    if (!meta || json_object_set_new(meta, "scheduled_at", json_string(first_at))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory firing a timer");
        goto out;
    }
    struct vg_wake_req req = {.reason = VG_REASON_TIMER,
                              .agent_id = jstr(t, "agent_id"),
                              .reason_id = id,
                              .scheduled_ms = sched,
                              .meta = meta};
    enum vg_enqueue_result res;
    char key[65];
    rc = vg_wake_enqueue(w, &req, key, &res, err);
    if (rc == VIGIL_ENOTFOUND) { /* the agent was deleted: the timer has nobody to wake */
        rc = vg_store_remove(env->store, "timer", id, err);
        goto out;
    }
    if (rc)
        goto out;
    if (json_object_set_new(t, "last_scheduled_ms", json_integer(last)) ||
        json_object_set_new(t, "fired", json_integer(jint(t, "fired") + 1))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory firing a timer");
        goto out;
    }
    rc = timer_save(env, t, rev, found, next, err); /* same transaction as the wake */
    *fired = 1;
out:
    json_decref(t);
    json_decref(meta);
    return rc;
}

/* A timer whose intent cannot be evaluated any more is set aside (k1 "error") with the reason,
 * instead of failing every firing pass. */
static vigil_code park(struct vg_env *env, const char *id, vigil_error *err)
{
    json_t *t = NULL;
    int64_t rev = 0;
    char why[256];
    snprintf(why, sizeof why, "%s", err && err->message[0] ? err->message : "cannot be evaluated");
    vigil_code rc = vg_env_get_json(env, "timer", id, &t, &rev, err);
    if (rc)
        return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
    if (json_object_set_new(t, "error", json_string(why)) ||
        json_object_set_new(t, "done", json_true())) {
        json_decref(t);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory setting a timer aside");
    }
    rc = vg_env_update_json(env, "timer", id, jstr(t, "agent_id"), "error", jstr(t, "kind"),
                            INT64_MAX, t, rev, err);
    json_decref(t);
    return rc;
}

/*
 * Fire the due timers of ids: each timer's wake and advance stay together. Up to 256 timers
 * in one transaction, each in its own savepoint: one broken timer must not hold back the others
 * (S3-070). On a server store (PostgreSQL), where other daemons fire timers at the same time,
 * a transaction per timer: a batch would hold the queued wakes of many agents at once, and two
 * such batches could wait on each other.
 */
static vigil_code fire_batch(struct vg_wake *w, const struct vg_id_list *ids, int *n, int *broken,
                             vigil_error *err)
{
    struct vg_env *env = w->env;
    int own_tx = (env->store->methods->caps & VG_STORE_CAP_RECONNECTS) != 0, tagged = 0;
    const char *saved = NULL;
    vigil_code rc = own_tx ? VIGIL_OK : vg_wake_tx_begin(env, &tagged, &saved, err);
    for (size_t i = 0; !rc && i < ids->n; i++) {
        int one = 0, t2 = 0;
        const char *s2 = NULL;
        if ((rc = own_tx ? vg_wake_tx_begin(env, &t2, &s2, err) : vg_store_begin(env->store, err)))
            break;
        rc = fire_one(w, ids->ids[i], &one, err);
        rc = own_tx ? vg_wake_tx_end(env, rc, t2, s2, err) : vg_store_end(env->store, rc, err);
        if (rc == VIGIL_ECONFLICT || rc == VIGIL_EBUSY) { /* its agent's queued wake moved or */
            rc = VIGIL_OK; /* is held (another daemon): the next tick fires it */
            one = 0;
        } else if (rc == VIGIL_EINVAL || rc == VIGIL_ECORRUPT || rc == VIGIL_EPARSE) {
            rc = park(env, ids->ids[i], err);
            ++*broken;
        }
        *n += rc ? 0 : one;
    }
    return own_tx ? rc : vg_wake_tx_end(env, rc, tagged, saved, err);
}

vigil_code vg_timer_fire_due(struct vg_wake *w, int limit, int *fired, vigil_error *err)
{
    struct vg_env *env = w->env;
    int total = 0;
    vigil_code rc = VIGIL_OK;
    if (limit <= 0)
        limit = INT32_MAX;
    while (!rc && total < limit) {
        struct vg_id_list c = {0};
        struct vg_query q = {.kind = "timer",
                             .k1 = "on",
                             .has_seq_max = 1,
                             .seq_max = vg_env_now(env),
                             .limit = VG_MIN(256, limit - total)};
        int n = 0, broken = 0;
        if ((rc = vg_store_scan_ids(env->store, &q, &c, err))) {
            vg_id_list_release(&c);
            break;
        }
        if (!c.n) {
            vg_id_list_release(&c);
            break;
        }
        rc = fire_batch(w, &c, &n, &broken, err);
        vg_id_list_release(&c);
        if (!rc)
            total += n;
        if (!rc && n == 0 && broken == 0)
            break;
    }
    if (!rc && fired)
        *fired = total;
    return rc;
}
