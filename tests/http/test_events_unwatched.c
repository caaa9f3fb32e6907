/*
 * test_events_unwatched.c: while no event stream is open, the daemon's own turns do not hurry
 * the event poller (it reads them at its next events_poll_ms, as it reads other processes'
 * writes): no poll and no wake-up of the poller per turn (docs/internals/PERF.md, Session 27).
 * What that must keep: a stream that opens gets those turns' events at once, not a poll
 * interval later, and while a stream is open the daemon's turns reach it within the coalescing
 * delay. The store poll is a minute here, so only the daemon's own commits and a stream
 * opening can bring a read forward; each wait below gives up after 10 s.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include <unistd.h>

static struct live L;
static const char *const slow_poll[] = {"--events-poll-ms", "60000", NULL};

/* Run first: no stream of another test may be open (the server drops a closed one only at its
 * next write). */
TEST(a_stream_that_opens_gets_the_turns_nobody_watched_at_once)
{
    static char buf[1 << 18];
    size_t len = 0;
    char agent[64], path[128];
    live_agent_create(&L, "unwatched", agent, sizeof agent);
    live_chat(&L, agent, "nobody watches this one");
    live_chat(&L, agent, "nor this one");
    snprintf(path, sizeof path, "/v1/events?agent=%s", agent);
    int fd = live_stream_open(&L, path, NULL);
    ASSERT(live_stream_until(fd, buf, sizeof buf, &len, ": vigil events"));
    live_stream_ends_within(fd, buf, sizeof buf, &len, 2,
                            10); /* the open brought the read forward */
    live_chat(&L, agent, "watched");
    live_stream_ends_within(fd, buf, sizeof buf, &len, 3,
                            10); /* a turn with a stream open: read at once */
    close(fd);
    ASSERT_EQ(live_count(buf, "event: run.started"), 3);
    struct live_resp r;
    ASSERT_EQ(live_req(&L, "GET", "/metrics", NULL, NULL, 1, &r), 200);
    ASSERT_CONTAINS(r.body, "vigil_runs_ended_total{outcome=\"completed\"} 3\n");
    live_resp_free(&r);
}

int main(void)
{
    live_start(&L, "http-events-unwatched", slow_poll);
    RUN(a_stream_that_opens_gets_the_turns_nobody_watched_at_once);
    live_stop(&L);
    return 0;
}
