/*
 * test_events_api.c: the store's event log (vigil_events_append/read/bounds/trim): positions
 * are given one by one across a runtime's appends, reads go on after a position and filter
 * by agent, trimming drops the oldest end only and never lets a position be given twice, nor
 * does a power loss (a new runtime starts past the durable reservation); an
 * append commits without a sync of the store's log, which vigil_events_sync makes (once); and
 * a commit that wrote wakes vigil_stats_wait_commit.
 */
#include "base/common.h"

#include "helpers/test.h"
#include "runtime/runtime_int.h"

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
    /* Another runtime (a restarted daemon) goes on past the reservation: above every position
     * given before, by a hole. */
    rt = open_rt(path);
    ASSERT_EQ(vigil_events_append(rt, "[{\"kind\":\"message\",\"agent_id\":\"b\",\"data\":[3]}]",
                                  &first, &err),
              VIGIL_OK);
    ASSERT(first > 3);
    int64_t third = first;
    json_t *all = read_after(rt, 0, NULL);
    ASSERT_EQ(json_array_size(all), 3);
    for (size_t i = 0; i < 2; i++)
        ASSERT_EQ(position(all, i), (int64_t)i + 1);
    ASSERT_EQ(position(all, 2), third);
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
    ASSERT_EQ(position(of_b, 0), third);
    json_decref(of_b);
    /* Trimming everything keeps the newest, so the next position is still new. */
    ASSERT_EQ(vigil_events_trim(rt, 100, &err), VIGIL_OK);
    ASSERT_EQ(vigil_events_bounds(rt, &oldest, &newest, &err), VIGIL_OK);
    ASSERT_EQ(oldest, third);
    ASSERT_EQ(newest, third);
    ASSERT_EQ(vigil_events_append(rt, "[{\"kind\":\"kill\",\"data\":{}}]", &first, &err), VIGIL_OK);
    ASSERT_EQ(first, third + 1); /* the same runtime: the next position */
    /* Refused: not an array, an event without a kind, a limit out of range. */
    ASSERT_EQ(vigil_events_append(rt, "{}", &first, &err), VIGIL_EINVAL);
    ASSERT_EQ(vigil_events_append(rt, "[{\"data\":{}}]", &first, &err), VIGIL_EINVAL);
    char *text = NULL;
    ASSERT_EQ(vigil_events_read(rt, 0, NULL, 0, &text, &err), VIGIL_EINVAL);
    ASSERT_EQ(vigil_events_bounds(rt, &oldest, &newest, &err), VIGIL_OK);
    ASSERT_EQ(newest, third + 1); /* the refused appends gave nothing */
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
    /* A runtime's first append reserves positions ahead, durably (see a_lost_append...). */
    ASSERT_EQ(vigil_events_append(rt, "[{\"kind\":\"kill\",\"data\":{\"n\":0}}]", NULL, &err),
              VIGIL_OK);
    ASSERT_EQ(vigil_events_sync(rt, &err), VIGIL_OK);
    vigil_stats_read(&before);
    ASSERT_EQ(vigil_events_append(rt, "[{\"kind\":\"kill\",\"data\":{\"n\":1}}]", NULL, &err),
              VIGIL_OK);
    vigil_stats_read(&after);
    ASSERT_EQ(after.commits, before.commits + 1);
    ASSERT_EQ(after.log_syncs, before.log_syncs); /* committed, not synced */
    json_t *seen = read_after(reader, 0, NULL);   /* and seen by another connection */
    ASSERT_EQ(json_array_size(seen), 2);
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

/* A power loss loses the newest appends (not synced); the positions they were given may have
 * reached a client (GET /v1/events), so the restarted daemon must not give them again. */
TEST(a_lost_append_never_gives_its_position_again)
{
    char path[4200], id[24];
    vigil_error err = {0};
    int64_t first = -1, oldest = -1, newest = -1;
    snprintf(path, sizeof path, "%s/lost.db", vg_test_tmpdir("events_api_lost"));
    vigil_runtime *rt = open_rt(path);
    ASSERT_EQ(vigil_events_append(rt, "[{\"kind\":\"kill\",\"data\":{\"n\":1}}]", &first, &err),
              VIGIL_OK);
    ASSERT_EQ(first, 1);
    ASSERT_EQ(vigil_events_append(rt,
                                  "[{\"kind\":\"kill\",\"data\":{\"n\":2}},"
                                  "{\"kind\":\"kill\",\"data\":{\"n\":3}}]",
                                  &first, &err),
              VIGIL_OK);
    ASSERT_EQ(first, 2); /* positions 1..3 handed out */
    /* The power loss: the last two appends' records gone from the store, as if never synced. */
    struct vg_store *store = vg_runtime_env(rt)->store;
    for (int pos = 2; pos <= 3; pos++) {
        snprintf(id, sizeof id, "%020d", pos);
        ASSERT_EQ(vg_store_remove(store, "event_log", id, &err), VIGIL_OK);
    }
    vigil_runtime_close(rt);
    rt = open_rt(path); /* the restarted daemon */
    ASSERT_EQ(vigil_events_bounds(rt, &oldest, &newest, &err), VIGIL_OK);
    ASSERT_EQ(newest, 1);
    ASSERT_EQ(vigil_events_append(rt, "[{\"kind\":\"kill\",\"data\":{\"n\":4}}]", &first, &err),
              VIGIL_OK);
    ASSERT(first > 3); /* above every position handed out before the loss */
    vigil_runtime_close(rt);
}

TEST(a_list_append_gives_each_event_its_position)
{
    /* vigil_events_append_list: each event's position comes back (0 for a key the log holds),
     * the data is kept as given, and a bad event appends nothing. */
    char path[4200];
    vigil_error err = {0};
    snprintf(path, sizeof path, "%s/events.db", vg_test_tmpdir("events_list"));
    vigil_runtime *rt = open_rt(path);
    vigil_event one[] = {{.kind = "run.started",
                          .agent_id = "a",
                          .key = "run.started:r1",
                          .data_json = "{\"run_id\":\"r1\",\"n\":1.5}"},
                         {.kind = "kill", .data_json = "[true,null]"}};
    ASSERT_EQ(vigil_events_append_list(rt, one, 2, &err), VIGIL_OK);
    int64_t base = one[0].position;
    ASSERT(base > 0);
    ASSERT_EQ(one[1].position, base + 1);
    vigil_event two[] = {
        {.kind = "run.started",
         .agent_id = "a",
         .key = "run.started:r1",
         .data_json = "{\"run_id\":\"r1\"}"}, /* in the log already */
        {.kind = "run.ended", .agent_id = "a", .key = "run.ended:r1", .data_json = "\"done\""}};
    ASSERT_EQ(vigil_events_append_list(rt, two, 2, &err), VIGIL_OK);
    ASSERT_EQ(two[0].position, 0);
    ASSERT_EQ(two[1].position, base + 2);
    vigil_event bad[] = {{.kind = "kill", .data_json = "{}"},
                         {.kind = "kill", .data_json = "{\"open\":"}};
    ASSERT_EQ(vigil_events_append_list(rt, bad, 2, &err), VIGIL_EINVAL);
    ASSERT_EQ(bad[0].position, 0);
    json_t *all = read_after(rt, 0, NULL);
    ASSERT_EQ(json_array_size(all), 3); /* nothing of the bad append */
    ASSERT_EQ(position(all, 2), base + 2);
    json_t *data = json_object_get(json_array_get(all, 0), "data");
    ASSERT_STREQ(json_string_value(json_object_get(data, "run_id")), "r1");
    ASSERT(json_real_value(json_object_get(data, "n")) == 1.5);
    ASSERT(json_is_true(json_array_get(json_object_get(json_array_get(all, 1), "data"), 0)));
    json_decref(all);
    vigil_runtime_close(rt);
}

/* An event's reals come back as the fewest digits that read back the same (trial J5): given
 * as 0.8 or as jansson wrote them before session 37, 0.80000000000000004 (an event stored then,
 * or data text given to vigil_events_append_list), they read 0.8. */
TEST(reals_in_event_data_read_back_short)
{
    char path[4200];
    vigil_error err = {0};
    int64_t first = 0;
    snprintf(path, sizeof path, "%s/events.db", vg_test_tmpdir("events_reals"));
    vigil_runtime *rt = open_rt(path);
    ASSERT_EQ(vigil_events_append(rt,
                                  "[{\"kind\":\"message\",\"data\":{\"confidence\":0.8,"
                                  "\"temperature\":21.5,\"least\":5e-324}}]",
                                  &first, &err),
              VIGIL_OK);
    vigil_event old[] = {
        {.kind = "message", .data_json = "{\"confidence\":0.80000000000000004,\"price\":9.99}"}};
    ASSERT_EQ(vigil_events_append_list(rt, old, 1, &err), VIGIL_OK);
    char *text = NULL;
    ASSERT_EQ(vigil_events_read(rt, 0, NULL, 10, &text, &err), VIGIL_OK);
    ASSERT_CONTAINS(text, "{\"confidence\":0.8,\"temperature\":21.5,\"least\":5e-324}");
    ASSERT_CONTAINS(text, "{\"confidence\":0.8,\"price\":9.99}");
    vigil_free(text);
    vigil_runtime_close(rt);
}

int main(void)
{
    RUN(positions_reads_and_trims);
    RUN(an_append_is_not_synced_until_asked);
    RUN(a_commit_wakes_the_waiter);
    RUN(a_lost_append_never_gives_its_position_again);
    RUN(a_list_append_gives_each_event_its_position);
    RUN(reals_in_event_data_read_back_short);
    return 0;
}
