/*
 * test_read_batch.c: vigil_runtime_read_batch gives the reads between its two calls one
 * snapshot of the store (the HTTP API wraps each GET in one): a change another runtime commits
 * meanwhile is not seen until the batch ends, and is seen after it. A write made in a batch
 * outside a transaction commits at once, and a fiber that parks leaves its batches.
 */
#include "helpers/rt.h"
#include "store/store.h"

TEST(reads_in_a_batch_share_one_snapshot)
{
    struct test_rt t;
    char id[37];
    char *first = NULL, *during = NULL, *after = NULL;
    vigil_runtime *other = NULL;
    test_rt_open(&t, "read_batch");
    vigil_agent_spec spec = {.name = "steady"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));

    vigil_runtime_read_batch(t.rt, 1);
    ASSERT_OK(vigil_agent_show(t.rt, id, &first, E));
    ASSERT_OK(vigil_agent_destroy(other, id, "another process", E)); /* commits meanwhile */
    ASSERT_OK(vigil_agent_show(t.rt, id, &during, E));
    vigil_runtime_read_batch(t.rt, 0);
    ASSERT_OK(vigil_agent_show(t.rt, id, &after, E));

    ASSERT_CONTAINS(first, "\"lifecycle\":\"created\"");
    ASSERT_STREQ(during, first); /* the batch's snapshot */
    ASSERT_CONTAINS(after, "\"lifecycle\":\"destroyed\"");
    vigil_free(first);
    vigil_free(during);
    vigil_free(after);
    vigil_runtime_read_batch(NULL, 1); /* no runtime: nothing to do */
    vigil_runtime_close(other);
    test_rt_close(&t);
}

/* Whether `other` finds the record (kind "note", id). */
static int other_finds(vigil_runtime *other, const char *id)
{
    struct vg_record *r = NULL;
    vigil_error miss = {0};
    vigil_code rc = vg_store_get_copy(vg_runtime_env(other)->store, "note", id, &r, &miss);
    vg_free(r);
    return rc == VIGIL_OK;
}

/* A lone write in a batch (a run's start writes the first run's memory, a note, between its
 * batched reads) commits as it would outside one: the batch's read transaction must not take
 * it in, uncommitted until the batch ends. */
TEST(a_write_in_a_batch_commits_at_once)
{
    struct test_rt t;
    char id[37];
    vigil_runtime *other = NULL;
    test_rt_open(&t, "read_batch_write");
    vigil_agent_spec spec = {.name = "writer"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    int64_t lc_read = 0;
    struct vg_query q = {.kind = "agent"};

    vg_store_read_batch(t.env->store, 1);
    ASSERT_OK(vg_store_count(t.env->store, &q, &lc_read, E)); /* the batch's snapshot taken */
    ASSERT_OK(vg_env_put_text(t.env, "note", "n1", id, "", "", 0, "{}", 0, E));
    ASSERT(other_finds(other, "n1")); /* committed, while the batch goes on */
    ASSERT_OK(vg_store_count(t.env->store, &q, &lc_read, E));
    vg_store_read_batch(t.env->store, 0);
    ASSERT_EQ(lc_read, 1);
    vigil_runtime_close(other);
    test_rt_close(&t);
}

/* A fiber that parks inside a batch (vigil_chat_many's turns, a daemon worker's runs) leaves it,
 * so the fibers that run meanwhile read the store as it is; it takes the batch up again when it
 * resumes, and its end is then the batch's end. */
TEST(a_parked_fiber_leaves_its_read_batch)
{
    struct test_rt t;
    char id[37];
    char *during = NULL, *after = NULL;
    vigil_runtime *other = NULL;
    if (getenv("VIGIL_TEST_RT_PG")) /* SQLite's read transactions: PostgreSQL ignores batches */
        return;
    test_rt_open(&t, "read_batch_leave");
    vigil_agent_spec spec = {.name = "parked"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));

    vg_store_read_batch(t.env->store, 1);
    vg_store_read_batch(t.env->store, 1); /* nested */
    ASSERT_OK(vigil_agent_show(t.rt, id, &during, E));
    int left = vg_store_read_batch_leave(t.env->store); /* parks */
    ASSERT_EQ(left, 2);
    ASSERT_OK(vigil_agent_destroy(other, id, "another process", E));
    ASSERT_OK(vigil_agent_show(t.rt, id, &after, E)); /* another fiber's read: as it is */
    ASSERT_CONTAINS(during, "\"lifecycle\":\"created\"");
    ASSERT_CONTAINS(after, "\"lifecycle\":\"destroyed\"");
    vg_store_read_batch_rejoin(t.env->store, left); /* resumes */
    vg_store_read_batch(t.env->store, 0);
    vg_store_read_batch(t.env->store, 0);
    vg_store_read_batch(t.env->store, 0); /* one too many: ignored, as before */
    ASSERT_EQ(vg_store_read_batch_leave(t.env->store), 0);
    vigil_free(during);
    vigil_free(after);
    vigil_runtime_close(other);
    test_rt_close(&t);
}

int main(void)
{
    RUN(reads_in_a_batch_share_one_snapshot);
    RUN(a_write_in_a_batch_commits_at_once);
    RUN(a_parked_fiber_leaves_its_read_batch);
    return 0;
}
