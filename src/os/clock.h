/*
 * clock.h: the clock port. Nothing in vigil reads the time except through a struct vg_clock, so
 * tests drive time by hand (their adapter: tests/helpers/hand_clock.h) and never sleep. The real
 * adapter reads CLOCK_REALTIME and CLOCK_MONOTONIC.
 */
#ifndef VG_CLOCK_H
#define VG_CLOCK_H

#include <stdint.h>

struct vg_clock;

struct vg_clock_methods {
    int version;      /* 1: every method below */
    const char *name; /* "real"; tests' own: "test" */
    /* Wall-clock time in milliseconds since the Unix epoch (UTC). May jump. */
    int64_t (*now_ms)(struct vg_clock *c);
    /* Monotonic time in nanoseconds from an arbitrary origin. Never goes back. */
    int64_t (*mono_ns)(struct vg_clock *c);
    /* Wait ms milliseconds (the test clock only advances itself). */
    void (*sleep_ms)(struct vg_clock *c, int64_t ms);
};

struct vg_clock {
    const struct vg_clock_methods *methods; /* must stay first */
};

/* The process-wide real clock (borrowed, never freed). */
struct vg_clock *vg_clock_real(void);

static inline int64_t vg_clock_now_ms(struct vg_clock *c)
{
    return c->methods->now_ms(c);
}
static inline int64_t vg_clock_mono_ns(struct vg_clock *c)
{
    return c->methods->mono_ns(c);
}
static inline void vg_clock_sleep_ms(struct vg_clock *c, int64_t ms)
{
    c->methods->sleep_ms(c, ms);
}

/* Format ms since epoch as RFC 3339 UTC with milliseconds: 2026-11-23T03:21:54.123Z (25 bytes). */
void vg_time_format_ms(char out[32], int64_t ms);
/* Parse RFC 3339 (Z or +hh:mm offset, optional fraction) into ms since epoch; 0 on success. */
int vg_time_parse_ms(const char *text, int64_t *out_ms);
/* Parse a duration written as a number then one unit letter (s, m, h, d or w: "30d", "36h") or
 * "never", the form of manifests and the config file, into ms (*out_ms -1 for "never"); 0 on
 * success, -1 for anything else. */
int vg_duration_parse_ms(const char *text, int64_t *out_ms);

#endif
