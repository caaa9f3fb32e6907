/*
 * command.c: command tools: an external program run once per call, in its own process group,
 * that reads the arguments (a JSON object) on stdin and answers by the reply protocol on stdout.
 * The parent feeds stdin and drains stdout and stderr with poll() (vg_fiber_poll: on a fiber,
 * the fiber waits and its thread runs the others), so no pipe can fill up and block either
 * side; a deadline (clock port), an output cap and a non-zero exit each end the call, and the
 * whole process group is killed and reaped before the call returns.
 */
#include "base/common.h"

#include "base/buf.h"
#include "os/clock.h"
#include "os/fiber.h"
#include "tool/tool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define STDERR_KEEP 2048

struct cmd_provider {
    struct vg_tool_provider base; /* must stay first */
    json_t *contract;             /* owned */
    char **argv;                  /* owned, NULL-terminated */
    int timeout_ms;
    size_t max_output;
    struct vg_clock *clock;
};

static vigil_code m_list(struct vg_tool_provider *p, json_t **out, vigil_error *err)
{
    struct cmd_provider *c = (struct cmd_provider *)p;
    if (!(*out = json_pack("[O]", c->contract)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing a command tool");
    return VIGIL_OK;
}

/* environ plus the VIGIL_* call variables, built before fork (the child must not allocate). */
static char **make_env(const struct vg_tool_request *q, char extra[4][300])
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = vg_calloc(n + 5, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "VIGIL_TOOL=", 11) && strncmp(environ[i], "VIGIL_OPERATION_ID=", 19) &&
            strncmp(environ[i], "VIGIL_AGENT_ID=", 15) && strncmp(environ[i], "VIGIL_PREVIEW=", 14))
            env[k++] = environ[i];
    snprintf(extra[0], 300, "VIGIL_TOOL=%s", q->tool);
    snprintf(extra[1], 300, "VIGIL_OPERATION_ID=%s", q->operation_id ? q->operation_id : "");
    snprintf(extra[2], 300, "VIGIL_AGENT_ID=%s", q->agent_id);
    snprintf(extra[3], 300, "VIGIL_PREVIEW=%d", q->preview_only ? 1 : 0);
    for (int i = 0; i < 4; i++)
        env[k++] = extra[i];
    env[k] = NULL;
    return env;
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Kill the whole group and reap the leader; returns its wait status (or -1). */
static int kill_and_reap(pid_t pid, int already_reaped, int status)
{
    kill(-pid, SIGKILL); /* the group: grandchildren too */
    if (already_reaped)
        return status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}

/* One call's child process and the pipes to it, shared by spawn, pump and reap. */
struct cmd_call {
    int in[2], outp[2], errp[2];
    char extra[4][300];
    char **env;
    char *input;
    size_t in_len, in_off;
    struct vg_buf out, ebuf;
    pid_t pid;
    int status, reaped, timed_out, too_big;
    int open_in, open_out, open_err;
    int64_t deadline;
};

static void call_init(struct cmd_call *k, const struct cmd_provider *c)
{
    memset(k, 0, sizeof *k);
    for (int i = 0; i < 2; i++)
        k->in[i] = k->outp[i] = k->errp[i] = -1;
    k->pid = -1;
    vg_buf_init(&k->out, c->max_output);
    vg_buf_init(&k->ebuf, VG_BUF_DEFAULT_MAX);
}

/* Forks the command with its stdio on fresh pipes; the parent keeps non-blocking ends. */
static vigil_code call_spawn(struct cmd_call *k, const struct cmd_provider *c,
                             const struct vg_tool_request *q, vigil_error *err)
{
    k->input = json_dumps(q->args, JSON_COMPACT | JSON_SORT_KEYS);
    k->env = make_env(q, k->extra);
    if (!k->input || !k->env)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting a command tool");
    /* stdin is a socket so a write to a child that quit is EPIPE, never SIGPIPE. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, k->in) || pipe2(k->outp, O_CLOEXEC) ||
        pipe2(k->errp, O_CLOEXEC))
        return VG_FAIL(err, VIGIL_EIO, "could not create pipes for command \"%s\": %s",
                       c->argv[0], strerror(errno));
    k->deadline = vg_clock_mono_ns(c->clock) + (int64_t)c->timeout_ms * 1000000;
    k->pid = fork();
    if (k->pid < 0)
        return VG_FAIL(err, VIGIL_EIO, "could not start command \"%s\": %s", c->argv[0],
                       strerror(errno));
    if (k->pid == 0) {
        /* Child: only async-signal-safe calls from here on. */
        setpgid(0, 0);
        dup2(k->in[1], 0);
        dup2(k->outp[1], 1);
        dup2(k->errp[1], 2);
        execvpe(c->argv[0], c->argv, k->env);
        static const char msg[] = "vigil: could not execute the command\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(127);
    }
    setpgid(k->pid, k->pid); /* also here, so the group exists before we might kill it */
    close(k->in[1]), k->in[1] = -1;
    close(k->outp[1]), k->outp[1] = -1;
    close(k->errp[1]), k->errp[1] = -1;
    set_nonblock(k->in[0]);
    set_nonblock(k->outp[0]);
    set_nonblock(k->errp[0]);
    k->in_len = strlen(k->input);
    k->open_in = k->open_out = k->open_err = 1;
    return VIGIL_OK;
}

/* Feeds stdin as far as the socket takes it; closes it when all is sent or the child won't read. */
static void pump_stdin(struct cmd_call *k)
{
    ssize_t w = send(k->in[0], k->input + k->in_off, k->in_len - k->in_off, MSG_NOSIGNAL);
    if (w > 0)
        k->in_off += (size_t)w;
    if (w < 0 && errno != EAGAIN && errno != EINTR)
        k->in_off = k->in_len; /* the child does not read stdin: fine */
    if (k->in_off == k->in_len) {
        shutdown(k->in[0], SHUT_WR);
        k->open_in = 0;
    }
}

/* Drains stdout into the capped buffer; sets too_big when the cap is hit. */
static void pump_stdout(struct cmd_call *k)
{
    char chunk[8192];
    ssize_t n = read(k->outp[0], chunk, sizeof chunk);
    if (n > 0) {
        vg_buf_append(&k->out, chunk, (size_t)n);
        if (k->out.fail)
            k->too_big = 1;
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        k->open_out = 0;
    }
}

/* Drains stderr, keeping only its tail for the failure message. */
static void pump_stderr(struct cmd_call *k)
{
    char chunk[8192];
    ssize_t n = read(k->errp[0], chunk, sizeof chunk);
    if (n > 0) {
        vg_buf_append(&k->ebuf, chunk, (size_t)n);
        if (k->ebuf.len > 4 * STDERR_KEEP) { /* keep only the tail */
            memmove(k->ebuf.data, k->ebuf.data + k->ebuf.len - STDERR_KEEP, STDERR_KEEP);
            k->ebuf.len = STDERR_KEEP;
            k->ebuf.data[k->ebuf.len] = '\0';
        }
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        k->open_err = 0;
    }
}

/* Moves bytes both ways until the output closes and the child exits, the deadline passes or the
 * output cap is hit. */
static vigil_code call_pump(struct cmd_call *k, const struct cmd_provider *c, vigil_error *err)
{
    while (k->open_out || k->open_err || !k->reaped) {
        int64_t left_ns = k->deadline - vg_clock_mono_ns(c->clock);
        if (left_ns <= 0) {
            k->timed_out = 1;
            return VIGIL_OK;
        }
        struct pollfd fds[3];
        int nf = 0, io = -1, oo = -1, eo = -1;
        if (k->open_in)
            io = nf, fds[nf++] = (struct pollfd){.fd = k->in[0], .events = POLLOUT};
        if (k->open_out)
            oo = nf, fds[nf++] = (struct pollfd){.fd = k->outp[0], .events = POLLIN};
        if (k->open_err)
            eo = nf, fds[nf++] = (struct pollfd){.fd = k->errp[0], .events = POLLIN};
        int wait_ms = (int)VG_MIN(left_ns / 1000000 + 1, 1000);
        if (!k->open_out && !k->open_err) {
            /* Output closed: wait for the exit, a few ms at a time, up to the deadline. */
            pid_t w = waitpid(k->pid, &k->status, WNOHANG);
            if (w == k->pid) {
                k->reaped = 1;
                continue;
            }
            wait_ms = VG_MIN(wait_ms, 5);
        }
        /* On a worker's fiber this parks the run, not the thread: the worker's other runs go
         * on while the command works. */
        int pr = vg_fiber_poll(fds, (unsigned)nf, wait_ms);
        if (pr < 0 && errno != EINTR)
            return VG_FAIL(err, VIGIL_EIO, "poll failed for command \"%s\": %s", c->argv[0],
                           strerror(errno));
        if (pr <= 0)
            continue;
        if (io >= 0 && fds[io].revents)
            pump_stdin(k);
        if (oo >= 0 && fds[oo].revents) {
            pump_stdout(k);
            if (k->too_big)
                return VIGIL_OK;
        }
        if (eo >= 0 && fds[eo].revents)
            pump_stderr(k);
    }
    return VIGIL_OK;
}

/* The call's answer from how it ended: timeout, too much output, a failed exit, or the reply. */
static void call_verdict(const struct cmd_call *k, const struct cmd_provider *c,
                         struct vg_tool_response *r)
{
    int status = k->status;
    if (k->timed_out) {
        vg_tool_response_fail(r, VG_TOOL_TIMEOUT, "command \"%s\" ran past %d ms and was killed",
                              c->argv[0], c->timeout_ms);
    } else if (k->too_big) {
        vg_tool_response_fail(r, VG_TOOL_FAILED,
                              "command \"%s\" wrote more than %zu bytes and was killed",
                              c->argv[0], c->max_output);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        const char *tail = k->ebuf.len > 200 ? k->ebuf.data + k->ebuf.len - 200 : k->ebuf.data;
        vg_tool_response_fail(r, VG_TOOL_FAILED, "command \"%s\" %s %d%s%s", c->argv[0],
                              WIFEXITED(status) ? "exited with status" : "was killed by signal",
                              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                              k->ebuf.len ? ": " : "", tail);
    } else {
        vg_tool_reply_parse(k->out.data, k->out.len, r);
    }
}

/* Kills the whole group and reaps the leader, whatever ended the call, before it returns. */
static void call_reap(struct cmd_call *k)
{
    if (k->pid > 0)
        k->status = kill_and_reap(k->pid, k->reaped, k->status);
    k->pid = -1;
}

/* Closes the pipes and frees the buffers; the child is already reaped. */
static void call_release(struct cmd_call *k)
{
    for (int i = 0; i < 2; i++) {
        if (k->in[i] >= 0)
            close(k->in[i]);
        if (k->outp[i] >= 0)
            close(k->outp[i]);
        if (k->errp[i] >= 0)
            close(k->errp[i]);
    }
    vg_buf_release(&k->out);
    vg_buf_release(&k->ebuf);
    vg_free(k->input);
    vg_free(k->env);
}

static vigil_code m_call(struct vg_tool_provider *p, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err)
{
    struct cmd_provider *c = (struct cmd_provider *)p;
    struct cmd_call k;
    call_init(&k, c);
    vigil_code rc = call_spawn(&k, c, q, err);
    if (rc == VIGIL_OK)
        rc = call_pump(&k, c, err);
    call_reap(&k);
    if (rc == VIGIL_OK)
        call_verdict(&k, c, r);
    call_release(&k);
    return rc;
}

static void m_destroy(struct vg_tool_provider *p)
{
    struct cmd_provider *c = (struct cmd_provider *)p;
    for (size_t i = 0; c->argv && c->argv[i]; i++)
        vg_free(c->argv[i]);
    vg_free(c->argv);
    json_decref(c->contract);
    vg_free(c);
}

static const struct vg_tool_provider_methods cmd_methods = {
    .version = 1, .name = "command", .caps = 0, .list = m_list, .call = m_call,
    .lookup = NULL, .destroy = m_destroy};

vigil_code vg_tool_command_provider(const json_t *contract,
                                    const struct vg_tool_command_options *o,
                                    struct vg_tool_provider **out, vigil_error *err)
{
    size_t n = 0;
    if (!o || !o->argv || !o->argv[0] || !*o->argv[0])
        return VG_FAIL(err, VIGIL_EINVAL, "a command tool needs a program (argv[0])");
    while (o->argv[n])
        n++;
    struct cmd_provider *c = vg_calloc(1, sizeof *c);
    if (!c)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory registering a command tool");
    c->base.methods = &cmd_methods;
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
    c->max_output = o->max_output ? o->max_output : (size_t)1 << 20;
    c->clock = o->clock ? o->clock : vg_clock_real();
    c->contract = json_deep_copy(contract);
    c->argv = vg_calloc(n + 1, sizeof *c->argv);
    for (size_t i = 0; c->argv && i < n; i++)
        if (!(c->argv[i] = vg_strdup(o->argv[i])))
            break;
    if (!c->contract || !c->argv || (n && !c->argv[n - 1])) {
        m_destroy(&c->base);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory registering a command tool");
    }
    *out = &c->base;
    return VIGIL_OK;
}
