/*
 * test_http_fiber.c: HTTP requests made on fibers (src/model/http.c with src/os/fiber.h). A
 * fiber's request does not block its thread: the fiber parks and the other fibers run, so two
 * requests of one thread are in flight at once. The loopback server here proves it: it answers
 * only once both requests have arrived, the second first. Made one after the other (a blocking
 * request), the first would wait for an answer that never comes and time out.
 */
#include "helpers/test.h"

#include "model/http.h"
#include "os/fiber.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

struct pair_server {
    int lfd;
    int port;
    pthread_t thread;
};

static void read_request(int fd)
{
    char buf[4096];
    size_t have = 0;
    while (have < sizeof buf - 1) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            return;
        have += (size_t)n;
        buf[have] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            return;
    }
}

static void answer(int fd, const char *text)
{
    char msg[256];
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     strlen(text), text);
    if (write(fd, msg, (size_t)n) < 0)
        return;
}

/* Accept two connections, read both requests, answer the second, then the first. */
static void *serve_pair(void *arg)
{
    struct pair_server *ps = arg;
    int first = accept(ps->lfd, NULL, NULL);
    read_request(first);
    int second = accept(ps->lfd, NULL, NULL);
    read_request(second);
    answer(second, "second");
    close(second);
    answer(first, "first");
    close(first);
    return NULL;
}

static int start_pair_server(struct pair_server *ps)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    ps->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (ps->lfd < 0 || bind(ps->lfd, (struct sockaddr *)&a, sizeof a) || listen(ps->lfd, 8) ||
        getsockname(ps->lfd, (struct sockaddr *)&a, &alen))
        return -1;
    ps->port = ntohs(a.sin_port);
    return pthread_create(&ps->thread, NULL, serve_pair, ps);
}

struct call {
    char url[64];
    vigil_code rc;
    char body[64];
};

static void fetch(void *arg)
{
    struct call *c = arg;
    struct vg_http_request req = {.method = "GET", .url = c->url, .timeout_ms = 5000};
    struct vg_http_response resp;
    vigil_error err = {0};
    vg_http_response_init(&resp);
    c->rc = vg_http_perform(&req, &resp, &err);
    snprintf(c->body, sizeof c->body, "%.*s", (int)resp.body.len,
             resp.body.data ? resp.body.data : "");
    vg_http_response_release(&resp);
}

TEST(two_fibers_have_their_requests_in_flight_at_once)
{
    struct pair_server ps;
    ASSERT(start_pair_server(&ps) == 0);
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    struct call a = {0}, b = {0};
    snprintf(a.url, sizeof a.url, "http://127.0.0.1:%d/a", ps.port);
    snprintf(b.url, sizeof b.url, "http://127.0.0.1:%d/b", ps.port);
    ASSERT_OK(vg_fiber_spawn(s, fetch, &a, E));
    ASSERT_OK(vg_fiber_spawn(s, fetch, &b, E));
    vg_fiber_sched_run(s);
    pthread_join(ps.thread, NULL);
    close(ps.lfd);
    ASSERT_OK(a.rc);
    ASSERT_OK(b.rc);
    ASSERT_STREQ(a.body, "first");
    ASSERT_STREQ(b.body, "second");
    ASSERT(vg_fiber_sched_io(s) != NULL); /* the HTTP driver joined the scheduler */
    vg_fiber_sched_free(s);
}

static int never(void *user)
{
    VG_UNUSED(user);
    return 0;
}

/* Where the guard forbids parking (a store transaction is open), a fiber's request blocks the
 * thread as on any thread, and still succeeds. */
static void *serve_one(void *arg)
{
    struct pair_server *ps = arg;
    int fd = accept(ps->lfd, NULL, NULL);
    read_request(fd);
    answer(fd, "only");
    close(fd);
    return NULL;
}

TEST(a_fiber_that_may_not_park_blocks_for_its_request)
{
    struct pair_server ps;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    ps.lfd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(ps.lfd >= 0 && !bind(ps.lfd, (struct sockaddr *)&a, sizeof a) && !listen(ps.lfd, 8) &&
           !getsockname(ps.lfd, (struct sockaddr *)&a, &alen));
    ps.port = ntohs(a.sin_port);
    ASSERT(pthread_create(&ps.thread, NULL, serve_one, &ps) == 0);
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    vg_fiber_sched_set_guard(s, never, NULL);
    struct call c = {0};
    snprintf(c.url, sizeof c.url, "http://127.0.0.1:%d/", ps.port);
    ASSERT_OK(vg_fiber_spawn(s, fetch, &c, E));
    vg_fiber_sched_run(s);
    pthread_join(ps.thread, NULL);
    close(ps.lfd);
    ASSERT_OK(c.rc);
    ASSERT_STREQ(c.body, "only");
    ASSERT(vg_fiber_sched_io(s) == NULL); /* no driver: the request never parked */
    vg_fiber_sched_free(s);
}

/* With the HTTP driver in charge of the scheduler's waits, a fiber polling a descriptor is
 * still woken: the server below answers the request only after a second fiber, waiting on a
 * pipe the server writes to once the request has arrived, tells it to. A driver that did not
 * watch the pipe would leave that fiber parked and the request unanswered until its timeout. */
struct relay_server {
    struct pair_server ps;
    int arrived[2]; /* server -> waiting fiber */
    int go[2];      /* waiting fiber -> server */
    int relayed;
};

static void *serve_on_go(void *arg)
{
    struct relay_server *rs = arg;
    int fd = accept(rs->ps.lfd, NULL, NULL);
    read_request(fd);
    char c;
    if (write(rs->arrived[1], "a", 1) == 1 && read(rs->go[0], &c, 1) == 1)
        answer(fd, "relayed");
    close(fd);
    return NULL;
}

static void relays(void *arg)
{
    struct relay_server *rs = arg;
    struct pollfd p = {.fd = rs->arrived[0], .events = POLLIN};
    char c;
    if (vg_fiber_poll(&p, 1, 2000) == 1 && read(rs->arrived[0], &c, 1) == 1)
        rs->relayed = write(rs->go[1], "g", 1) == 1;
}

TEST(the_http_driver_also_wakes_fibers_polling_descriptors)
{
    struct relay_server rs = {.relayed = 0};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    ASSERT(pipe(rs.arrived) == 0 && pipe(rs.go) == 0);
    rs.ps.lfd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(rs.ps.lfd >= 0 && !bind(rs.ps.lfd, (struct sockaddr *)&a, sizeof a) &&
           !listen(rs.ps.lfd, 8) && !getsockname(rs.ps.lfd, (struct sockaddr *)&a, &alen));
    rs.ps.port = ntohs(a.sin_port);
    ASSERT(pthread_create(&rs.ps.thread, NULL, serve_on_go, &rs) == 0);
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    struct call c = {0};
    snprintf(c.url, sizeof c.url, "http://127.0.0.1:%d/", rs.ps.port);
    ASSERT_OK(vg_fiber_spawn(s, fetch, &c, E));   /* installs the driver, parks */
    ASSERT_OK(vg_fiber_spawn(s, relays, &rs, E)); /* parks on the pipe */
    vg_fiber_sched_run(s);
    if (!rs.relayed) /* release the server before failing */
        ASSERT_EQ(write(rs.go[1], "g", 1), 1);
    pthread_join(rs.ps.thread, NULL);
    ASSERT(rs.relayed);
    ASSERT(vg_fiber_sched_io(s) != NULL);
    ASSERT_OK(c.rc);
    ASSERT_STREQ(c.body, "relayed");
    vg_fiber_sched_free(s);
    close(rs.ps.lfd);
    for (int i = 0; i < 2; i++) {
        close(rs.arrived[i]);
        close(rs.go[i]);
    }
}

int main(void)
{
    RUN(two_fibers_have_their_requests_in_flight_at_once);
    RUN(a_fiber_that_may_not_park_blocks_for_its_request);
    RUN(the_http_driver_also_wakes_fibers_polling_descriptors);
    return 0;
}
