/*
 * test_events_relisted.c: the event poller lists the 2 newest runs, and the pages after them
 * while all it read are new; ended runs that left the short listing are forgotten. A longer
 * listing that shows such a run again must not take it for new: its end was counted once in
 * /metrics (vigil_runs_ended_total) and its events are in the stream once. A burst longer than
 * the old cap of 50 is followed whole. The store poll is a minute here, so the poller reads
 * only after the daemon's own commits (a chat over HTTP): the turns taken through the C API in
 * this process between them come in bursts.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include <unistd.h>

static struct live L;
static const char *const slow_poll[] = {"--events-poll-ms", "60000", NULL};

/* The sum of the samples of a counter over its labels. */
static double counter(const char *text, const char *name)
{
    double sum = 0;
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, name, n) && p[n] == '{')
            sum += strtod(strchr(p, ' ') + 1, NULL);
    return sum;
}

static void burst(vigil_runtime *rt, const char *agent, int turns)
{
    vigil_error err = {0};
    for (int i = 0; i < turns; i++) {
        char *out = NULL;
        ASSERT_EQ(vigil_chat(rt, agent, NULL, "in a burst", NULL, &out, &err), VIGIL_OK);
        vigil_free(out);
    }
}

TEST(a_run_listed_again_is_not_new)
{
    static char buf[1 << 20];
    size_t len = 0;
    char agent[64];
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    vigil_runtime_options o = {.size = sizeof o, .store_uri = L.store};
    live_agent_create(&L, "relisted", agent, sizeof agent);
    ASSERT_EQ(vigil_runtime_open(&o, &rt, &err), VIGIL_OK);
    int fd = live_stream_open(&L, "/v1/events", NULL);
    ASSERT(live_stream_until(fd, buf, sizeof buf, &len, ": vigil events"));
    burst(rt, agent, 10);
    live_chat(&L, agent, "read now"); /* the poller reads the 11 runs */
    live_stream_runs(fd, buf, sizeof buf, &len, 11);
    live_chat(&L, agent, "read again"); /* the 8 newest: the oldest 4 are forgotten */
    live_stream_runs(fd, buf, sizeof buf, &len, 12);
    burst(rt, agent, 10);
    live_chat(&L, agent, "read all"); /* 9 new of the 8 newest: the 50 newest, the 4 again */
    live_stream_runs(fd, buf, sizeof buf, &len, 23);
    close(fd);
    vigil_runtime_close(rt);
    struct live_resp r;
    ASSERT_EQ(live_req(&L, "GET", "/metrics", NULL, NULL, 1, &r), 200);
    ASSERT_EQ(counter(r.body, "vigil_runs_ended_total"), 23);
    live_resp_free(&r);
    ASSERT_EQ(live_count(buf, "event: run.started"), 23);
}

TEST(a_burst_of_runs_between_polls_is_followed_whole)
{
    static char buf[1 << 21];
    size_t len = 0;
    char agent[64];
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    vigil_runtime_options o = {.size = sizeof o, .store_uri = L.store};
    live_agent_create(&L, "burst", agent, sizeof agent);
    ASSERT_EQ(vigil_runtime_open(&o, &rt, &err), VIGIL_OK);
    char path[128];
    snprintf(path, sizeof path, "/v1/events?agent=%s", agent);
    int fd = live_stream_open(&L, path, NULL);
    ASSERT(live_stream_until(fd, buf, sizeof buf, &len, ": vigil events"));
    burst(rt, agent, 60); /* more than the 50 the poller listed at most before */
    live_chat(&L, agent, "read now");
    live_stream_ends_within(fd, buf, sizeof buf, &len, 61, 20);
    live_chat(&L, agent, "and once more"); /* nothing of the burst again */
    live_stream_ends_within(fd, buf, sizeof buf, &len, 62, 20);
    close(fd);
    vigil_runtime_close(rt);
    ASSERT_EQ(live_count(buf, "event: run.started"), 62);
    ASSERT_EQ(live_count(buf, "event: run.ended"), 62);
}

int main(void)
{
    live_start(&L, "http-events-relisted", slow_poll);
    RUN(a_run_listed_again_is_not_new);
    RUN(a_burst_of_runs_between_polls_is_followed_whole);
    live_stop(&L);
    return 0;
}
