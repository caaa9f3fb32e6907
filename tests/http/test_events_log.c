/*
 * test_events_log.c: GET /v1/events ids are positions of the store's event log
 * (vigil_events_append): a stream that resumes from before the daemon's ring of recent events
 * gets a `gap` event and then every event from the log, once each, in order; and after the
 * daemon restarts, Last-Event-ID resumes from the log with nothing lost and nothing repeated,
 * and new events go on above every position given before (past a hole); a Last-Event-ID past the
 * log (events lost before their sync) gets a gap back to the log's next position. The ring is 4
 * events here, so a few turns are enough to fall behind it. A stream of one agent gets the kill
 * switches' events too, live and from the log.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include <unistd.h>

static struct live L;
static const char *const small_ring[] = {"--events-ring", "4", NULL};
static char agent[64];

static void chat(const char *text)
{
    live_chat(&L, agent, text);
}

static void chat_as(const char *who, const char *text)
{
    live_chat(&L, who, text);
}

/* Read a stream opened after last_id until it holds the event with id want_last. */
static int read_until_id(const char *last_id, long long want_last, char *buf, size_t cap)
{
    char needle[48];
    size_t len = 0;
    buf[0] = '\0';
    snprintf(needle, sizeof needle, "\nid: %lld\n", want_last);
    int fd = live_stream_open(&L, "/v1/events", last_id);
    int ok = live_stream_until(fd, buf, cap, &len, needle);
    close(fd);
    return ok;
}

static void assert_run(const long long *got, int n, const long long *want, int m)
{
    ASSERT_EQ(n, m);
    for (int i = 0; i < n; i++)
        ASSERT_EQ(got[i], want[i]);
}

/* Each event of from_log ("id: N\nevent: K\ndata: D\n\n"), as the log gave it to a stream
 * behind the ring, is in live byte for byte, as the ring gave it (the poller puts what it
 * appended into the ring itself: the two must not differ). */
static void assert_same_events(const char *from_log, const char *live)
{
    int n = 0;
    for (const char *p = strstr(from_log, "id: "); p; p = strstr(p + 1, "\nid: ")) {
        const char *start = *p == '\n' ? p + 1 : p, *end = strstr(start, "\n\n");
        char block[4096];
        ASSERT(end && (size_t)(end - start) < sizeof block);
        snprintf(block, sizeof block, "%.*s", (int)(end - start + 2), start);
        ASSERT_CONTAINS(live, block);
        n++;
    }
    ASSERT(n > 0);
}

TEST(resume_from_the_log_across_a_restart)
{
    static char all[65536], again[65536];
    long long ids[256], got[256];
    size_t len = 0;
    live_agent_create(&L, "logged", agent, sizeof agent);
    int fd = live_stream_open(&L, "/v1/events", NULL);
    ASSERT(live_stream_until(fd, all, sizeof all, &len, ": vigil events"));
    for (int i = 0; i < 3; i++)
        chat("log this");
    live_stream_runs(fd, all, sizeof all, &len, 3);
    close(fd);
    int n = live_event_ids(all, ids, 256);
    ASSERT(n > 8); /* well past the ring of 4 */
    for (int i = 1; i < n; i++)
        ASSERT_EQ(ids[i], ids[i - 1] + 1); /* the log's positions, one by one */
    /* From the second event: behind the ring, so a gap that misses nothing, then the log. */
    char from[32];
    snprintf(from, sizeof from, "%lld", ids[0]);
    ASSERT(read_until_id(from, ids[n - 1], again, sizeof again));
    char gap[128];
    snprintf(gap, sizeof gap, "event: gap\ndata: {\"missed_from\":%lld,\"resume_at\":%lld}", ids[1],
             ids[1]);
    ASSERT_CONTAINS(again, gap);
    assert_run(got, live_event_ids(again, got, 256), ids + 1, n - 1);
    assert_same_events(strstr(again, "\nid: "), all);
    /* After a restart: the same from the middle on, and new events after the last. */
    live_restart(&L, small_ring);
    snprintf(from, sizeof from, "%lld", ids[n / 2]);
    ASSERT(read_until_id(from, ids[n - 1], again, sizeof again));
    assert_run(got, live_event_ids(again, got, 256), ids + n / 2 + 1, n - n / 2 - 1);
    len = 0;
    all[0] = '\0';
    snprintf(from, sizeof from, "%lld", ids[n - 1]);
    fd = live_stream_open(&L, "/v1/events", from);
    ASSERT(live_stream_until(fd, all, sizeof all, &len, ": vigil events"));
    chat("after the restart");
    ASSERT(live_stream_until(fd, all, sizeof all, &len, "event: run.ended"));
    close(fd);
    int m = live_event_ids(all, got, 256);
    ASSERT(m >= 2);
    /* Nothing repeated, no position given twice: the restarted daemon's first append starts
     * past the log's reservation (vigil_events_append), so above the last by a hole, which the
     * stream crosses with a gap that misses nothing. */
    ASSERT(got[0] > ids[n - 1] + 1);
    for (int i = 1; i < m; i++)
        ASSERT_EQ(got[i], got[i - 1] + 1);
    snprintf(gap, sizeof gap, "event: gap\ndata: {\"missed_from\":%lld,\"resume_at\":%lld}",
             ids[n - 1] + 1, ids[n - 1] + 1);
    ASSERT_CONTAINS(all, gap);
    /* A Last-Event-ID past the log (its newest events lost to a power loss before their sync,
     * here an id never given): a gap back to the log's next, not a silent skip; the new events
     * come from there on (after a real loss, above the client's id: vigil_events_append). */
    long long next = got[m - 1] + 1;
    snprintf(from, sizeof from, "%lld", next + 99);
    len = 0;
    all[0] = '\0';
    fd = live_stream_open(&L, "/v1/events", from);
    snprintf(gap, sizeof gap, "event: gap\ndata: {\"missed_from\":%lld,\"resume_at\":%lld}",
             next + 100, next);
    ASSERT(live_stream_until(fd, all, sizeof all, &len, gap));
    chat("after the loss");
    ASSERT(live_stream_until(fd, all, sizeof all, &len, "event: run.ended"));
    close(fd);
    ASSERT_EQ(live_event_ids(all, got, 256) > 0 ? got[0] : -1, next);
}

static void kill_switch(int on)
{
    struct live_resp r = {0};
    ASSERT_EQ(live_req(&L, "POST", "/v1/kill",
                       on ? "{\"on\":true,\"reason\":\"incident 1\"}" : "{\"on\":false}", NULL, 1,
                       &r),
              200);
    live_resp_free(&r);
}

/* The id of the first event of this kind in a stream's text; -1 when none. */
static long long first_id_of(const char *text, const char *kind)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\nevent: %s\n", kind);
    const char *e = strstr(text, needle), *p = e;
    while (p && p > text && strncmp(p, "id: ", 4))
        p--;
    return p && !strncmp(p, "id: ", 4) ? atoll(p + 4) : -1;
}

/* The global switch stops every agent, so a front end that watches one agent (agent=) must see
 * it go on: kill events name no agent and pass the filter, from the ring and from the log
 * (trial J2 of session 36: both left them out). */
TEST(an_agents_stream_gets_the_kill_switch)
{
    static char mine[32768], all[32768], again[32768];
    size_t ml = 0, al = 0, gl = 0;
    char watched[64], path[128];
    live_agent_create(&L, "watched", watched, sizeof watched);
    snprintf(path, sizeof path, "/v1/events?agent=%s", watched);
    int fm = live_stream_open(&L, path, NULL), fa = live_stream_open(&L, "/v1/events", NULL);
    ASSERT(live_stream_until(fm, mine, sizeof mine, &ml, ": vigil events"));
    ASSERT(live_stream_until(fa, all, sizeof all, &al, ": vigil events"));
    kill_switch(1);
    ASSERT(live_stream_until(fa, all, sizeof all, &al, "event: kill"));
    ASSERT(live_stream_until(fm, mine, sizeof mine, &ml, "event: kill"));
    ASSERT_CONTAINS(mine, "incident 1");
    kill_switch(0);
    for (int i = 0; i < 3; i++)
        chat_as(watched, "after the switch"); /* the switch's event leaves the ring of 4 */
    live_stream_runs(fm, mine, sizeof mine, &ml, 3);
    close(fm);
    close(fa);
    long long kid = first_id_of(all, "kill");
    ASSERT(kid > 0);
    char from[32];
    snprintf(from, sizeof from, "%lld", kid - 1);
    int fg = live_stream_open(&L, path, from);
    ASSERT(live_stream_until(fg, again, sizeof again, &gl, "event: run.ended"));
    close(fg);
    ASSERT_CONTAINS(again, "event: gap"); /* from the log, behind the ring */
    ASSERT_EQ(first_id_of(again, "kill"), kid);
}

int main(void)
{
    live_start(&L, "http-events-log", small_ring);
    RUN(resume_from_the_log_across_a_restart);
    RUN(an_agents_stream_gets_the_kill_switch);
    live_stop(&L);
    return 0;
}
