/*
 * command.c: command tools: an external program run once per call, in its own process group,
 * that reads the arguments (a JSON object) on stdin and answers by the reply protocol on stdout.
 * The parent feeds stdin and drains stdout and stderr with poll() (vg_fiber_poll: on a fiber,
 * the fiber waits and its thread runs the others), so no pipe can fill up and block either
 * side; a deadline (clock port), an output cap and a non-zero exit each end the call, and the
 * whole process group is killed and reaped before the call returns.
 */
#include "base/common.h"
#include "base/json.h"

#include "base/buf.h"
#include "os/clock.h"
#include "os/fiber.h"
#include "os/fs.h"
#include "tool/tool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define STDERR_KEEP 2048

struct cmd_provider {
    struct vg_tool_provider base; /* must stay first */
    json_t *contract;             /* owned */
    char **argv;                  /* owned, NULL-terminated */
    char *cwd;                    /* owned; NULL: the caller's */
    char **env_allow;             /* owned, NULL-terminated; used with minimal_env */
    char **env_set;               /* owned "NAME=template", NULL-terminated */
    int minimal_env;
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

/* Strings made for one call (expanded argv and environment), freed after it. */
struct call_strings {
    char **argv; /* NULL-terminated */
    char **env;  /* NULL-terminated; entries point into environ, extra or own */
    char **own;  /* what this call allocated */
    size_t n_own;
};

static void call_strings_release(struct call_strings *s)
{
    for (size_t i = 0; i < s->n_own; i++)
        vg_free(s->own[i]);
    vg_free(s->own);
    vg_free(s->argv);
    vg_free(s->env);
}

/* A template with ${NAME} replaced by the environment's value and "$${" by "${", owned. NULL
 * with *missing set to the unset name (a secret never leaves the process any other way). */
static char *expand(const char *t, char missing[128])
{
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    for (const char *p = t; *p;) {
        if (!strncmp(p, "$${", 3)) { /* a literal "${" */
            vg_buf_puts(&b, "${");
            p += 3;
            continue;
        }
        const char *close = !strncmp(p, "${", 2) ? strchr(p + 2, '}') : NULL;
        if (!close) {
            vg_buf_putc(&b, *p++);
            continue;
        }
        snprintf(missing, 128, "%.*s", (int)(close - p - 2), p + 2);
        const char *v = vg_os_getenv(missing);
        if (!v) {
            vg_buf_release(&b);
            return NULL;
        }
        vg_buf_puts(&b, v);
        p = close + 1;
    }
    missing[0] = '\0';
    char *out = b.fail ? NULL : vg_strndup(b.data ? b.data : "", b.len);
    vg_buf_release(&b);
    return out;
}

static int keep_own(struct call_strings *s, char *str)
{
    if (!str)
        return 0;
    s->own[s->n_own++] = str;
    return 1;
}

static int allowed_name(const struct cmd_provider *c, const char *entry)
{
    static const char *const base[] = {"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"};
    size_t n = strcspn(entry, "=");
    for (size_t i = 0; i < VG_ARRAY_LEN(base); i++)
        if (strlen(base[i]) == n && !strncmp(entry, base[i], n))
            return 1;
    for (size_t i = 0; c->env_allow && c->env_allow[i]; i++)
        if (strlen(c->env_allow[i]) == n && !strncmp(entry, c->env_allow[i], n))
            return 1;
    return 0;
}

static int is_call_var(const char *e)
{
    return !strncmp(e, "VIGIL_TOOL=", 11) || !strncmp(e, "VIGIL_OPERATION_ID=", 19) ||
           !strncmp(e, "VIGIL_AGENT_ID=", 15) || !strncmp(e, "VIGIL_PREVIEW=", 14);
}

/*
 * argv and environment for one call, built before fork (the child must not allocate): the
 * whole environ (or, for a minimal environment, the base names and the allowlist), then the
 * declared variables, then the VIGIL_* call variables. 0 on success; -1 out of memory; 1 when a
 * ${NAME} reference names an unset variable (missing holds the name).
 */
static int make_call(const struct cmd_provider *c, const struct vg_tool_request *q,
                     char extra[4][300], struct call_strings *s, char missing[128])
{
    size_t n = 0, na = 0, ns = 0;
    while (environ && environ[n])
        n++;
    while (c->argv[na])
        na++;
    while (c->env_set && c->env_set[ns])
        ns++;
    s->env = vg_calloc(n + ns + 5, sizeof *s->env);
    s->argv = vg_calloc(na + 1, sizeof *s->argv);
    s->own = vg_calloc(na + ns + 1, sizeof *s->own);
    if (!s->env || !s->argv || !s->own)
        return -1;
    for (size_t i = 0; i < na; i++) {
        if (!strstr(c->argv[i], "${"))
            s->argv[i] = c->argv[i];
        else if (!keep_own(s, s->argv[i] = expand(c->argv[i], missing)))
            return missing[0] ? 1 : -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_call_var(environ[i]) && (!c->minimal_env || allowed_name(c, environ[i])))
            s->env[k++] = environ[i];
    for (size_t i = 0; i < ns; i++)
        if (!keep_own(s, s->env[k++] = expand(c->env_set[i], missing)))
            return missing[0] ? 1 : -1;
    snprintf(extra[0], 300, "VIGIL_TOOL=%s", q->tool);
    snprintf(extra[1], 300, "VIGIL_OPERATION_ID=%s", q->operation_id ? q->operation_id : "");
    snprintf(extra[2], 300, "VIGIL_AGENT_ID=%s", q->agent_id);
    snprintf(extra[3], 300, "VIGIL_PREVIEW=%d", q->preview_only ? 1 : 0);
    for (int i = 0; i < 4; i++)
        s->env[k++] = extra[i];
    s->env[k] = NULL;
    return 0;
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
    char missing[128];      /* the unset variable a ${NAME} reference names, if any */
    struct call_strings cs; /* expanded argv and environment */
    char *input;
    size_t in_len, in_off;
    struct vg_buf out, ebuf;
    pid_t pid;
    int status, reaped, timed_out, too_big, halted;
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

/* A command that could not be started reads as one that exited at once: 126 when its working
 * directory could not be entered, 127 otherwise (a shell's codes), with the reason on stderr. */
static void call_start_failed(struct cmd_call *k, const struct cmd_provider *c, int e)
{
    struct stat st;
    int cwd_failed = c->cwd && (stat(c->cwd, &st) != 0 || !S_ISDIR(st.st_mode) ||
                                access(c->cwd, X_OK) != 0); /* chdir needs search permission */
    char msg[256];
    int n =
        snprintf(msg, sizeof msg, "vigil: could not %s: %s\n",
                 cwd_failed ? "enter the working directory" : "execute the command", strerror(e));
    vg_buf_append(&k->ebuf, msg, (size_t)VG_MIN(n, (int)sizeof msg - 1));
    k->status = (cwd_failed ? 126 : 127) << 8; /* as wait reports an exit with that status */
    k->reaped = 1;
}

/* A script without a "#!" line, run by /bin/sh as execvp runs it (glibc's posix_spawnp stopped
 * doing so in 2.26): the file as sh's first operand, then its arguments. Only a path names the
 * file for sh; a bare name keeps posix_spawnp's ENOEXEC. */
static int spawn_script(pid_t *pid, char **argv, char **env, const posix_spawn_file_actions_t *fa,
                        const posix_spawnattr_t *at)
{
    size_t n = 0;
    while (argv[n])
        n++;
    char **sh = strchr(argv[0], '/') ? vg_calloc(n + 2, sizeof *sh) : NULL;
    if (!sh)
        return ENOEXEC;
    sh[0] = "/bin/sh";
    memcpy(sh + 1, argv, (n + 1) * sizeof *sh); /* argv's NULL too */
    int e = posix_spawn(pid, "/bin/sh", fa, at, sh, env);
    vg_free(sh);
    return e;
}

/* Starts the command with its stdio on fresh pipes; the parent keeps non-blocking ends. A
 * ${NAME} reference to an unset variable starts nothing and leaves its name in k->missing.
 * posix_spawn, not fork: glibc's starts the child without copying the parent's page tables,
 * which in a daemon holding many agents cost milliseconds a call (docs/scale-out.md). */
static vigil_code call_spawn(struct cmd_call *k, const struct cmd_provider *c,
                             const struct vg_tool_request *q, vigil_error *err)
{
    k->input = vg_json_dumps(q->args, JSON_COMPACT | JSON_SORT_KEYS);
    int made = k->input ? make_call(c, q, k->extra, &k->cs, k->missing) : -1;
    if (made < 0)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting a command tool");
    if (made > 0)
        return VIGIL_OK;
    /* stdin is a socket so a write to a child that quit is EPIPE, never SIGPIPE. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, k->in) || pipe2(k->outp, O_CLOEXEC) ||
        pipe2(k->errp, O_CLOEXEC))
        return VG_FAIL(err, VIGIL_EIO, "could not create pipes for command \"%s\": %s", c->argv[0],
                       strerror(errno));
    k->deadline = vg_clock_mono_ns(c->clock) + (int64_t)c->timeout_ms * 1000000;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int e = posix_spawn_file_actions_init(&fa);
    if (e == 0 && (e = posix_spawnattr_init(&at)) != 0)
        posix_spawn_file_actions_destroy(&fa);
    if (e != 0)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting command \"%s\"", c->argv[0]);
    /* Its own process group (killed whole at the deadline); the pipes as its stdio. */
    e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    if (!e)
        e = posix_spawnattr_setpgroup(&at, 0);
    if (!e)
        e = posix_spawn_file_actions_adddup2(&fa, k->in[1], 0);
    if (!e)
        e = posix_spawn_file_actions_adddup2(&fa, k->outp[1], 1);
    if (!e)
        e = posix_spawn_file_actions_adddup2(&fa, k->errp[1], 2);
    if (!e && c->cwd)
        e = posix_spawn_file_actions_addchdir_np(&fa, c->cwd);
    pid_t pid = -1;
    if (!e)
        e = posix_spawnp(&pid, k->cs.argv[0], &fa, &at, k->cs.argv, k->cs.env);
    if (e == ENOEXEC)
        e = spawn_script(&pid, k->cs.argv, k->cs.env, &fa, &at);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (e == ENOMEM || e == EAGAIN)
        return VG_FAIL(err, VIGIL_EIO, "could not start command \"%s\": %s", c->argv[0],
                       strerror(e));
    if (e)
        call_start_failed(k, c, e);
    else
        k->pid = pid;
    close(k->in[1]), k->in[1] = -1;
    close(k->outp[1]), k->outp[1] = -1;
    close(k->errp[1]), k->errp[1] = -1;
    set_nonblock(k->in[0]);
    set_nonblock(k->outp[0]);
    set_nonblock(k->errp[0]);
    k->in_len = strlen(k->input);
    k->open_in = k->open_out = k->open_err = k->pid > 0;
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
static vigil_code call_pump(struct cmd_call *k, const struct cmd_provider *c,
                            const volatile int *halt, vigil_error *err)
{
    while (k->open_out || k->open_err || !k->reaped) {
        if (halt && *halt) { /* checked at least once a second: the poll waits no longer */
            k->halted = 1;
            return VIGIL_OK;
        }
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
    if (k->halted) { /* out of time as a timeout is: the executor's rules for one apply */
        vg_tool_response_fail(r, VG_TOOL_TIMEOUT,
                              "command \"%s\" was killed: vigil stopped while it ran (its grace "
                              "period ended)",
                              c->argv[0]);
    } else if (k->timed_out) {
        vg_tool_response_fail(r, VG_TOOL_TIMEOUT, "command \"%s\" ran past %d ms and was killed",
                              c->argv[0], c->timeout_ms);
    } else if (k->too_big) {
        vg_tool_response_fail(r, VG_TOOL_FAILED,
                              "command \"%s\" wrote more than %zu bytes and was killed", c->argv[0],
                              c->max_output);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        const char *tail = k->ebuf.len > 200 ? k->ebuf.data + k->ebuf.len - 200 : k->ebuf.data;
        vg_tool_response_fail(r, VG_TOOL_FAILED, "command \"%s\" %s %d%s%s", c->argv[0],
                              WIFEXITED(status) ? "exited with status" : "was killed by signal",
                              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                              k->ebuf.len ? ": " : "", tail);
        r->stopped = !WIFEXITED(status); /* it may have acted before the signal came */
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
    call_strings_release(&k->cs);
}

static vigil_code m_call(struct vg_tool_provider *p, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err)
{
    struct cmd_provider *c = (struct cmd_provider *)p;
    struct cmd_call k;
    call_init(&k, c);
    vigil_code rc = call_spawn(&k, c, q, err);
    /* The name only: a reference's value is never written. The user fixes it (not a failure of
     * the tool's): not_configured, EINVAL. */
    if (rc == VIGIL_OK && k.missing[0])
        vg_tool_response_fail(r, VG_TOOL_NOT_CONFIGURED,
                              "command \"%s\" needs the environment variable %s, which is "
                              "not set",
                              c->argv[0], k.missing);
    else if (rc == VIGIL_OK)
        rc = call_pump(&k, c, q->halt, err);
    call_reap(&k);
    if (rc == VIGIL_OK && !k.missing[0])
        call_verdict(&k, c, r);
    call_release(&k);
    return rc;
}

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        vg_free(v[i]);
    vg_free(v);
}

/* A NULL-terminated copy (owned); 0 out of memory. src NULL gives NULL and 1. */
static int copy_strv(const char *const *src, char ***out)
{
    size_t n = 0;
    *out = NULL;
    if (!src)
        return 1;
    while (src[n])
        n++;
    if (!(*out = vg_calloc(n + 1, sizeof **out)))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((*out)[i] = vg_strdup(src[i])))
            return 0;
    return 1;
}

static void m_destroy(struct vg_tool_provider *p)
{
    struct cmd_provider *c = (struct cmd_provider *)p;
    free_strv(c->argv);
    free_strv(c->env_allow);
    free_strv(c->env_set);
    vg_free(c->cwd);
    json_decref(c->contract);
    vg_free(c);
}

static const struct vg_tool_provider_methods cmd_methods = {.version = 1,
                                                            .name = "command",
                                                            .caps = 0,
                                                            .list = m_list,
                                                            .call = m_call,
                                                            .lookup = NULL,
                                                            .destroy = m_destroy};

vigil_code vg_tool_command_provider(const json_t *contract, const struct vg_tool_command_options *o,
                                    struct vg_tool_provider **out, vigil_error *err)
{
    if (!o || !o->argv || !o->argv[0] || !*o->argv[0])
        return VG_FAIL(err, VIGIL_EINVAL, "a command tool needs a program (argv[0])");
    struct cmd_provider *c = vg_calloc(1, sizeof *c);
    if (!c)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory registering a command tool");
    c->base.methods = &cmd_methods;
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
    c->max_output = o->max_output ? o->max_output : (size_t)1 << 20;
    c->clock = o->clock ? o->clock : vg_clock_real();
    c->minimal_env = o->minimal_env;
    c->contract = json_deep_copy(contract);
    int copied = copy_strv(o->argv, &c->argv) && copy_strv(o->env_allow, &c->env_allow) &&
                 copy_strv(o->env_set, &c->env_set) && (!o->cwd || (c->cwd = vg_strdup(o->cwd)));
    if (!c->contract || !copied) {
        m_destroy(&c->base);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory registering a command tool");
    }
    *out = &c->base;
    return VIGIL_OK;
}
