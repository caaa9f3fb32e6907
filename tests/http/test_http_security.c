/*
 * test_http_security.c: the access rules of the HTTP API (docs/http.md, "Access") against a
 * live `vigil serve --listen`: each hostile or malformed request of the matrix is refused with
 * its status, nothing it asked for is written (the kill switch stays off, no agent appears),
 * and the daemon goes on serving. The matrix's requests that would write aim at POST /v1/kill
 * and POST /v1/agents, so "nothing written" is checked on what they would have changed.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

static struct live L;
static int cases;

/* One case of the matrix through libcurl. */
static void expect(long want, const char *method, const char *path, const char *body, int auth,
                   const char *h1, const char *h2)
{
    const char *headers[] = {h1, h2, NULL};
    struct live_resp r;
    long got = live_req(&L, method, path, body, headers, auth, &r);
    if (got != want)
        TEST_FAIL_("%s %s (%s, %s): status %ld, expected %ld: %s", method, path, h1 ? h1 : "-",
                   h2 ? h2 : "-", got, want, r.body);
    if (want >= 400 && want != 431 &&
        (!strstr(r.body, "\"code\"") || !strstr(r.body, "\"message\"")))
        TEST_FAIL_("%s %s: refusal without a JSON error body: %s", method, path, r.body);
    live_resp_free(&r);
    cases++;
}

/* One case through a raw socket (what libcurl would not send). */
static void expect_raw(int want, const char *request, size_t len)
{
    char out[2048];
    int got = live_raw(&L, request, len, 10000, out, sizeof out);
    if (got != want)
        TEST_FAIL_("raw request %.60s...: status %d, expected %d: %.300s", request, got, want, out);
    cases++;
}

static void assert_nothing_written(void)
{
    struct live_resp r;
    ASSERT_EQ(live_req(&L, "GET", "/v1/kill", NULL, NULL, 1, &r), 200);
    ASSERT(!strstr(r.body, "\"on\":true"));
    live_resp_free(&r);
    ASSERT_EQ(live_req(&L, "GET", "/v1/agents", NULL, NULL, 1, &r), 200);
    ASSERT_CONTAINS(r.body, "\"items\":[]");
    live_resp_free(&r);
    ASSERT(live_running(&L));
    ASSERT_EQ(live_req(&L, "GET", "/v1/health", NULL, NULL, 1, NULL), 200);
}

static const char *const kill_on = "{\"on\":true}";
static const char *const agent = "{\"name\":\"intruder\",\"prompt\":\"x\"}";

/* The matrix: token, query string, cookie. */
TEST(tokens_are_checked)
{
    char wrong[128], longer[128], query[200], cookie[200], basic[200], lower[200];
    snprintf(wrong, sizeof wrong, "Authorization: Bearer %064d", 7);
    snprintf(longer, sizeof longer, "Authorization: Bearer %sx", L.token);
    snprintf(query, sizeof query, "/v1/kill?token=%s", L.token);
    snprintf(cookie, sizeof cookie, "Cookie: token=%s; vigil_token=%s", L.token, L.token);
    snprintf(basic, sizeof basic, "Authorization: Basic %s", L.token);
    snprintf(lower, sizeof lower, "Authorization: bearer %s", L.token);
    expect(401, "GET", "/v1/agents", NULL, 0, NULL, NULL);
    expect(401, "POST", "/v1/kill", kill_on, 0, NULL, NULL);
    expect(401, "POST", "/v1/agents", agent, 0, NULL, NULL);
    expect(401, "POST", "/v1/kill", kill_on, 0, wrong, NULL);
    expect(401, "POST", "/v1/kill", kill_on, 0, longer, NULL);
    expect(401, "POST", "/v1/kill", kill_on, 0, "Authorization: Bearer ", NULL);
    expect(401, "POST", "/v1/kill", kill_on, 0, basic, NULL);
    expect(401, "POST", query, kill_on, 0, NULL, NULL);
    snprintf(query, sizeof query, "/v1/kill?access_token=%s", L.token);
    expect(401, "POST", query, kill_on, 0, NULL, NULL);
    expect(401, "POST", query, kill_on, 1, NULL, NULL); /* even beside a good header */
    expect(401, "POST", "/v1/kill", kill_on, 0, cookie, NULL);
    expect(401, "GET", "/metrics", NULL, 0, NULL, NULL);
    expect(401, "GET", "/openapi.json", NULL, 0, NULL, NULL);
    /* The run controls: stopping or starting a run is as guarded as the kill switch. */
    expect(401, "POST", "/v1/runs/0123456789abcdef/cancel", "{}", 0, NULL, NULL);
    expect(401, "POST", "/v1/runs/0123456789abcdef/rerun", "{\"prompt\":\"x\"}", 0, wrong, NULL);
    expect(401, "POST", "/v1/runs/0123456789abcdef/resume", "{}", 0, cookie, NULL);
    /* Lineage and the task graph are read only with the token, as every other route. */
    expect(401, "GET", "/v1/tasks", NULL, 0, NULL, NULL);
    expect(401, "GET", "/v1/tasks/graph", NULL, 0, wrong, NULL);
    expect(401, "GET", "/v1/tasks/0123456789abcdef", NULL, 0, cookie, NULL);
    expect(401, "GET", "/v1/agents/x/tree", NULL, 0, NULL, NULL);
    /* Running code is as guarded as the kill switch: never without the token. */
    expect(401, "POST", "/v1/sandbox/run", "{\"code\":\"return 1\"}", 0, NULL, NULL);
    expect(401, "POST", "/v1/sandbox/run", "{\"code\":\"return 1\"}", 0, wrong, NULL);
    snprintf(query, sizeof query, "/v1/sandbox/run?token=%s", L.token);
    expect(401, "POST", query, "{\"code\":\"return 1\"}", 0, cookie, NULL);
    expect(401, "GET", "/v1/agents/x/tool-calls", NULL, 0, NULL, NULL);
    expect(401, "GET", "/v1/agents/x/journal", NULL, 0, NULL, NULL);
    expect(401, "POST", "/v1/tasks", "{\"title\":\"t\"}", 0, NULL, NULL);
    expect(401, "GET", "/v1/mcp/servers", NULL, 0, NULL, NULL);
    expect(401, "POST", "/v1/tasks/dispatch", "{}", 0, wrong, NULL);
    expect(401, "POST", "/v1/tasks/0123456789abcdef/cancel", NULL, 0, cookie, NULL);
    expect(401, "POST", "/v1/agents/x/journal", "{}", 0, wrong, NULL);
    expect(200, "GET", "/v1/agents", NULL, 0, lower, NULL); /* the scheme is case-insensitive */
    assert_nothing_written();
}

/* The matrix: event stream. */
TEST(events_need_the_token)
{
    char query[200];
    snprintf(query, sizeof query, "/v1/events?token=%s", L.token);
    expect(401, "GET", "/v1/events", NULL, 0, "Accept: text/event-stream", NULL);
    expect(401, "GET", query, NULL, 0, "Accept: text/event-stream", NULL);
    assert_nothing_written();
}

/* The matrix: Host and Origin. */
TEST(host_and_origin_are_checked)
{
    char other_port[64], same[64];
    snprintf(other_port, sizeof other_port, "Host: 127.0.0.1:%d", L.port + 1);
    snprintf(same, sizeof same, "Origin: http://127.0.0.1:%d", L.port);
    expect(403, "POST", "/v1/kill", kill_on, 1, "Host: evil.example", NULL);
    expect(403, "GET", "/v1/agents", NULL, 1, "Host: evil.example:80", NULL);
    expect(403, "GET", "/v1/agents", NULL, 1, other_port, NULL);
    expect(403, "POST", "/v1/kill", kill_on, 1, "Origin: http://evil.example", NULL);
    expect(403, "GET", "/v1/agents", NULL, 1, "Origin: null", NULL);
    expect(403, "POST", "/v1/agents", agent, 1, "Origin: https://127.0.0.1.evil.example", NULL);
    expect(403, "OPTIONS", "/v1/kill", NULL, 0, "Origin: http://evil.example",
           "Access-Control-Request-Method: POST");
    expect(403, "OPTIONS", "/v1/kill", NULL, 0, "Access-Control-Request-Method: POST", NULL);
    expect(200, "GET", "/v1/agents", NULL, 1, same, NULL); /* the server's own page */
    expect_raw(403, "GET /v1/agents HTTP/1.1\r\nConnection: close\r\n\r\n", 46); /* no Host */
    /* The refusal says how an origin is let in (trial J7). */
    static const char *const other[] = {"Origin: http://app.example", NULL};
    struct live_resp r;
    ASSERT_EQ(live_req(&L, "GET", "/v1/agents", NULL, other, 1, &r), 403);
    ASSERT_CONTAINS(r.body, "--allow-origin");
    live_resp_free(&r);
    assert_nothing_written();
}

/* A Last-Event-ID that is no event's id is refused, not taken as none (trial J7): the client
 * would silently start at now and lose what it missed. An empty one is none. */
TEST(a_mangled_last_event_id_is_refused)
{
    static const char *const bad[] = {"abc", "-5", "1e3", "5x", "+7", "99999999999999999999"};
    char h[64];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(h, sizeof h, "Last-Event-ID: %s", bad[i]);
        expect(400, "GET", "/v1/events", NULL, 1, h, "Accept: text/event-stream");
    }
    char buf[4096];
    size_t len = 0;
    int fd = live_stream_open(&L, "/v1/events", "");
    ASSERT(fd >= 0);
    ASSERT(live_stream_until(fd, buf, sizeof buf, &len, " 200 "));
    close(fd);
    assert_nothing_written();
}

/* The matrix: caps. */
TEST(sizes_are_capped)
{
    size_t big = (2u << 20) + 10;
    char *body = vg_malloc(big + 1), *req = vg_malloc(64 * 1024);
    memset(body, ' ', big);
    memcpy(body, "{\"on\":true,\"pad\":\"", 18);
    memcpy(body + big - 2, "\"}", 2);
    body[big] = '\0';
    expect(413, "POST", "/v1/kill", body, 1, NULL, NULL);
    expect(413, "POST", "/v1/agents", body, 1, "Transfer-Encoding: chunked", NULL);
    vg_free(body);
    int n = snprintf(req, 64 * 1024,
                     "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Pad: ", L.port);
    memset(req + n, 'a', 40000);
    n += 40000;
    n += snprintf(req + n, 64 * 1024 - (size_t)n, "\r\nConnection: close\r\n\r\n");
    expect_raw(431, req, (size_t)n);
    vg_free(req);
    assert_nothing_written();
}

/* A client that sends half its headers and stops is dropped after the idle timeout (3 s). */
TEST(slow_clients_time_out)
{
    char out[256];
    const char *half = "POST /v1/kill HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le";
    int got = live_raw(&L, half, strlen(half), 20000, out, sizeof out);
    ASSERT_EQ(got, -1); /* closed without an answer, well before the safety wait */
    cases++;
    assert_nothing_written();
}

/*
 * A slowloris client: it sends its headers a byte at a time, each byte when the server has said
 * nothing for 200 ms, so the idle timeout (3 s) never runs out; the header deadline (the same
 * 3 s from the connection's start) cuts it. Without the deadline it would trickle until the
 * 20 s safety bound.
 */
TEST(slowloris_is_cut_at_the_header_deadline)
{
    static const char req[] =
        "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)L.port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), cut = 0;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ASSERT(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    for (size_t i = 0; i < 100 && !cut; i++) { /* 100 x 200 ms: the 20 s safety bound */
        char c;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) > 0) { /* the server spoke: it closed, or answered */
            ssize_t r = recv(fd, &c, 1, 0);
            ASSERT(r <= 0); /* closed without an answer */
            cut = 1;
        } else if (send(fd, req + i % (sizeof req - 1), 1, MSG_NOSIGNAL) != 1) {
            cut = 1;
        }
    }
    close(fd);
    ASSERT(cut);
    cases++;
    assert_nothing_written();
}

/* The matrix: paths and methods. */
TEST(paths_and_methods)
{
    char req[512];
    const char *const raw_paths[] = {"/v1/../v1/kill",   "/v1/agents/%2e%2e/kill",
                                     "/v1//kill",        "/v1/agents/..%2f..%2fkill",
                                     "/v1/agents/a%00b", "/v1/agents\\..\\kill"};
    for (size_t i = 0; i < VG_ARRAY_LEN(raw_paths); i++) {
        int n = snprintf(req, sizeof req,
                         "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
                         "Content-Length: 11\r\nConnection: close\r\n\r\n{\"on\":true}",
                         raw_paths[i], L.port, L.token);
        expect_raw(400, req, (size_t)n);
    }
    expect(405, "PUT", "/v1/agents", agent, 1, NULL, NULL);
    expect(405, "DELETE", "/v1/kill", NULL, 1, NULL, NULL);
    expect(405, "PATCH", "/v1/kill", kill_on, 1, NULL, NULL);
    expect(405, "GET", "/v1/agents/x/chat", NULL, 1, NULL, NULL);
    expect(405, "TRACE", "/v1/agents", NULL, 1, NULL, NULL);
    expect(400, "GET", "/v1/kill", NULL, 1, "X-HTTP-Method-Override: POST", NULL);
    expect(400, "POST", "/v1/agents", agent, 1, "X-HTTP-Method-Override: DELETE", NULL);
    expect(405, "GET", "/v1/runs/0123456789abcdef/cancel", NULL, 1, NULL, NULL);
    expect(405, "DELETE", "/v1/runs/0123456789abcdef/rerun", NULL, 1, NULL, NULL);
    expect(405, "PUT", "/v1/runs/0123456789abcdef/resume", "{}", 1, NULL, NULL);
    expect(405, "DELETE", "/v1/tasks/graph", NULL, 1, NULL, NULL);
    expect(405, "PUT", "/v1/agents/x/tree", "{}", 1, NULL, NULL);
    expect(405, "GET", "/v1/sandbox/run", NULL, 1, NULL, NULL);
    expect(405, "DELETE", "/v1/agents/x/journal", NULL, 1, NULL, NULL);
    expect(405, "PUT", "/v1/tasks", "{}", 1, NULL, NULL);
    expect(405, "GET", "/v1/tasks/0123456789abcdef/cancel", NULL, 1, NULL, NULL);
    expect(405, "POST", "/v1/sandbox", "{}", 1, NULL, NULL);
    expect(400, "GET", "/v1/runs/0123456789abcdef", NULL, 1, "X-HTTP-Method-Override: POST", NULL);
    expect(404, "GET", "/v1/nope", NULL, 1, NULL, NULL);
    expect(404, "GET", "/v1/agents/%3Cscript%3E", NULL, 1, NULL, NULL);
    assert_nothing_written();
}

/* The matrix: bodies. */
TEST(hostile_bodies)
{
    size_t depth = 100000;
    char *bomb = vg_malloc(2 * depth + 32);
    size_t n = (size_t)snprintf(bomb, 32, "{\"on\":true,\"x\":");
    memset(bomb + n, '[', depth);
    memset(bomb + n + depth, ']', depth);
    memcpy(bomb + n + 2 * depth, "}", 2);
    expect(400, "POST", "/v1/kill", bomb, 1, NULL, NULL);
    vg_free(bomb);
    char nested[2000] = "{\"name\":\"intruder\",\"prompt\":\"x\",\"config\":";
    for (int i = 0; i < 40; i++)
        snprintf(nested + strlen(nested), sizeof nested - strlen(nested), "{\"a\":");
    snprintf(nested + strlen(nested), sizeof nested - strlen(nested), "1");
    for (int i = 0; i < 41; i++)
        snprintf(nested + strlen(nested), sizeof nested - strlen(nested), "}");
    expect(400, "POST", "/v1/agents", nested, 1, NULL, NULL);
    expect(400, "POST", "/v1/agents", "{\"name\":\"bad\xff\xfe\",\"prompt\":\"x\"}", 1, NULL, NULL);
    expect(400, "POST", "/v1/kill", "{\"on\":true,\"reason\":\"\xc0\xaf\"}", 1, NULL, NULL);
    expect(400, "POST", "/v1/kill", "[true]", 1, NULL, NULL);
    expect(400, "POST", "/v1/kill", "{\"on\":true,\"on\":false}", 1, NULL, NULL);
    expect(400, "POST", "/v1/kill", "{\"on\":\"yes\"}", 1, NULL, NULL);
    expect(400, "POST", "/v1/kill", "{\"on\":tru", 1, NULL, NULL);
    expect(400, "POST", "/v1/kill", "", 1, NULL, NULL);
    expect(400, "POST", "/v1/agents", "{}", 1, NULL, NULL);
    assert_nothing_written();
}

/* Connections past the limit (4 here) are closed unanswered; once the holders go, the daemon
 * serves again. Each holder keeps its connection alive after an answered request, so the daemon
 * has surely accepted it before the fifth connects (with partial requests the pool's threads
 * could accept the fifth before the last holder). The idle timeout is raised so the header
 * deadline cannot cut a holder first. */
TEST(connections_are_limited)
{
    static const char *const extra[] = {"--http-max-connections", "4", "--http-timeout-s", "60",
                                        NULL};
    struct live small;
    int fds[4];
    char held[512], ans[256];
    struct sockaddr_in a = {.sin_family = AF_INET};
    live_start(&small, "http-conn-limit", extra);
    a.sin_port = htons((uint16_t)small.port);
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int n = snprintf(held, sizeof held,
                     "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer "
                     "%s\r\n\r\n",
                     small.port, small.token);
    for (int i = 0; i < 4; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        ASSERT(fds[i] >= 0 && connect(fds[i], (struct sockaddr *)&a, sizeof a) == 0);
        ASSERT(send(fds[i], held, (size_t)n, 0) == n);
        ssize_t got = recv(fds[i], ans, sizeof ans - 1, 0); /* the answer's first bytes */
        ASSERT(got > 12);
        ans[got] = 0;
        if (strncmp(ans, "HTTP/1.1 200", 12) != 0)
            TEST_FAIL_("holder %d: %s", i, ans);
    }
    const char *req = "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    ASSERT_EQ(live_raw(&small, req, strlen(req), 10000, NULL, 0), -1);
    cases++;
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    long st = 0;
    for (int tries = 0; tries < 100 && st != 200; tries++) { /* the holders' threads end */
        st = live_req(&small, "GET", "/v1/health", NULL, NULL, 1, NULL);
        if (st != 200)
            poll(NULL, 0, 100);
    }
    ASSERT_EQ(st, 200);
    live_stop(&small);
}

int main(void)
{
    live_start(&L, "http-security", NULL);
    RUN(tokens_are_checked);
    RUN(events_need_the_token);
    RUN(a_mangled_last_event_id_is_refused);
    RUN(host_and_origin_are_checked);
    RUN(sizes_are_capped);
    RUN(slow_clients_time_out);
    RUN(slowloris_is_cut_at_the_header_deadline);
    RUN(paths_and_methods);
    RUN(hostile_bodies);
    RUN(connections_are_limited);
    fprintf(stderr, "security matrix: %d cases refused as expected\n", cases);
    ASSERT(cases >= 40);
    live_stop(&L);
    return 0;
}
