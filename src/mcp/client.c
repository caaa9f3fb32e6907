/*
 * client.c: one MCP server over stdio, revision 2025-11-25. The server starts on first use
 * (initialize, then notifications/initialized); a request is one line out, and lines are read
 * back until its response arrives, answering the server's own requests (ping) and taking its
 * notifications (list_changed, progress, log messages) on the way. One request is in flight
 * per server at a time (a mutex): the loop that waits is the only reader of the pipe.
 *
 * What the reference servers do that the specification does not promise (docs/internals/MCP.md):
 * a malformed line of ours gets no answer at all, so every wait has a deadline (the clock
 * port) and a timeout sends notifications/cancelled; server request ids start at 0 and keep
 * their JSON type; a server may ignore stdin closing (stop escalates to SIGTERM, SIGKILL); a
 * non-JSON line on stdout is logged and skipped; a line over max_message is dropped whole and
 * fails the request it answered. A server that dies fails the request and stays down for a
 * backoff (250 ms doubling to 30 s, reset by a successful request) before the next use
 * starts it again.
 */
#include "mcp/proc.h"

#include "base/json.h"
#include "os/clock.h"
#include "os/fiber.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROTOCOL "2025-11-25"
#define MODERN "2026-07-28"
#define DISCOVER_TIMEOUT_MS 10000 /* a legacy server may never answer server/discover */
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS 30000
#define READ_CHUNK 65536
#define POLL_SLICE_MS 100
#define MAX_LIST_PAGES 100
#define MAX_INPUT_ROUNDS 8   /* 2026-07-28 input_required follow-ups of one request */
#define BREAKER_TIMEOUTS 3   /* requests in a row without an answer: the server is restarted */
#define WAIT_OUT_MAX_MS 1000 /* a backoff left this short is waited out, not failed at once */
#define ERR_TAIL_LINES 3     /* stderr lines a failure's message quotes */
#define STUCK_PING_MS 2000   /* after a stdio request timed out: how long a ping may take */

static const char *const supported_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                 "2024-11-05"};

enum state { ST_NEW, ST_RUNNING, ST_DOWN };
/* Which revision the server speaks, learnt at its first start and kept across restarts. */
enum era { ERA_UNKNOWN, ERA_LEGACY, ERA_MODERN };

struct vg_mcp_client {
    const struct vg_mcp_server_conf *conf;
    struct vg_clock *clock;
    vg_mcp_log_fn log;
    void *log_user;
    int grace_ms;
    int own_stream; /* url servers: keep the server's own stream open (listen.c) */
    pthread_mutex_t mu;
    enum state state;
    struct vg_mcp_proc proc;
    struct vg_buf rd;   /* stdout bytes not yet read as lines */
    size_t scanned;     /* rd bytes known to hold no newline */
    int skipping;       /* dropping the rest of an oversized line */
    int oversized;      /* a line was dropped since the last look */
    char err_line[512]; /* stderr bytes of the line being written */
    size_t err_len;
    char err_tail[ERR_TAIL_LINES][160]; /* its last stderr lines, for messages about a death */
    unsigned err_lines;                 /* stderr lines seen since it started */
    int log_stderr; /* a log was given: its stderr lines and its stops go there too (else
                       only into the message of a failure) */
    int64_t next_id;
    int64_t progress_token; /* the call in flight's token, or -1 */
    int progressed;         /* progress arrived for it since the last look */
    json_t *init;           /* the initialize result */
    json_t *tools;          /* the last tools/list, or NULL */
    int tools_stale;
    int64_t backoff_ms, retry_at_ns;
    int timeouts;   /* requests in a row that timed out */
    int unanswered; /* the last request was written whole and the server died before answering */
    char down_why[240];
    struct vg_mcp_http http;      /* url servers: session and version (http.c) */
    struct vg_mcp_http_kept kept; /* url servers: what http keeps between POSTs */
    json_t *deferred; /* url servers: our answers to its requests, sent after the POST */
    enum era era;
    int retired;                      /* its declaration was replaced: never started again */
    struct vg_mcp_listener *listener; /* url servers: the server's own stream (listen.c) */
    atomic_int heard_change;          /* the listener heard tools/list_changed */
};

void vg_mcp_log_to_stderr(void *user, const char *server, const char *line)
{
    (void)user;
    fprintf(stderr, "vigil: mcp %s: %s\n", server, line);
}

static void note(struct vg_mcp_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(struct vg_mcp_client *c, const char *fmt, ...)
{
    char line[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->log(c->log_user, c->conf->name, line);
}

vigil_code vg_mcp_client_new(const struct vg_mcp_server_conf *conf, const struct vg_mcp_options *o,
                             struct vg_mcp_client **out, vigil_error *err)
{
    struct vg_mcp_client *c = vg_calloc(1, sizeof *c);
    if (!c)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating an MCP client");
    c->conf = conf;
    c->http.kept = &c->kept;
    c->clock = o && o->clock ? o->clock : vg_clock_real();
    c->log = o && o->log ? o->log : vg_mcp_log_to_stderr;
    c->log_stderr = o && o->log;
    c->log_user = o ? o->log_user : NULL;
    c->grace_ms = o && o->stop_grace_ms > 0 ? o->stop_grace_ms : 500;
    c->own_stream = !(o && o->no_own_stream);
    c->proc = (struct vg_mcp_proc){.pid = 0, .in = -1, .out = -1, .err = -1};
    c->progress_token = -1;
    vg_buf_init(&c->rd, conf->max_message + READ_CHUNK + 1);
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return VIGIL_OK;
}

/* Take the client: a fiber waiting here parks (its worker's other runs go on). */
static void lock(struct vg_mcp_client *c)
{
    while (pthread_mutex_trylock(&c->mu) != 0)
        vg_fiber_poll(NULL, 0, 1);
}

static void unlock(struct vg_mcp_client *c)
{
    pthread_mutex_unlock(&c->mu);
}

static void reset_streams(struct vg_mcp_client *c)
{
    vg_buf_reset(&c->rd);
    c->scanned = 0;
    c->skipping = c->oversized = 0;
    c->err_len = 0;
    json_decref(c->init);
    c->init = NULL;
    json_decref(c->tools);
    c->tools = NULL;
}

static void stop_listening(struct vg_mcp_client *c)
{
    vg_mcp_listen_stop(c->listener);
    c->listener = NULL;
}

static void stop_locked(struct vg_mcp_client *c)
{
    stop_listening(c);
    if (c->proc.pid > 0)
        vg_mcp_proc_stop(&c->proc, c->clock, c->grace_ms, NULL);
    reset_streams(c);
    c->http.session[0] = c->http.version[0] = '\0';
    if (c->state == ST_RUNNING)
        c->state = ST_NEW;
}

void vg_mcp_client_stop(struct vg_mcp_client *c)
{
    lock(c);
    stop_locked(c);
    unlock(c);
}

void vg_mcp_client_retire(struct vg_mcp_client *c)
{
    lock(c);
    stop_locked(c);
    c->retired = 1;
    unlock(c);
}

void vg_mcp_client_free(struct vg_mcp_client *c)
{
    if (!c)
        return;
    vg_mcp_client_stop(c);
    vg_mcp_http_kept_release(&c->kept);
    vg_buf_release(&c->rd);
    json_decref(c->deferred);
    pthread_mutex_destroy(&c->mu);
    vg_free(c);
}

const char *vg_mcp_client_state(const struct vg_mcp_client *c)
{
    return c->state == ST_RUNNING ? "running" : c->state == ST_DOWN ? "down" : "not started";
}

int vg_mcp_client_pid(const struct vg_mcp_client *c)
{
    return c->state == ST_RUNNING ? (int)c->proc.pid : 0;
}

json_t *vg_mcp_client_server_info(const struct vg_mcp_client *c)
{
    return c->init;
}

/* Its last stderr lines, oldest first, joined by " | ": as many of the newest as fit in n, so
 * the line that says why it failed is never the one cut off. */
static void last_words(const struct vg_mcp_client *c, char *out, size_t n)
{
    unsigned have = VG_MIN(c->err_lines, ERR_TAIL_LINES), take = 0;
    size_t len = 0;
    while (take < have) {
        size_t add = strlen(c->err_tail[(c->err_lines - 1 - take) % ERR_TAIL_LINES]);
        if (len + add + (take ? 3 : 0) >= n)
            break;
        len += add + (take ? 3 : 0);
        take++;
    }
    out[0] = '\0';
    for (unsigned k = take; k > 0; k--) {
        size_t at = strlen(out);
        snprintf(out + at, n - at, "%s%s", at ? " | " : "",
                 c->err_tail[(c->err_lines - k) % ERR_TAIL_LINES]);
    }
}

/* The server is gone or unusable: stop what is left of it and wait a backoff before the next
 * start. Returns ENETWORK naming why. */
static vigil_code mark_down(struct vg_mcp_client *c, vigil_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static vigil_code mark_down(struct vg_mcp_client *c, vigil_error *err, const char *fmt, ...)
{
    int st = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->down_why, sizeof c->down_why, fmt, ap);
    va_end(ap);
    int had = c->proc.pid > 0;
    stop_listening(c);
    vg_mcp_proc_stop(&c->proc, c->clock, had ? 50 : 0, &st);
    reset_streams(c);
    c->state = ST_DOWN;
    c->backoff_ms = c->backoff_ms ? VG_MIN(c->backoff_ms * 2, BACKOFF_MAX_MS) : BACKOFF_FIRST_MS;
    c->retry_at_ns = vg_clock_mono_ns(c->clock) + c->backoff_ms * 1000000;
    if (c->log_stderr) /* else the caller's error says it, the one place a person looks */
        note(c, "%s (next start in %lld ms)", c->down_why, (long long)c->backoff_ms);
    char words[180]; /* within the 256 of a message, beside the server's name and why */
    last_words(c, words, sizeof words);
    return VG_FAIL(err, VIGIL_ENETWORK, "MCP server \"%s\": %s%s%s", c->conf->name, c->down_why,
                   words[0] ? "; its last words: " : "", words);
}

static void read_stderr(struct vg_mcp_client *c);

/* The child closed stdout or its stdin broke: reap it and say how it ended. */
static vigil_code died(struct vg_mcp_client *c, vigil_error *err)
{
    int st = 0;
    pid_t w = 0;
    /* Output closes a moment before the exit: give the exit status 100 ms to arrive. */
    for (int nap = 0; nap < 20 && (w = waitpid(c->proc.pid, &st, WNOHANG)) == 0; nap++)
        vg_fiber_poll(NULL, 0, 5);
    if (w == c->proc.pid) {
        kill(-c->proc.pid, SIGKILL); /* the rest of its group */
        c->proc.pid = 0;
        /* Its last words are in the pipe now that it exited, whether or not a poll saw them
         * yet: the message about its death quotes them. */
        read_stderr(c);
        close(c->proc.in), close(c->proc.out);
        if (c->proc.err >= 0)
            close(c->proc.err);
        c->proc.in = c->proc.out = c->proc.err = -1;
        if (WIFEXITED(st))
            return mark_down(c, err, "the server exited with status %d", WEXITSTATUS(st));
        return mark_down(c, err, "the server was killed by signal %d", WTERMSIG(st));
    }
    return mark_down(c, err, "the server closed its output");
}

/* ---- writing -------------------------------------------------------------------------------- */

static vigil_code read_stdout(struct vg_mcp_client *c, int *eof);

/* One message as one line, its newline included (compact JSON escapes every newline inside
 * strings). While the pipe is full the server's output is read too, so neither side can block
 * the other. */
static vigil_code send_text(struct vg_mcp_client *c, const char *data, size_t len, int64_t deadline,
                            vigil_error *err)
{
    for (size_t off = 0; off < len;) {
        ssize_t w = send(c->proc.in, data + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return died(c, err);
        if (vg_clock_mono_ns(c->clock) >= deadline)
            return VG_FAIL(err, VIGIL_ETIMEOUT, "MCP server \"%s\" stopped reading its input",
                           c->conf->name);
        struct pollfd fds[2] = {{.fd = c->proc.in, .events = POLLOUT},
                                {.fd = c->proc.out, .events = POLLIN}};
        if (vg_fiber_poll(fds, 2, POLL_SLICE_MS) > 0 && fds[1].revents) {
            int eof = 0;
            vigil_code rc = read_stdout(c, &eof);
            if (rc || eof)
                return rc ? rc : died(c, err);
        }
    }
    return VIGIL_OK;
}

static vigil_code out_of_memory_writing(struct vg_mcp_client *c, vigil_error *err)
{
    return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing to MCP server \"%s\"", c->conf->name);
}

static vigil_code send_msg(struct vg_mcp_client *c, json_t *msg, int64_t deadline, vigil_error *err)
{
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    vigil_code rc = vg_json_put_compact(&b, msg) != 0 || (vg_buf_putc(&b, '\n'), b.fail)
                        ? out_of_memory_writing(c, err)
                        : send_text(c, b.data, b.len, deadline, err);
    vg_buf_release(&b);
    return rc;
}

static vigil_code http_send(struct vg_mcp_client *c, json_t *msg, vigil_error *err);

static vigil_code notify(struct vg_mcp_client *c, const char *method, json_t *params,
                         vigil_error *err)
{
    json_t *m = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
    if (!m || (params && json_object_set_new(m, "params", params))) {
        json_decref(m);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing to MCP server");
    }
    int64_t deadline = vg_clock_mono_ns(c->clock) + (int64_t)c->conf->timeout_ms * 1000000;
    vigil_code rc = c->conf->url ? http_send(c, m, err) : send_msg(c, m, deadline, err);
    json_decref(m);
    return rc;
}

/* Our answer to a server's request: ping is answered, anything else is not offered (we
 * declare no client capabilities). The id goes back with its JSON type. */
static void answer(struct vg_mcp_client *c, const struct vg_mcp_msg *m)
{
    json_t *r;
    if (!strcmp(m->method, "ping"))
        r = json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id", m->id, "result");
    else
        r = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", m->id, "error", "code",
                      -32601, "message", "Method not found");
    int64_t deadline = vg_clock_mono_ns(c->clock) + (int64_t)c->conf->timeout_ms * 1000000;
    if (r && c->conf->url) { /* one POST at a time: sent once the one in flight ends */
        if (!c->deferred)
            c->deferred = json_array();
        json_array_append(c->deferred, r);
    } else if (r) {
        send_msg(c, r, deadline, NULL);
    }
    json_decref(r);
}

/* ---- reading -------------------------------------------------------------------------------- */

static void take_stderr(struct vg_mcp_client *c, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n' || c->err_len == sizeof c->err_line - 1) {
            c->err_line[c->err_len] = '\0';
            if (c->err_len) {
                if (c->log_stderr)
                    c->log(c->log_user, c->conf->name, c->err_line);
                snprintf(c->err_tail[c->err_lines++ % ERR_TAIL_LINES], sizeof c->err_tail[0],
                         "%.159s", c->err_line);
            }
            c->err_len = 0;
            if (p[i] == '\n')
                continue;
        }
        c->err_line[c->err_len++] = p[i];
    }
}

static void read_stderr(struct vg_mcp_client *c)
{
    char chunk[4096];
    ssize_t n = -1;
    while (c->proc.err >= 0 && (n = read(c->proc.err, chunk, sizeof chunk)) > 0)
        take_stderr(c, chunk, (size_t)n);
    if (n == 0) {
        close(c->proc.err);
        c->proc.err = -1;
    }
}

/* Append what stdout holds now; a line past max_message is dropped as it streams in. */
static vigil_code read_stdout(struct vg_mcp_client *c, int *eof)
{
    char chunk[READ_CHUNK];
    for (;;) {
        ssize_t n = read(c->proc.out, chunk, sizeof chunk);
        if (n == 0) {
            *eof = 1;
            return VIGIL_OK;
        }
        if (n < 0)
            return VIGIL_OK; /* EAGAIN: all read; other errors show up as EOF next time */
        const char *p = chunk;
        size_t len = (size_t)n;
        if (c->skipping) {
            const char *nl = memchr(p, '\n', len);
            if (!nl)
                continue;
            c->skipping = 0;
            len -= (size_t)(nl + 1 - p);
            p = nl + 1;
        }
        vg_buf_append(&c->rd, p, len);
        if (c->rd.fail)
            return VG_FAIL(NULL, VIGIL_ENOMEM, "out of memory");
        if (c->rd.len - c->scanned > c->conf->max_message &&
            !memchr(c->rd.data + c->scanned, '\n', c->rd.len - c->scanned)) {
            /* No newline within the cap: drop the line, and the rest of it as it comes. */
            vg_buf_reset(&c->rd);
            c->scanned = 0;
            c->skipping = 1;
            c->oversized = 1;
        }
        if ((size_t)n < sizeof chunk)
            return VIGIL_OK; /* drained: poll says when there is more (saves a read per call) */
    }
}

/* The next complete line in rd (NUL-terminated in place), or NULL. */
static char *next_line(struct vg_mcp_client *c, size_t *len)
{
    char *start = c->rd.data + c->scanned;
    char *nl = memchr(start, '\n', c->rd.len - c->scanned);
    if (!nl)
        return NULL;
    *nl = '\0';
    *len = (size_t)(nl - start);
    c->scanned = (size_t)(nl + 1 - c->rd.data);
    return start;
}

/* Drop the lines already handled from the front of rd. */
static void compact_rd(struct vg_mcp_client *c)
{
    if (!c->scanned)
        return;
    size_t rest = c->rd.len - c->scanned;
    memmove(c->rd.data, c->rd.data + c->scanned, rest);
    c->rd.len = rest;
    c->rd.data[rest] = '\0';
    c->scanned = 0;
}

static void take_notification(struct vg_mcp_client *c, const struct vg_mcp_msg *m)
{
    if (!strcmp(m->method, "notifications/tools/list_changed")) {
        c->tools_stale = 1;
    } else if (!strcmp(m->method, "notifications/progress")) {
        json_t *tok = json_object_get(m->params, "progressToken");
        if (json_is_integer(tok) && json_integer_value(tok) == c->progress_token)
            c->progressed = 1;
    } else if (!strcmp(m->method, "notifications/message")) {
        char *data = vg_json_dump(json_object_get(m->params, "data"), 0);
        note(c, "%s: %.300s",
             json_string_value(json_object_get(m->params, "level"))
                 ? json_string_value(json_object_get(m->params, "level"))
                 : "log",
             data ? data : "");
        vg_free(data);
    } /* cancelled, resources/..., anything else: nothing to do (MCP-04) */
}

/* Handle one line; 1 when it is the response to id (then *resp holds it, owned). */
static int take_line(struct vg_mcp_client *c, const char *line, size_t len, int64_t id,
                     struct vg_mcp_msg *resp)
{
    struct vg_mcp_msg m;
    if (len == 0 || (len == 1 && line[0] == '\r'))
        return 0;
    switch (vg_mcp_msg_parse(line, len, &m)) {
    case VG_MCP_INVALID:
        note(c, "ignored a line that is not a JSON-RPC message (%s): %.120s", m.why, line);
        break;
    case VG_MCP_REQUEST:
        answer(c, &m);
        break;
    case VG_MCP_NOTIFICATION:
        take_notification(c, &m);
        break;
    case VG_MCP_RESPONSE:
        if (json_is_integer(m.id) && json_integer_value(m.id) == id) {
            *resp = m;
            return 1;
        }
        /* The late answer to a request we cancelled or gave up on: dropped (MCP-38). */
        break;
    }
    vg_mcp_msg_release(&m);
    return 0;
}

/* Read until the response to id arrives (*resp owned), the deadline passes (ETIMEOUT), the
 * answer is too big (ETOOBIG) or the server dies (ENETWORK). Progress on the request moves the
 * deadline on by one timeout, up to max_deadline. */
static vigil_code await(struct vg_mcp_client *c, int64_t id, int64_t deadline, int64_t max_deadline,
                        int64_t timeout_ns, struct vg_mcp_msg *resp, vigil_error *err)
{
    for (;;) {
        size_t len;
        char *line;
        int got = 0;
        while (!got && (line = next_line(c, &len)))
            got = take_line(c, line, len, id, resp);
        compact_rd(c);
        if (got)
            return VIGIL_OK;
        if (c->proc.pid <= 0)
            return VG_FAIL(err, VIGIL_ENETWORK, "MCP server \"%s\" is gone", c->conf->name);
        if (c->oversized) {
            c->oversized = 0;
            return VG_FAIL(err, VIGIL_ETOOBIG,
                           "MCP server \"%s\" answered more than %zu bytes (max_message_bytes): "
                           "the answer was dropped",
                           c->conf->name, c->conf->max_message);
        }
        int64_t now = vg_clock_mono_ns(c->clock);
        if (c->progressed) {
            c->progressed = 0;
            deadline = VG_MIN(VG_MAX(deadline, now + timeout_ns), max_deadline);
        }
        if (now >= deadline)
            return VG_FAIL(err, VIGIL_ETIMEOUT, "MCP server \"%s\" did not answer within %lld ms",
                           c->conf->name, (long long)(timeout_ns / 1000000));
        struct pollfd fds[2] = {{.fd = c->proc.out, .events = POLLIN},
                                {.fd = c->proc.err, .events = POLLIN}};
        int wait_ms = (int)VG_MIN((deadline - now) / 1000000 + 1, POLL_SLICE_MS);
        int pr = vg_fiber_poll(fds, c->proc.err >= 0 ? 2 : 1, wait_ms);
        if (pr <= 0)
            continue;
        if (c->proc.err >= 0 && fds[1].revents)
            read_stderr(c);
        if (fds[0].revents) {
            int eof = 0;
            vigil_code rc = read_stdout(c, &eof);
            if (rc)
                return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading MCP server \"%s\"",
                               c->conf->name);
            if (eof) {
                while ((line = next_line(c, &len)))
                    if (take_line(c, line, len, id, resp))
                        return VIGIL_OK;
                read_stderr(c);
                return died(c, err);
            }
        }
    }
}

/* ---- Streamable HTTP (http.c carries the bytes) -------------------------------------------- */

struct http_wait {
    struct vg_mcp_client *c;
    int64_t id;
    struct vg_mcp_msg *resp;
};

static int http_take(void *user, const char *text, size_t len)
{
    struct http_wait *w = user;
    return take_line(w->c, text, len, w->id, w->resp);
}

static int http_ignore(void *user, const char *text, size_t len)
{
    struct http_wait *w = user;
    struct vg_mcp_msg m;
    if (vg_mcp_msg_parse(text, len, &m) == VG_MCP_NOTIFICATION)
        take_notification(w->c, &m);
    vg_mcp_msg_release(&m);
    return 0;
}

/* One message (text, len) as a POST; method and name: the request's, for the 2026-07-28
 * headers (they must match the body's). */
static vigil_code http_post(struct vg_mcp_client *c, const char *text, size_t len,
                            const char *method, const char *name, int64_t timeout_ns,
                            vg_mcp_http_msg_fn fn, struct http_wait *w, vigil_error *err)
{
    int modern = c->era == ERA_MODERN || (method && !strcmp(method, "server/discover"));
    c->http.method = modern ? method : NULL;
    c->http.name = c->http.method ? name : NULL;
    return vg_mcp_http_post(&c->http, c->conf, text, len, (int)(timeout_ns / 1000000), fn, w, err);
}

/* A notification or one of our answers: the server's 202 carries nothing. */
static vigil_code http_send(struct vg_mcp_client *c, json_t *msg, vigil_error *err)
{
    struct http_wait w = {.c = c, .id = -1, .resp = NULL};
    char *text = vg_json_dump(msg, 0);
    if (!text)
        return out_of_memory_writing(c, err);
    vigil_code rc =
        http_post(c, text, strlen(text), json_string_value(json_object_get(msg, "method")), NULL,
                  (int64_t)c->conf->timeout_ms * 1000000, http_ignore, &w, err);
    vg_free(text);
    return rc;
}

static vigil_code handshake(struct vg_mcp_client *c, vigil_error *err);

/* Whether the server no longer knows our session: HTTP 404 (the specification), or what the
 * TypeScript SDK's servers answer, HTTP 400 with a -32000 error naming the session. */
static int session_lost(struct vg_mcp_client *c, vigil_code rc, const struct vg_mcp_msg *resp)
{
    const char *msg = json_string_value(json_object_get(resp->error, "message"));
    if (rc == VIGIL_ENOTFOUND)
        return 1;
    return !rc && c->http.status == 400 && resp->error && msg && strcasestr(msg, "session");
}

/* A request as one POST, its response read from the JSON body or the SSE stream; the server's
 * own requests on the way are answered after it. A session the server forgot (404) is
 * initialized again and the request sent once more. */
static vigil_code http_exchange(struct vg_mcp_client *c, const struct vg_buf *m, const char *method,
                                const char *name, int64_t id, int64_t t, struct vg_mcp_msg *resp,
                                vigil_error *err)
{
    struct http_wait w = {.c = c, .id = id, .resp = resp};
    int initialize = !strcmp(method, "initialize");
    vigil_code rc = http_post(c, m->data, m->len, method, name, t, http_take, &w, err);
    if (c->http.session[0] && !initialize && session_lost(c, rc, resp)) {
        note(c, "the server forgot our session: initializing again");
        vg_mcp_msg_release(resp);
        memset(resp, 0, sizeof *resp);
        c->http.session[0] = c->http.version[0] = '\0';
        json_decref(c->init);
        c->init = NULL;
        c->tools_stale = 1;
        if (!(rc = handshake(c, err)))
            rc = http_post(c, m->data, m->len, method, name, t, http_take, &w, err);
    }
    for (size_t i = 0; i < json_array_size(c->deferred); i++)
        http_send(c, json_array_get(c->deferred, i), NULL);
    json_array_clear(c->deferred);
    if (!rc && !resp->root)
        rc = VG_FAIL(err, VIGIL_EPROVIDER, "MCP server \"%s\" ended its answer without a response",
                     c->conf->name);
    return rc;
}

/* The start of a request's text, up to its params. */
static void put_request_head(struct vg_buf *b, int64_t id, const char *method)
{
    vg_buf_puts(b, "{\"jsonrpc\":\"2.0\",\"id\":");
    vg_buf_put_i64(b, id);
    vg_buf_puts(b, ",\"method\":");
    vg_json_put_string(b, method);
}

/*
 * A stdio request timed out: is the server stuck? vigil sends it one request at a time, so a
 * server that answers nothing while its call hangs (single-threaded, as many small servers
 * are) would cost every later call its whole timeout until the breaker opened after three
 * (trial L5). A ping with a short deadline tells: answered, the server works and only that call
 * was slow, so it stays; unanswered, it is stopped now (the breaker opens: the next call waits
 * out the short backoff and gets a new process). An HTTP server's requests are POSTs of their
 * own, one hung POST holding up no other: it is not asked.
 */
static void check_stuck(struct vg_mcp_client *c, int64_t timeout_ns)
{
    if (c->conf->url || c->state != ST_RUNNING || c->proc.pid <= 0)
        return;
    int64_t id = c->next_id++, ping_ns = VG_MIN(timeout_ns, (int64_t)STUCK_PING_MS * 1000000);
    int64_t now = vg_clock_mono_ns(c->clock);
    struct vg_mcp_msg resp = {0};
    struct vg_buf b;
    vigil_error e2 = {0};
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    put_request_head(&b, id, "ping");
    vg_buf_puts(&b, "}\n");
    vigil_code rc = b.fail ? VIGIL_ENOMEM : send_text(c, b.data, b.len, now + ping_ns, &e2);
    if (!rc)
        rc = await(c, id, now + ping_ns, now + ping_ns, ping_ns, &resp, &e2);
    vg_mcp_msg_release(&resp);
    vg_buf_release(&b);
    if (rc == VIGIL_ETIMEOUT && c->state == ST_RUNNING)
        mark_down(c, NULL, "a request got no answer in %lld ms, nor a ping in %lld ms: stuck",
                  (long long)(timeout_ns / 1000000), (long long)(ping_ns / 1000000));
}

/* Request id, written in m (its text, ended with "\n" for stdio, which HTTP leaves out), and
 * its response, on a running server. name: params.name, for the 2026-07-28 headers. cancel:
 * on timeout, tell the server (notifications/cancelled); initialize must never be cancelled. */
static vigil_code exchange_text(struct vg_mcp_client *c, int64_t id, const char *method,
                                const char *name, const struct vg_buf *m, int timeout_ms,
                                int cancel, json_t **result, vigil_error *err)
{
    int64_t t = (int64_t)(timeout_ms > 0 ? timeout_ms : c->conf->timeout_ms) * 1000000;
    int64_t now = vg_clock_mono_ns(c->clock);
    struct vg_mcp_msg resp = {0};
    vigil_code rc;
    if (m->fail)
        return out_of_memory_writing(c, err);
    if (c->conf->url) {
        struct vg_buf body = *m;
        body.len--; /* no newline in a POST's body */
        rc = http_exchange(c, &body, method, name, id, t, &resp, err);
    } else if (!(rc = send_text(c, m->data, m->len, now + t, err))) {
        rc = await(c, id, now + t, now + 10 * t, t, &resp, err);
        c->unanswered = rc == VIGIL_ENETWORK; /* it had the request: it may have acted */
    }
    if (rc == VIGIL_ETIMEOUT && cancel && c->state == ST_RUNNING && c->proc.pid > 0) {
        vigil_error e2 = {0};
        notify(c, "notifications/cancelled",
               json_pack("{s:I, s:s}", "requestId", (json_int_t)id, "reason",
                         "timed out: the client gave up"),
               &e2);
        check_stuck(c, t);
    }
    if (rc)
        return rc;
    if (resp.error)
        rc = vg_mcp_rpc_error(c->conf->name, resp.error, err);
    else if (c->era != ERA_MODERN || !(rc = vg_mcp_modern_result(c->conf->name, resp.result, err)))
        *result = json_incref(resp.result);
    vg_mcp_msg_release(&resp);
    return rc;
}

/* One request and its response, written from params (borrowed, may be NULL). */
static vigil_code exchange(struct vg_mcp_client *c, const char *method, json_t *params,
                           int timeout_ms, int cancel, json_t **result, vigil_error *err)
{
    int64_t id = c->next_id++;
    struct vg_buf b;
    json_t *p = c->era == ERA_MODERN || !strcmp(method, "server/discover")
                    ? vg_mcp_modern_params(params)
                    : json_incref(params);
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    put_request_head(&b, id, method);
    if (p) {
        vg_buf_puts(&b, ",\"params\":");
        if (vg_json_put_compact(&b, p))
            b.fail = 1;
    }
    vg_buf_puts(&b, "}\n");
    vigil_code rc =
        params && !p ? out_of_memory_writing(c, err)
                     : exchange_text(c, id, method, json_string_value(json_object_get(p, "name")),
                                     &b, timeout_ms, cancel, result, err);
    vg_buf_release(&b);
    json_decref(p);
    return rc;
}

/* A request with its 2026-07-28 follow-up rounds (MCP.md MCP-50): a result "input_required" is
 * answered by sending the request again, as a new request, with the inputs vigil can give and
 * the server's requestState; at most MAX_INPUT_ROUNDS times. */
static vigil_code roundtrip(struct vg_mcp_client *c, const char *method, json_t *params,
                            int timeout_ms, int cancel, json_t **result, vigil_error *err)
{
    json_t *p = json_incref(params), *res = NULL;
    vigil_code rc;
    for (int round = 0;; round++) {
        rc = exchange(c, method, p, timeout_ms, cancel, &res, err);
        if (rc || c->era != ERA_MODERN || !vg_mcp_modern_input_required(res))
            break;
        json_t *next = NULL;
        if (round == MAX_INPUT_ROUNDS)
            rc = VG_FAIL(err, VIGIL_EPROVIDER,
                         "MCP server \"%s\" still asks for input after %d rounds of answers",
                         c->conf->name, MAX_INPUT_ROUNDS);
        else
            rc = vg_mcp_modern_follow_up(c->conf->name, p, res, &next, err);
        json_decref(res);
        res = NULL;
        json_decref(p);
        p = next;
        if (rc)
            break;
    }
    json_decref(p);
    if (!rc)
        *result = res;
    return rc;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

/* 2026-07-28 has no session to carry notifications: a client asks for them with
 * subscriptions/listen, a request the server keeps open and answers only when it ends the
 * subscription. Over stdio it is sent and not awaited: the server's
 * notifications/tools/list_changed then arrive among the answers to later requests, as in
 * 2025-11-25, and its final answer is dropped like any answer nobody waits for. Over HTTP the
 * request holds a stream of its own open beside the POSTs: listen.c keeps it. */
static vigil_code listen_for_changes(struct vg_mcp_client *c, vigil_error *err)
{
    if (c->conf->url)
        return VIGIL_OK;
    json_t *notes = json_pack("{s:{s:b}}", "notifications", "toolsListChanged", 1);
    json_t *m = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", (json_int_t)c->next_id++,
                          "method", "subscriptions/listen", "params", vg_mcp_modern_params(notes));
    json_decref(notes);
    if (!m)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing to MCP server");
    int64_t deadline = vg_clock_mono_ns(c->clock) + (int64_t)c->conf->timeout_ms * 1000000;
    vigil_code rc = send_msg(c, m, deadline, err);
    json_decref(m);
    return rc;
}

/* 2026-07-28 (MCP.md MCP-48): server/discover first, unless the server is known to be legacy.
 * A result offering 2026-07-28 makes it modern: no initialize, no session, _meta on every
 * request. An error answer or none in time means legacy; a dead server is an error. */
static vigil_code discover(struct vg_mcp_client *c, vigil_error *err)
{
    json_t *res = NULL;
    vigil_error e2 = {0};
    if (c->era == ERA_LEGACY)
        return VIGIL_OK;
    snprintf(c->http.version, sizeof c->http.version, "%s", MODERN);
    vigil_code rc = roundtrip(c, "server/discover", NULL,
                              VG_MIN(c->conf->timeout_ms, DISCOVER_TIMEOUT_MS), 0, &res, &e2);
    if (rc == VIGIL_ENETWORK || rc == VIGIL_ENOMEM) {
        vg_error_copy(err, &e2);
        return rc;
    }
    if (!rc && vg_mcp_modern_offered(res)) {
        c->era = ERA_MODERN;
        c->init = res;
        snprintf(c->http.version, sizeof c->http.version, "%s", MODERN);
        c->http.session[0] = '\0';
        return listen_for_changes(c, err);
    }
    json_decref(res);
    c->era = ERA_LEGACY;
    c->http.version[0] = '\0';
    return VIGIL_OK;
}

/* A message on the server's own stream (the listener's thread: only atomics and the log). */
static void heard(void *user, const struct vg_mcp_msg *m)
{
    struct vg_mcp_client *c = user;
    if (!strcmp(m->method, "notifications/tools/list_changed")) {
        atomic_store(&c->heard_change, 1);
        note(c, "the server announced a change of its tools on its own stream");
    } else if (!strcmp(m->method, "notifications/message")) {
        char *data = vg_json_dump(json_object_get(m->params, "data"), 0);
        const char *level = json_string_value(json_object_get(m->params, "level"));
        note(c, "on its own stream: %s: %.300s", level ? level : "log", data ? data : "");
        vg_free(data);
    }
}

/* Url servers, once the handshake is done: keep the server's own stream open (listen.c) with
 * this session; a stream that cannot start only costs the notifications. */
static void listen_http(struct vg_mcp_client *c)
{
    vigil_error e2 = {0};
    stop_listening(c);
    if (vg_mcp_listen_start(c->conf, &c->http, c->era == ERA_MODERN, heard, c, &c->listener, &e2))
        note(c, "%s", e2.message);
}

static vigil_code handshake_once(struct vg_mcp_client *c, vigil_error *err);

static vigil_code handshake(struct vg_mcp_client *c, vigil_error *err)
{
    vigil_code rc = handshake_once(c, err);
    if (!rc && c->conf->url && c->own_stream)
        listen_http(c);
    return rc;
}

static vigil_code handshake_once(struct vg_mcp_client *c, vigil_error *err)
{
    json_t *res = NULL;
    vigil_code drc = discover(c, err);
    if (drc || c->era == ERA_MODERN)
        return drc;
    json_t *params =
        json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", PROTOCOL, "capabilities",
                  "clientInfo", "name", "vigil", "version", vigil_version());
    if (!params)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting MCP server");
    vigil_code rc = roundtrip(c, "initialize", params, 0, 0, &res, err);
    json_decref(params);
    if (rc)
        return rc;
    const char *v = json_string_value(json_object_get(res, "protocolVersion"));
    int ok = 0;
    for (size_t i = 0; v && i < VG_ARRAY_LEN(supported_versions); i++)
        ok |= !strcmp(v, supported_versions[i]);
    if (!ok) { /* v is res's: named before res goes */
        rc = VG_FAIL(err, VIGIL_EUNSUPPORTED,
                     "MCP server \"%s\" speaks protocol version \"%s\", which vigil does not "
                     "(it speaks %s back to 2024-11-05)",
                     c->conf->name, v ? v : "(none)", PROTOCOL);
        json_decref(res);
        return rc;
    }
    c->init = res;
    snprintf(c->http.version, sizeof c->http.version, "%s", v);
    return notify(c, "notifications/initialized", NULL, err);
}

/* Make sure the server runs: start and initialize it unless it is within a backoff. */
/* A server that exited between requests failed no request: it is reaped and started again
 * at once, without a backoff. 1 when it had exited. */
static int exited_while_idle(struct vg_mcp_client *c)
{
    int st = 0;
    if (waitpid(c->proc.pid, &st, WNOHANG) != c->proc.pid)
        return 0;
    kill(-c->proc.pid, SIGKILL); /* what it left in its group */
    c->proc.pid = 0;
    close(c->proc.in), close(c->proc.out);
    if (c->proc.err >= 0)
        close(c->proc.err);
    c->proc.in = c->proc.out = c->proc.err = -1;
    note(c, "the server exited (%s %d) between requests; starting it again",
         WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    c->state = ST_NEW;
    return 1;
}

/* Within a backoff: fail at once, or wait out what is left when that is under a second and
 * the request's time (wait_ms) allows it, so that one crash does not fail the next few calls
 * of a fast model or of parallel sub-agents (trial E26 e). */
static vigil_code backing_off(struct vg_mcp_client *c, int wait_ms, vigil_error *err)
{
    int64_t now = vg_clock_mono_ns(c->clock);
    if (c->state != ST_DOWN || now >= c->retry_at_ns)
        return VIGIL_OK;
    int64_t left_ms = (c->retry_at_ns - now + 999999) / 1000000;
    if (left_ms <= WAIT_OUT_MAX_MS && left_ms < wait_ms) {
        vg_clock_sleep_ms(c->clock, left_ms);
        return VIGIL_OK;
    }
    return VG_FAIL(err, VIGIL_ENETWORK, "MCP server \"%s\" is down (%s); next start in %lld ms",
                   c->conf->name, c->down_why, (long long)left_ms);
}

static vigil_code ensure(struct vg_mcp_client *c, int wait_ms, vigil_error *err)
{
    vigil_error e2 = {0};
    if (c->retired)
        return VG_FAIL(err, VIGIL_ENETWORK,
                       "MCP server \"%s\" was declared anew; its old declaration is not started",
                       c->conf->name);
    if (c->state == ST_RUNNING && (c->conf->url || (c->proc.pid > 0 && !exited_while_idle(c))))
        return VIGIL_OK;
    vigil_code rc = backing_off(c, wait_ms, err);
    if (rc)
        return rc;
    reset_streams(c);
    c->err_lines = 0;
    rc = c->conf->url ? VIGIL_OK : vg_mcp_proc_start(c->conf, &c->proc, err);
    if (rc) {
        mark_down(c, NULL, "could not start: %s", err ? err->message : "");
        return rc;
    }
    c->state = ST_RUNNING;
    c->tools_stale = 1;
    if ((rc = handshake(c, &e2))) {
        if (c->state == ST_RUNNING)
            mark_down(c, NULL, "initialize failed: %s", e2.message);
        vg_error_copy(err, &e2);
        if (err && rc != VIGIL_ENETWORK)
            err->code = rc;
        return rc;
    }
    return VIGIL_OK;
}

/* The circuit breaker, after each request: a success closes it (the backoff starts over); a
 * death already opened it (mark_down); BREAKER_TIMEOUTS timeouts in a row open it too: the
 * server is stopped, and calls fail at once until the backoff has passed and a new process
 * starts. Other failures (an error answer, an oversized one) leave the server as it is. */
static void breaker(struct vg_mcp_client *c, vigil_code rc)
{
    if (rc == VIGIL_OK) {
        c->backoff_ms = 0;
        c->timeouts = 0;
    } else if (rc == VIGIL_ETIMEOUT && ++c->timeouts >= BREAKER_TIMEOUTS &&
               c->state == ST_RUNNING) {
        c->timeouts = 0;
        mark_down(c, NULL, "%d requests in a row got no answer", BREAKER_TIMEOUTS);
    }
}

static vigil_code request_locked(struct vg_mcp_client *c, const char *method, json_t *params,
                                 int timeout_ms, json_t **result, vigil_error *err)
{
    vigil_code rc = ensure(c, timeout_ms > 0 ? timeout_ms : c->conf->timeout_ms, err);
    if (!rc) {
        rc = roundtrip(c, method, params, timeout_ms, 1, result, err);
        breaker(c, rc);
    }
    return rc;
}

vigil_code vg_mcp_client_request(struct vg_mcp_client *c, const char *method, json_t *params,
                                 int timeout_ms, json_t **result, vigil_error *err)
{
    lock(c);
    vigil_code rc = request_locked(c, method, params, timeout_ms, result, err);
    unlock(c);
    json_decref(params);
    return rc;
}

static vigil_code list_locked(struct vg_mcp_client *c, vigil_error *err)
{
    json_t *all = json_array(), *cursor = NULL;
    vigil_code rc = all ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tools");
    c->tools_stale = 0; /* a change announced while we list makes the next use list again */
    for (int page = 0; !rc && page < MAX_LIST_PAGES; page++) {
        json_t *res = NULL, *params = cursor ? json_pack("{s:O}", "cursor", cursor) : NULL;
        rc = request_locked(c, "tools/list", params, 0, &res, err);
        json_decref(params);
        if (rc)
            break;
        json_t *tools = json_object_get(res, "tools");
        if (!json_is_array(tools)) {
            json_decref(res);
            rc = VG_FAIL(err, VIGIL_EPROVIDER, "MCP server \"%s\": tools/list has no tools array",
                         c->conf->name);
            break;
        }
        json_array_extend(all, tools);
        json_t *next = json_object_get(res, "nextCursor");
        int again = json_is_string(next) && !(cursor && json_equal(next, cursor));
        json_decref(cursor);
        cursor = again ? json_incref(next) : NULL;
        json_decref(res);
        if (!again)
            break;
    }
    json_decref(cursor);
    if (rc) {
        json_decref(all);
        return rc;
    }
    json_decref(c->tools);
    c->tools = all;
    return VIGIL_OK;
}

vigil_code vg_mcp_client_tools(struct vg_mcp_client *c, json_t **tools, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    lock(c);
    if (atomic_exchange(&c->heard_change, 0))
        c->tools_stale = 1;
    if (!c->tools || c->tools_stale || c->state != ST_RUNNING)
        rc = list_locked(c, err);
    if (!rc)
        *tools = c->tools;
    unlock(c);
    return rc;
}

int vg_mcp_client_tools_changed(struct vg_mcp_client *c)
{
    lock(c);
    int changed = c->state == ST_RUNNING && (c->tools_stale || atomic_load(&c->heard_change));
    unlock(c);
    return changed;
}

/* tools/call to a 2025-11-25 server, written as text: no tree of the request is built. The
 * progress token is the call's own id (unique for the client's life). */
static vigil_code call_legacy(struct vg_mcp_client *c, const char *tool, const json_t *args,
                              json_t **result, vigil_error *err)
{
    int64_t id = c->next_id++;
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    put_request_head(&b, id, "tools/call");
    vg_buf_puts(&b, ",\"params\":{\"name\":");
    vg_json_put_string(&b, tool);
    vg_buf_puts(&b, ",\"arguments\":");
    if (!args)
        vg_buf_puts(&b, "{}");
    else if (vg_json_put_compact(&b, args))
        b.fail = 1;
    vg_buf_puts(&b, ",\"_meta\":{\"progressToken\":");
    vg_buf_put_i64(&b, id);
    vg_buf_puts(&b, "}}}\n");
    c->progress_token = id;
    c->progressed = 0;
    vigil_code rc = exchange_text(c, id, "tools/call", tool, &b, 0, 1, result, err);
    vg_buf_release(&b);
    return rc;
}

/* tools/call to a 2026-07-28 server: a tree, which its follow-up rounds rewrite. */
static vigil_code call_modern(struct vg_mcp_client *c, const char *tool, json_t *args,
                              json_t **result, vigil_error *err)
{
    json_t *params = json_pack("{s:s, s:o, s:{s:I}}", "name", tool, "arguments",
                               args ? json_incref(args) : json_object(), "_meta", "progressToken",
                               (json_int_t)c->next_id);
    if (!params)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory calling an MCP tool");
    c->progress_token = c->next_id;
    c->progressed = 0;
    vigil_code rc = roundtrip(c, "tools/call", params, 0, 1, result, err);
    json_decref(params);
    return rc;
}

vigil_code vg_mcp_client_call_unanswered(struct vg_mcp_client *c, const char *tool, json_t *args,
                                         json_t **result, int *unanswered, vigil_error *err)
{
    lock(c);
    int called = 0;
    vigil_code rc = ensure(c, c->conf->timeout_ms, err);
    if (!rc) {
        c->unanswered = 0; /* the start's own requests are not the call's */
        called = 1;
        rc = c->era == ERA_MODERN ? call_modern(c, tool, args, result, err)
                                  : call_legacy(c, tool, args, result, err);
        c->progress_token = -1;
        breaker(c, rc);
    }
    if (unanswered)
        *unanswered = rc && called && c->unanswered;
    unlock(c);
    return rc;
}

vigil_code vg_mcp_client_call(struct vg_mcp_client *c, const char *tool, json_t *args,
                              json_t **result, vigil_error *err)
{
    return vg_mcp_client_call_unanswered(c, tool, args, result, NULL, err);
}
