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

static vigil_code m_call(struct vg_tool_provider *p, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err)
{
    struct cmd_provider *c = (struct cmd_provider *)p;
    int in[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1};
    char extra[4][300];
    char **env = NULL;
    char *input = NULL;
    struct vg_buf out, ebuf;
    vigil_code rc = VIGIL_OK;
    pid_t pid = -1;
    int status = 0, reaped = 0, timed_out = 0, too_big = 0;

    vg_buf_init(&out, c->max_output);
    vg_buf_init(&ebuf, VG_BUF_DEFAULT_MAX);
    input = json_dumps(q->args, JSON_COMPACT | JSON_SORT_KEYS);
    env = make_env(q, extra);
    if (!input || !env) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting a command tool");
        goto out;
    }
    /* stdin is a socket so a write to a child that quit is EPIPE, never SIGPIPE. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) || pipe2(outp, O_CLOEXEC) ||
        pipe2(errp, O_CLOEXEC)) {
        rc = VG_FAIL(err, VIGIL_EIO, "could not create pipes for command \"%s\": %s",
                     c->argv[0], strerror(errno));
        goto out;
    }
    int64_t deadline = vg_clock_mono_ns(c->clock) + (int64_t)c->timeout_ms * 1000000;
    pid = fork();
    if (pid < 0) {
        rc = VG_FAIL(err, VIGIL_EIO, "could not start command \"%s\": %s", c->argv[0],
                     strerror(errno));
        goto out;
    }
    if (pid == 0) {
        /* Child: only async-signal-safe calls from here on. */
        setpgid(0, 0);
        dup2(in[1], 0);
        dup2(outp[1], 1);
        dup2(errp[1], 2);
        execvpe(c->argv[0], c->argv, env);
        static const char msg[] = "vigil: could not execute the command\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so the group exists before we might kill it */
    close(in[1]), in[1] = -1;
    close(outp[1]), outp[1] = -1;
    close(errp[1]), errp[1] = -1;
    set_nonblock(in[0]);
    set_nonblock(outp[0]);
    set_nonblock(errp[0]);

    size_t in_len = strlen(input), in_off = 0;
    int open_out = 1, open_err = 1, open_in = 1;
    while (open_out || open_err || !reaped) {
        int64_t left_ns = deadline - vg_clock_mono_ns(c->clock);
        if (left_ns <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd fds[3];
        int nf = 0, io = -1, oo = -1, eo = -1;
        if (open_in)
            io = nf, fds[nf++] = (struct pollfd){.fd = in[0], .events = POLLOUT};
        if (open_out)
            oo = nf, fds[nf++] = (struct pollfd){.fd = outp[0], .events = POLLIN};
        if (open_err)
            eo = nf, fds[nf++] = (struct pollfd){.fd = errp[0], .events = POLLIN};
        int wait_ms = (int)VG_MIN(left_ns / 1000000 + 1, 1000);
        if (!open_out && !open_err) {
            /* Output closed: wait for the exit, a few ms at a time, up to the deadline. */
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) {
                reaped = 1;
                continue;
            }
            wait_ms = VG_MIN(wait_ms, 5);
        }
        /* On a worker's fiber this parks the run, not the thread: the worker's other runs go
         * on while the command works. */
        int pr = vg_fiber_poll(fds, (unsigned)nf, wait_ms);
        if (pr < 0 && errno != EINTR) {
            rc = VG_FAIL(err, VIGIL_EIO, "poll failed for command \"%s\": %s", c->argv[0],
                         strerror(errno));
            break;
        }
        if (pr <= 0)
            continue;
        if (io >= 0 && fds[io].revents) {
            ssize_t w = send(in[0], input + in_off, in_len - in_off, MSG_NOSIGNAL);
            if (w > 0)
                in_off += (size_t)w;
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                in_off = in_len; /* the child does not read stdin: fine */
            if (in_off == in_len) {
                shutdown(in[0], SHUT_WR);
                open_in = 0;
            }
        }
        char chunk[8192];
        if (oo >= 0 && fds[oo].revents) {
            ssize_t n = read(outp[0], chunk, sizeof chunk);
            if (n > 0) {
                vg_buf_append(&out, chunk, (size_t)n);
                if (out.fail) {
                    too_big = 1;
                    break;
                }
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                open_out = 0;
            }
        }
        if (eo >= 0 && fds[eo].revents) {
            ssize_t n = read(errp[0], chunk, sizeof chunk);
            if (n > 0) {
                vg_buf_append(&ebuf, chunk, (size_t)n);
                if (ebuf.len > 4 * STDERR_KEEP) { /* keep only the tail */
                    memmove(ebuf.data, ebuf.data + ebuf.len - STDERR_KEEP, STDERR_KEEP);
                    ebuf.len = STDERR_KEEP;
                    ebuf.data[ebuf.len] = '\0';
                }
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                open_err = 0;
            }
        }
    }
    status = kill_and_reap(pid, reaped, status);
    pid = -1;
    if (rc)
        goto out;
    if (timed_out) {
        vg_tool_response_fail(r, VG_TOOL_TIMEOUT, "command \"%s\" ran past %d ms and was killed",
                              c->argv[0], c->timeout_ms);
    } else if (too_big) {
        vg_tool_response_fail(r, VG_TOOL_FAILED,
                              "command \"%s\" wrote more than %zu bytes and was killed",
                              c->argv[0], c->max_output);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        const char *tail = ebuf.len > 200 ? ebuf.data + ebuf.len - 200 : ebuf.data;
        vg_tool_response_fail(r, VG_TOOL_FAILED, "command \"%s\" %s %d%s%s", c->argv[0],
                              WIFEXITED(status) ? "exited with status" : "was killed by signal",
                              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                              ebuf.len ? ": " : "", tail);
    } else {
        vg_tool_reply_parse(out.data, out.len, r);
    }
out:
    if (pid > 0)
        kill_and_reap(pid, 0, 0);
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (outp[i] >= 0)
            close(outp[i]);
        if (errp[i] >= 0)
            close(errp[i]);
    }
    vg_buf_release(&out);
    vg_buf_release(&ebuf);
    vg_free(input);
    vg_free(env);
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
