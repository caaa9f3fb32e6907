/*
 * say.c: see say.h. The wall time is read from the system, not the clock port: it stamps what a
 * person reads, and nothing computes with it.
 */
#include "base/common.h"

#include "os/clock.h"
#include "os/say.h"

#include <stdarg.h>
#include <time.h>

void vg_say(const char *fmt, ...)
{
    struct timespec ts;
    char at[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    vg_time_format_ms(at, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    flockfile(stderr); /* one line, whole, among the workers' */
    fprintf(stderr, "%s ", at);
    vfprintf(stderr, fmt, ap);
    funlockfile(stderr);
    va_end(ap);
}
