/*
 * test_live_stats.c: the daemon's own counters and its commit signal, against a live
 * `vigil serve`: /metrics has step and model-call latency histograms whose counts grow by the
 * turns taken, and log syncs; and an event reaches a stream at once when the daemon itself
 * journals it, with the store poll set to a minute (longer than the test's safety bound), so
 * only the in-process signal can have delivered it.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include <unistd.h>

static struct live L;
static char counted[64]; /* the first test's agent */

/* The value of the sample line that starts with name (its labels included); -1 when absent. */
static double sample(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, name, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static char *metrics(void)
{
    struct live_resp r;
    ASSERT_EQ(live_req(&L, "GET", "/metrics", NULL, NULL, 1, &r), 200);
    free(r.headers);
    return r.body;
}

TEST(histograms_count_the_turns)
{
    char *agent = counted;
    live_agent_create(&L, "counted", agent, sizeof counted);
    live_chat(&L, agent, "warm up"); /* the first turn of the process is counted like any other */
    char *before = metrics();
    for (int i = 0; i < 3; i++)
        live_chat(&L, agent, "count me");
    char *after = metrics();
    ASSERT_CONTAINS(after, "# TYPE vigil_step_duration_seconds histogram\n");
    ASSERT_CONTAINS(after, "# TYPE vigil_model_call_duration_seconds histogram\n");
    ASSERT_CONTAINS(after, "vigil_step_duration_seconds_bucket{le=\"0.0005\"} ");
    ASSERT_CONTAINS(after, "# TYPE vigil_log_syncs_total counter\n");
    static const char *const counts[] = {"vigil_step_duration_seconds_count",
                                         "vigil_step_duration_seconds_bucket{le=\"+Inf\"}",
                                         "vigil_model_call_duration_seconds_count",
                                         "vigil_model_call_duration_seconds_bucket{le=\"+Inf\"}"};
    /* The scripted model answers each turn in one step without tools: three turns, three
     * steps and three model calls. */
    for (size_t i = 0; i < VG_ARRAY_LEN(counts); i++) {
        ASSERT(sample(before, counts[i]) >= 1);
        ASSERT_EQ((long)(sample(after, counts[i]) - sample(before, counts[i])), 3);
    }
    /* Buckets are cumulative: each is at most the next. */
    ASSERT(sample(after, "vigil_step_duration_seconds_bucket{le=\"0.001\"}") <=
           sample(after, "vigil_step_duration_seconds_bucket{le=\"60\"}"));
    ASSERT(sample(after, "vigil_step_duration_seconds_sum") >
           sample(before, "vigil_step_duration_seconds_sum"));
    /* Durable commits sync the log: three turns sync it at least three times. */
    ASSERT(sample(after, "vigil_log_syncs_total") - sample(before, "vigil_log_syncs_total") >= 3);
    ASSERT(sample(after, "vigil_store_commits_total") >
           sample(before, "vigil_store_commits_total"));
    free(before);
    free(after);
}

TEST(events_arrive_without_the_poll)
{
    static char buf[65536];
    size_t len = 0;
    char agent[64], path[160];
    /* An agent of its own, so the stream has this chat's run only: the previous test's last
     * run may still be on its way, and under load its run.ended came after this stream opened.
     * (POST /v1/agents creates or updates by name: asking for "counted" again gave the previous
     * test's agent, whose run.started the stream had missed.) */
    live_agent_create(&L, "streamed", agent, sizeof agent);
    ASSERT(strcmp(agent, counted) != 0);
    snprintf(path, sizeof path, "/v1/events?kind=run&agent=%s", agent);
    int fd = live_stream_open(&L, path, NULL);
    ASSERT(live_stream_until(fd, buf, sizeof buf, &len, ": vigil events"));
    live_chat(&L, agent, "are you there");
    /* The poll is a minute away: only the daemon's commit signal can bring these in 30 s. */
    ASSERT(live_stream_until(fd, buf, sizeof buf, &len, "event: run.ended"));
    ASSERT_CONTAINS(buf, "event: run.started");
    close(fd);
}

/* A task's run ending in the daemon is counted by the dispatcher's counters: one end, one
 * call, and the CPU it took (docs/http.md). */
TEST(the_dispatcher_counts_a_tasks_run_end)
{
    struct live_resp r;
    char id[64], path[160];
    ASSERT_EQ(live_req(&L, "POST", "/v1/agents",
                       "{\"name\":\"doer\",\"kind\":\"doer\",\"prompt\":\"You do it.\"}", NULL, 1,
                       &r),
              200); /* created or updated by name */
    live_resp_free(&r);
    char *before = metrics();
    ASSERT_CONTAINS(before, "# TYPE vigil_dispatcher_cpu_seconds_total counter\n");
    ASSERT_EQ(
        live_req(&L, "POST", "/v1/tasks", "{\"title\":\"do it\",\"kind\":\"doer\"}", NULL, 1, &r),
        201);
    live_json_str(r.body, "id", id, sizeof id);
    live_resp_free(&r);
    ASSERT_EQ(live_req(&L, "POST", "/v1/tasks/dispatch", "{\"slots\":1}", NULL, 1, &r), 200);
    live_resp_free(&r);
    /* Until the task is done; 30 s is a safety bound, not a wait. */
    snprintf(path, sizeof path, "/v1/tasks/%s", id);
    char st[32] = "";
    for (int i = 0; i < 3000 && strcmp(st, "done"); i++) {
        ASSERT_EQ(live_req(&L, "GET", path, NULL, NULL, 1, &r), 200);
        live_json_str(r.body, "status", st, sizeof st);
        live_resp_free(&r);
        if (strcmp(st, "done"))
            usleep(10000);
    }
    ASSERT_STREQ(st, "done");
    /* The counters move once the end's call returns, just after its commit showed it done. */
    char *after = metrics();
    for (int i = 0; i < 3000 && sample(after, "vigil_dispatcher_run_ends_total") ==
                                    sample(before, "vigil_dispatcher_run_ends_total");
         i++) {
        free(after);
        usleep(10000);
        after = metrics();
    }
    ASSERT_EQ((long)(sample(after, "vigil_dispatcher_run_ends_total") -
                     sample(before, "vigil_dispatcher_run_ends_total")),
              1);
    ASSERT_EQ((long)(sample(after, "vigil_dispatcher_calls_total") -
                     sample(before, "vigil_dispatcher_calls_total")),
              1);
    ASSERT(sample(after, "vigil_dispatcher_cpu_seconds_total") >
           sample(before, "vigil_dispatcher_cpu_seconds_total"));
    free(before);
    free(after);
}

int main(void)
{
    static const char *const slow_poll[] = {"--events-poll-ms", "60000", NULL};
    live_start(&L, "http-live-stats", slow_poll);
    RUN(histograms_count_the_turns);
    RUN(events_arrive_without_the_poll);
    /* A task's run ends through the dispatcher with the agent loop's runner (the daemon's
     * own), not the tests' echo runner the helper gives by default. */
    setenv("VIGIL_LIVE_RUNNER", "loop", 1);
    live_restart(&L, slow_poll);
    RUN(the_dispatcher_counts_a_tasks_run_end);
    live_stop(&L);
    return 0;
}
