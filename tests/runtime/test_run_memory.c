/*
 * test_run_memory.c: what a run holds in memory (its conversation, its model response, the
 * journal's run, the window of the thread) is given back when the run ends, whether it
 * completed or failed, so a long-lived process does not grow wake after wake. Runs of one
 * agent alternate between success and a failure on the model (a refused key, not retried),
 * each run on a thread of its own as a daemon's wakes are; after a warm-up (caches that fill
 * to their caps: the store's pages, parsed records, the threads' windows; measured, they stop
 * growing after some 500 runs) the heap in use (glibc's count) stays where it was, give or take
 * a few KiB of caches trading entries. A run that kept even its window of these short
 * exchanges (about 260 bytes) leaves 79 KiB over these runs, and the check fails.
 */
#include "helpers/rt.h"

#include <malloc.h>
#include <stdio.h>

#define WARM 600
#define RUNS 300

/* Under AddressSanitizer the heap is its allocator's; its leak check covers the release. */
#ifndef VG_ASAN

static char cassette[4200];

/* A cassette of n exchanges: the even ones answer, the odd ones refuse the key. */
static void write_cassette(const char *dir, int n)
{
    snprintf(cassette, sizeof cassette, "%s/runs.json", dir);
    FILE *f = fopen(cassette, "w");
    ASSERT(f != NULL);
    fputs("{\"vigil_cassette\":1,\"exchanges\":[", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%s", i ? "," : "",
                i % 2 ? "{\"error\":{\"code\":\"EAUTH\",\"message\":\"key refused\"}}"
                      : "{\"response\":{\"text\":\"noted, and here is a reply long enough to "
                        "be worth keeping: the weather, the plans, the list of things\"}}");
    fputs("]}", f);
    fclose(f);
}

/* One run on a thread of its own; odd ones fail on the model. */
static void one_run(struct test_rt *t, const char *agent, int i)
{
    char session[32], *out = NULL;
    snprintf(session, sizeof session, "s%d", i);
    vigil_error err = {0};
    vigil_code rc =
        vigil_chat(t->rt, agent, session, "remember that the meeting moved to Thursday at ten",
                   NULL, &out, &err);
    if (i % 2) {
        ASSERT_CODE(VIGIL_EAUTH, rc);
    } else {
        ASSERT_OK(rc);
        ASSERT(out != NULL);
    }
    vigil_free(out);
}

/* proves: S3-051 */
TEST(runs_give_their_memory_back_on_success_and_on_failure)
{
    struct test_rt t;
    test_rt_open(&t, "run_memory");
    write_cassette(vg_test_tmpdir("run_memory_cassette"), WARM + RUNS);
    setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
    char agent[37];
    vigil_agent_spec spec = {.name = "Keeper"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    for (int i = 0; i < WARM; i++)
        one_run(&t, agent, i);
    size_t warm = mallinfo2().uordblks;
    for (int i = WARM; i < WARM + RUNS; i++)
        one_run(&t, agent, i);
    size_t after = mallinfo2().uordblks;
    long grown = (long)after - (long)warm;
    fprintf(stderr, "  heap in use: %zu after the warm-up, %zu after %d more runs\n", warm, after,
            RUNS);
    if (grown > 24 * 1024)
        TEST_FAIL_("%d runs left %ld bytes behind in the heap", RUNS, grown);
    test_rt_close(&t);
}

#endif

int main(void)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_CONFIG");
#ifndef VG_ASAN
    RUN(runs_give_their_memory_back_on_success_and_on_failure);
#endif
    return 0;
}
