/*
 * stdio.c: the child process of a stdio MCP server. Like a command tool (tool/command.c) it
 * runs in its own process group so stopping it reaches what it started (npx starts node), but
 * it lives across calls, and it gets a minimal environment: a server's tools can read their
 * environment back to the model (the everything server's get-env does), so vigil's own
 * variables and secrets stay out unless declared.
 */
#include "mcp/proc.h"

#include "os/clock.h"
#include "os/fiber.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *const inherited[] = {"HOME=", "LOGNAME=", "PATH=", "SHELL=", "TERM=", "USER="};

/* The child's environment; *owned gets the interpolated strings to wipe after the fork. */
static char **make_env(const struct vg_mcp_server_conf *s, char ***owned, char missing[130])
{
    size_t n = 0, k = 0, m = 0;
    while (s->env && s->env[n])
        n++;
    char **env = vg_calloc(VG_ARRAY_LEN(inherited) + n + 1, sizeof *env);
    char **own = vg_calloc(n + 1, sizeof *own);
    if (!env || !own) {
        vg_free(env);
        vg_free(own);
        return NULL;
    }
    for (size_t i = 0; environ && environ[i]; i++)
        for (size_t j = 0; j < VG_ARRAY_LEN(inherited); j++)
            if (!strncmp(environ[i], inherited[j], strlen(inherited[j]))) {
                size_t klen = strlen(inherited[j]);
                int declared = 0;
                for (size_t d = 0; d < n; d++)
                    declared |= !strncmp(s->env[d], inherited[j], klen);
                if (!declared)
                    env[k++] = environ[i];
            }
    for (size_t i = 0; i < n; i++) {
        if (!(own[m] = vg_mcp_interpolate(s->env[i], missing)))
            break;
        env[k++] = own[m++];
    }
    *owned = own;
    if (m < n) {
        vg_free(env);
        return NULL;
    }
    return env;
}

static void wipe(char **owned)
{
    for (size_t i = 0; owned && owned[i]; i++) {
        volatile char *p = owned[i];
        while (*p)
            *p++ = 0;
        vg_free(owned[i]);
    }
    vg_free(owned);
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void say(const char *text)
{
    ssize_t w = write(2, text, strlen(text));
    (void)w;
}

/* In the child after a failed exec: name the command and why, with write(2) alone (the parent
 * may have threads, so nothing that allocates or locks), then exit 127 as a shell would. The
 * parent shows these words as the server's last. */
static _Noreturn void exec_failed(const char *command, int e)
{
    say("vigil: could not execute the MCP server's command \"");
    say(command);
    say(e == ENOENT    ? "\": no such file, or not found on PATH\n"
        : e == EACCES  ? "\": permission denied (is it executable?)\n"
        : e == ENOEXEC ? "\": not an executable format (a script needs its #! line)\n"
                       : "\": the system refused to run it\n");
    _exit(127);
}

vigil_code vg_mcp_proc_start(const struct vg_mcp_server_conf *s, struct vg_mcp_proc *p,
                             vigil_error *err)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
    char **owned = NULL, missing[130] = "";
    char **env = make_env(s, &owned, missing);
    vigil_code rc = VIGIL_OK;
    *p = (struct vg_mcp_proc){.pid = 0, .in = -1, .out = -1, .err = -1};
    if (!env) {
        wipe(owned);
        if (missing[0])
            return VG_FAIL(err, VIGIL_EINVAL,
                           "MCP server \"%s\" needs the environment variable %s, which is not set",
                           s->name, missing);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting MCP server \"%s\"", s->name);
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) || pipe2(out, O_CLOEXEC) ||
        pipe2(er, O_CLOEXEC)) {
        rc = VG_FAIL(err, VIGIL_EIO, "could not create pipes for MCP server \"%s\": %s", s->name,
                     strerror(errno));
        goto done;
    }
    pid_t pid = fork();
    if (pid < 0) {
        rc = VG_FAIL(err, VIGIL_EIO, "could not start MCP server \"%s\": %s", s->name,
                     strerror(errno));
        goto done;
    }
    if (pid == 0) {
        /* Child: only async-signal-safe calls from here on. */
        setpgid(0, 0);
        dup2(in[1], 0);
        dup2(out[1], 1);
        dup2(er[1], 2);
        signal(SIGPIPE, SIG_DFL);
        if (s->cwd && chdir(s->cwd) != 0) {
            static const char msg[] = "vigil: could not enter the server's cwd\n";
            ssize_t w = write(2, msg, sizeof msg - 1);
            (void)w;
            _exit(127);
        }
        execvpe(s->argv[0], s->argv, env);
        exec_failed(s->argv[0], errno);
    }
    setpgid(pid, pid);
    p->pid = pid;
    p->in = in[0], in[0] = -1;
    p->out = out[0], out[0] = -1;
    p->err = er[0], er[0] = -1;
    set_nonblock(p->in);
    set_nonblock(p->out);
    set_nonblock(p->err);
done:
    for (int i = 0; i < 2; i++) {
        close_fd(&in[i]);
        close_fd(&out[i]);
        close_fd(&er[i]);
    }
    vg_free(env);
    wipe(owned);
    return rc;
}

/* Wait up to grace_ms (by the clock, and by as many 10 ms naps as would take on a real one:
 * a test clock that stands still must not hold a stop forever) for the child to exit. */
static int wait_exit(struct vg_mcp_proc *p, struct vg_clock *clock, int grace_ms, int *status)
{
    int64_t until = vg_clock_mono_ns(clock) + (int64_t)grace_ms * 1000000;
    for (int naps = 0;; naps++) {
        pid_t w = waitpid(p->pid, status, WNOHANG);
        if (w == p->pid || (w < 0 && errno == ECHILD))
            return 1;
        if (vg_clock_mono_ns(clock) >= until || naps * 10 >= grace_ms)
            return 0;
        vg_fiber_poll(NULL, 0, 10);
    }
}

void vg_mcp_proc_stop(struct vg_mcp_proc *p, struct vg_clock *clock, int grace_ms, int *status)
{
    int st = 0;
    if (p->pid <= 0)
        return;
    close_fd(&p->in); /* the polite request: EOF on stdin */
    if (!wait_exit(p, clock, grace_ms, &st)) {
        kill(-p->pid, SIGTERM);
        if (!wait_exit(p, clock, grace_ms, &st)) {
            kill(-p->pid, SIGKILL);
            while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
                ;
        }
    }
    kill(-p->pid, SIGKILL); /* whatever the leader left behind in its group */
    close_fd(&p->out);
    close_fd(&p->err);
    p->pid = 0;
    if (status)
        *status = st;
}
