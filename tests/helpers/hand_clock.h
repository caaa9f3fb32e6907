/*
 * hand_clock.h: the tests' adapter of the clock port (src/os/clock.h): a clock that moves only
 * when a test says so, so no test sleeps to wait for time. Not part of libvigil.
 */
#ifndef VG_HAND_CLOCK_H
#define VG_HAND_CLOCK_H

#include "os/clock.h"

/* A clock that moves only when told to. Caller-allocated; no resources to release. */
struct vg_test_clock {
    struct vg_clock base; /* must stay first */
    int64_t wall_ms;      /* current wall time, ms since epoch */
    int64_t mono_ns;      /* current monotonic time, ns */
    int64_t slept_ms;     /* total requested through sleep_ms, for assertions */
};

void vg_test_clock_init(struct vg_test_clock *tc, int64_t wall_ms);
/* Move both wall and monotonic time forward by ms. */
void vg_test_clock_advance(struct vg_test_clock *tc, int64_t ms);
/* Set the wall clock to an arbitrary time (a clock jump); monotonic time is unchanged. */
void vg_test_clock_set_wall(struct vg_test_clock *tc, int64_t wall_ms);

#endif
