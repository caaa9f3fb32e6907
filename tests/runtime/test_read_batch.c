/*
 * test_read_batch.c: vigil_runtime_read_batch gives the reads between its two calls one
 * snapshot of the store (the HTTP API wraps each GET in one): a change another runtime commits
 * meanwhile is not seen until the batch ends, and is seen after it.
 */
#include "helpers/rt.h"

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

int main(void)
{
    RUN(reads_in_a_batch_share_one_snapshot);
    return 0;
}
