/*
 * test_events_pg.c: two daemons serving HTTP on one PostgreSQL store (the test server of
 * scripts/pg.sh, VIGIL_PG_URI; skipped without it unless VIGIL_REQUIRE_PG=1) each derive the
 * events from the store, and the event log holds each event once: both streams show the same
 * positions, one by one, and the log has one run.started and one run.ended per run.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/pg_env.h"
#include "helpers/test.h"

#include <jansson.h>
#include <unistd.h>

#define RUNS 3

static struct live A, B;
static char agent[64];

/* Events of one kind in the whole log. */
static int logged(const char *uri, const char *kind)
{
    vigil_runtime_options o = {.size = sizeof o, .store_uri = uri};
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    char *text = NULL;
    ASSERT_EQ(vigil_runtime_open(&o, &rt, &err), VIGIL_OK);
    ASSERT_EQ(vigil_events_read(rt, 0, NULL, 1000, &text, &err), VIGIL_OK);
    json_t *all = json_loads(text, 0, NULL), *it;
    size_t i;
    int n = 0;
    json_array_foreach (all, i, it)
        n += !strcmp(json_string_value(json_object_get(it, "kind")), kind);
    json_decref(all);
    vigil_free(text);
    vigil_runtime_close(rt);
    return n;
}

TEST(two_daemons_log_each_event_once)
{
    static char a[65536], b[65536];
    size_t alen = 0, blen = 0;
    long long aids[512], bids[512];
    live_agent_create(&A, "shared", agent, sizeof agent);
    int fa = live_stream_open(&A, "/v1/events", NULL),
        fb = live_stream_open(&B, "/v1/events", NULL);
    ASSERT(live_stream_until(fa, a, sizeof a, &alen, ": vigil events"));
    ASSERT(live_stream_until(fb, b, sizeof b, &blen, ": vigil events"));
    for (int i = 0; i < RUNS; i++)
        live_chat(i % 2 ? &B : &A, agent, "hello");
    live_stream_runs(fa, a, sizeof a, &alen, RUNS);
    live_stream_runs(fb, b, sizeof b, &blen, RUNS);
    close(fa);
    close(fb);
    /* Both daemons have derived and flushed every event of the runs by now. */
    ASSERT_EQ(live_count(a, "event: run.ended"), RUNS);
    ASSERT_EQ(live_count(b, "event: run.ended"), RUNS);
    ASSERT_EQ(live_count(a, "event: gap"), 0);
    ASSERT_EQ(live_count(b, "event: gap"), 0);
    int na = live_event_ids(a, aids, 512), nb = live_event_ids(b, bids, 512);
    ASSERT(na > 2 * RUNS);
    for (int i = 1; i < na; i++)
        ASSERT_EQ(aids[i], aids[i - 1] + 1);
    for (int i = 0; i < na && i < nb; i++)
        ASSERT_EQ(aids[i], bids[i]); /* one log, the same positions on both */
    ASSERT_EQ(logged(A.store, "run.started"), RUNS);
    ASSERT_EQ(logged(A.store, "run.ended"), RUNS);
}

int main(void)
{
    char uri[1024];
    static const char *const fast[] = {"--workers", "1", NULL};
    vg_test_pg_schema_uri("events_pg", 1, uri, sizeof uri);
    live_start_on(&A, "http-events-pg-a", uri, 1, fast);
    live_start_on(&B, "http-events-pg-b", uri, 0, fast);
    RUN(two_daemons_log_each_event_once);
    live_stop(&A);
    live_stop(&B);
    return 0;
}
