/*
 * bench_events.c: how long a journaled message takes to reach a client of GET /v1/events
 * (issue 29 item 3) against a live `vigil serve --listen`: chat turns with the scripted model
 * over HTTP while one client reads the stream; for each message event, the time it arrived
 * less the message's journaled time (occurred_at, in ms). The daemon's own writes wake the
 * stream at once (vigil_stats_wait_commit); the store poll (--events-poll-ms, 250 here, the
 * default) is only the fallback for other processes' writes, so the figures show the signal.
 * Usage: bench_events [TURNS] (default 100). Needs the built vigil-test ($VIGIL_TEST_CLI,
 * else the build folder's).
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct live L;
static double delays_ms[100000];
static int n_delays, stream_fd;

static double real_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec * 1000 + (double)t.tv_nsec / 1e6;
}

/* "2026-11-27T14:40:15.123Z" in ms since the epoch; -1 when it is not that. */
static double parse_at(const char *s)
{
    struct tm tm = {0};
    int ms = 0;
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                     &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) * 1000 + ms;
}

/* One message event's data line: its delay from the journal to here. */
static void measure(const char *data, double arrived)
{
    json_t *v = json_loads(data, 0, NULL);
    double at = parse_at(json_string_value(json_object_get(v, "occurred_at")));
    if (at >= 0 && n_delays < (int)VG_ARRAY_LEN(delays_ms))
        delays_ms[n_delays++] = arrived - at;
    json_decref(v);
}

static void *read_stream(void *arg)
{
    static char buf[1 << 20];
    size_t len = 0;
    VG_UNUSED(arg);
    for (;;) {
        struct pollfd p = {.fd = stream_fd, .events = POLLIN};
        if (poll(&p, 1, 60000) != 1)
            return NULL;
        ssize_t n = recv(stream_fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0)
            return NULL;
        double arrived = real_ms();
        len += (size_t)n;
        buf[len] = '\0';
        char *end, *start = buf;
        while ((end = strstr(start, "\n\n"))) { /* each whole event */
            *end = '\0';
            char *data = strstr(start, "\ndata: ");
            if (strstr(start, "event: message\n") && data)
                measure(data + 7, arrived);
            start = end + 2;
        }
        len -= (size_t)(start - buf);
        memmove(buf, start, len + 1);
    }
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const char *const extra[] = {"--events-poll-ms", "250", NULL};
    int turns = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 100;
    char agent[64] = "", path[160];
    struct live_resp r;
    pthread_t reader;
    if (!getenv("VIGIL_TEST_CLI"))
        setenv("VIGIL_TEST_CLI", VIGIL_BINARY_DIR "/vigil-test", 1);
    live_start(&L, "bench-events", extra);
    if (live_req(&L, "POST", "/v1/agents", "{\"name\":\"timed\",\"prompt\":\"You help.\"}", NULL, 1,
                 &r) != 200)
        TEST_FAIL_("could not create the agent: %s", r.body);
    json_t *made = json_loads(r.body, 0, NULL);
    snprintf(agent, sizeof agent, "%s",
             json_string_value(json_object_get(json_array_get(made, 0), "id")));
    json_decref(made);
    live_resp_free(&r);
    stream_fd = live_stream_open(&L, "/v1/events?kind=message", NULL);
    pthread_create(&reader, NULL, read_stream, NULL);
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent);
    for (int i = 0; i < turns; i++) {
        if (live_req(&L, "POST", path, "{\"text\":\"how late is the news\"}", NULL, 1, &r) != 200)
            TEST_FAIL_("turn %d failed: %s", i, r.body);
        live_resp_free(&r);
    }
    double settle = real_ms(); /* the last turn's events: at most one poll period more */
    while (real_ms() - settle < 1000)
        poll(NULL, 0, 100);
    shutdown(stream_fd, SHUT_RDWR);
    pthread_join(reader, NULL);
    close(stream_fd);
    live_stop(&L);
    if (n_delays == 0)
        TEST_FAIL_("no message event arrived");
    qsort(delays_ms, (size_t)n_delays, sizeof delays_ms[0], by_value);
    printf("journaled message -> event at the client, %d messages of %d turns "
           "(ms, journal times have ms resolution):\n"
           "  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n",
           n_delays, turns, delays_ms[n_delays / 2], delays_ms[n_delays * 9 / 10],
           delays_ms[n_delays * 99 / 100], delays_ms[n_delays - 1]);
    return 0;
}
