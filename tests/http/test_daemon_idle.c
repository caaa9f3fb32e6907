/*
 * test_daemon_idle.c: an idle daemon's loop ticks without waking its workers. Every poll tick
 * woke each worker thread to read an empty queue (docs/internals/PERF.md, session 37); now the
 * loop reads it once and wakes them only when it holds a run. /metrics counts both
 * (vigil_daemon_ticks_total, vigil_daemon_worker_wakeups_total). What that must keep: a wake
 * queued through the API still runs at once.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include <poll.h>

static struct live L;
/* A short poll: many ticks soon, each of which woke every worker before. */
static const char *const fast_poll[] = {"--poll-ms", "10", NULL};

static long long metric(const char *name)
{
    struct live_resp r;
    char needle[128];
    ASSERT_EQ(live_req(&L, "GET", "/metrics", NULL, NULL, 1, &r), 200);
    snprintf(needle, sizeof needle, "\n%s ", name);
    const char *at = strstr(r.body, needle);
    ASSERT(at);
    long long v = strtoll(at + strlen(needle), NULL, 10);
    live_resp_free(&r);
    return v;
}

/* Until the loop has ticked n more times; 30 s is a safety bound, not a wait. */
static void ticks_pass(long long n)
{
    long long until = metric("vigil_daemon_ticks_total") + n;
    for (int i = 0; i < 3000 && metric("vigil_daemon_ticks_total") < until; i++)
        poll(NULL, 0, 10); /* the ticks come on the daemon's clock: nothing to wait on */
    ASSERT(metric("vigil_daemon_ticks_total") >= until);
}

TEST(idle_ticks_leave_the_workers_asleep)
{
    char agent[64];
    live_agent_create(&L, "idle", agent, sizeof agent);
    ticks_pass(2); /* what starting and the agent's creation queued is over */
    long long woken = metric("vigil_daemon_worker_wakeups_total");
    ticks_pass(30);
    /* Two workers on every tick before: 60 and more. */
    ASSERT_EQ(metric("vigil_daemon_worker_wakeups_total"), woken);
}

TEST(a_queued_wake_still_wakes_a_worker_and_runs)
{
    char agent[64], path[200];
    struct live_resp r;
    live_agent_create(&L, "woken", agent, sizeof agent);
    long long woken = metric("vigil_daemon_worker_wakeups_total");
    snprintf(path, sizeof path, "/v1/agents/%s/wake", agent);
    ASSERT_EQ(live_req(&L, "POST", path, "{\"message\":\"look\"}", NULL, 1, &r), 202);
    live_resp_free(&r);
    /* Until its run completes; 30 s is a safety bound, not a wait. */
    snprintf(path, sizeof path, "/v1/wakes?agent=%s&status=completed", agent);
    int done = 0;
    for (int i = 0; i < 3000 && !done; i++) {
        ASSERT_EQ(live_req(&L, "GET", path, NULL, NULL, 1, &r), 200);
        done = strstr(r.body, agent) != NULL;
        live_resp_free(&r);
        if (!done)
            poll(NULL, 0, 10);
    }
    ASSERT(done);
    ASSERT(metric("vigil_daemon_worker_wakeups_total") > woken);
}

int main(void)
{
    live_start(&L, "http-daemon-idle", fast_poll);
    RUN(idle_ticks_leave_the_workers_asleep);
    RUN(a_queued_wake_still_wakes_a_worker_and_runs);
    live_stop(&L);
    return 0;
}
