/*
 * zygote.c: the fast way to a confined child. Making a user, mount, network and IPC namespace
 * and exec-free forking of a large host costs tens of milliseconds per execution (the network
 * namespace's creation and teardown most of it), so they are made once: a long-lived zygote
 * process, started by the first execution (a host that never runs code never has one), lives in
 * new user, mount, network, IPC and UTS namespaces as the unprivileged uid with no other
 * descriptor than its control socket. The zygote keeps one spare ready and the next one
 * warming: fresh children cloned with CLONE_NEWPID | CLONE_PARENT, so every execution is a new
 * process, the init of its own PID namespace, and the host's own child (reaped, timed and
 * killed as before). The zygote tells the host a spare's pid as soon as it is made (so the
 * host can always reap it) and again when it is ready: it dropped the capabilities it held in
 * the zygote's namespace, made its interpreter (the pages every execution writes first) and
 * applied what every execution has whatever its limits (vg_sandbox_confine_early). For each
 * execution the host sends the limits, the three bridge descriptors, the working directory's
 * descriptor and the program's payload (with the cgroup layer, after moving the spare into the
 * execution's cgroup, usually done ahead by the reaper thread); the spare takes them off the
 * socket itself, tells the zygote (which then lets the next spare read the socket), applies
 * the per-execution layers (rlimits, descriptors, Landlock on its own working directory, the
 * strict seccomp filter) and runs. Making a process (a new address space) is thus off an
 * execution's path; no spare serves twice, and none holds anything of an execution before its
 * request.
 *
 * The zygote is started from a keeper thread that lives as long as the host process: the
 * zygote and every child die with that thread (PR_SET_PDEATHSIG), so they must not hang on a
 * worker thread that ends. The keeper waits for the zygote; when it dies (killed, crashed) it
 * kills and reaps its spares, those said and any made but not said (zygote_gone), and the next
 * execution starts a new one.
 */
#include "base/common.h"

#include "os/clock.h"
#include "sandbox/sandbox.h"
#include "sandbox/spawn_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ZYGOTE_MAGIC 0x7a79676fu
/* The child's 0, 1, 2 (in that order: a spare receives them as its descriptors 0, 1, 2), the
 * working directory, and the host's liveness socket. */
#define ZYGOTE_FDS 5
#define ZYGOTE_FD_DIR 3
#define ZYGOTE_FD_HOST 4
#define ZYGOTE_CTL_FD 3
#define ZYGOTE_PACE_FD 4  /* the host's word that an execution was answered */
#define SPARE_ZYGOTE_FD 4 /* a spare's socket to the zygote (the pace socket is not a spare's) */
/* A spare is made in about a millisecond; one that is not ready after this is stuck (stopped,
 * starved): the request waiting for it has the zygote replaced rather than wait on. */
#define ZYGOTE_SPARE_MS 5000
#define ZYGOTE_PREPARE_MS 50 /* how long the reaper waits for the next spare (prepare) */
/* A request this soon after the last answer is one of a burst (back to back): the spare after
 * it is made at once, as the next request will need it before a paced making could end. */
#define ZYGOTE_BURST_NS (5 * 1000000LL)
/* The zygote's word to the host that the spare it said last is warm (pids are > 0, errors
 * -errno, ready 0). */
#define ZYGOTE_SAID_WARM INT32_MIN
#define SPARE_STACK (64 * 1024)

struct zygote_req {
    uint32_t magic;
    uint32_t mask;
    uintptr_t fn;   /* the zygote is a fork of the host: the same address means the same code */
    uint32_t burst; /* one of a burst: the zygote makes the next spare at once (pace_wait) */
    struct vg_code_limits lim;
    uint64_t payload_len;
};

/* ---- the zygote process ------------------------------------------------------------------- */

static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* One request: the header with its descriptors, then the payload. -1 at the host's end. */
static int zygote_receive(struct zygote_req *q, int fds[ZYGOTE_FDS], char **payload)
{
    char cbuf[CMSG_SPACE(sizeof(int) * ZYGOTE_FDS)];
    struct iovec iov = {q, sizeof *q};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    ssize_t n;
    while ((n = recvmsg(ZYGOTE_CTL_FD, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
    if (n != (ssize_t)sizeof *q || q->magic != ZYGOTE_MAGIC || !c || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len != CMSG_LEN(sizeof(int) * ZYGOTE_FDS))
        return -1;
    memcpy(fds, CMSG_DATA(c), sizeof(int) * ZYGOTE_FDS);
    *payload = malloc(q->payload_len + 1);
    if (!*payload || read_full(ZYGOTE_CTL_FD, *payload, q->payload_len))
        return -1;
    return 0;
}

static int drop_capabilities(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    memset(d, 0, sizeof d);
    return syscall(SYS_capset, &h, d) ? errno : 0;
}

/* The execution's process, once its request came: init of its new PID namespace, child of
 * the host. */
_Noreturn static void zygote_child(const struct zygote_req *q, const int fds[ZYGOTE_FDS],
                                   char *payload)
{
    /* The host holds the other end until it reaps this child: a hangup means it died before
     * the death signal was set. */
    struct pollfd host_alive = {.fd = fds[ZYGOTE_FD_HOST], .events = POLLIN};
    if (poll(&host_alive, 1, 0) > 0)
        _exit(127);
    close(ZYGOTE_CTL_FD);
    close(fds[ZYGOTE_FD_HOST]);
    if (fchdir(fds[ZYGOTE_FD_DIR]))
        vg_sandbox_child_fail("the working directory", errno);
    close(fds[ZYGOTE_FD_DIR]);
    struct vg_sandbox_spec s = {.workdir = ".",
                                .lim = q->lim,
                                .fd_in = fds[0],
                                .fd_out = fds[1],
                                .fd_err = fds[2],
                                .received_bytes = (size_t)q->payload_len};
    const char *step = "";
    int rc = vg_sandbox_confine(&s, q->mask, &step);
    if (rc)
        vg_sandbox_child_fail(step, rc);
    vg_sandbox_main_fn fn = (vg_sandbox_main_fn)q->fn;
    int st = fn(payload);
    /* The host answers once the pipes close, without waiting for the exit (whose teardown of
     * the address space costs milliseconds): close them first. */
    close(0);
    close(1);
    close(2);
    _exit(st);
}

/* The spare: cloned before its request, so the clone (a new address space, the costliest step
 * of a fresh process) is not on an execution's path. It does what needs no request (death
 * signal, no capability, a session of its own once the host can know its pid, the layers every
 * execution has), then, at its turn, takes the next request off the control socket itself and
 * tells the zygote it did ('T'; 'X': the host is gone). Nothing of an execution is in it before
 * that, and it serves only one. */
static vg_sandbox_main_fn spare_warm;
/* The layers of the zygote's executions (set in the host before it starts the zygote). */
static unsigned zygote_mask;

void vg_sandbox_zygote_warm(vg_sandbox_main_fn warm)
{
    spare_warm = warm;
}

/* The stack an execution will use, copied now rather than one fault at a time on its path. */
static void touch_stack(void)
{
    volatile char pages[SPARE_STACK];
    for (size_t i = 0; i < sizeof pages; i += 4096)
        pages[i] = 0;
}

static ssize_t spare_said(int fd, char *said)
{
    ssize_t n;
    while ((n = read(fd, said, 1)) < 0 && errno == EINTR)
        ;
    return n;
}

_Noreturn static void spare_run(int zygote_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* Its own socket to the zygote as descriptor 4, and none of the zygote's others (the one
     * to the spare before it, above all). */
    if (zygote_fd != SPARE_ZYGOTE_FD && dup2(zygote_fd, SPARE_ZYGOTE_FD) < 0)
        _exit(127);
    if (syscall(SYS_close_range, SPARE_ZYGOTE_FD + 1u, ~0u, 0u) < 0)
        for (int fd = SPARE_ZYGOTE_FD + 1; fd < 1024; fd++)
            close(fd);
    /* Full capabilities in the zygote's user namespace, which owns the namespaces every
     * execution shares: none may be kept. */
    int caps = drop_capabilities();
    /* Until the host can know it a spare stays in the zygote's process group: a zygote that
     * dies between making a spare and saying its pid leaves one the host does not know, and
     * the host finds it there (zygote_gone). Once the zygote said its pid ('s') it gets a
     * session of its own, here rather than at its turn: a new session is also a new
     * scheduler autogroup, whose making and first placement cost 1-8 ms of wall time on a
     * loaded machine. */
    char said_pid = 0;
    if (spare_said(SPARE_ZYGOTE_FD, &said_pid) != 1 || said_pid != 's')
        _exit(127);
    setsid();
    /* Every page this process writes is first copied from the zygote (a fault and a TLB flush
     * each) and every code page it runs is mapped anew: the runtime's warm-up does, before the
     * request, what every execution does first (an interpreter made and closed). */
    touch_stack();
    if (spare_warm)
        spare_warm(NULL);
    /* What every execution applies whatever its limits, done now: only what is specific to
     * the execution remains after its request. */
    const char *early_step = "";
    int early = vg_sandbox_confine_early(zygote_mask, &early_step);
    /* The request's descriptors for the child's 0, 1, 2 come first: received as 0, 1, 2. */
    close(0);
    close(1);
    close(2);
    /* Warm ('W'); then made while the spare before it waits: its turn ('g') comes once that one
     * took its request, and only then does it read the control socket. Ready ('R'): the zygote
     * tells the host so. */
    char turn = 0, ready = 'R';
    if (write(SPARE_ZYGOTE_FD, "W", 1) != 1 || spare_said(SPARE_ZYGOTE_FD, &turn) != 1 ||
        turn != 'g')
        _exit(127);
    if (write(SPARE_ZYGOTE_FD, &ready, 1) != 1)
        _exit(127);
    struct zygote_req q = {0};
    int fds[ZYGOTE_FDS];
    char *payload = NULL;
    char said = zygote_receive(&q, fds, &payload) ? 'X' : q.burst ? 'B' : 'T';
    /* A zygote that died meanwhile cannot hear it; the request is this spare's all the same. */
    ssize_t w = write(SPARE_ZYGOTE_FD, &said, 1);
    (void)w;
    close(SPARE_ZYGOTE_FD);
    if (said == 'X')
        _exit(127);
    if (caps)
        vg_sandbox_child_fail("dropping capabilities", caps);
    if (early || q.mask != zygote_mask)
        vg_sandbox_child_fail(early ? early_step : "the zygote's layers", early ? early : EINVAL);
    zygote_child(&q, fds, payload);
}

/* A new spare: its pid (-errno), the zygote's end of the socket between them in *zfd. */
static long spare_make(int *zfd)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return -errno;
    long pid = syscall(SYS_clone, CLONE_PARENT | CLONE_NEWPID, 0, NULL, NULL, 0);
    if (pid == 0)
        spare_run(sv[1]);
    int e = errno;
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return -e;
    }
    *zfd = sv[0];
    return pid;
}

static int say(int32_t v)
{
    return send(ZYGOTE_CTL_FD, &v, sizeof v, MSG_NOSIGNAL) == (ssize_t)sizeof v ? 0 : -1;
}

/* A new spare's pid told to the host, then the spare told it was ('s': it may leave the
 * zygote's process group), then, once it has warmed, the host told so; -1 when the host is
 * gone, the clone failed or the spare died. The spare before it serves its request meanwhile
 * (it reads the control socket itself). */
static int spare_said_to_host(long pid, int zfd)
{
    if (say((int32_t)pid) || pid < 0 || write(zfd, "s", 1) != 1)
        return -1;
    char warm = 0;
    return spare_said(zfd, &warm) == 1 && warm == 'W' ? say(ZYGOTE_SAID_WARM) : -1;
}

/* Executions the zygote's spares took, and those the host said it answered (pace socket). */
struct pace {
    uint64_t taken, answered;
    int burst; /* the last one taken was one of a burst */
};

/* The host's words that executions were answered, those there within ms; -1 when it is gone. */
static int pace_read(struct pace *pc, int ms)
{
    struct pollfd p = {.fd = ZYGOTE_PACE_FD, .events = POLLIN};
    char words[64];
    int n;
    while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
        ;
    if (n <= 0)
        return 0;
    ssize_t r = read(ZYGOTE_PACE_FD, words, sizeof words);
    if (r <= 0)
        return -1;
    pc->answered += (uint64_t)r;
    return 0;
}

/* Before making the next spare while an execution runs: wait until the host answered it, so
 * that the making (a clone, the interpreter's warm-up: several milliseconds of CPU) does not
 * take the core the execution and its host need. Not in a burst (the next request needs the
 * spare soon), and not once the ready spare cur took a request or died (executions overlap:
 * the next spare is needed now; or the zygote ends). -1 when the host is gone. */
static int pace_wait(struct pace *pc, int cur)
{
    if (pace_read(pc, 0))
        return -1;
    if (pc->burst || pc->answered >= pc->taken)
        return 0;
    struct pollfd p[2] = {{.fd = ZYGOTE_PACE_FD, .events = POLLIN}, {.fd = cur, .events = POLLIN}};
    int n;
    while ((n = poll(p, 2, -1)) < 0 && errno == EINTR)
        ;
    return n > 0 && p[0].revents ? pace_read(pc, 0) : 0;
}

/* Keep one spare ready and the next one warming: tell the host a spare's pid as soon as it is
 * made (so the host can always reap it), give it its turn once the one before took its
 * request, tell the host when it is ready (0), make the next, wait until this one took its
 * request, again. The next spare's making overlaps the execution before it. */
static int zygote_main(void *user)
{
    (void)user;
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    int cur = -1;
    long pid = spare_make(&cur);
    if (spare_said_to_host(pid, cur))
        return 0;
    struct pace pc = {0, 0, 0};
    for (;;) {
        char said = 0;
        if (write(cur, "g", 1) != 1 || spare_said(cur, &said) != 1 || said != 'R' || say(0))
            return 0;
        if (pace_wait(&pc, cur)) /* the last spare's execution may run */
            return 0;
        int next = -1;
        pid = spare_make(&next);
        if (spare_said_to_host(pid, next))
            return 0;
        ssize_t n = spare_said(cur, &said);
        close(cur);
        /* The host is gone, or the spare died before its request: the stream's state is not
         * known any more, so this zygote ends and the host starts a new one. */
        if (n != 1 || (said != 'T' && said != 'B'))
            return 0;
        pc.taken++;
        pc.burst = said == 'B';
        cur = next;
    }
}

/* The zygote keeps only its control and pace sockets (as descriptors 3 and 4) and no
 * environment. */
static int zygote_start(void *user)
{
    extern char **environ;
    static char *empty_env[] = {NULL};
    const int *sock =
        user; /* control, pace: moved above 4 first, so neither overwrites the other */
    int ctl = fcntl(sock[0], F_DUPFD, 10), pace = fcntl(sock[1], F_DUPFD, 10);
    if (ctl < 0 || pace < 0 || dup2(ctl, ZYGOTE_CTL_FD) < 0 || dup2(pace, ZYGOTE_PACE_FD) < 0)
        _exit(126);
    if (syscall(SYS_close_range, ZYGOTE_PACE_FD + 1u, ~0u, 0u) < 0)
        for (int fd = ZYGOTE_PACE_FD + 1; fd < 65536; fd++)
            close(fd);
    int null_fd = open("/dev/null", O_RDWR);
    for (int fd = 0; null_fd >= 0 && fd < 3; fd++)
        dup2(null_fd, fd);
    if (null_fd > 2)
        close(null_fd);
    environ = empty_env;
    /* Merge the host's free heap chunks once here, or every child would (glibc consolidates
     * on its first large allocation), writing to, and so copying, pages all over the heap. */
    malloc_trim(0);
    return zygote_main(NULL);
}

/* ---- the host's side ---------------------------------------------------------------------- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int keeper;        /* the keeper thread runs */
    int want;          /* an execution waits for a zygote */
    uint64_t attempts; /* starts tried, so a waiter sees its own */
    vigil_code start_rc;
    char start_msg[256];
    pid_t pid;       /* -1: none */
    pid_t spare;     /* the zygote's spare, once it said its pid; 0: not read yet */
    int spare_ready; /* and said it is ready */
    pid_t next;      /* the spare being made after it, once read; 0: not read yet */
    pid_t said_last; /* the last spare the zygote said */
    pid_t warm;      /* the last spare the zygote said is warm */
    int ctl;         /* the host's end of the control socket */
    int go_fd;       /* the launch's liveness socket: held while the zygote lives */
    unsigned mask;
    /* The pace socket's host end (pace_wait) and the last answer's time, under pace_lock
     * (and lock to change pace): an answer must not wait for lock, which the reaper holds
     * while the next spare warms (vg_sandbox_zygote_prepare). */
    pthread_mutex_t pace_lock;
    int pace;
    uint64_t pace_zygote; /* the start (attempts) of the zygote at the pace socket's far end */
    int64_t answered_ns;
    struct vg_sandbox_spec spec; /* the first execution's uid settings */
    /* With the cgroup layer: the spare's cgroup, made and the spare placed in it before its
     * request (vg_sandbox_zygote_prepare), with the last execution's memory cap. */
    struct vg_sandbox_cg spare_cg;
    pid_t spare_cg_pid;
    size_t spare_cg_memory, cg_memory;
} z = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .pace_lock = PTHREAD_MUTEX_INITIALIZER,
       .changed = PTHREAD_COND_INITIALIZER,
       .pid = -1,
       .ctl = -1,
       .pace = -1,
       .go_fd = -1};

static pthread_once_t z_once = PTHREAD_ONCE_INIT;

/* A forked copy of the host has no keeper and no zygote of its own. */
static void z_after_fork(void)
{
    pthread_mutex_init(&z.lock, NULL);
    pthread_cond_init(&z.changed, NULL);
    if (z.ctl >= 0)
        close(z.ctl);
    if (z.go_fd >= 0)
        close(z.go_fd);
    pthread_mutex_init(&z.pace_lock, NULL);
    if (z.pace >= 0)
        close(z.pace);
    z.ctl = z.go_fd = z.pace = -1;
    z.pid = -1;
    z.spare = 0;
    z.spare_ready = 0;
    z.next = 0;
    z.keeper = z.want = 0;
    memset(&z.spare_cg, 0, sizeof z.spare_cg); /* the host's to remove */
    z.spare_cg_pid = 0;
}

/* Under z.lock: a spare that will serve no execution (its zygote died, or its request could
 * not be sent) is the host's child: kill and reap it. */
static void spare_release(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* Under z.lock, the zygote dead: its spares, said or not yet read, go too. */
static void spares_release(void)
{
    spare_release(z.spare);
    spare_release(z.next);
    z.spare = z.next = 0;
    z.spare_ready = 0;
    int32_t v;
    while (z.ctl >= 0 && recv(z.ctl, &v, sizeof v, MSG_DONTWAIT) == (ssize_t)sizeof v)
        spare_release((pid_t)v);
    vg_sandbox_cg_remove(&z.spare_cg); /* its spare is reaped */
    z.spare_cg_pid = 0;
}

/* Under z.lock, the zygote pid dead but not reaped: its spares go, those it said and those it
 * made but could not say any more (still in its process group: spare_run), and then it. */
static void zygote_gone(pid_t pid)
{
    if (z.pid == pid) {
        spares_release();
        close(z.ctl);
        close(z.go_fd);
        pthread_mutex_lock(&z.pace_lock);
        close(z.pace);
        z.pace = -1;
        pthread_mutex_unlock(&z.pace_lock);
        z.ctl = z.go_fd = -1;
        z.pid = -1;
    }
    kill(-pid, SIGKILL);
    siginfo_t si;
    while (waitid(P_PGID, (id_t)pid, &si, WEXITED) == 0 || errno == EINTR)
        ;
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) /* in case it left its group */
        ;
}

static void z_init(void)
{
    pthread_atfork(NULL, NULL, z_after_fork);
}

static vigil_code zygote_spawn(pid_t *pid, int *ctl, int *pace, int *go_fd, vigil_error *err)
{
    int sv[2], pv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return VG_FAIL(err, VIGIL_EIO, "could not make the sandbox zygote's socket: %s",
                       strerror(errno));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pv)) {
        close(sv[0]);
        close(sv[1]);
        return VG_FAIL(err, VIGIL_EIO, "could not make the sandbox zygote's socket: %s",
                       strerror(errno));
    }
    int zygote_ends[2] = {sv[1], pv[1]};
    struct vg_sandbox_spec s = z.spec;
    s.workdir = "/";
    struct vg_sandbox_launch l = {.s = &s,
                                  .mask = z.mask,
                                  .ns_flags = VG_SBX_NS_FLAGS & ~(unsigned long)CLONE_NEWPID,
                                  .fn = zygote_start,
                                  .user = zygote_ends};
    struct vg_sandbox_child c;
    vigil_code rc = vg_sandbox_launch(&l, &c, err);
    close(sv[1]);
    close(pv[1]);
    if (rc) {
        close(sv[0]);
        close(pv[0]);
        return rc;
    }
    /* The keeper waits on the pid itself. */
    if (c.pidfd >= 0)
        close(c.pidfd);
    *go_fd = c.go_fd;
    *pid = c.pid;
    *ctl = sv[0];
    *pace = pv[0];
    return VIGIL_OK;
}

static void *keeper_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&z.lock);
    for (;;) {
        while (!z.want)
            pthread_cond_wait(&z.changed, &z.lock);
        z.want = 0;
        vigil_error err = {0};
        pid_t pid = -1;
        int ctl = -1, pace = -1, go_fd = -1;
        z.start_rc = zygote_spawn(&pid, &ctl, &pace, &go_fd, &err);
        snprintf(z.start_msg, sizeof z.start_msg, "%s", err.message);
        z.attempts++;
        if (!z.start_rc) {
            z.pid = pid, z.ctl = ctl, z.go_fd = go_fd;
            pthread_mutex_lock(&z.pace_lock);
            z.pace = pace;
            z.pace_zygote = z.attempts;
            pthread_mutex_unlock(&z.pace_lock);
        }
        pthread_cond_broadcast(&z.changed);
        if (z.start_rc)
            continue;
        pthread_mutex_unlock(&z.lock);
        /* Not reaped yet: while the zygote is a zombie its pid, its process group's id, is
         * not given to another process. */
        siginfo_t si;
        while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR)
            ;
        pthread_mutex_lock(&z.lock);
        zygote_gone(pid);
        pthread_cond_broadcast(&z.changed);
    }
    return NULL;
}

/* Under z.lock: a running zygote, started by the keeper when there is none. */
static vigil_code zygote_ready(vigil_error *err)
{
    if (z.pid > 0)
        return VIGIL_OK;
    if (!z.keeper) {
        pthread_attr_t a;
        pthread_t t;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int e = pthread_create(&t, &a, keeper_main, NULL);
        pthread_attr_destroy(&a);
        if (e)
            return VG_FAIL(err, VIGIL_EIO, "could not start the sandbox's keeper thread: %s",
                           strerror(e));
        z.keeper = 1;
    }
    uint64_t mine = z.attempts + 1;
    z.want = 1;
    pthread_cond_broadcast(&z.changed);
    while (z.attempts < mine)
        pthread_cond_wait(&z.changed, &z.lock);
    if (z.start_rc)
        return VG_FAIL(err, z.start_rc, "%s", z.start_msg);
    return VIGIL_OK;
}

/* Under z.lock: the zygote's next word (a pid, -errno, or 0: ready) within ms, past its words
 * that a spare is warm (noted in z.warm); -1 when it is gone or said nothing in time. */
static int zygote_said(int32_t *v, int ms)
{
    struct pollfd p = {.fd = z.ctl, .events = POLLIN};
    for (;;) {
        if (poll(&p, 1, ms) != 1 || read_full(z.ctl, v, sizeof *v))
            return -1;
        if (*v != ZYGOTE_SAID_WARM)
            break;
        z.warm = z.said_last;
    }
    if (*v > 0)
        z.said_last = (pid_t)*v;
    return 0;
}

/* Under z.lock: the spare's pid once it is ready, as the zygote said it (once per spare; < 0:
 * -errno of its clone), or 0 when the zygote is gone or said nothing within ms (a spare said
 * but not ready stays in z.spare, for the keeper to reap or a later call to find ready). */
static pid_t spare_pid(int ms)
{
    int32_t v = 0;
    if (!z.spare && z.next) { /* already read */
        z.spare = z.next;
        z.next = 0;
        z.spare_ready = 0;
    }
    if (!z.spare) {
        if (zygote_said(&v, ms) || v <= 0)
            return v < 0 ? (pid_t)v : 0;
        z.spare = (pid_t)v;
        z.spare_ready = 0;
    }
    if (!z.spare_ready && (zygote_said(&v, ms) || v != 0))
        return 0;
    z.spare_ready = 1;
    return z.spare;
}

/* Under z.lock: the ready spare for a request, or 0 when the zygote is gone or its spare is
 * stuck (not ready in ZYGOTE_SPARE_MS, far more than making one takes): then the zygote is
 * killed, and with it that spare (zygote_gone), and a new one made. */
static pid_t spare_for_request(void)
{
    pid_t pid = spare_pid(ZYGOTE_SPARE_MS);
    if (pid == 0 && z.pid > 0)
        kill(z.pid, SIGKILL);
    return pid;
}

/* Under z.lock: send one request to the ready spare pid; pid, or 0 when the zygote is gone. */
static pid_t zygote_request(pid_t pid, const struct zygote_req *q, const int fds[ZYGOTE_FDS],
                            const void *payload)
{
    z.spare = 0; /* this request is its, whatever happens now */
    z.spare_ready = 0;
    char cbuf[CMSG_SPACE(sizeof(int) * ZYGOTE_FDS)];
    memset(cbuf, 0, sizeof cbuf);
    /* The header and the payload in one message: the spare, woken by it, finds the payload
     * there rather than waiting to be woken a second time. */
    struct iovec iov[2] = {{(void *)q, sizeof *q}, {(void *)payload, q->payload_len}};
    struct msghdr mh = {.msg_iov = iov,
                        .msg_iovlen = q->payload_len ? 2 : 1,
                        .msg_control = cbuf,
                        .msg_controllen = sizeof cbuf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * ZYGOTE_FDS);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * ZYGOTE_FDS);
    ssize_t sent = sendmsg(z.ctl, &mh, MSG_NOSIGNAL);
    int ok = sent >= (ssize_t)sizeof q[0];
    for (size_t off = ok ? (size_t)sent - sizeof q[0] : 0; ok && off < q->payload_len;) {
        ssize_t w = send(z.ctl, (const char *)payload + off, q->payload_len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            ok = 0;
        else
            off += (size_t)w;
    }
    if (!ok) {
        spare_release(pid);
        return 0;
    }
    return pid;
}

/* Under z.lock: the zygote is broken; kill it and wait for the keeper to let it go. */
static void zygote_discard(void)
{
    pid_t old = z.pid;
    if (old <= 0)
        return;
    kill(old, SIGKILL);
    while (z.pid == old)
        pthread_cond_wait(&z.changed, &z.lock);
}

/* Under z.lock: with the cgroup layer, the spare that will take this request is moved into
 * the execution's cgroup before the request goes, so nothing of the program runs outside it. */
static vigil_code place_spare(const struct vg_sandbox_spec *s, unsigned mask, pid_t spare,
                              struct vg_sandbox_child *out, vigil_error *err)
{
    out->applied = mask;
    memset(&out->cg, 0, sizeof out->cg);
    if (!(mask & VG_SBX_CGROUP))
        return VIGIL_OK;
    out->pid = spare;
    size_t memory = s->lim.memory_bytes + VG_CG_MEMORY_ROOM;
    z.cg_memory = memory; /* the cap the next spare's cgroup is made with */
    if (!z.spare_cg.made || z.spare_cg_pid != spare) /* not prepared: made now */
        return vg_sandbox_cg_enter(s, out, err);
    out->cg = z.spare_cg;
    memset(&z.spare_cg, 0, sizeof z.spare_cg);
    z.spare_cg_pid = 0;
    int e = memory == z.spare_cg_memory ? 0 : vg_sandbox_cg_set_memory(&out->cg, memory);
    return vg_sandbox_cg_missing(s, out, e, err);
}

void vg_sandbox_zygote_prepare(void)
{
    pthread_once(&z_once, z_init);
    pthread_mutex_lock(&z.lock);
    /* A spare being made is ready in a millisecond or two, and the next request needs that
     * very spare anyway: wait that long for it, so its cgroup is made off the request's path
     * (about 0.5 ms on it otherwise). No longer: a stuck spare must not hold the lock every
     * request needs (it is then prepared at the request, which replaces it if it stays stuck). */
    pid_t spare = z.pid > 0 && (z.mask & VG_SBX_CGROUP) && z.cg_memory && !z.spare_cg.made
                      ? spare_pid(ZYGOTE_PREPARE_MS)
                      : 0;
    if (spare > 0 && !vg_sandbox_cg_make(&z.spare_cg, z.cg_memory, VG_CG_MAX_PIDS)) {
        if (vg_sandbox_cg_place(&z.spare_cg, spare))
            vg_sandbox_cg_remove(&z.spare_cg); /* made at the request instead */
        else
            z.spare_cg_pid = spare, z.spare_cg_memory = z.cg_memory;
    }
    pthread_mutex_unlock(&z.lock);
}

static vigil_code spawn_in_zygote(const struct vg_sandbox_spec *s, const struct zygote_req *q,
                                  const int fds[ZYGOTE_FDS], const void *payload,
                                  struct vg_sandbox_child *out, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    pthread_mutex_lock(&z.lock);
    struct zygote_req burst_q = *q;
    pthread_mutex_lock(&z.pace_lock);
    burst_q.burst = vg_clock_mono_ns(vg_clock_real()) - z.answered_ns < ZYGOTE_BURST_NS;
    pthread_mutex_unlock(&z.pace_lock);
    q = &burst_q;
    /* The zygote runs as the uid and with the layers of the execution that started it; one
     * that asks for others gets a new zygote. */
    if (z.pid > 0 && (z.mask != q->mask || z.spec.sandbox_uid != s->sandbox_uid))
        zygote_discard();
    if (z.pid <= 0) {
        z.spec = *s;
        z.mask = q->mask;
        zygote_mask = q->mask; /* the zygote, a copy of this process, reads it */
    }
    /* Twice at most: a zygote that died since the last execution is replaced once. */
    for (int attempt = 0; attempt < 2; attempt++) {
        if ((rc = zygote_ready(err)))
            break;
        pid_t pid = spare_for_request();
        if (pid > 0 && (rc = place_spare(s, q->mask, pid, out, err)))
            break;
        if (pid > 0)
            pid = zygote_request(pid, q, fds, payload);
        out->pid = pid;
        out->from_zygote = z.attempts; /* the zygote that took the request */
        if (pid > 0)
            break;
        vg_sandbox_cg_remove(&out->cg); /* the spare it held is gone */
        if (pid < 0) {
            rc = VG_FAIL(err, VIGIL_EIO, "could not start the sandbox: clone: %s",
                         strerror((int)-pid));
            break;
        }
        zygote_discard();
        rc = VG_FAIL(err, VIGIL_EIO, "the sandbox's zygote process died twice in a row");
    }
    pthread_mutex_unlock(&z.lock);
    return rc;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Through the zygote when the host makes namespaces; the direct way otherwise. */
vigil_code vg_sandbox_spawn_flat(const struct vg_sandbox_spec *s, vg_sandbox_main_fn fn,
                                 const void *payload, size_t payload_len,
                                 struct vg_sandbox_child *out, vigil_error *err)
{
    unsigned mask = 0;
    out->pid = out->pidfd = out->go_fd = -1;
    out->from_zygote = 0;
    memset(&out->cg, 0, sizeof out->cg);
    vigil_code rc = vg_sandbox_check_layers(s, &mask, err);
    if (rc)
        return rc;
    if ((mask & VG_SBX_NS_LAYERS) != VG_SBX_NS_LAYERS)
        return vg_sandbox_spawn(s, fn, (void *)payload, out, err);
    pthread_once(&z_once, z_init);
    int go[2] = {-1, -1};
    int dirfd = open(s->workdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return VG_FAIL(err, VIGIL_EIO, "could not open the working directory %s: %s", s->workdir,
                       strerror(errno));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go)) {
        close(dirfd);
        return VG_FAIL(err, VIGIL_EIO, "could not make the sandbox's socket: %s", strerror(errno));
    }
    struct zygote_req q = {.magic = ZYGOTE_MAGIC,
                           .mask = mask,
                           .fn = (uintptr_t)fn,
                           .lim = s->lim,
                           .payload_len = payload_len};
    int fds[ZYGOTE_FDS] = {s->fd_in, s->fd_out, s->fd_err, dirfd, go[0]};
    rc = spawn_in_zygote(s, &q, fds, payload, out, err);
    close(dirfd);
    close_fd(&go[0]);
    if (rc) {
        close_fd(&go[1]);
        out->pid = -1;
        out->from_zygote = 0;
        return rc;
    }
    out->pidfd = (int)syscall(SYS_pidfd_open, out->pid, 0);
    out->go_fd = go[1];
    return VIGIL_OK;
}

void vg_sandbox_zygote_settle(void)
{
    pthread_once(&z_once, z_init);
    pthread_mutex_lock(&z.lock);
    pid_t dead = z.pid;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    /* WNOWAIT: the keeper, which waits for it too, reaps it. */
    if (dead > 0 && !waitid(P_PID, (id_t)dead, &si, WEXITED | WNOHANG | WNOWAIT) &&
        si.si_pid == dead)
        while (z.pid == dead)
            pthread_cond_wait(&z.changed, &z.lock);
    pthread_mutex_unlock(&z.lock);
}

pid_t vg_sandbox_spare_pid(void)
{
    pthread_once(&z_once, z_init);
    pthread_mutex_lock(&z.lock);
    pid_t p = z.pid > 0 ? spare_pid(ZYGOTE_SPARE_MS) : -1;
    pthread_mutex_unlock(&z.lock);
    return p > 0 ? p : -1;
}

pid_t vg_sandbox_next_spare_pid(void)
{
    pthread_once(&z_once, z_init);
    pthread_mutex_lock(&z.lock);
    int32_t v = 0;
    /* After a ready spare the zygote's next word is the next one's pid (or -errno). */
    if (z.pid > 0 && spare_pid(ZYGOTE_SPARE_MS) > 0 && !z.next &&
        !zygote_said(&v, ZYGOTE_SPARE_MS) && v > 0)
        z.next = (pid_t)v;
    pid_t p = z.next;
    pthread_mutex_unlock(&z.lock);
    return p > 0 ? p : -1;
}

int vg_sandbox_next_spare_warm(void)
{
    pid_t next = vg_sandbox_next_spare_pid();
    pthread_mutex_lock(&z.lock);
    /* The zygote's word after a spare's pid is that it is warm (spare_said_to_host). */
    struct pollfd p = {.fd = z.ctl, .events = POLLIN};
    int32_t v = 0;
    if (next > 0 && z.pid > 0 && z.next == next && z.warm != next &&
        poll(&p, 1, ZYGOTE_SPARE_MS) == 1 && !read_full(z.ctl, &v, sizeof v) &&
        v == ZYGOTE_SAID_WARM)
        z.warm = next;
    int warm = next > 0 && z.warm == next;
    pthread_mutex_unlock(&z.lock);
    return warm ? 0 : -1;
}

void vg_sandbox_zygote_answered(struct vg_sandbox_child *c)
{
    uint64_t zygote = c->from_zygote;
    if (!zygote)
        return;
    c->from_zygote = 0;
    pthread_once(&z_once, z_init);
    pthread_mutex_lock(&z.pace_lock);
    z.answered_ns = vg_clock_mono_ns(vg_clock_real());
    /* A full or gone socket: the zygote makes the next spare when a request takes this one.
     * An execution of a zygote that died since is no answer for its successor, which would
     * count it against one of its own and make its next spare while that one runs. */
    if (z.pace >= 0 && z.pace_zygote == zygote)
        (void)send(z.pace, "a", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    pthread_mutex_unlock(&z.pace_lock);
}

pid_t vg_sandbox_zygote_pid(void)
{
    pthread_once(&z_once, z_init);
    pthread_mutex_lock(&z.lock);
    pid_t p = z.pid;
    pthread_mutex_unlock(&z.lock);
    return p;
}
