/*
 * test_close_memory.c: a closed runtime gives its memory back to the system. The C library
 * keeps freed heap pages resident; vigil_runtime_close hands them back (src/base/alloc.h,
 * vg_alloc_release_free), so what a runtime held (its page cache, its runs' state: some 8 MB
 * after a hundred agents' turns) does not stay under the rest of the process's life, its exit
 * included (docs/internals/PERF.md, "Session 35").
 */
#include "helpers/test.h"

#include <stdlib.h>

#define AGENTS 60

/* Under AddressSanitizer the heap is its allocator's, which keeps freed blocks in quarantine on
 * purpose; what is checked here is the C library's. */
#ifndef VG_ASAN

/* The process's anonymous resident memory in KiB, counted page by page (smaps_rollup). */
static long anonymous_kib(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    ASSERT(f != NULL);
    char line[256];
    long kib = -1;
    while (kib < 0 && fgets(line, sizeof line, f))
        if (!strncmp(line, "Anonymous:", 10))
            kib = strtol(line + 10, NULL, 10);
    fclose(f);
    ASSERT(kib >= 0);
    return kib;
}

TEST(a_closed_runtime_gives_its_memory_back)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    char path[4200];
    snprintf(path, sizeof path, "%s/rt.db", vg_test_tmpdir("close_memory"));
    long before = anonymous_kib();
    vigil_runtime_options o;
    vigil_runtime_options_default(&o);
    o.store_uri = path;
    o.create_if_missing = 1;
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    for (int i = 0; i < AGENTS; i++) {
        char name[32], agent[37], *out = NULL;
        snprintf(name, sizeof name, "agent-%d", i);
        vigil_agent_spec spec = {.name = name};
        ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
        ASSERT_OK(vigil_chat(rt, agent, NULL, "hello", NULL, &out, E));
        vigil_free(out);
    }
    /* The host's own memory, taken after the runtime's: above it in the heap, so the freed
     * pages under it cannot go back by the heap's end shrinking. */
    char *host = malloc(64);
    ASSERT(host != NULL);
    host[0] = 1;
    long open_kib = anonymous_kib();
    vigil_runtime_close(rt);
    long closed_kib = anonymous_kib();
    /* The runtime held enough for the check to tell (its page cache alone is up to 1 MiB). */
    ASSERT(open_kib - before >= 1024);
    /* Most of it gone once closed (without the release, all of it stays). What stays is the
     * process's own from then on (the manifest schema compiled once for its life, the libraries'
     * one-time state) and pages partly in use. */
    if (closed_kib - before > (open_kib - before) / 2)
        TEST_FAIL_("closed, the process still holds %ld of the %ld KiB the runtime took",
                   closed_kib - before, open_kib - before);
    free(host);
}

#endif

int main(void)
{
#ifndef VG_ASAN
    RUN(a_closed_runtime_gives_its_memory_back);
#endif
    return 0;
}
