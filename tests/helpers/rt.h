/*
 * rt.h: a runtime on a fresh store in the test's folder, with a test clock and seeded ids, so
 * every run of a test sees the same ids and times.
 */
#ifndef VG_TEST_RT_H
#define VG_TEST_RT_H

#include "helpers/test.h"
#include "os/clock.h"
#include "runtime/runtime.h"

struct test_rt {
    struct vg_test_clock clock;
    vigil_runtime *rt;
    struct vg_env *env;
    char path[4200];
    uint64_t opens; /* how many times the store was opened: each open seeds ids anew */
};

/* Open (creating) a store named `name` in a fresh folder. Fails the test on error. With
 * VIGIL_TEST_RT_PG set, the store is a fresh schema of the test PostgreSQL server instead
 * (VIGIL_PG_URI; CTest's *_pg variants of the memory tests). */
void test_rt_open(struct test_rt *t, const char *name);
/* Reopen the same store file (a restart), keeping the clock. */
void test_rt_reopen(struct test_rt *t);
void test_rt_close(struct test_rt *t);
/* How many spawn decisions agent's lineage (vigil_agent_tree) lists that say `decision`. */
int test_rt_decisions_saying(struct test_rt *t, const char *agent, const char *decision);

#endif
