/*
 * model_server.c: the instant loopback model server of the benchmarks (model_server.h).
 */
#include "base/common.h"

#include "helpers/model_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char tool_body[] =
    "{\"id\":\"chatcmpl-b\",\"object\":\"chat.completion\",\"model\":\"bench\",\"choices\":[{"
    "\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
    "\"call_%d\",\"type\":\"function\",\"function\":{\"name\":\"echo\",\"arguments\":"
    "\"{\\\"text\\\":\\\"step %d\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{"
    "\"prompt_tokens\":100,\"completion_tokens\":10,\"total_tokens\":110}}";
static const char final_body[] =
    "{\"id\":\"chatcmpl-f\",\"object\":\"chat.completion\",\"model\":\"bench\",\"choices\":[{"
    "\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"all done\"},"
    "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":3,"
    "\"total_tokens\":103}}";

/* Steps done so far: the last "step N" the echo tool returned, plus one (0 when none). The
 * context window may drop early results, so counting them would undercount. */
static int steps_done(const char *body)
{
    int n = 0;
    for (const char *p = body; (p = strstr(p, "step ")); p += 5) {
        long v = strtol(p + 5, NULL, 10);
        if (v + 1 > n)
            n = (int)v + 1;
    }
    return n;
}

/* Serve one keep-alive connection: read requests, answer each at once. */
static void serve_conn(int fd, int steps, int notify_fd)
{
    static char buf[1 << 20];
    size_t have = 0;
    for (;;) {
        char *hdr_end;
        while (!(hdr_end = memmem(buf, have, "\r\n\r\n", 4))) {
            ssize_t n = read(fd, buf + have, sizeof buf - have - 1);
            if (n <= 0)
                return;
            have += (size_t)n;
        }
        buf[have] = '\0';
        long clen = 0;
        char *cl = strcasestr(buf, "content-length:");
        if (cl && cl < hdr_end)
            clen = strtol(cl + 15, NULL, 10);
        size_t total = (size_t)(hdr_end + 4 - buf) + (size_t)clen;
        while (have < total) {
            ssize_t n = read(fd, buf + have, sizeof buf - have - 1);
            if (n <= 0)
                return;
            have += (size_t)n;
        }
        if (notify_fd >= 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
            if (write(notify_fd, &ns, sizeof ns) < 0)
                return;
        }
        /* BENCH_MODEL_DELAY_MS: a model's latency per call (a real model is never instant). */
        const char *delay = getenv("BENCH_MODEL_DELAY_MS");
        long delay_ms = delay ? strtol(delay, NULL, 10) : 0;
        if (delay_ms > 0)
            usleep((useconds_t)delay_ms * 1000);
        char save = buf[total];
        buf[total] = '\0';
        int done = steps_done(hdr_end + 4);
        buf[total] = save;
        char body[2048], head[256];
        int blen = done < steps ? snprintf(body, sizeof body, tool_body, done, done)
                                : snprintf(body, sizeof body, "%s", final_body);
        int hlen = snprintf(head, sizeof head,
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            "Content-Length: %d\r\nConnection: keep-alive\r\n\r\n",
                            blen);
        /* One write per response: two small writes would meet Nagle's algorithm and the
         * client's delayed ACK, adding 40 ms that are no part of vigil. */
        char msg[2304];
        memcpy(msg, head, (size_t)hlen);
        memcpy(msg + hlen, body, (size_t)blen);
        if (write(fd, msg, (size_t)(hlen + blen)) < 0)
            return;
        memmove(buf, buf + total, have - total);
        have -= total;
    }
}

pid_t vg_instant_model_start(int steps_single, int steps_multi, int notify_fd, int *port)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1, pfd[2];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 256) ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) || pipe(pfd)) {
        perror("server");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGCHLD, SIG_IGN); /* handlers are reaped automatically */
        for (;;) {
            int fd = accept(lfd, NULL, NULL);
            if (fd < 0)
                continue;
            /* The path says how many steps this client wants: /s<N>/v1/chat/completions. */
            if (fork() == 0) {
                char peek[64] = "";
                recv(fd, peek, sizeof peek - 1, MSG_PEEK);
                int steps = strstr(peek, "/multi/") ? steps_multi : steps_single;
                serve_conn(fd, steps, notify_fd);
                _exit(0);
            }
            close(fd);
        }
    }
    close(lfd);
    return pid;
}
