/*
 * bench_http.c: the HTTP API's figures (issue 29, "Measured") against a live `vigil serve
 * --listen` on this machine:
 *   - reads per second and p99 latency with 64 keep-alive clients (wrk, 2 threads, 10 s) for
 *     reading an agent (GET /v1/agents/{id}) and listing runs (GET /v1/runs?agent=..&limit=20);
 *   - a chat turn over HTTP (keep-alive, whole answer) against the same turn through the C API,
 *     both with the scripted model, and the difference per turn, with the store's log syncs
 *     and writing commits per turn (the daemon's /metrics counters and this process's
 *     vigil_stats: counts, which the machine's load does not change);
 *   - the daemon's resident memory for 1,000 idle event-stream clients.
 * Each figure comes with the CPU time (user+sys) it cost per operation, the daemon's (from
 * /proc/PID/stat) and the client's (wrk's, or this process's), and the load average is printed
 * before and after: on a shared machine the wall figures follow the load, the CPU ones much less.
 * The load client is wrk: C, two threads each with an epoll loop over 32 keep-alive
 * connections, one request in flight per connection (no pipelining, as a browser or an app's
 * HTTP client sends them), its latencies kept in a histogram. It shares the two cores with the
 * daemon: about 16 to 30 us of CPU a request against the daemon's 30 to 50 (session 23,
 * docs/internals/PERF.md), so it is not what bounds the figure; a leaner client of our own
 * would do the same recv, send and epoll_wait calls a request.
 * Usage: bench_http [SECONDS [PARTS]] (wrk's duration, default 10; PARTS: any of "reads",
 * "chat", "streams", comma separated, default all). Needs wrk (scripts/deps.sh test)
 * and the built command ($VIGIL_CLI, else the build folder's).
 */
#include "base/common.h"

#include "base/buf.h"
#include "helpers/live_http.h"
#include "helpers/test.h"
#include "bench_util.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct live L;

/* CPU seconds of this process (RUSAGE_SELF) or of its waited-for children (wrk). */
static double rusage_cpu_s(int who)
{
    struct rusage u;
    getrusage(who, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

static void print_load(const char *when)
{
    double l[3] = {0};
    if (getloadavg(l, 3) == 3)
        printf("load average %s: %.2f %.2f %.2f (%ld cores)\n", when, l[0], l[1], l[2],
               sysconf(_SC_NPROCESSORS_ONLN));
}

static void make_agent(const char *name, char *id, size_t n)
{
    char body[128];
    struct live_resp r;
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"prompt\":\"You help.\"}", name);
    if (live_req(&L, "POST", "/v1/agents", body, NULL, 1, &r) != 200)
        TEST_FAIL_("could not create an agent: %s", r.body);
    json_t *v = json_loads(r.body, 0, NULL);
    snprintf(id, n, "%s", json_string_value(json_object_get(json_array_get(v, 0), "id")));
    json_decref(v);
    live_resp_free(&r);
}

/* wrk's "99%" latency in ms and requests per second for one URL path, with the CPU per
 * request of the daemon and of wrk. */
static void wrk(const char *label, const char *path, int seconds)
{
    char cmd[1024], line[512];
    double rps = 0, p99 = 0, requests = 0;
    snprintf(cmd, sizeof cmd,
             "wrk -t2 -c64 -d%ds --latency -H 'Authorization: Bearer %s' "
             "'http://127.0.0.1:%d%s' 2>&1",
             seconds, L.token, L.port, path);
    double daemon0 = (double)bench_proc_cpu_us(L.pid) / 1e6, wrk0 = rusage_cpu_s(RUSAGE_CHILDREN);
    FILE *p = popen(cmd, "r");
    if (!p)
        TEST_FAIL_("could not run wrk");
    while (fgets(line, sizeof line, p)) {
        char unit[8] = "";
        double v;
        if (sscanf(line, " Requests/sec: %lf", &v) == 1)
            rps = v;
        else if (strstr(line, " requests in ") && sscanf(line, " %lf", &v) == 1)
            requests = v;
        else if (sscanf(line, " 99%% %lf%7s", &v, unit) == 2)
            p99 = !strcmp(unit, "us") ? v / 1000 : !strcmp(unit, "s") ? v * 1000 : v;
        else if (strstr(line, "Non-2xx"))
            fprintf(stderr, "wrk: %s", line);
    }
    if (pclose(p) != 0 || rps == 0 || requests == 0)
        TEST_FAIL_("wrk failed (is it installed? scripts/deps.sh test)");
    double daemon = (double)bench_proc_cpu_us(L.pid) / 1e6 - daemon0,
           client = rusage_cpu_s(RUSAGE_CHILDREN) - wrk0;
    printf("%-28s %8.0f req/s  p99 %6.2f ms  CPU/req: daemon %5.1f us, wrk %5.1f us\n", label, rps,
           p99, daemon / requests * 1e6, client / requests * 1e6);
}

static size_t discard(char *d, size_t s, size_t n, void *u)
{
    VG_UNUSED(d);
    VG_UNUSED(u);
    return s * n;
}

static double chat_http(const char *agent, int turns)
{
    char url[256], authz[128];
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/agents/%s/chat", L.port, agent);
    snprintf(authz, sizeof authz, "Authorization: Bearer %s", L.token);
    h = curl_slist_append(h, authz);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{\"text\":\"hello there\"}");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    double t0 = bench_wall_s();
    for (int i = 0; i < turns; i++) {
        long st = 0;
        if (curl_easy_perform(c) != CURLE_OK ||
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st) != CURLE_OK || st != 200)
            TEST_FAIL_("chat over HTTP failed: %ld", st);
    }
    double per = (bench_wall_s() - t0) / turns;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return per;
}

static double chat_c(const char *agent, int turns)
{
    vigil_runtime_options o = {.size = sizeof o, .store_uri = L.store};
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    double t0 = bench_wall_s();
    for (int i = 0; i < turns; i++) {
        char *out = NULL;
        ASSERT_OK(vigil_chat(rt, agent, NULL, "hello there", NULL, &out, E));
        vigil_free(out);
    }
    double per = (bench_wall_s() - t0) / turns;
    vigil_runtime_close(rt);
    return per;
}

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* Open n event streams and wait until each has its first bytes. */
static void idle_streams(int *fds, int n)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)L.port)};
    char req[512], buf[512];
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int len = snprintf(req, sizeof req,
                       "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer "
                       "%s\r\n\r\n",
                       L.port, L.token);
    for (int i = 0; i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&a, sizeof a) != 0 ||
            send(fds[i], req, (size_t)len, 0) != len)
            TEST_FAIL_("stream %d: could not connect", i);
    }
    for (int i = 0; i < n; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        if (poll(&p, 1, 30000) != 1 || recv(fds[i], buf, sizeof buf, 0) <= 0)
            TEST_FAIL_("stream %d: no answer within 30 s", i);
    }
}

/* The daemon's counter `name` from /metrics (0 when absent). */
static double daemon_counter(const char *body, const char *name)
{
    const char *at = body;
    size_t n = strlen(name);
    while ((at = strstr(at, name)) && (at[n] != ' ' || (at != body && at[-1] != '\n')))
        at += n;
    return at ? strtod(at + n, NULL) : 0;
}

/* Log syncs and writing commits so far: the daemon's and this process's. */
static void store_counts(double *syncs, double *commits)
{
    struct live_resp r;
    vigil_stats st;
    if (live_req(&L, "GET", "/metrics", NULL, NULL, 1, &r) != 200)
        TEST_FAIL_("could not read /metrics: %s", r.body);
    vigil_stats_read(&st);
    *syncs = daemon_counter(r.body, "vigil_log_syncs_total") + (double)st.log_syncs;
    *commits = daemon_counter(r.body, "vigil_store_commits_total") + (double)st.commits;
    live_resp_free(&r);
}

/* Wall and CPU seconds per turn of one side of the chat comparison, summed over rounds, with
 * the store's log syncs and commits (both processes). The daemon's poller reads what a round
 * committed up to events_poll_ms later, and syncs its log once quiet: each round waits for
 * that (the counters settle) so that the work is counted with the round that caused it. */
struct side {
    double wall, daemon_cpu, self_cpu, syncs, commits;
    int turns;
};

static void settle(void)
{
    double s0, c0, s1, c1;
    int still = 0;
    store_counts(&s0, &c0);
    /* Unchanged for 1.5 s: past the daemon's poll (250 ms) and its quiet sync of the event
     * log (a second after its last append, src/http/events.c). */
    for (int i = 0; i < 200 && still < 5; i++) {
        struct timespec t = {0, 300 * 1000 * 1000};
        nanosleep(&t, NULL); /* the daemon's poll comes in its own time: nothing to wait on */
        store_counts(&s1, &c1);
        still = s1 == s0 && c1 == c0 ? still + 1 : 0;
        s0 = s1;
        c0 = c1;
    }
}

static void chat_round(struct side *sd, const char *agent, int turns, int http)
{
    double s0, c0, s1, c1;
    settle();
    store_counts(&s0, &c0);
    double d0 = (double)bench_proc_cpu_us(L.pid) / 1e6, self0 = rusage_cpu_s(RUSAGE_SELF);
    sd->wall += (http ? chat_http(agent, turns) : chat_c(agent, turns)) * turns;
    sd->self_cpu += rusage_cpu_s(RUSAGE_SELF) - self0;
    settle();
    sd->daemon_cpu += (double)bench_proc_cpu_us(L.pid) / 1e6 - d0;
    store_counts(&s1, &c1);
    sd->syncs += s1 - s0;
    sd->commits += c1 - c0;
    sd->turns += turns;
}

static void print_chat(const struct side *h, const struct side *c)
{
    double hw = h->wall / h->turns * 1e3, cw = c->wall / c->turns * 1e3;
    double hc = (h->daemon_cpu + h->self_cpu) / h->turns * 1e3;
    double cc = (c->daemon_cpu + c->self_cpu) / c->turns * 1e3;
    printf("%-28s wall %7.3f ms over HTTP, %7.3f ms through the C API: HTTP adds %.3f ms\n",
           "a chat turn (scripted model)", hw, cw, hw - cw);
    printf("%-28s CPU  %7.3f ms over HTTP (daemon %.3f + client %.3f), %7.3f ms through the C "
           "API (this process %.3f + daemon %.3f): HTTP adds %.3f ms\n",
           "", hc, h->daemon_cpu / h->turns * 1e3, h->self_cpu / h->turns * 1e3, cc,
           c->self_cpu / c->turns * 1e3, c->daemon_cpu / c->turns * 1e3, hc - cc);
    printf("%-28s log syncs %.2f and commits %.2f per turn over HTTP, %.2f and %.2f through the "
           "C API (both processes, the daemon's event log included)\n",
           "", h->syncs / h->turns, h->commits / h->turns, c->syncs / c->turns,
           c->commits / c->turns);
}

int main(int argc, char **argv)
{
    /* The daemon's own event poll interval (the test helpers' 50 ms polls more than it would). */
    static const char *const extra[] = {"--http-max-connections", "1100", "--events-poll-ms", "250",
                                        NULL};
    static int fds[1000];
    int seconds = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 10;
    const char *parts = argc > 2 ? argv[2] : "reads,chat,streams";
    char agent[64], other[64], path[256];
    if (!getenv("VIGIL_CLI"))
        setenv("VIGIL_CLI", VIGIL_BINARY_DIR "/vigil", 1);
    if (!getenv(
            "VIGIL_TEST_CLI")) /* the daemon the live helpers start (tests/helpers/live_http.c) */
        setenv("VIGIL_TEST_CLI", VIGIL_BINARY_DIR "/vigil-test", 1);
    print_load("before");
    live_start(&L, "bench-http", extra);
    make_agent("reader", agent, sizeof agent);
    make_agent("direct", other, sizeof other);
    struct side http = {0}, direct = {0};
    for (int round = 0; round < 10; round++) { /* interleaved, so both see the same load */
        chat_round(&http, agent, 20, 1);
        chat_round(&direct, other, 20, 0);
    }
    if (strstr(parts, "reads")) {
        snprintf(path, sizeof path, "/v1/agents/%s", agent);
        /* The first seconds open a runtime per concurrent request (up to 64, each a store
         * connection): shown apart, so the steady figures below are not its tail. */
        wrk("read an agent, cold (2 s)", path, 2);
        wrk("read an agent", path, seconds);
        snprintf(path, sizeof path, "/v1/runs?agent=%s&limit=20", agent);
        wrk("list runs (20 of 200)", path, seconds);
    }
    if (strstr(parts, "chat"))
        print_chat(&http, &direct);
    if (!strstr(parts, "streams")) {
        live_stop(&L);
        print_load("after");
        return 0;
    }
    long before = rss_kb(L.pid);
    idle_streams(fds, (int)VG_ARRAY_LEN(fds));
    long after = rss_kb(L.pid);
    printf("%-28s %8.1f MB more resident memory (%ld kB -> %ld kB): %.1f kB each\n",
           "1000 idle event streams", (double)(after - before) / 1024, before, after,
           (double)(after - before) / (double)VG_ARRAY_LEN(fds));
    for (size_t i = 0; i < VG_ARRAY_LEN(fds); i++)
        close(fds[i]);
    live_stop(&L);
    print_load("after");
    return 0;
}
