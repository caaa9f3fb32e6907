/*
 * bench_http.c: the HTTP API's figures (issue 29, "Measured") against a live `vigil serve
 * --listen` on this machine:
 *   - reads per second and p99 latency with 64 keep-alive clients (wrk, 2 threads, 10 s) for
 *     reading an agent (GET /v1/agents/{id}) and listing runs (GET /v1/runs?agent=..&limit=20);
 *   - a chat turn over HTTP (keep-alive, whole answer) against the same turn through the C API,
 *     both with the scripted model, in 20 pairs of 10-turn blocks, HTTP and C API alternately
 *     first, so both sides see the same machine state and the same store. Per turn it prints
 *     the median of each side and of the pairs' differences ("HTTP adds"), with the
 *     differences' quartiles and extremes, for the wall, the CPU, the daemon's context
 *     switches and the store's log syncs and writing commits (the daemon's /metrics counters
 *     and this process's vigil_stats: counts, which the machine's load does not change), and
 *     each pair's figures. What the daemon does beside the turns: over HTTP it runs them (a
 *     kept worker) and its event poller reads them at its 250 ms poll (no stream is open, so
 *     it does not listen for commits); through the C API it reads the other process's turns
 *     the same way. Its idle work (the poll, its timers, this bench's /metrics reads while a
 *     block settles: about 2 ms of CPU a turn at 10 turns a block) is measured before each
 *     pair and taken off, as it follows the settle's length, not the turns;
 *   - the same wrk against a server that does no work (one epoll loop a core answering fixed
 *     bytes of the agent read's size): the floor this machine puts under the reads' p99;
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
 * Usage: bench_http [SECONDS [PARTS [PAIRS]]] (wrk's duration, default 10; PARTS: any of
 * "reads", "chat", "streams", "pairs" (a chat turn in PAIRS pairs of single turns, default
 * 1,000), comma separated, default all but pairs; "pairs" alone skips the blocks). Needs wrk
 * (scripts/deps.sh test) and the built command ($VIGIL_CLI, else the build folder's).
 * BENCH_HTTP_C_DEFER=1: the pairs' C API turns defer their upkeep as the daemon's do (below).
 */
#include "base/common.h"

#include "base/buf.h"
#include "helpers/live_http.h"
#include "helpers/test.h"
#include "bench_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
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

/* Its daily budgets unlimited: the chat parts make thousands of turns of one agent, past the
 * default 1,000 steps a day (each would then answer 429 budget_exceeded). */
static void make_agent(const char *name, char *id, size_t n)
{
    char body[256];
    struct live_resp r;
    snprintf(body, sizeof body,
             "{\"name\":\"%s\",\"prompt\":\"You help.\",\"budgets\":{\"tokens\":null,"
             "\"cost_usd\":null,\"steps\":null,\"tool_calls\":null,\"wall_ms\":null}}",
             name);
    if (live_req(&L, "POST", "/v1/agents", body, NULL, 1, &r) != 200)
        TEST_FAIL_("could not create an agent: %s", r.body);
    json_t *v = json_loads(r.body, 0, NULL);
    snprintf(id, n, "%s", json_string_value(json_object_get(json_array_get(v, 0), "id")));
    json_decref(v);
    live_resp_free(&r);
}

struct threads {
    double cpu_ns, voluntary, involuntary;
};
static struct threads daemon_threads(void);

/* wrk's "99%" latency in ms and requests per second for one URL path, with the CPU per
 * request of the daemon and of wrk, and, for the daemon, its context switches a request:
 * voluntary (a thread that waited: for its next request, or for a lock) and involuntary (one
 * the scheduler took the core from: on 2 cores shared with wrk, what the p99 is made of). */
static void wrk_at(const char *label, int port, pid_t server, const char *path, int seconds)
{
    char cmd[1024], line[512];
    double rps = 0, p99 = 0, requests = 0;
    snprintf(cmd, sizeof cmd,
             "wrk -t2 -c64 -d%ds --latency -H 'Authorization: Bearer %s' "
             "'http://127.0.0.1:%d%s' 2>&1",
             seconds, L.token, port, path);
    double daemon0 = (double)bench_proc_cpu_us(server) / 1e6, wrk0 = rusage_cpu_s(RUSAGE_CHILDREN);
    struct threads t0 = server == L.pid ? daemon_threads() : (struct threads){0};
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
    double daemon = (double)bench_proc_cpu_us(server) / 1e6 - daemon0,
           client = rusage_cpu_s(RUSAGE_CHILDREN) - wrk0;
    printf("%-28s %8.0f req/s  p99 %6.2f ms  CPU/req: daemon %5.1f us, wrk %5.1f us\n", label, rps,
           p99, daemon / requests * 1e6, client / requests * 1e6);
    if (server == L.pid) {
        struct threads t1 = daemon_threads();
        printf("%-28s the daemon's switches a request: %.3f voluntary, %.3f involuntary\n", "",
               (t1.voluntary - t0.voluntary) / requests,
               (t1.involuntary - t0.involuntary) / requests);
    }
}

static void wrk(const char *label, const char *path, int seconds)
{
    wrk_at(label, L.port, L.pid, path, seconds);
}

/* The floor under the reads' figures: a server that does no work, loaded by the same wrk. One
 * epoll loop a core (the daemon's pool has as many threads), each with its own SO_REUSEPORT
 * socket on one port so the kernel spreads the connections evenly, answering each request with
 * fixed bytes the size of the daemon's answer. What its p99 is, 64 clients on this machine
 * have before any server does anything; the daemon's p99 is read against it. */
struct floor_server;
struct floor_thread {
    struct floor_server *f;
    int fd; /* its listening socket */
    pthread_t thread;
};
struct floor_server {
    struct floor_thread t[4];
    int n, port;
    atomic_int stop;
    char *answer;
    size_t answer_len;
};

/* Answer each whole request read on c (no pipelining: wrk sends one at a time). 0: closed. */
static int floor_answer(struct floor_server *f, int c)
{
    char buf[8192];
    ssize_t r = read(c, buf, sizeof buf - 1);
    if (r <= 0)
        return r < 0 && errno == EAGAIN;
    buf[r] = '\0';
    for (char *at = buf; (at = strstr(at, "\r\n\r\n")); at += 4)
        if (write(c, f->answer, f->answer_len) != (ssize_t)f->answer_len)
            return 0;
    return 1;
}

static void *floor_loop(void *arg)
{
    struct floor_thread *t = arg;
    struct floor_server *f = t->f;
    int lfd = t->fd;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd}, got[64];
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    while (!atomic_load(&f->stop)) {
        int n = epoll_wait(ep, got, 64, 100);
        for (int i = 0; i < n; i++) {
            int fd = got[i].data.fd, c;
            if (fd != lfd) {
                if (!floor_answer(f, fd))
                    close(fd);
                continue;
            }
            while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
            }
        }
    }
    close(ep);
    return NULL;
}

static int floor_socket(int port)
{
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, SOMAXCONN) ||
        getsockname(fd, (struct sockaddr *)&a, &n))
        TEST_FAIL_("floor server: could not listen: %s", strerror(errno));
    return fd;
}

/* Start the floor server answering body_len bytes of JSON with the daemon's usual headers. */
static void floor_start(struct floor_server *f, size_t body_len)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cores < 1 ? 1 : cores > 4 ? 4 : (int)cores;
    char head[256];
    int h = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nDate: Sat, 28 Nov 2026 00:00:00 GMT\r\n\r\n",
                     body_len);
    f->answer_len = (size_t)h + body_len;
    f->answer = malloc(f->answer_len);
    memcpy(f->answer, head, (size_t)h);
    memset(f->answer + h, ' ', body_len);
    f->answer[h] = '{';
    f->answer[f->answer_len - 1] = '}';
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    for (f->n = 0; f->n < threads; f->n++) {
        struct floor_thread *t = &f->t[f->n];
        t->f = f;
        t->fd = floor_socket(f->port);
        getsockname(t->fd, (struct sockaddr *)&a, &n);
        f->port = ntohs(a.sin_port); /* the first socket's port, then the same for the rest */
        pthread_create(&t->thread, NULL, floor_loop, t);
    }
}

static void floor_stop(struct floor_server *f)
{
    atomic_store(&f->stop, 1);
    for (int i = 0; i < f->n; i++) {
        pthread_join(f->t[i].thread, NULL);
        close(f->t[i].fd);
    }
    free(f->answer);
}

static size_t discard(char *d, size_t s, size_t n, void *u)
{
    VG_UNUSED(d);
    VG_UNUSED(u);
    return s * n;
}

/* The HTTP side's client: one keep-alive connection for the whole comparison, as an app keeps. */
static CURL *chat_client(const char *agent, struct curl_slist **h)
{
    char url[256], authz[128];
    CURL *c = curl_easy_init();
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/agents/%s/chat", L.port, agent);
    snprintf(authz, sizeof authz, "Authorization: Bearer %s", L.token);
    *h = curl_slist_append(NULL, authz);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{\"text\":\"hello there\"}");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    return c;
}

/* The same POST to a server that does no work (the floor server): the round trip alone. */
static CURL *floor_client(int port)
{
    char url[128];
    CURL *c = curl_easy_init();
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{\"text\":\"hello there\"}");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    return c;
}

static void chat_http(CURL *c, int turns)
{
    for (int i = 0; i < turns; i++) {
        long st = 0;
        if (curl_easy_perform(c) != CURLE_OK ||
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st) != CURLE_OK || st != 200)
            TEST_FAIL_("chat over HTTP failed: %ld", st);
    }
}

static void chat_c(vigil_runtime *rt, const char *agent, int turns)
{
    for (int i = 0; i < turns; i++) {
        char *out = NULL;
        ASSERT_OK(vigil_chat(rt, agent, NULL, "hello there", NULL, &out, E));
        vigil_free(out);
    }
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

/* The daemon's CPU time in ns (each thread's run time from /proc/PID/task/TID/schedstat: ns,
 * where /proc/PID/stat counts 10 ms ticks, a quarter of a 10-turn block) and its context
 * switches, voluntary (a thread that slept: a hand-off's wake-up) and not, summed over its
 * threads. A thread that ended takes its counts with it: the daemon's kept workers live 30 s
 * idle, longer than a block and its settling. */
static void task_counts(const char *tid, struct threads *t)
{
    char path[128], line[256];
    unsigned long long ns = 0;
    long v;
    snprintf(path, sizeof path, "/proc/%d/task/%.32s/schedstat", (int)L.pid, tid);
    FILE *f = fopen(path, "re");
    if (f && fscanf(f, "%llu", &ns) == 1)
        t->cpu_ns += (double)ns;
    if (f)
        fclose(f);
    snprintf(path, sizeof path, "/proc/%d/task/%.32s/status", (int)L.pid, tid);
    f = fopen(path, "re");
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
            t->voluntary += (double)v;
        else if (sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
            t->involuntary += (double)v;
    }
    if (f)
        fclose(f);
}

static struct threads daemon_threads(void)
{
    struct threads t = {0};
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)L.pid);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.')
            task_counts(e->d_name, &t);
    if (d)
        closedir(d);
    return t;
}

/* One block of turns on one side, per turn: wall; CPU of the daemon and of this process (the
 * client over HTTP, the turn itself through the C API); the daemon's context switches; the
 * store's log syncs and commits (both processes). The daemon's poller reads what a block
 * committed up to events_poll_ms later and syncs its event log once quiet: each block is
 * followed by settle() (the counters still) so that work is counted with the block that caused
 * it, and so are settle's own /metrics reads (the same number, 6 or more, on each side). */
struct block {
    double wall, daemon_cpu, self_cpu, voluntary, involuntary, syncs, commits;
    double idle_cpu; /* the daemon's idle CPU over the window, a turn: taken off daemon_cpu */
    double window;   /* seconds from the block's start to its counters still (its settle) */
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

static struct block chat_block(CURL *c, vigil_runtime *rt, const char *agent, int turns)
{
    double s0, c0, s1, c1;
    struct block b;
    store_counts(&s0, &c0);
    struct threads d0 = daemon_threads();
    double self0 = bench_cpu_s(), t0 = bench_wall_s();
    if (c)
        chat_http(c, turns);
    else
        chat_c(rt, agent, turns);
    b.wall = (bench_wall_s() - t0) / turns;
    b.self_cpu = (bench_cpu_s() - self0) / turns;
    settle();
    struct threads d1 = daemon_threads();
    b.window = bench_wall_s() - t0;
    store_counts(&s1, &c1);
    b.daemon_cpu = (d1.cpu_ns - d0.cpu_ns) / 1e9 / turns;
    b.voluntary = (d1.voluntary - d0.voluntary) / turns;
    b.involuntary = (d1.involuntary - d0.involuntary) / turns;
    b.syncs = (s1 - s0) / turns;
    b.commits = (c1 - c0) / turns;
    return b;
}

/* The daemon with no turn to do, through a settle as long as a block's: its poll every 250 ms,
 * its timers and the settle's /metrics reads. Its CPU a second is taken off each block's
 * daemon CPU (window x rate), leaving what the turns cost it. */
static double idle_rate(void)
{
    struct threads d0 = daemon_threads();
    double t0 = bench_wall_s();
    settle();
    struct threads d1 = daemon_threads();
    return (d1.cpu_ns - d0.cpu_ns) / 1e9 / (bench_wall_s() - t0);
}

#define CHAT_PAIRS 20
#define CHAT_TURNS 10

/* The p-th fraction (0..1) of n values (sorted in place). */
static double quantile(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[(int)(p * (n - 1) + 0.5)];
}

/* One figure over the pairs: median of each side and of the pairs' differences, with the
 * differences' quartiles and extremes (the spread one block pair to the next). */
static void print_figure(const char *what, const double *http, const double *capi, double scale)
{
    double h[CHAT_PAIRS], c[CHAT_PAIRS], d[CHAT_PAIRS];
    for (int i = 0; i < CHAT_PAIRS; i++) {
        h[i] = http[i] * scale;
        c[i] = capi[i] * scale;
        d[i] = h[i] - c[i];
    }
    double hm = quantile(h, CHAT_PAIRS, 0.5), cm = quantile(c, CHAT_PAIRS, 0.5);
    double dm = quantile(d, CHAT_PAIRS, 0.5), q1 = quantile(d, CHAT_PAIRS, 0.25);
    double q3 = quantile(d, CHAT_PAIRS, 0.75);
    printf("  %-30s %8.3f %8.3f  %+8.3f  [%+.3f, %+.3f]  %+.3f .. %+.3f\n", what, hm, cm, dm, q1,
           q3, d[0], d[CHAT_PAIRS - 1]);
}

#define COLUMN(arr, field, out)                                                                    \
    for (int i_ = 0; i_ < CHAT_PAIRS; i_++)                                                        \
    (out)[i_] = (arr)[i_].field

static void print_chat(const struct block *h, const struct block *c)
{
    double hv[CHAT_PAIRS], cv[CHAT_PAIRS], hcpu[CHAT_PAIRS], ccpu[CHAT_PAIRS];
    printf("a chat turn (scripted model): %d pairs of %d-turn blocks, HTTP and C API "
           "alternately first; per turn, medians over the blocks (the daemon's CPU without "
           "its idle rate, measured before each pair, over the block's settle):\n",
           CHAT_PAIRS, CHAT_TURNS);
    printf("  %-30s %8s %8s  %8s  %-18s %s\n", "", "HTTP", "C API", "HTTP adds", "(quartiles)",
           "(least .. most)");
    for (int i = 0; i < CHAT_PAIRS; i++) {
        hcpu[i] = h[i].daemon_cpu + h[i].self_cpu;
        ccpu[i] = c[i].daemon_cpu + c[i].self_cpu;
    }
    COLUMN(h, wall, hv);
    COLUMN(c, wall, cv);
    print_figure("wall, ms", hv, cv, 1e3);
    print_figure("CPU, both processes, ms", hcpu, ccpu, 1e3);
    COLUMN(h, daemon_cpu, hv);
    COLUMN(c, daemon_cpu, cv);
    print_figure("CPU of the daemon, ms", hv, cv, 1e3);
    COLUMN(h, idle_cpu, hv);
    COLUMN(c, idle_cpu, cv);
    print_figure("daemon idle beside (taken off)", hv, cv, 1e3);
    COLUMN(h, self_cpu, hv);
    COLUMN(c, self_cpu, cv);
    print_figure("CPU of the bench process, ms", hv, cv, 1e3);
    COLUMN(h, voluntary, hv);
    COLUMN(c, voluntary, cv);
    print_figure("daemon's voluntary switches", hv, cv, 1);
    COLUMN(h, involuntary, hv);
    COLUMN(c, involuntary, cv);
    print_figure("daemon's involuntary switches", hv, cv, 1);
    COLUMN(h, commits, hv);
    COLUMN(c, commits, cv);
    print_figure("commits (both processes)", hv, cv, 1);
    COLUMN(h, syncs, hv);
    COLUMN(c, syncs, cv);
    print_figure("log syncs (both processes)", hv, cv, 1);
    printf("  by block pair (ms a turn: wall, daemon CPU + bench CPU; commits):\n");
    for (int i = 0; i < CHAT_PAIRS; i++)
        printf("  %2d %-5s HTTP %6.3f, %5.3f + %5.3f; %4.2f   C API %6.3f, %5.3f + %5.3f; %4.2f\n",
               i, i % 2 ? "C API" : "HTTP", h[i].wall * 1e3, h[i].daemon_cpu * 1e3,
               h[i].self_cpu * 1e3, h[i].commits, c[i].wall * 1e3, c[i].daemon_cpu * 1e3,
               c[i].self_cpu * 1e3, c[i].commits);
}

/* HTTP turns and C API turns in small blocks, alternately first, so both see the same machine
 * state and the store's growth; the daemon idles beside the C API's turns except for its poll. */
static void compare_chat(const char *agent, const char *other, struct block *h, struct block *c)
{
    struct curl_slist *hdr = NULL;
    CURL *client = chat_client(agent, &hdr);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = L.store};
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    chat_http(client, CHAT_TURNS); /* warm: the connection, a worker, both runtimes' caches */
    chat_c(rt, other, CHAT_TURNS);
    settle();
    for (int i = 0; i < CHAT_PAIRS; i++) {
        double idle = idle_rate();
        if (i % 2) {
            c[i] = chat_block(NULL, rt, other, CHAT_TURNS);
            h[i] = chat_block(client, NULL, agent, CHAT_TURNS);
        } else {
            h[i] = chat_block(client, NULL, agent, CHAT_TURNS);
            c[i] = chat_block(NULL, rt, other, CHAT_TURNS);
        }
        h[i].idle_cpu = idle * h[i].window / CHAT_TURNS;
        c[i].idle_cpu = idle * c[i].window / CHAT_TURNS;
        h[i].daemon_cpu -= h[i].idle_cpu;
        c[i].daemon_cpu -= c[i].idle_cpu;
    }
    vigil_runtime_close(rt);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(client);
}

/* Single turns in pairs (session 35): one over HTTP and one through the C API, alternately
 * first, TURN_PAIRS times, each side's figures taken around its one turn: the wall, and the CPU
 * of both processes (the daemon's threads' run time, ns, and this process's). A pair's two
 * turns are a few milliseconds apart, so the machine's load moves both alike, where the blocks
 * above are seconds apart. The daemon's poll (every 250 ms) reads both sides' turns and lands in
 * one turn of either side in fifty or so: the median leaves it out, the upper tail shows it. The
 * daemon's answer goes out before its thread is done with the request (back to its epoll
 * wait): a short pause after each turn keeps that work in its own turn's figures. */
#define TURN_PAIRS 1000

static int turn_pairs = TURN_PAIRS; /* bench_http's third argument */
/* BENCH_HTTP_C_DEFER=1: the C API's turns leave their upkeep (vigil_runtime_defer_upkeep) as
 * the daemon's do, run after the turn's wall is taken and before its CPU is: both sides'
 * walls without the upkeep, both sides' CPU with it. Unset: vigil_chat as a program calls it. */
static int c_defers;

struct turn {
    double wall, cpu, self, daemon;
    double switches, self_switches; /* voluntary ones: the daemon's, this process's */
};

/* This process's voluntary context switches so far (all its threads). */
static double self_switches(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_nvcsw;
}

/* One round trip to the floor server, its wall: what a request and its answer cost on this
 * machine's loopback with no work behind them (two processes woken, the kernel's TCP, libcurl),
 * against which "HTTP adds" is read. */
static double floor_trip(CURL *c)
{
    double t0 = bench_wall_s();
    if (curl_easy_perform(c) != CURLE_OK)
        TEST_FAIL_("the floor server did not answer");
    return bench_wall_s() - t0;
}

static struct turn one_turn(CURL *c, vigil_runtime *rt, const char *agent)
{
    struct turn t;
    struct timespec pause = {0, 2 * 1000 * 1000};
    struct threads d0 = daemon_threads();
    double sw0 = self_switches(), self0 = bench_cpu_s(), t0 = bench_wall_s();
    if (c)
        chat_http(c, 1);
    else
        chat_c(rt, agent, 1);
    t.wall = bench_wall_s() - t0;
    if (!c && c_defers)
        vigil_runtime_upkeep(rt);
    t.self = bench_cpu_s() - self0;
    t.self_switches = self_switches() - sw0;
    nanosleep(&pause, NULL); /* not a wait for an event: see above */
    struct threads d1 = daemon_threads();
    t.daemon = (d1.cpu_ns - d0.cpu_ns) / 1e9;
    t.switches = d1.voluntary - d0.voluntary;
    t.cpu = t.self + t.daemon;
    return t;
}

/* Median, quartiles and the 10th and 90th percentiles of n values, times scale. */
static void print_spread(const char *what, double *v, int n, double scale)
{
    double q[5] = {0.10, 0.25, 0.5, 0.75, 0.90};
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    printf("  %-34s", what);
    for (int i = 0; i < 5; i++)
        printf(" %+8.3f", v[(int)(q[i] * (n - 1) + 0.5)] * scale);
    printf("\n");
}

/* The 95% confidence interval of the median of n sorted values, from their ranks alone (the
 * number of values under the median is binomial(n, 1/2)): no assumption about the spread's
 * shape, which on a shared machine has long tails. */
static void print_median_ci(const double *sorted, int n, double scale)
{
    int half = (int)(0.98 * sqrt((double)n)); /* 1.96 sqrt(n) / 2 */
    int lo = n / 2 - half - 1, hi = n / 2 + half;
    if (lo < 0 || hi >= n)
        return;
    printf("  %-34s %+8.3f .. %+8.3f\n", "  its median's 95% interval", sorted[lo] * scale,
           sorted[hi] * scale);
}

/* One figure of the pairs: each side's spread, then the pairs' differences', with the
 * interval their median is known to. */
static void print_pairs(const char *what, const struct turn *h, const struct turn *c, size_t at,
                        double scale)
{
    int n = turn_pairs;
    double *hv = vg_malloc(3 * (size_t)n * sizeof *hv), *cv = hv + n, *dv = cv + n;
    char label[64];
    if (!hv)
        TEST_FAIL_("out of memory");
    for (int i = 0; i < n; i++) {
        memcpy(&hv[i], (const char *)&h[i] + at, sizeof(double));
        memcpy(&cv[i], (const char *)&c[i] + at, sizeof(double));
        dv[i] = hv[i] - cv[i];
    }
    snprintf(label, sizeof label, "%s, HTTP", what);
    print_spread(label, hv, n, scale);
    snprintf(label, sizeof label, "%s, C API", what);
    print_spread(label, cv, n, scale);
    snprintf(label, sizeof label, "%s, HTTP adds (pairs)", what);
    print_spread(label, dv, n, scale);
    print_median_ci(dv, n, scale);
    vg_free(hv);
}

static void compare_turns(const char *agent, const char *other)
{
    int n = turn_pairs;
    struct turn *h = vg_calloc(2 * (size_t)n, sizeof *h), *c = h ? h + n : NULL;
    double *trip = vg_calloc((size_t)n, sizeof *trip);
    struct curl_slist *hdr = NULL;
    if (!h || !trip)
        TEST_FAIL_("out of memory");
    CURL *client = chat_client(agent, &hdr);
    struct floor_server f = {0};
    floor_start(&f, 600); /* about a whole turn's answer */
    CURL *to_floor = floor_client(f.port);
    floor_trip(to_floor);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = L.store};
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    c_defers = getenv("BENCH_HTTP_C_DEFER") && !strcmp(getenv("BENCH_HTTP_C_DEFER"), "1");
    vigil_runtime_defer_upkeep(rt, c_defers);
    chat_http(client, CHAT_TURNS);
    chat_c(rt, other, CHAT_TURNS);
    for (int i = 0; i < n; i++) {
        if (i % 2) {
            c[i] = one_turn(NULL, rt, other);
            h[i] = one_turn(client, NULL, agent);
        } else {
            h[i] = one_turn(client, NULL, agent);
            c[i] = one_turn(NULL, rt, other);
        }
        trip[i] = floor_trip(to_floor);
    }
    vigil_runtime_close(rt);
    curl_easy_cleanup(to_floor);
    floor_stop(&f);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(client);
    printf("a chat turn (scripted model): %d pairs of single turns, HTTP and C API alternately "
           "first; ms a turn at the 10th, 25th, 50th, 75th, 90th percentiles (CPU both: the "
           "daemon's and this process's; CPU bench: this process's, the client or the turn)%s:\n",
           n, c_defers ? "; the C API's upkeep deferred, after its wall" : "");
    print_pairs("wall", h, c, offsetof(struct turn, wall), 1e3);
    print_pairs("CPU both", h, c, offsetof(struct turn, cpu), 1e3);
    print_pairs("CPU daemon", h, c, offsetof(struct turn, daemon), 1e3);
    print_pairs("CPU bench", h, c, offsetof(struct turn, self), 1e3);
    printf("  voluntary context switches a turn (not ms), the daemon's and this process's (the\n"
           "  client's wait, or the C API turn's own log sync):\n");
    print_pairs("switches", h, c, offsetof(struct turn, switches), 1);
    print_pairs("switches, bench", h, c, offsetof(struct turn, self_switches), 1);
    printf("  the same POST to a server doing nothing (one a pair, keep-alive; ms):\n");
    print_spread("wall, floor round trip", trip, n, 1e3);
    vg_free(trip);
    vg_free(h);
}

/* The floor server answering as many bytes as the daemon's read of agent, loaded alike. */
static void reads_floor(const char *agent, int seconds)
{
    char path[128];
    struct live_resp r;
    snprintf(path, sizeof path, "/v1/agents/%s", agent);
    if (live_req(&L, "GET", path, NULL, NULL, 1, &r) != 200)
        TEST_FAIL_("could not read the agent: %s", r.body);
    size_t body_len = strlen(r.body);
    live_resp_free(&r);
    struct floor_server f = {0};
    floor_start(&f, body_len);
    wrk_at("floor: a server doing nothing", f.port, getpid(), "/", seconds);
    floor_stop(&f);
}

int main(int argc, char **argv)
{
    /* The daemon's own event poll interval (the test helpers' 50 ms polls more than it would). */
    static const char *const extra[] = {"--http-max-connections", "1100", "--events-poll-ms", "250",
                                        NULL};
    static int fds[1000];
    int seconds = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 10;
    const char *parts = argc > 2 ? argv[2] : "reads,chat,streams";
    if (argc > 3 && (turn_pairs = (int)strtol(argv[3], NULL, 10)) < 10)
        TEST_FAIL_("PAIRS: 10 or more");
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
    static struct block http[CHAT_PAIRS], direct[CHAT_PAIRS];
    if (strstr(parts, "pairs")) /* only the single turns' pairs, then the parts asked */
        compare_turns(agent, other);
    if (strcmp(parts, "pairs") != 0)
        compare_chat(agent, other, http, direct);
    if (strstr(parts, "reads")) {
        snprintf(path, sizeof path, "/v1/agents/%s", agent);
        /* The first seconds open a runtime per concurrent request (up to 64, each a store
         * connection): shown apart, so the steady figures below are not its tail. */
        wrk("read an agent, cold (2 s)", path, 2);
        wrk("read an agent", path, seconds);
        snprintf(path, sizeof path, "/v1/runs?agent=%s&limit=20", agent);
        wrk("list runs (20 of 200)", path, seconds);
        reads_floor(agent, seconds);
    }
    if (strstr(parts, "chat") && strcmp(parts, "pairs") != 0)
        print_chat(http, direct);
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
