/* hand_clock.c: the tests' clock (hand_clock.h). */
#include "helpers/hand_clock.h"

static int64_t test_now_ms(struct vg_clock *c)
{
    return ((struct vg_test_clock *)c)->wall_ms;
}

static int64_t test_mono_ns(struct vg_clock *c)
{
    return ((struct vg_test_clock *)c)->mono_ns;
}

static void test_sleep_ms(struct vg_clock *c, int64_t ms)
{
    struct vg_test_clock *tc = (struct vg_test_clock *)c;
    if (ms <= 0)
        return;
    tc->slept_ms += ms;
    vg_test_clock_advance(tc, ms);
}

static const struct vg_clock_methods test_methods = {
    .version = 1,
    .name = "test",
    .now_ms = test_now_ms,
    .mono_ns = test_mono_ns,
    .sleep_ms = test_sleep_ms,
};

void vg_test_clock_init(struct vg_test_clock *tc, int64_t wall_ms)
{
    tc->base.methods = &test_methods;
    tc->wall_ms = wall_ms;
    tc->mono_ns = 1000000000; /* a non-zero origin catches code that treats 0 as unset */
    tc->slept_ms = 0;
}

void vg_test_clock_advance(struct vg_test_clock *tc, int64_t ms)
{
    tc->wall_ms += ms;
    tc->mono_ns += ms * 1000000;
}

void vg_test_clock_set_wall(struct vg_test_clock *tc, int64_t wall_ms)
{
    tc->wall_ms = wall_ms;
}
