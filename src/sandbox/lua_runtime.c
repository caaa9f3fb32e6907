/*
 * lua_runtime.c: the default code runtime: one Lua program per confined child (spawn.c), and
 * the host's half of the bridge. The host waits on the child's two pipes (bridge messages on
 * its descriptor 1, printed output on 2) and its pidfd, answers requests (files beneath the
 * working directory, host tools through q->host), keeps the first 1 MiB of output, and kills
 * the whole process group at the wall-time limit or when the bridge is abused. Answers go to
 * the child over a socket (send with MSG_NOSIGNAL: a child that died never raises SIGPIPE in
 * the host).
 */
#include "base/common.h"
#include "base/json.h"

#include "os/clock.h"
#include "os/fiber.h"
#include "sandbox/fetch.h"
#include "sandbox/lua_child.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The largest file a read returns and tool answer the bridge carries. */
#define VG_BRIDGE_MAX_VALUE (1024u * 1024)

enum stop {
    STOP_NONE,
    STOP_TIMEOUT,
    STOP_BROKEN,
    STOP_DIR,
    STOP_SYSCALL,
    STOP_HALTED,
    STOP_CANCELED
};

struct exec {
    const struct vg_code_request *q;
    struct vg_code_result *r;
    struct vg_sandbox_child child;
    int msg_fd, out_fd, ans_fd, dirfd;
    struct vg_bridge_reader rd;
    char *out;
    size_t out_len, out_seen;
    char *ans;
    size_t ans_len, ans_off;
    int final; /* the program's result or error arrived */
    enum stop stop;
    char broken[160];
    int64_t deadline_ns;
    struct vg_fetch_job *fetch; /* a fetch under way on its own thread; requests wait */
    json_int_t fetch_id;
    char *fetch_url;
    /* The working directory's cap (limits.dir_bytes): measured at the first write that may grow
     * it (or at the start when the program writes files itself), then kept by each write and
     * remove. */
    int dir_measured;
    long long dir_room;    /* what it may still grow; negative when over */
    long long dir_ceiling; /* direct writes: the most it may hold, its cap or what it held */
    long long dir_used;    /* direct writes: the last measure */
    int64_t dir_next_ns;   /* direct writes: when to measure again */
    /* A child whose forbidden system calls come to the host (vg_code_child.syscall_listener):
     * the listener it sends, once, and the call that stopped it. */
    int await_listener;    /* the listener has not come yet */
    int listener_fd;       /* -1: none (yet, or it was closed) */
    char syscall_name[40]; /* "chown" */
    int syscall_nr;
    int64_t cancel_next_ns; /* when to ask vg_code_request.cancelled again */
};

/* How often the host measures a folder the program writes into itself. */
#define DIR_CHECK_NS (100 * 1000000LL)

void vg_code_limits_default(struct vg_code_limits *l)
{
    l->code_bytes = 50 * 1024;
    l->wall_ms = 60000;
    l->cpu_ms = 30000;
    l->memory_bytes = 256u * 1024 * 1024;
    l->output_bytes = 1024 * 1024;
    l->tool_calls = 25;
    l->file_bytes = 16u * 1024 * 1024;
    l->fds = 16;
    l->dir_bytes = 256u * 1024 * 1024;
}

vigil_code vg_code_limits_from_json(const json_t *obj, struct vg_code_limits *l, vigil_error *err)
{
    static const char *const keys[] = {"code_bytes",   "wall_ms",      "cpu_ms",
                                       "memory_bytes", "output_bytes", "tool_calls",
                                       "file_bytes",   "fds",          "dir_bytes"};
    if (!obj)
        return VIGIL_OK;
    if (!json_is_object(obj))
        return VG_FAIL(err, VIGIL_EINVAL, "sandbox limits must be an object");
    for (size_t i = 0; i < VG_ARRAY_LEN(keys); i++) {
        json_t *v = json_object_get(obj, keys[i]);
        if (!v)
            continue;
        json_int_t n = json_integer_value(v);
        if (!json_is_integer(v) || n < (i == 5 ? 0 : 1) || n > ((json_int_t)1 << 40))
            return VG_FAIL(err, VIGIL_EINVAL, "sandbox limit \"%s\" must be a positive integer",
                           keys[i]);
        switch (i) {
        case 0:
            l->code_bytes = (size_t)n;
            break;
        case 1:
            l->wall_ms = (int)VG_MIN(n, INT32_MAX);
            break;
        case 2:
            l->cpu_ms = (int)VG_MIN(n, INT32_MAX);
            break;
        case 3:
            l->memory_bytes = (size_t)n;
            break;
        case 4:
            l->output_bytes = (size_t)n;
            break;
        case 5:
            l->tool_calls = (int)VG_MIN(n, INT32_MAX);
            break;
        case 6:
            l->file_bytes = (size_t)n;
            break;
        case 7:
            l->fds = (int)VG_MIN(VG_MAX(n, 4), 1024);
            break;
        default:
            l->dir_bytes = (size_t)n;
            break;
        }
    }
    return VIGIL_OK;
}

static void fail(struct vg_code_result *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct vg_code_result *r, const char *code, const char *fmt, ...)
{
    va_list ap;
    r->ok = 0;
    snprintf(r->error_code, sizeof r->error_code, "%s", code);
    va_start(ap, fmt);
    vsnprintf(r->error_message, sizeof r->error_message, fmt, ap);
    va_end(ap);
}

/* ---- answering requests ------------------------------------------------------------------- */

static void queue_answer(struct exec *x, json_t *a)
{
    char *s = a ? vg_json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    size_t n = s ? strlen(s) : 0;
    char *b = s ? vg_realloc(x->ans, x->ans_len + n + 1) : NULL;
    if (!b) {
        free(s);
        x->stop = STOP_BROKEN;
        snprintf(x->broken, sizeof x->broken, "out of memory answering the program");
        return;
    }
    memcpy(b + x->ans_len, s, n);
    b[x->ans_len + n] = '\n';
    x->ans = b;
    x->ans_len += n + 1;
    free(s);
}

/* Every refusal, of a request or of the program, goes into the result (and so into the
 * toolResult in the agent's journal) with its reason; the first VG_CODE_MAX_REFUSALS in full. */
static void note_refusal(struct vg_code_result *r, const char *op, const char *target,
                         const char *code, const char *msg)
{
    if (r->refusals_total++ >= VG_CODE_MAX_REFUSALS)
        return;
    if (!r->refusals)
        r->refusals = json_array();
    json_t *one = json_pack("{s:s, s:s, s:s}", "op", op, "code", code, "reason", msg);
    if (one && target)
        json_object_set_new(one, "target", json_string(target));
    json_array_append_new(r->refusals, one);
}

static const char *op_name(enum vg_bridge_op op)
{
    static const char *const names[] = {"bad",    "tool",  "read",   "write", "list",
                                        "remove", "fetch", "result", "error"};
    return (unsigned)op < VG_ARRAY_LEN(names) ? names[op] : "bad";
}

static void answer_error(struct exec *x, const struct vg_bridge_msg *m, const char *code,
                         const char *msg)
{
    note_refusal(x->r, op_name(m->op), m->op == VG_BRIDGE_TOOL ? m->name : m->path, code, msg);
    queue_answer(
        x, json_pack("{s:I, s:{s:s, s:s}}", "id", m->id, "error", "code", code, "message", msg));
}

static void answer_value(struct exec *x, json_int_t id, json_t *v)
{
    queue_answer(x, json_pack("{s:I, s:o}", "id", id, "value", v ? v : json_null()));
}

static void answer_tool(struct exec *x, const struct vg_bridge_msg *m)
{
    char code[32] = "", msg[256] = "";
    json_t *res = NULL;
    if (!x->q->host || !x->q->host->call_tool) {
        answer_error(x, m, "not_allowed", "this execution may not call host tools");
        return;
    }
    if (x->r->tool_calls >= x->q->lim.tool_calls) {
        snprintf(msg, sizeof msg, "an execution may call host tools %d times; this was one more",
                 x->q->lim.tool_calls);
        answer_error(x, m, "tool_limit", msg);
        return;
    }
    x->r->tool_calls++;
    json_t *args = m->value ? json_incref(m->value) : json_object();
    if (x->q->host->call_tool(x->q->host->user, m->name, args, &res, code, msg)) {
        json_decref(args);
        answer_error(x, m, *code ? code : "tool_failed", msg);
        return;
    }
    json_decref(args);
    answer_value(x, m->id, res);
}

/* A fetch leaves the host like a tool call, and counts against the same limit. */
static void answer_fetch(struct exec *x, const struct vg_bridge_msg *m)
{
    char msg[256] = "";
    if (!x->q->fetch_policy ||
        !json_array_size(json_object_get(x->q->fetch_policy, "allow_hosts"))) {
        answer_error(x, m, "not_allowed", "no host may be fetched (sandbox.fetch.allow_hosts)");
        return;
    }
    if (x->r->tool_calls >= x->q->lim.tool_calls) {
        answer_error(x, m, "tool_limit", "no more host calls in this execution");
        return;
    }
    x->r->tool_calls++;
    /* On a thread of its own, so this loop, and the fibers beside it, go on; it ends by the
     * execution's wall-time deadline at the latest. */
    x->fetch_url = vg_strdup(m->path);
    x->fetch = x->fetch_url ? vg_fetch_start(x->q->fetch_policy, m->path, x->deadline_ns) : NULL;
    if (!x->fetch) {
        vg_free(x->fetch_url);
        x->fetch_url = NULL;
        snprintf(msg, sizeof msg, "the host could not start the fetch (out of memory)");
        answer_error(x, m, "failed", msg);
        return;
    }
    x->fetch_id = m->id;
}

static void fetch_ended(struct exec *x)
{
    char code[32] = "", msg[256] = "";
    json_t *v = vg_fetch_finish(x->fetch, code, msg);
    struct vg_bridge_msg m = {.op = VG_BRIDGE_FETCH, .id = x->fetch_id, .path = x->fetch_url};
    x->fetch = NULL;
    if (v)
        answer_value(x, x->fetch_id, v);
    else
        answer_error(x, &m, code, msg);
    vg_free(x->fetch_url);
    x->fetch_url = NULL;
}

/* The folder's usage, once per execution, when a write may first grow it: an execution that
 * writes nothing walks nothing. */
static void measure_dir(struct exec *x)
{
    if (x->dir_measured)
        return;
    long long cap = (long long)x->q->lim.dir_bytes;
    x->dir_room = cap - vg_sandbox_dir_usage(x->q->workdir, cap);
    x->dir_measured = 1;
}

static void answer_file(struct exec *x, const struct vg_bridge_msg *m)
{
    char code[32] = "", msg[256] = "";
    json_t *v = NULL;
    int rc = 0;
    size_t read_max = VG_MIN(x->q->lim.file_bytes, (size_t)VG_BRIDGE_MAX_VALUE);
    long long *room = x->dir_measured ? &x->dir_room : NULL;
    switch (m->op) {
    case VG_BRIDGE_READ:
        rc = (v = vg_sandbox_file_read(x->dirfd, m->path, read_max, code, msg)) ? 0 : -1;
        break;
    case VG_BRIDGE_WRITE:
        measure_dir(x);
        rc = vg_sandbox_file_write(x->dirfd, m->path, m->data, m->data_len, m->append,
                                   x->q->lim.file_bytes, &x->dir_room, code, msg);
        v = rc ? NULL : json_true();
        break;
    case VG_BRIDGE_LIST:
        rc = (v = vg_sandbox_file_list(x->dirfd, m->path, code, msg)) ? 0 : -1;
        break;
    default: /* before the first measure nothing needs crediting: the measure sees it gone */
        rc = vg_sandbox_file_remove(x->dirfd, m->path, room, code, msg);
        v = rc ? NULL : json_true();
    }
    if (rc)
        answer_error(x, m, code, msg);
    else
        answer_value(x, m->id, v);
}

/* A program that writes files itself (Deno's API) is measured from the start, then every
 * DIR_CHECK_NS and at its end: it may hold its cap, or what it held at the start when that was
 * more (a lowered cap; files a person put there), and is stopped when it holds more. */
static void watch_dir_start(struct exec *x)
{
    long long cap = (long long)x->q->lim.dir_bytes;
    x->dir_used = vg_sandbox_dir_usage(x->q->workdir, INT64_MAX);
    x->dir_room = cap - x->dir_used;
    x->dir_measured = 1;
    x->dir_ceiling = VG_MAX(cap, x->dir_used);
    x->dir_next_ns = vg_clock_mono_ns(vg_clock_real()) + DIR_CHECK_NS;
}

static void watch_dir(struct exec *x, int64_t now_ns, int now_anyway)
{
    if ((now_ns < x->dir_next_ns && !now_anyway) || x->stop != STOP_NONE)
        return;
    x->dir_used = vg_sandbox_dir_usage(x->q->workdir, x->dir_ceiling);
    /* A folder of many thousands of entries takes milliseconds of the host's CPU to measure:
     * the measures then come further apart, so they take at most a tenth of it. */
    int64_t took = vg_clock_mono_ns(vg_clock_real()) - now_ns;
    x->dir_next_ns = now_ns + VG_MAX(DIR_CHECK_NS, 10 * took);
    if (x->dir_used > x->dir_ceiling)
        x->stop = STOP_DIR;
}

static void take_final(struct exec *x, const struct vg_bridge_msg *m)
{
    x->final = 1;
    if (m->op == VG_BRIDGE_RESULT) {
        x->r->ok = 1;
        x->r->result = json_incref(m->value ? m->value : json_null());
        return;
    }
    static const char *const codes[] = {"syntax_error", "runtime_error", "memory_limit",
                                        "tool_limit", "bridge_error"};
    const char *code = "runtime_error";
    for (size_t i = 0; i < VG_ARRAY_LEN(codes); i++)
        if (!strcmp(m->code, codes[i]))
            code = codes[i];
    fail(x->r, code, "%s", m->message);
}

static void handle_line(struct exec *x, const char *line, size_t len)
{
    struct vg_bridge_msg m;
    enum vg_bridge_op op = vg_bridge_msg_parse(line, len, &m);
    if (x->final) { /* nothing is answered after the program's last word */
        x->stop = STOP_BROKEN;
        snprintf(x->broken, sizeof x->broken, "a message after the program's result");
    } else if (op == VG_BRIDGE_BAD) {
        x->stop = STOP_BROKEN;
        snprintf(x->broken, sizeof x->broken, "a bridge message was refused: %s", m.why);
    } else if (op == VG_BRIDGE_RESULT || op == VG_BRIDGE_ERROR) {
        take_final(x, &m);
    } else if (op == VG_BRIDGE_TOOL) {
        answer_tool(x, &m);
    } else if (op == VG_BRIDGE_FETCH) {
        answer_fetch(x, &m);
    } else {
        answer_file(x, &m);
    }
    vg_bridge_msg_release(&m);
}

/* ---- the wait loop ------------------------------------------------------------------------ */

/* The whole lines read so far, in order; a fetch under way holds the rest back. */
static void handle_lines(struct exec *x)
{
    const char *line;
    size_t len;
    while (x->stop == STOP_NONE && !x->fetch && vg_bridge_reader_next(&x->rd, &line, &len))
        handle_line(x, line, len);
    if (x->rd.overflow && x->stop == STOP_NONE) {
        x->stop = STOP_BROKEN;
        snprintf(x->broken, sizeof x->broken, "a bridge message longer than %u bytes",
                 VG_BRIDGE_MAX_LINE);
    }
}

/* What a read of a pipe gave: READ_CLOSED (end or error), READ_NONE (nothing now), READ_DATA. */
enum { READ_CLOSED, READ_NONE, READ_DATA };

static int read_some(int fd, char *buf, size_t cap, ssize_t *n)
{
    *n = read(fd, buf, cap);
    if (*n < 0)
        return errno == EAGAIN || errno == EINTR ? READ_NONE : READ_CLOSED;
    return *n ? READ_DATA : READ_CLOSED;
}

static int read_messages(struct exec *x)
{
    char buf[65536];
    ssize_t n;
    int got = read_some(x->msg_fd, buf, sizeof buf, &n);
    if (got != READ_DATA)
        return got;
    if (vg_bridge_reader_feed(&x->rd, buf, (size_t)n, NULL)) {
        x->stop = STOP_BROKEN;
        snprintf(x->broken, sizeof x->broken, "out of memory reading the program's messages");
    }
    handle_lines(x);
    return READ_DATA;
}

/* Keep the first output_bytes; count the rest and drop it. */
static int read_output(struct exec *x)
{
    char buf[65536];
    ssize_t n;
    int got = read_some(x->out_fd, buf, sizeof buf, &n);
    if (got != READ_DATA)
        return got;
    size_t room = x->q->lim.output_bytes - x->out_len;
    size_t take = VG_MIN(room, (size_t)n);
    if (take) {
        char *b = vg_realloc(x->out, x->out_len + take + 1);
        if (b) {
            memcpy(b + x->out_len, buf, take);
            x->out = b;
            x->out_len += take;
        }
    }
    x->out_seen += (size_t)n;
    return READ_DATA;
}

static void write_answers(struct exec *x)
{
    while (x->ans_off < x->ans_len) {
        ssize_t n = send(x->ans_fd, x->ans + x->ans_off, x->ans_len - x->ans_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) {
            if (n < 0 && errno != EAGAIN && errno != EINTR)
                x->ans_off = x->ans_len; /* the child is gone: nothing to deliver */
            break;
        }
        x->ans_off += (size_t)n;
    }
    if (x->ans_off == x->ans_len)
        x->ans_off = x->ans_len = 0;
}

/* The child's seccomp listener, sent once over the answer socket before it runs the program;
 * whatever else comes there is not read. */
static void take_listener(struct exec *x)
{
    char byte, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = {.iov_base = &byte, .iov_len = 1};
    struct msghdr m = {
        .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(x->ans_fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    x->await_listener = 0;
    struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&m) : NULL;
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        memcpy(&x->listener_fd, CMSG_DATA(c), sizeof(int));
}

/* A forbidden system call, held by the kernel until the host answers: its number and name are
 * noted, and the child is stopped (killed at the loop's end; the call never runs). */
static void take_syscall(struct exec *x, short revents)
{
    struct seccomp_notif n;
    memset(&n, 0, sizeof n);
    if ((revents & POLLIN) && ioctl(x->listener_fd, SECCOMP_IOCTL_NOTIF_RECV, &n) == 0) {
        char *name = seccomp_syscall_resolve_num_arch(n.data.arch, n.data.nr);
        snprintf(x->syscall_name, sizeof x->syscall_name, "%s", name ? name : "unknown");
        x->syscall_nr = n.data.nr;
        free(name);
        x->stop = STOP_SYSCALL;
        return;
    }
    if (revents & (POLLHUP | POLLERR)) { /* no process is left under the filter */
        close(x->listener_fd);
        x->listener_fd = -1;
    }
}

/* Why the host stops the program now, by its own clock: the host stopping for good (halt,
 * looked at on every turn: a flag) or a person cancelling the run (a store read: asked once a
 * second). A program whose run was cancelled is killed at once rather than left to run out its
 * wall time (trial L6). */
static enum stop stopped_from_outside(struct exec *x, int64_t now)
{
    const struct vg_code_request *q = x->q;
    if (q->halt && *q->halt)
        return STOP_HALTED;
    if (q->cancelled && !x->cancel_next_ns) /* a program that ends within a second: no read */
        x->cancel_next_ns = now + 1000000000LL;
    if (!q->cancelled || now < x->cancel_next_ns)
        return STOP_NONE;
    x->cancel_next_ns = now + 1000000000LL;
    if (!q->cancelled(q->cancelled_user))
        return STOP_NONE;
    return q->halt && *q->halt ? STOP_HALTED : STOP_CANCELED; /* the observer says yes to both */
}

/* Until the child's pipes are closed and it either exited or gave its last word (a Lua child
 * closes its pipes after its result, before it exits: the exit, which tears its address space
 * down, is not waited for). Whether it exited. */
static int wait_loop(struct exec *x, int direct_files)
{
    int msg_open = 1, out_open = 1, exited = x->child.pidfd < 0;
    int wait_ms = direct_files ? (int)(DIR_CHECK_NS / 1000000) : 1000;
    while ((msg_open || out_open || !(exited || x->final)) && x->stop == STOP_NONE) {
        struct pollfd p[7];
        unsigned n = 0;
        int im = -1, io = -1, ip = -1, ia = -1, iff = -1, il = -1, in = -1;
        if (x->await_listener)
            il = (int)n, p[n++] = (struct pollfd){.fd = x->ans_fd, .events = POLLIN};
        if (x->listener_fd >= 0)
            in = (int)n, p[n++] = (struct pollfd){.fd = x->listener_fd, .events = POLLIN};
        if (msg_open && !x->fetch)
            im = (int)n, p[n++] = (struct pollfd){.fd = x->msg_fd, .events = POLLIN};
        if (x->fetch)
            iff = (int)n,
            p[n++] = (struct pollfd){.fd = vg_fetch_done_fd(x->fetch), .events = POLLIN};
        if (out_open)
            io = (int)n, p[n++] = (struct pollfd){.fd = x->out_fd, .events = POLLIN};
        if (!exited)
            ip = (int)n, p[n++] = (struct pollfd){.fd = x->child.pidfd, .events = POLLIN};
        if (x->ans_len)
            ia = (int)n, p[n++] = (struct pollfd){.fd = x->ans_fd, .events = POLLOUT};
        int64_t now = vg_clock_mono_ns(vg_clock_real()), left = (x->deadline_ns - now) / 1000000;
        if (left <= 0) {
            x->stop = STOP_TIMEOUT;
            break;
        }
        if ((x->stop = stopped_from_outside(x, now)) != STOP_NONE) /* the poll waits 1 s at most */
            break;
        if (direct_files)
            watch_dir(x, now, 0);
        if (x->stop != STOP_NONE || vg_fiber_poll(p, n, (int)VG_MIN(left, wait_ms)) <= 0)
            continue;
        if (im >= 0 && p[im].revents)
            msg_open = read_messages(x) != READ_CLOSED;
        if (io >= 0 && p[io].revents)
            out_open = read_output(x) != READ_CLOSED;
        if (ia >= 0 && p[ia].revents)
            write_answers(x);
        if (ip >= 0 && p[ip].revents)
            exited = 1;
        if (il >= 0 && p[il].revents)
            take_listener(x);
        if (in >= 0 && p[in].revents)
            take_syscall(x, p[in].revents);
        if (iff >= 0 && p[iff].revents) {
            fetch_ended(x);
            handle_lines(x);
        }
    }
    if (x->fetch) { /* the execution ended first: the fetch ends on its own by the deadline */
        vg_fetch_abandon(x->fetch);
        x->fetch = NULL;
        vg_free(x->fetch_url);
        x->fetch_url = NULL;
    }
    return exited;
}

/* ---- one execution ------------------------------------------------------------------------ */

static void classify_end(struct exec *x, int status)
{
    struct vg_code_result *r = x->r;
    const struct vg_code_limits *l = &x->q->lim;
    if (x->stop == STOP_SYSCALL && x->final) { /* on its way out: the answer stands, noted */
        char why[128];
        snprintf(why, sizeof why,
                 "a system call the sandbox forbids (%s, number %d), after the "
                 "program's answer",
                 x->syscall_name, x->syscall_nr);
        note_refusal(r, "syscall", x->syscall_name, "sandbox_violation", why);
    } else if (x->stop == STOP_TIMEOUT) {
        fail(r, "timeout",
             "the program ran longer than its wall-time limit of %d ms and was "
             "stopped",
             l->wall_ms);
    } else if (x->stop == STOP_HALTED) {
        fail(r, "interrupted",
             "the program was killed: vigil stopped while it ran (its grace period ended)");
    } else if (x->stop == STOP_CANCELED) {
        fail(r, "canceled",
             "the program was killed: its run was cancelled while it ran; what it wrote in its "
             "working directory stays there");
    } else if (x->stop == STOP_BROKEN) {
        fail(r, "bridge_error", "the program was stopped: %s", x->broken);
        note_refusal(r, "bridge", NULL, "bridge_error", x->broken);
    } else if (x->stop == STOP_DIR) {
        json_decref(r->result);
        r->result = NULL;
        fail(r, "dir_limit",
             "the program's files took the working directory to %lld bytes, over its limit of "
             "%lld (sandbox limits.dir_bytes); it was stopped: remove files to make room",
             x->dir_used, x->dir_ceiling);
        note_refusal(r, "write", NULL, "dir_limit", r->error_message);
    } else if (x->stop == STOP_SYSCALL) {
        fail(r, "sandbox_violation",
             "the program made a system call the sandbox forbids (%s, number %d) and was stopped",
             x->syscall_name, x->syscall_nr);
        note_refusal(r, "syscall", x->syscall_name, "sandbox_violation", r->error_message);
    } else if (x->final) {
        return;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 125) {
        fail(r, "sandbox_unavailable", "%.*s", (int)VG_MIN(x->out_len, 400),
             x->out ? x->out : "the sandbox could not be set up");
    } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS) {
        fail(r, "sandbox_violation",
             "the program made a system call the sandbox forbids and "
             "was stopped");
        note_refusal(r, "syscall", NULL, "sandbox_violation", r->error_message);
    } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL &&
               r->cpu_ms * 2 >= (int64_t)l->cpu_ms) {
        /* Not the host's kill, and the child cannot signal: the kernel's RLIMIT_CPU (whose
         * clock runs ahead of the rusage the host reads back, hence the margin). */
        fail(r, "cpu_limit", "the program used more than its CPU-time limit of %d ms", l->cpu_ms);
    } else {
        fail(r, "runtime_error", "the program ended without a result (%s %d)",
             WIFSIGNALED(status) ? "signal" : "exit status",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
}

static void finish_output(struct exec *x)
{
    struct vg_code_result *r = x->r;
    char marker[96] = "";
    if (x->out_seen > x->out_len) {
        r->output_truncated = 1;
        snprintf(marker, sizeof marker, "\n[output truncated: %zu of %zu bytes shown]\n",
                 x->out_len, x->out_seen);
    }
    size_t m = strlen(marker);
    char *b = vg_realloc(x->out, x->out_len + m + 1);
    if (!b) {
        vg_free(x->out);
        r->output = NULL;
        r->output_len = 0;
    } else {
        memcpy(b + x->out_len, marker, m + 1);
        r->output = b;
        r->output_len = x->out_len + m;
    }
    x->out = NULL;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static vigil_code open_channels(struct exec *x, int msg[2], int out[2], int ans[2],
                                vigil_error *err)
{
    if (pipe2(msg, O_CLOEXEC) || pipe2(out, O_CLOEXEC) ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ans))
        return VG_FAIL(err, VIGIL_EIO, "could not make the sandbox's pipes: %s", strerror(errno));
    fcntl(msg[0], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    x->msg_fd = msg[0];
    x->out_fd = out[0];
    x->ans_fd = ans[0];
    return VIGIL_OK;
}

/* Nothing may outlive the execution, even at a clean end: the child is killed. One that gave
 * its result and closed its pipes is reaped on the reaper thread, its CPU time and cgroup
 * counters read first (they are final), so the answer does not wait for the kernel's teardown;
 * any other is reaped here, for its exit status. */
static int end_child(struct exec *x, int exited)
{
    int status = 0;
    struct vg_sandbox_cg *cg = &x->child.cg;
    if (!exited && x->final && x->stop == STOP_NONE &&
        !vg_sandbox_cpu_ms(x->child.pid, &x->r->cpu_ms)) {
        vg_sandbox_kill(&x->child);
        vg_sandbox_cg_read(cg);
    } else {
        vg_sandbox_kill(&x->child);
        vg_sandbox_reap(&x->child, &status, &x->r->cpu_ms);
    }
    x->r->cg_memory_hits = cg->memory_hits;
    x->r->cg_oom_kills = cg->oom_kills;
    x->r->cg_pids_refused = cg->pids_refused;
    x->r->cg_memory_peak = cg->memory_peak;
    vg_sandbox_zygote_answered(&x->child); /* the next spare's making may start */
    if (x->child.pid > 0)
        vg_sandbox_reap_later(&x->child);
    return status;
}

static vigil_code run_child(struct exec *x, const struct vg_code_child *c, vigil_error *err)
{
    const struct vg_code_request *q = x->q;
    int msg[2] = {-1, -1}, out[2] = {-1, -1}, ans[2] = {-1, -1};
    struct vg_sandbox_spec s = {.workdir = q->workdir,
                                .lim = q->lim,
                                .required = q->required,
                                .sandbox_uid = q->sandbox_uid,
                                .confine = c->confine,
                                .enter = c->enter,
                                .confine_user = c->confine_user};
    int64_t t0 = vg_clock_mono_ns(vg_clock_real());
    vigil_code rc = open_channels(x, msg, out, ans, err);
    if (!rc) {
        s.fd_in = ans[1], s.fd_out = msg[1], s.fd_err = out[1];
        x->deadline_ns = t0 + (int64_t)q->lim.wall_ms * 1000000;
        rc = c->payload_len
                 ? vg_sandbox_spawn_flat(&s, c->main, c->user, c->payload_len, &x->child, err)
                 : vg_sandbox_spawn(&s, c->main, c->user, &x->child, err);
    }
    close_fd(&msg[1]), close_fd(&out[1]), close_fd(&ans[1]);
    if (rc) {
        close_fd(&msg[0]), close_fd(&out[0]), close_fd(&ans[0]);
        if (rc != VIGIL_EUNSUPPORTED)
            return rc;
        fail(x->r, "sandbox_unavailable", "%s", err ? err->message : "a required layer is missing");
        return VIGIL_OK;
    }
    x->r->layers = x->child.applied;
    x->await_listener = c->syscall_listener && (x->child.applied & VG_SBX_SECCOMP);
    if (c->direct_files) /* while the child starts */
        watch_dir_start(x);
    int status = end_child(x, wait_loop(x, c->direct_files));
    if (c->direct_files && x->stop == STOP_NONE) /* what it wrote since the last measure */
        watch_dir(x, vg_clock_mono_ns(vg_clock_real()), 1);
    while (x->stop == STOP_NONE && read_output(x) == READ_DATA) /* what was still in the pipe */
        ;
    x->r->wall_ms = (vg_clock_mono_ns(vg_clock_real()) - t0) / 1000000;
    classify_end(x, status);
    close_fd(&msg[0]), close_fd(&out[0]), close_fd(&ans[0]), close_fd(&x->listener_fd);
    return VIGIL_OK;
}

vigil_code vg_code_exec(const struct vg_code_request *q, const struct vg_code_child *c,
                        struct vg_code_result *r, vigil_error *err)
{
    memset(r, 0, sizeof *r);
    struct exec x = {.q = q, .r = r, .msg_fd = -1, .out_fd = -1, .ans_fd = -1, .listener_fd = -1};
    x.dirfd = open(q->workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (x.dirfd < 0)
        return VG_FAIL(err, VIGIL_EIO, "could not open the working directory %s: %s", q->workdir,
                       strerror(errno));
    vigil_code rc = run_child(&x, c, err);
    close(x.dirfd);
    vg_bridge_reader_free(&x.rd);
    vg_free(x.ans);
    finish_output(&x);
    if (rc)
        vg_code_result_release(r);
    return rc;
}

static pthread_once_t warm_once = PTHREAD_ONCE_INIT;

static int lua_warm(void *user)
{
    (void)user;
    vg_lua_child_prepare();
    return 0;
}

/* The host resolves the interpreter's symbols once (its zygote and children inherit them), and
 * each spare child makes the interpreter its execution will use before its request. */
static void lua_warm_once(void)
{
    vg_lua_child_warm();
    vg_sandbox_zygote_warm(lua_warm);
}

static vigil_code lua_run(struct vg_code_runtime *rt, const struct vg_code_request *q,
                          struct vg_code_result *r, vigil_error *err)
{
    memset(r, 0, sizeof *r);
    pthread_once(&warm_once, lua_warm_once);
    if (q->code_len > q->lim.code_bytes) {
        fail(r, "code_too_large", "the program is %zu bytes; the limit is %zu", q->code_len,
             q->lim.code_bytes);
        return VIGIL_OK;
    }
    /* The child's input, flat: the zygote makes the child and gets it as bytes. */
    struct vg_lua_child *lc = vg_malloc(sizeof *lc + q->code_len);
    if (!lc)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting the program");
    lc->memory_bytes = q->lim.memory_bytes;
    lc->code_len = q->code_len;
    memcpy(lc->code, q->code, q->code_len);
    struct vg_code_child c = {
        .main = vg_lua_child_main, .user = lc, .payload_len = sizeof *lc + q->code_len};
    vigil_code rc = vg_code_exec(q, &c, r, err);
    vg_free(lc);
    return rc;
}

static const struct vg_code_runtime_methods lua_methods = {.name = "lua", .run = lua_run};
static struct vg_code_runtime lua_runtime = {&lua_methods};

struct vg_code_runtime *vg_code_runtime_lua(void)
{
    return &lua_runtime;
}

vigil_code vg_code_run(struct vg_code_runtime *rt, const struct vg_code_request *q,
                       struct vg_code_result *r, vigil_error *err)
{
    return rt->methods->run(rt, q, r, err);
}

void vg_code_result_release(struct vg_code_result *r)
{
    json_decref(r->refusals);
    r->refusals = NULL;
    json_decref(r->result);
    vg_free(r->output);
    r->result = NULL;
    r->output = NULL;
}

json_t *vg_code_result_json(const struct vg_code_result *r)
{
    json_t *o = json_pack("{s:b, s:s%, s:b, s:o, s:i, s:I, s:I}", "ok", r->ok, "output",
                          r->output ? r->output : "", r->output ? r->output_len : 0,
                          "output_truncated", r->output_truncated, "layers",
                          vg_sandbox_layers_json(r->layers), "tool_calls", r->tool_calls, "wall_ms",
                          (json_int_t)r->wall_ms, "cpu_ms", (json_int_t)r->cpu_ms);
    if (!o)
        return NULL;
    if (r->layers & VG_SBX_CGROUP) /* what the cgroup counted: its caps hit or not */
        json_object_set_new(o, "cgroup",
                            json_pack("{s:I, s:I, s:I, s:I}", "memory_hits",
                                      (json_int_t)r->cg_memory_hits, "oom_kills",
                                      (json_int_t)r->cg_oom_kills, "pids_refused",
                                      (json_int_t)r->cg_pids_refused, "memory_peak",
                                      (json_int_t)r->cg_memory_peak));
    if (r->refusals_total) {
        json_object_set(o, "refusals", r->refusals ? r->refusals : json_array());
        json_object_set_new(o, "refusals_total", json_integer(r->refusals_total));
    }
    if (r->ok)
        json_object_set(o, "result", r->result ? r->result : json_null());
    else
        json_object_set_new(
            o, "error",
            json_pack("{s:s, s:s}", "code", r->error_code, "message", r->error_message));
    return o;
}
