/*
 * test_events_api.c: the store's event log (vigil_events_append/read/bounds/trim): positions
 * are given one by one across appends and runtimes, reads go on after a position and filter
 * by agent, trimming drops the oldest end only and never lets a position be given twice; an
 * append commits without a sync of the store's log, which vigil_events_sync makes (once); and
 * a commit that wrote wakes vigil_stats_wait_commit.
 */
#include "base/common.h"

#include "helpers/test.h"

#include <jansson.h>

static vigil_runtime *open_rt(const char *path)
{
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path, .create_if_missing = 1};
    ASSERT_EQ(vigil_runtime_open(&o, &rt, &err), VIGIL_OK);
    return rt;
}

static json_t *read_after(vigil_runtime *rt, int64_t after, const char *agent)
{
    char *text = NULL;
    vigil_error err = {0};
    ASSERT_EQ(vigil_events_read(rt, after, agent, 1000, &text, &err), VIGIL_OK);
    json_t *v = json_loads(text, 0, NULL);
    vigil_free(text);
    ASSERT(json_is_array(v));
    return v;
}

static int64_t position(json_t *events, size_t i)
{
    return json_integer_value(json_object_get(json_array_get(events, i), "position"));
}

TEST(positions_reads_and_trims)
{
    char path[4200];
    vigil_error err = {0};
    int64_t first = -1, oldest = -1, newest = -1;
    snprintf(path, sizeof path, "%s/events.db", vg_test_tmpdir("events_api"));
    vigil_runtime *rt = open_rt(path);
    ASSERT_EQ(vigil_events_bounds(rt, &oldest, &newest, &err), VIGIL_OK);
    ASSERT_EQ(oldest, 0);
    ASSERT_EQ(newest, 0);
    ASSERT_EQ(vigil_events_append(rt, "[]", &first, &err), VIGIL_OK);
    ASSERT_EQ(first, 0);
    ASSERT_EQ(
        vigil_events_append(rt,
                            "[{\"kind\":\"run.started\",\"agent_id\":\"a\",\"data\":{\"n\":1}},"
                            "{\"kind\":\"kill\",\"agent_id\":null,\"data\":{\"n\":2}}]",
                            &first, &err),
        VIGIL_OK);
    ASSERT_EQ(first, 1);
    vigil_runtime_close(rt);
    rt = open_rt(path); /* another runtime (a restarted daemon) goes on from the log */
    ASSERT_EQ(vigil_events_append(rt, "[{\"kind\":\"message\",\"agent_id\":\"b\",\"data\":[3]}]",
                                  &first, &err),
              VIGIL_OK);
    ASSERT_EQ(first, 3);
    json_t *all = read_after(rt, 0, NULL);
    ASSERT_EQ(json_array_size(all), 3);
    for (size_t i = 0; i < 3; i++)
        ASSERT_EQ(position(all, i), (int64_t)i + 1);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(all, 0), "kind")), "run.started");
    ASSERT(json_is_null(json_object_get(json_array_get(all, 1), "agent_id")) ||
           !json_object_get(json_array_get(all, 1), "agent_id"));
    ASSERT_EQ(
        json_integer_value(json_array_get(json_object_get(json_array_get(all, 2), "data"), 0)), 3);
    json_decref(all);
    json_t *after = read_after(rt, 1, NULL);
    ASSERT_EQ(json_array_size(after), 2);
    ASSERT_EQ(position(after, 0), 2);
    json_decref(after);
    json_t *of_b = read_after(rt, 0, "b");
    ASSERT_EQ(json_array_size(of_b), 1);
    ASSERT_EQ(position(of_b, 0), 3);
    json_decref(of_b);
    /* Trimming everything keeps the newest, so the next position is still new. */
    ASSERT_EQ(vigil_events_trim(rt, 100, &err), VIGIL_OK);
    ASSERT_EQ(vigil_events_bounds(rt, &oldest, &newest, &err), VIGIL_OK);
    ASSERT_EQ(oldest, 3);
    ASSERT_EQ(newest, 3);
    ASSERT_EQ(vigil_events_append(rt, "[{\"kind\":\"kill\",\"data\":{}}]", &first, &err), VIGIL_OK);
    ASSERT_EQ(first, 4);
    /* Refused: not an array, an event without a kind, a limit out of range. */
    ASSERT_EQ(vigil_events_append(rt, "{}", &first, &err), VIGIL_EINVAL);
    ASSERT_EQ(vigil_events_append(rt, "[{\"data\":{}}]", &first, &err), VIGIL_EINVAL);
    char *text = NULL;
    ASSERT_EQ(vigil_events_read(rt, 0, NULL, 0, &text, &err), VIGIL_EINVAL);
    ASSERT_EQ(vigil_events_bounds(rt, &oldest, &newest, &err), VIGIL_OK);
    ASSERT_EQ(newest, 4); /* the refused appends gave nothing */
    vigil_runtime_close(rt);
}

TEST(a_commit_wakes_the_waiter)
{
    char path[4200];
    vigil_error err = {0};
    vigil_stats st;
    snprintf(path, sizeof path, "%s/wake.db", vg_test_tmpdir("events_api_wake"));
    vigil_runtime *rt = open_rt(path);
    vigil_stats_read(&st);
    /* Nothing committed since: no wait asked, the same count. */
    ASSERT_EQ(vigil_stats_wait_commit(st.commits, 0), st.commits);
    ASSERT_EQ(vigil_events_append(rt, "[{\"kind\":\"kill\",\"data\":{}}]", NULL, &err), VIGIL_OK);
    /* The append committed a write: the wait returns at once, the count moved on. */
    ASSERT(vigil_stats_wait_commit(st.commits, 60000) > st.commits);
    vigil_runtime_close(rt);
}

/* The daemon appends right after a turn's commits: a sync of its own would hold the store's
 * writer through an fdatasync the turn's next commit waits for (PERF.md, Session 23). */
TEST(an_append_is_not_synced_until_asked)
{
    char path[4200];
    vigil_error err = {0};
    vigil_stats before, after;
    snprintf(path, sizeof path, "%s/sync.db", vg_test_tmpdir("events_api_sync"));
    vigil_runtime *rt = open_rt(path), *reader = open_rt(path);
    vigil_stats_read(&before);
    ASSERT_EQ(vigil_events_append(rt, "[{\"kind\":\"kill\",\"data\":{\"n\":1}}]", NULL, &err),
              VIGIL_OK);
    vigil_stats_read(&after);
    ASSERT_EQ(after.commits, before.commits + 1);
    ASSERT_EQ(after.log_syncs, before.log_syncs); /* committed, not synced */
    json_t *seen = read_after(reader, 0, NULL);   /* and seen by another connection */
    ASSERT_EQ(json_array_size(seen), 1);
    json_decref(seen);
    ASSERT_EQ(vigil_events_sync(rt, &err), VIGIL_OK);
    vigil_stats_read(&after);
    ASSERT_EQ(after.log_syncs, before.log_syncs + 1);
    ASSERT_EQ(vigil_events_sync(rt, &err), VIGIL_OK); /* nothing appended since: no sync */
    vigil_stats_read(&before);
    ASSERT_EQ(before.log_syncs, after.log_syncs);
    vigil_runtime_close(reader);
    vigil_runtime_close(rt);
}

int main(void)
{
    RUN(positions_reads_and_trims);
    RUN(an_append_is_not_synced_until_asked);
    RUN(a_commit_wakes_the_waiter);
    return 0;
}
