/*
 * http_server.c: the loopback HTTP/1.1 server tests run the model adapters against. Plain
 * sockets and one thread; one connection at a time, "Connection: close" after every response,
 * which is all a blocking client needs. The request recording is read by the test thread after
 * the call returns, under a mutex.
 */
#include "base/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "helpers/http_server.h"
#include "helpers/test.h"
#include "os/fs.h"

#define MAX_REQUESTS 64

struct vg_test_server {
    int listen_fd;
    int stop_pipe[2];
    pthread_t thread;
    pthread_mutex_t lock;
    char url[64];
    const struct vg_ts_response *responses;
    size_t n_responses;
    struct vg_ts_request requests[MAX_REQUESTS];
    size_t n_requests;
};

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    case 529:
        return "Overloaded";
    default:
        return "Status";
    }
}

/* Read one request; 0 on success. */
static int read_request(int fd, struct vg_ts_request *req)
{
    struct vg_buf in;
    char tmp[4096];
    size_t head_end = 0, content_length = 0;
    vg_buf_init(&in, 64 << 20);
    for (;;) {
        char *end = strstr(in.data, "\r\n\r\n");
        if (end && !head_end) {
            head_end = (size_t)(end - in.data) + 4;
            const char *cl = NULL;
            for (const char *p = in.data; p < in.data + head_end; p = strstr(p, "\r\n") + 2) {
                if (strncasecmp(p, "content-length:", 15) == 0)
                    cl = p + 15;
                if (!strstr(p, "\r\n"))
                    break;
            }
            if (cl)
                content_length = (size_t)strtoul(cl, NULL, 10);
        }
        if (head_end && in.len >= head_end + content_length)
            break;
        ssize_t r = recv(fd, tmp, sizeof(tmp), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            vg_buf_release(&in);
            return -1;
        }
        vg_buf_append(&in, tmp, (size_t)r);
    }
    sscanf(in.data, "%15s %1023s", req->method, req->path);
    const char *line_end = strstr(in.data, "\r\n");
    req->headers = vg_strndup(line_end + 2, head_end - (size_t)(line_end + 2 - in.data));
    req->body = vg_strndup(in.data + head_end, content_length);
    req->body_len = content_length;
    vg_buf_release(&in);
    return 0;
}

static void respond(int fd, const struct vg_ts_response *r)
{
    struct vg_buf h;
    size_t len = r->body ? (r->body_len ? r->body_len : strlen(r->body)) : 0;
    size_t limit = r->cut_after && r->cut_after < len ? r->cut_after : len;
    int status = r->status ? r->status : 200;

    if (r->stall) { /* wait until the client hangs up */
        char c;
        while (recv(fd, &c, 1, 0) > 0)
            ;
        return;
    }
    vg_buf_init(&h, 0);
    vg_buf_printf(&h, "HTTP/1.1 %d %s\r\nConnection: close\r\n", status, reason(status));
    if (r->headers)
        vg_buf_puts(&h, r->headers);
    if (r->chunk)
        vg_buf_puts(&h, "Transfer-Encoding: chunked\r\n\r\n");
    else
        vg_buf_printf(&h, "Content-Length: %zu\r\n\r\n", len);
    if (send_all(fd, h.data, h.len) != 0) {
        vg_buf_release(&h);
        return;
    }
    vg_buf_release(&h);
    if (!r->chunk) {
        send_all(fd, r->body ? r->body : "", limit);
        return;
    }
    for (size_t off = 0; off < limit;) {
        size_t n = VG_MIN(r->chunk, limit - off);
        char sz[32];
        snprintf(sz, sizeof(sz), "%zx\r\n", n);
        if (send_all(fd, sz, strlen(sz)) || send_all(fd, r->body + off, n) ||
            send_all(fd, "\r\n", 2))
            return;
        off += n;
    }
    if (limit == len)
        send_all(fd, "0\r\n\r\n", 5);
}

static void *serve(void *arg)
{
    struct vg_test_server *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->listen_fd, .events = POLLIN},
                              {.fd = s->stop_pipe[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        struct vg_ts_request req;
        memset(&req, 0, sizeof(req));
        if (read_request(fd, &req) == 0) {
            size_t i;
            pthread_mutex_lock(&s->lock);
            i = s->n_requests;
            if (i < MAX_REQUESTS) {
                s->requests[i] = req;
                s->n_requests++;
            } else {
                vg_free(req.headers);
                vg_free(req.body);
            }
            pthread_mutex_unlock(&s->lock);
            size_t k = i < s->n_responses ? i : s->n_responses - 1;
            respond(fd, &s->responses[k]);
        }
        shutdown(fd, SHUT_WR);
        close(fd);
    }
    return NULL;
}

struct vg_test_server *vg_test_server_start(const struct vg_ts_response *responses, size_t n)
{
    struct vg_test_server *s = vg_calloc(1, sizeof(*s));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    ASSERT(s && n > 0);
    s->responses = responses;
    s->n_responses = n;
    s->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(s->listen_fd >= 0);
    ASSERT(bind(s->listen_fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    ASSERT(listen(s->listen_fd, 16) == 0);
    ASSERT(getsockname(s->listen_fd, (struct sockaddr *)&a, &alen) == 0);
    snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d", ntohs(a.sin_port));
    ASSERT(pipe(s->stop_pipe) == 0);
    pthread_mutex_init(&s->lock, NULL);
    ASSERT(pthread_create(&s->thread, NULL, serve, s) == 0);
    return s;
}

const char *vg_test_server_url(struct vg_test_server *s)
{
    return s->url;
}

size_t vg_test_server_count(struct vg_test_server *s)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->n_requests;
    pthread_mutex_unlock(&s->lock);
    return n;
}

const struct vg_ts_request *vg_test_server_request(struct vg_test_server *s, size_t i)
{
    pthread_mutex_lock(&s->lock);
    const struct vg_ts_request *r = i < s->n_requests ? &s->requests[i] : NULL;
    pthread_mutex_unlock(&s->lock);
    return r;
}

const char *vg_ts_header(const struct vg_ts_request *r, const char *name)
{
    static char value[1024];
    size_t n = strlen(name);
    for (const char *p = r->headers; p && *p;) {
        const char *e = strstr(p, "\r\n");
        if (!e)
            break;
        if ((size_t)(e - p) > n && p[n] == ':' && strncasecmp(p, name, n) == 0) {
            const char *v = p + n + 1;
            while (*v == ' ')
                v++;
            snprintf(value, sizeof(value), "%.*s", (int)(e - v), v);
            return value;
        }
        p = e + 2;
    }
    return NULL;
}

void vg_test_server_stop(struct vg_test_server *s)
{
    if (!s)
        return;
    ssize_t w = write(s->stop_pipe[1], "x", 1);
    (void)w;
    pthread_join(s->thread, NULL);
    close(s->listen_fd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    for (size_t i = 0; i < s->n_requests; i++) {
        vg_free(s->requests[i].headers);
        vg_free(s->requests[i].body);
    }
    pthread_mutex_destroy(&s->lock);
    vg_free(s);
}

char *vg_test_fixture(const char *relpath, size_t *len)
{
    char path[2048];
    char *text = NULL;
    size_t n = 0;
    vigil_error err = {0};
    snprintf(path, sizeof(path), "%s/tests/fixtures/%s", VIGIL_SOURCE_DIR, relpath);
    if (vg_fs_read_file(path, 64 << 20, &text, &n, &err) != VIGIL_OK)
        TEST_FAIL_("cannot read fixture %s: %s", path, err.message);
    if (len)
        *len = n;
    return text;
}
