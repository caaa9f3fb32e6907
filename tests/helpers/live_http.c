/*
 * live_http.c: see live_http.h.
 */
#include "base/common.h"

#include "base/buf.h"
#include "helpers/live_http.h"
#include "helpers/test.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void run_init(const char *cli, const char *store)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "VIGIL_STORE='%s' '%s' init >/dev/null 2>&1", store, cli);
    if (system(cmd) != 0)
        TEST_FAIL_("vigil init failed for %s", store);
}

/* Read the daemon's stderr until it names its port. */
static void wait_port(struct live *L)
{
    char buf[8192];
    size_t len = 0;
    int64_t until = now_ms() + 30000;
    while (now_ms() < until) {
        struct pollfd p = {.fd = L->err_fd, .events = POLLIN};
        if (poll(&p, 1, 1000) <= 0)
            continue;
        ssize_t n = read(L->err_fd, buf + len, sizeof buf - 1 - len);
        if (n <= 0)
            TEST_FAIL_("vigil serve exited before listening: %.*s", (int)len, buf);
        len += (size_t)n;
        buf[len] = '\0';
        const char *at = strstr(buf, "HTTP API on http://127.0.0.1:");
        if (at && strchr(at, '\n')) {
            L->port = (int)strtol(at + strlen("HTTP API on http://127.0.0.1:"), NULL, 10);
            return;
        }
    }
    TEST_FAIL_("vigil serve did not listen within 30 s: %.*s", (int)len, buf);
}

static void read_token(struct live *L)
{
    char path[4300];
    glob_t g = {0};
    /* A store URI's token is in a folder of its own under the data folder (docs/http.md). */
    snprintf(path, sizeof path, "%s%s/api-token", L->dir,
             strstr(L->store, "://") ? "/vigil/store-*" : "");
    if (glob(path, 0, NULL, &g) == 0 && g.gl_pathc == 1)
        snprintf(path, sizeof path, "%s", g.gl_pathv[0]);
    globfree(&g);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(L->token, sizeof L->token, f))
        TEST_FAIL_("no token in %s", path);
    fclose(f);
}

/* A failed assertion exits the test at once: the daemon must not outlive it. */
static pid_t started[8];

static void kill_started(void)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(started); i++)
        if (started[i] > 0 && kill(started[i], SIGKILL) == 0)
            waitpid(started[i], NULL, 0);
}

static void remember(pid_t pid)
{
    static int registered;
    if (!registered++)
        atexit(kill_started);
    for (size_t i = 0; i < VG_ARRAY_LEN(started); i++)
        if (started[i] <= 0) {
            started[i] = pid;
            return;
        }
}

static void forget(pid_t pid)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(started); i++)
        if (started[i] == pid)
            started[i] = 0;
}

/* vigil-test: the command with the tests' wake runners ("echo", set below), which the
 * product's command refuses. */
static const char *test_cli(void)
{
    const char *cli = getenv("VIGIL_TEST_CLI");
    if (!cli)
        TEST_FAIL_("VIGIL_TEST_CLI is not set (run through ctest)");
    return cli;
}

static void spawn(struct live *L, const char *const *extra);

void live_start(struct live *L, const char *name, const char *const *extra)
{
    memset(L, 0, sizeof *L);
    snprintf(L->dir, sizeof L->dir, "%s", vg_test_tmpdir(name));
    snprintf(L->store, sizeof L->store, "%s/vigil.db", L->dir);
    run_init(test_cli(), L->store);
    spawn(L, extra);
}

void live_start_on(struct live *L, const char *name, const char *uri, int init,
                   const char *const *extra)
{
    memset(L, 0, sizeof *L);
    snprintf(L->dir, sizeof L->dir, "%s", vg_test_tmpdir(name));
    snprintf(L->store, sizeof L->store, "%s", uri);
    if (init)
        run_init(test_cli(), L->store);
    spawn(L, extra);
}

void live_restart(struct live *L, const char *const *extra)
{
    live_stop(L);
    spawn(L, extra);
}

static void spawn(struct live *L, const char *const *extra)
{
    const char *cli = test_cli();
    int fds[2];
    if (pipe(fds) != 0)
        TEST_FAIL_("pipe: %s", strerror(errno));
    const char *argv[40] = {
        cli,  "serve",     "--listen", "127.0.0.1:0", "--http-timeout-s", "3", "--events-poll-ms",
        "50", "--poll-ms", "50"};
    int argc = 10;
    for (int i = 0; extra && extra[i] && argc < 38; i++)
        argv[argc++] = extra[i];
    L->pid = fork();
    if (L->pid < 0)
        TEST_FAIL_("fork: %s", strerror(errno));
    if (L->pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        setenv("VIGIL_STORE", L->store, 1);
        if (strstr(L->store, "://")) /* a store URI's data folder (the token's) */
            setenv("XDG_DATA_HOME", L->dir, 1);
        /* A test may ask for another of the tests' runners (wake_runners.c). */
        const char *runner = getenv("VIGIL_LIVE_RUNNER");
        setenv("VIGIL_WAKE_RUNNER", runner ? runner : "echo", 1);
        unsetenv("VIGIL_MODEL_PROVIDER");
        execv(cli, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    remember(L->pid);
    L->err_fd = fds[0];
    wait_port(L);
    read_token(L);
}

int live_running(struct live *L)
{
    int st;
    return waitpid(L->pid, &st, WNOHANG) == 0;
}

void live_stop(struct live *L)
{
    int st = 0;
    kill(L->pid, SIGTERM);
    int64_t until = now_ms() + 30000;
    pid_t got = 0;
    while ((got = waitpid(L->pid, &st, WNOHANG)) == 0 && now_ms() < until) {
        struct pollfd p = {.fd = L->err_fd, .events = POLLIN};
        char buf[4096];
        if (poll(&p, 1, 200) > 0 && read(L->err_fd, buf, sizeof buf) <= 0)
            p.fd = -1; /* closed: the process is on its way out */
    }
    if (got != L->pid)
        TEST_FAIL_("vigil serve did not stop within 30 s");
    forget(L->pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL_("vigil serve ended with status %d", st);
    close(L->err_fd);
}

static size_t collect(char *data, size_t size, size_t n, void *user)
{
    struct vg_buf *b = user;
    vg_buf_append(b, data, size * n);
    return size * n;
}

long live_req(struct live *L, const char *method, const char *path, const char *body,
              const char *const *headers, int auth, struct live_resp *out)
{
    char url[4200], authz[128];
    struct vg_buf b, h;
    struct curl_slist *hl = NULL;
    long status = 0;
    CURL *c = curl_easy_init();
    vg_buf_init(&b, 0);
    vg_buf_init(&h, 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", L->port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        int typed = 0; /* the caller's own Content-Type replaces the default */
        for (int i = 0; headers && headers[i]; i++)
            typed |= !strncasecmp(headers[i], "Content-Type:", 13);
        if (!typed)
            hl = curl_slist_append(hl, "Content-Type: application/json");
    }
    if (auth) {
        snprintf(authz, sizeof authz, "Authorization: Bearer %s", L->token);
        hl = curl_slist_append(hl, authz);
    }
    for (int i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    vg_buf_putc(&b, '\0');
    vg_buf_putc(&h, '\0');
    if (out) {
        out->status = status;
        out->body = vg_buf_detach(&b, NULL);
        out->headers = vg_buf_detach(&h, NULL);
    } else {
        vg_buf_release(&b);
        vg_buf_release(&h);
    }
    return status;
}

void live_resp_free(struct live_resp *r)
{
    vg_free(r->body);
    vg_free(r->headers);
    r->body = r->headers = NULL;
}

int live_raw(struct live *L, const char *request, size_t len, int wait_ms, char *out, size_t n)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)L->port)};
    char buf[65536];
    size_t got = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        TEST_FAIL_("could not connect to the daemon: %s", strerror(errno));
    signal(SIGPIPE, SIG_IGN);
    for (size_t off = 0; off < len;) {
        ssize_t w = send(fd, request + off, len - off, 0);
        if (w <= 0)
            break; /* the server may close early on a refused request */
        off += (size_t)w;
    }
    int64_t until = now_ms() + wait_ms;
    int closed = 0;
    while (now_ms() < until && got < sizeof buf - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)VG_MAX(until - now_ms(), 1)) <= 0)
            break;
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0) {
            closed = 1;
            break;
        }
        got += (size_t)r;
        if (memmem(buf, got, "\r\n\r\n", 4) && strstr(request, "Connection: close") == NULL &&
            !memmem(buf, got, "text/event-stream", 17))
            break; /* headers in: enough for a status */
    }
    close(fd);
    buf[got] = '\0';
    if (out && n) {
        snprintf(out, n, "%s", buf);
    }
    if (got >= 12 && !strncmp(buf, "HTTP/1.", 7))
        return (int)strtol(buf + 9, NULL, 10);
    return closed ? -1 : 0;
}

const char *live_json_str(const char *json, const char *key, char *out, size_t n)
{
    json_t *v = json ? json_loads(json, JSON_DECODE_ANY, NULL) : NULL;
    const char *s = json_string_value(json_object_get(v, key));
    snprintf(out, n, "%s", s ? s : "");
    json_decref(v);
    return out;
}

/* A stream's reading state: the answer's head is kept as it came, its body is unframed from
 * HTTP/1.1 chunks (the server sends the stream chunked: a chunk's size line may fall inside
 * "event: run.ended", and a needle searched in the framed bytes was then missed). Keyed by the
 * socket; live_stream_open starts a new one. */
struct stream_state {
    int fd, in_body, chunked, ended;
    size_t left; /* bytes of the current chunk still to come; 0: a size line is next */
    int crlf;    /* the CRLF after a chunk's data is next */
    char pending[1 << 16];
    size_t n_pending;
};
static struct stream_state streams[8];

static struct stream_state *stream_state(int fd, int fresh)
{
    struct stream_state *slot = NULL;
    for (size_t i = 0; i < VG_ARRAY_LEN(streams) && !slot; i++)
        if (streams[i].fd == fd + 1) /* fd + 1: a slot never used holds 0 */
            slot = &streams[i];
    for (size_t i = 0; i < VG_ARRAY_LEN(streams) && !slot; i++)
        if (!streams[i].fd)
            slot = &streams[i];
    if (!slot)
        slot = &streams[(size_t)fd % VG_ARRAY_LEN(streams)];
    if (fresh || slot->fd != fd + 1) {
        memset(slot, 0, sizeof *slot);
        slot->fd = fd + 1;
    }
    return slot;
}

int live_connect(struct live *L)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)L->port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ASSERT(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

int live_stream_open(struct live *L, const char *path, const char *last_id)
{
    char req[1024];
    int fd = live_connect(L);
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
                     "Accept: text/event-stream\r\n%s%s%s\r\n",
                     path, L->port, L->token, last_id ? "Last-Event-ID: " : "",
                     last_id ? last_id : "", last_id ? "\r\n" : "");
    ASSERT_EQ(send(fd, req, (size_t)n, 0), n);
    stream_state(fd, 1);
    return fd;
}

static void put(char *buf, size_t cap, size_t *len, const char *p, size_t n)
{
    n = VG_MIN(n, cap - 1 - *len);
    memcpy(buf + *len, p, n);
    *len += n;
    buf[*len] = '\0';
}

/* The head ends at its blank line: what came after it is body, to unframe. */
static void head_end(struct stream_state *st, char *buf, size_t *len)
{
    char *end = strstr(buf, "\r\n\r\n");
    if (!end)
        return;
    end += 4;
    size_t body = (size_t)(buf + *len - end);
    memcpy(st->pending, end, body);
    st->n_pending = body;
    *end = '\0';
    *len = (size_t)(end - buf);
    st->in_body = 1;
    for (const char *p = buf; *p && !st->chunked; p++)
        st->chunked = !strncasecmp(p, "\r\ntransfer-encoding: chunked", 28);
}

/* The pending body bytes into buf, unframed; leaves an incomplete size line pending. */
static void unframe(struct stream_state *st, char *buf, size_t cap, size_t *len)
{
    size_t at = 0;
    while (at < st->n_pending && !st->ended) {
        char *p = st->pending + at;
        size_t avail = st->n_pending - at;
        if (!st->chunked || st->left) {
            size_t n = st->chunked ? VG_MIN(avail, st->left) : avail;
            put(buf, cap, len, p, n);
            at += n;
            if (st->chunked && !(st->left -= n))
                st->crlf = 1;
        } else if (st->crlf) {
            if (avail < 2)
                break;
            at += 2;
            st->crlf = 0;
        } else {
            char *nl = memchr(p, '\n', avail);
            if (!nl)
                break;
            st->left = strtoul(p, NULL, 16);
            st->ended = !st->left;
            at += (size_t)(nl - p) + 1;
        }
    }
    memmove(st->pending, st->pending + at, st->n_pending - at);
    st->n_pending -= at;
}

int live_stream_read(int fd, char *buf, size_t cap, size_t *len, int wait_ms)
{
    struct stream_state *st = stream_state(fd, 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (st->ended || *len + 1 >= cap)
        return -1;
    if (poll(&p, 1, wait_ms) != 1)
        return 0;
    if (!st->in_body) {
        ssize_t n = recv(fd, buf + *len, cap - 1 - *len, 0);
        if (n <= 0)
            return -1;
        *len += (size_t)n;
        buf[*len] = '\0';
        head_end(st, buf, len);
        if (st->in_body)
            unframe(st, buf, cap, len);
        return 1;
    }
    ssize_t n = recv(fd, st->pending + st->n_pending, sizeof st->pending - st->n_pending, 0);
    if (n <= 0)
        return -1;
    st->n_pending += (size_t)n;
    unframe(st, buf, cap, len);
    return 1;
}

int live_stream_until(int fd, char *buf, size_t cap, size_t *len, const char *needle)
{
    int64_t t0 = now_ms();
    while (!strstr(buf, needle)) {
        if (now_ms() - t0 > 30000 || live_stream_read(fd, buf, cap, len, 1000) < 0)
            return 0;
    }
    return 1;
}

void live_stream_runs(int fd, char *buf, size_t cap, size_t *len, int runs)
{
    while (live_count(buf, "event: run.ended") < runs)
        ASSERT_EQ(live_stream_read(fd, buf, cap, len, 30000), 1);
}

void live_stream_ends_within(int fd, char *buf, size_t cap, size_t *len, int runs, int secs)
{
    int64_t t0 = now_ms();
    while (live_count(buf, "event: run.ended") < runs && now_ms() - t0 < (int64_t)secs * 1000)
        ASSERT(live_stream_read(fd, buf, cap, len, 500) >= 0);
    ASSERT_EQ(live_count(buf, "event: run.ended"), runs);
}

int live_event_ids(const char *text, long long *ids, int max)
{
    int n = 0;
    if (!strncmp(text, "id: ", 4) && n < max) /* not after a newline: the first line */
        ids[n++] = strtoll(text + 4, NULL, 10);
    for (const char *p = strstr(text, "\nid: "); p && n < max; p = strstr(p + 1, "\nid: "))
        ids[n++] = strtoll(p + 5, NULL, 10);
    return n;
}

int live_count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

void live_agent_create(struct live *L, const char *name, char *out, size_t n)
{
    char body[256];
    struct live_resp r;
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"prompt\":\"You help.\"}", name);
    ASSERT_EQ(live_req(L, "POST", "/v1/agents", body, NULL, 1, &r), 200);
    json_t *v = json_loads(r.body, 0, NULL);
    snprintf(out, n, "%s", json_string_value(json_object_get(json_array_get(v, 0), "id")));
    json_decref(v);
    live_resp_free(&r);
    ASSERT(out[0]);
}

void live_chat(struct live *L, const char *agent, const char *text)
{
    char path[160], body[512];
    struct live_resp r;
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent);
    snprintf(body, sizeof body, "{\"text\":\"%s\"}", text);
    ASSERT_EQ(live_req(L, "POST", path, body, NULL, 1, &r), 200);
    live_resp_free(&r);
}
