/*
 * test_events_log.c: GET /v1/events ids are positions of the store's event log
 * (vigil_events_append): a stream that resumes from before the daemon's ring of recent events
 * gets a `gap` event and then every event from the log, once each, in order; and after the
 * daemon restarts, Last-Event-ID resumes from the log with nothing lost and nothing repeated,
 * and new events go on from the next position. The ring is 4 events here, so a few turns are
 * enough to fall behind it.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include <jansson.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

static struct live L;
static const char *const small_ring[] = {"--events-ring", "4", NULL};
static char agent[64];

static void chat(const char *text)
{
    char path[160], body[160];
    struct live_resp r;
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent);
    snprintf(body, sizeof body, "{\"text\":\"%s\"}", text);
    ASSERT_EQ(live_req(&L, "POST", path, body, NULL, 1, &r), 200);
    live_resp_free(&r);
}

/* The ids of the stream's events in order, at most max; returns how many. */
static int ids_of(const char *text, long long *ids, int max)
{
    int n = 0;
    for (const char *p = strstr(text, "\nid: "); p && n < max; p = strstr(p + 1, "\nid: "))
        ids[n++] = strtoll(p + 5, NULL, 10);
    if (!strncmp(text, "id: ", 4) && n < max) /* not after a newline: the first line */
        ids[n++] = strtoll(text + 4, NULL, 10);
    return n;
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

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void assert_run(const long long *got, int n, const long long *want, int m)
{
    ASSERT_EQ(n, m);
    for (int i = 0; i < n; i++)
        ASSERT_EQ(got[i], want[i]);
}

TEST(resume_from_the_log_across_a_restart)
{
    static char all[65536], again[65536];
    long long ids[256], got[256];
    size_t len = 0;
    struct live_resp r;
    ASSERT_EQ(live_req(&L, "POST", "/v1/agents", "{\"name\":\"logged\",\"prompt\":\"You help.\"}",
                       NULL, 1, &r),
              200);
    json_t *v = json_loads(r.body, 0, NULL);
    snprintf(agent, sizeof agent, "%s",
             json_string_value(json_object_get(json_array_get(v, 0), "id")));
    json_decref(v);
    live_resp_free(&r);
    int fd = live_stream_open(&L, "/v1/events", NULL);
    ASSERT(live_stream_until(fd, all, sizeof all, &len, ": vigil events"));
    for (int i = 0; i < 3; i++)
        chat("log this");
    /* Three runs: read on until the third run.ended (30 s safety per read). */
    while (count(all, "event: run.ended") < 3) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ASSERT_EQ(poll(&p, 1, 30000), 1);
        ssize_t got_n = recv(fd, all + len, sizeof all - 1 - len, 0);
        ASSERT(got_n > 0);
        len += (size_t)got_n;
        all[len] = '\0';
    }
    close(fd);
    int n = ids_of(all, ids, 256);
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
    assert_run(got, ids_of(again, got, 256), ids + 1, n - 1);
    /* After a restart: the same from the middle on, and new events after the last. */
    live_restart(&L, small_ring);
    snprintf(from, sizeof from, "%lld", ids[n / 2]);
    ASSERT(read_until_id(from, ids[n - 1], again, sizeof again));
    assert_run(got, ids_of(again, got, 256), ids + n / 2 + 1, n - n / 2 - 1);
    len = 0;
    all[0] = '\0';
    snprintf(from, sizeof from, "%lld", ids[n - 1]);
    fd = live_stream_open(&L, "/v1/events", from);
    ASSERT(live_stream_until(fd, all, sizeof all, &len, ": vigil events"));
    chat("after the restart");
    ASSERT(live_stream_until(fd, all, sizeof all, &len, "event: run.ended"));
    close(fd);
    int m = ids_of(all, got, 256);
    ASSERT(m >= 2);
    ASSERT_EQ(got[0], ids[n - 1] + 1); /* nothing repeated, no position given twice */
}

int main(void)
{
    live_start(&L, "http-events-log", small_ring);
    RUN(resume_from_the_log_across_a_restart);
    live_stop(&L);
    return 0;
}
