/*
 * journal_fixture.c: see journal_fixture.h.
 */
#include "journal/journal_fixture.h"

void fx_open(struct fx *f, const char *name, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    vg_test_clock_init(&f->clock, 1795000000000LL);
    f->ids = vg_ids_seeded(&f->clock.base, seed);
    snprintf(f->path, sizeof f->path, "%s/j.db", vg_test_tmpdir(name));
    struct vg_store_options o = {.create_if_missing = 1};
    ASSERT_OK(vg_store_open(f->path, &o, &f->store, E));
}

void fx_reopen(struct fx *f)
{
    vg_store_close(f->store);
    struct vg_store_options o = {0};
    ASSERT_OK(vg_store_open(f->path, &o, &f->store, E));
}

void fx_close(struct fx *f)
{
    vg_store_close(f->store);
    vg_ids_free(f->ids);
    f->store = NULL;
    f->ids = NULL;
}

struct vg_store *fx_wrap_faults(struct fx *f)
{
    struct vg_store *fault = NULL;
    ASSERT_OK(vg_store_fault_wrap(f->store, &fault, E));
    f->store = fault;
    return fault;
}

struct vg_run *fx_run(struct fx *f, const char *agent, const char *key)
{
    struct vg_run_launch l = {.agent_id = agent,
                              .run_key = key,
                              .wake_reason = "message",
                              .thread_id = "thread-1",
                              .model = "scripted/test",
                              .limits_json = "{\"max_steps\":20}"};
    struct vg_run *run = NULL;
    ASSERT_OK(vg_journal_run_open(f->store, &f->clock.base, f->ids, &l, &run, E));
    return run;
}

int64_t fx_count(struct vg_store *s, const char *kind, const char *k1)
{
    int64_t n = -1;
    struct vg_query q = {.kind = kind, .k1 = k1};
    ASSERT_OK(vg_store_count(s, &q, &n, E));
    return n;
}
