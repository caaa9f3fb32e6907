/*
 * clock.c: the real adapter of the clock port, and RFC 3339 formatting.
 */
#include "base/common.h"

#include "os/clock.h"
#include "os/fiber.h"

#include <errno.h>
#include <time.h>

static int64_t real_now_ms(struct vg_clock *c)
{
    (void)c;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t real_mono_ns(struct vg_clock *c)
{
    (void)c;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void real_sleep_ms(struct vg_clock *c, int64_t ms)
{
    (void)c;
    if (ms <= 0)
        return;
    /* On a fiber (a daemon worker running many agents), wait parked: the other agents run. */
    if (vg_fiber_can_park()) {
        int64_t until = real_mono_ns(c) + ms * 1000000;
        while (real_mono_ns(c) < until)
            vg_fiber_park(until);
        return;
    }
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static const struct vg_clock_methods real_methods = {
    .version = 1,
    .name = "real",
    .now_ms = real_now_ms,
    .mono_ns = real_mono_ns,
    .sleep_ms = real_sleep_ms,
};

static struct vg_clock real_clock = {&real_methods};

struct vg_clock *vg_clock_real(void)
{
    return &real_clock;
}

static void put_digits(char *p, unsigned v, int n)
{
    while (n-- > 0) {
        p[n] = (char)('0' + v % 10);
        v /= 10;
    }
}

/* Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's civil_from_days):
 * no gmtime_r and no snprintf, which cost more than the rest of a journal record's fields. */
void vg_time_format_ms(char out[32], int64_t ms)
{
    int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    int millis = (int)(ms - secs * 1000);
    int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
    int sod = (int)(secs - days * 86400);
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    unsigned day = doy - (153 * mp + 2) / 5 + 1;
    unsigned month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = (int64_t)yoe + era * 400 + (month <= 2);
    /* Years past 9999 cannot be written in RFC 3339; clamp so the text stays well formed. */
    year = year < 0 ? 0 : year > 9999 ? 9999 : year;
    memcpy(out, "0000-00-00T00:00:00.000Z", 25);
    put_digits(out, (unsigned)year, 4);
    put_digits(out + 5, month, 2);
    put_digits(out + 8, day, 2);
    put_digits(out + 11, (unsigned)(sod / 3600), 2);
    put_digits(out + 14, (unsigned)(sod / 60 % 60), 2);
    put_digits(out + 17, (unsigned)(sod % 60), 2);
    put_digits(out + 20, (unsigned)millis, 3);
}

static int digits(const char *p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 0;
}

int vg_time_parse_ms(const char *s, int64_t *out_ms)
{
    int y, mo, d, h, mi, sec, millis = 0;
    if (!s || strlen(s) < 20)
        return -1;
    if (digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) || s[7] != '-' ||
        digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' ||
        digits(s + 17, 2, &sec))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return -1;
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        int nd = 0;
        while (*p >= '0' && *p <= '9') {
            if (nd < 3)
                millis = millis * 10 + (*p - '0');
            nd++;
            p++;
        }
        if (nd == 0)
            return -1;
        for (; nd < 3; nd++)
            millis *= 10;
    }
    int offset_min = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return -1;
        offset_min = (oh * 60 + om) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    if (*p)
        return -1;
    /* Days from civil (Howard Hinnant's algorithm), so no time zone state is consulted. */
    int yy = y - (mo <= 2);
    int era = (yy >= 0 ? yy : yy - 399) / 400;
    int yoe = yy - era * 400;
    int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = (int64_t)era * 146097 + doe - 719468;
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - (int64_t)offset_min * 60;
    *out_ms = secs * 1000 + millis;
    return 0;
}

int vg_duration_parse_ms(const char *text, int64_t *out_ms)
{
    static const char units[] = "smhdw";
    static const int64_t unit_ms[] = {1000LL, 60000LL, 3600000LL, 86400000LL, 604800000LL};
    if (text && !strcmp(text, "never")) {
        *out_ms = -1;
        return 0;
    }
    size_t n = text ? strlen(text) : 0;
    const char *unit = n >= 2 && text[n - 1] ? strchr(units, text[n - 1]) : NULL;
    int64_t v = 0;
    for (size_t i = 0; unit && i + 1 < n; i++) {
        if (text[i] < '0' || text[i] > '9' || v > 1000000000LL)
            return -1;
        v = v * 10 + (text[i] - '0');
    }
    if (!unit)
        return -1;
    *out_ms = v * unit_ms[unit - units];
    return 0;
}
