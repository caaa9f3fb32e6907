/*
 * spawn.c: a fresh confined child per execution. The host forks (glibc's fork keeps the
 * allocator sane in a threaded host); that single-threaded copy clones the real child into new
 * user, PID, mount, network, IPC and UTS namespaces with CLONE_PARENT, so the child is the
 * host's own child and the namespace's init (when it dies, everything in the namespace dies).
 * The host then maps one uid and gid for it — 1000 inside; outside the host's own uid, or
 * sandbox_uid when the host is root, since RLIMIT_NPROC does not bind root — and lets it go on
 * to confine itself (confine.c) and run.
 */
#include "base/common.h"
#include "base/json.h"

#include "sandbox/sandbox.h"
#include "sandbox/spawn_int.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const layer_names[VG_SBX_LAYER_COUNT] = {
    "userns",   "pidns",   "mountns",      "netns",  "ipcns",       "seccomp",
    "landlock", "rlimits", "no_new_privs", "cgroup", "descriptors", "pdeathsig"};

const char *vg_sandbox_layer_name(unsigned bit)
{
    for (unsigned i = 0; i < VG_SBX_LAYER_COUNT; i++)
        if (bit == 1u << i)
            return layer_names[i];
    return NULL;
}

unsigned vg_sandbox_layer_parse(const char *name)
{
    for (unsigned i = 0; name && i < VG_SBX_LAYER_COUNT; i++)
        if (!strcmp(name, layer_names[i]))
            return 1u << i;
    return 0;
}

json_t *vg_sandbox_layers_json(unsigned mask)
{
    json_t *a = json_array();
    for (unsigned i = 0; a && i < VG_SBX_LAYER_COUNT; i++)
        if (mask & (1u << i))
            json_array_append_new(a, json_string(layer_names[i]));
    return a;
}

/* ---- probe -------------------------------------------------------------------------------- */

static struct vg_sandbox_probe probed;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

/* Can a process make the namespaces? Tried in a throwaway child, the only sure test. */
static int userns_works(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(unshare(VG_SBX_NS_FLAGS) ? 1 : 0);
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p)
        return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void probe_run(void)
{
    struct vg_sandbox_probe *p = &probed;
    p->offered = VG_SBX_RLIMITS | VG_SBX_NONEWPRIVS | VG_SBX_FDS | VG_SBX_PDEATHSIG;
    p->host_root = geteuid() == 0;
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1u /* _VERSION */);
    p->landlock_abi = abi > 0 ? (int)abi : 0;
    if (p->landlock_abi)
        p->offered |= VG_SBX_LANDLOCK;
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0)
        p->offered |= VG_SBX_SECCOMP;
    p->userns = userns_works();
    if (p->userns)
        p->offered |= VG_SBX_NS_LAYERS;
    vg_sandbox_cgroup_probe(&p->cgroup);
    if (p->cgroup.usable)
        p->offered |= VG_SBX_CGROUP;
    snprintf(p->notes, sizeof p->notes, "%s%scgroup: %s",
             p->userns ? "" : "user namespaces are not allowed for this user; ",
             p->landlock_abi ? "" : "the kernel has no Landlock; ",
             !p->cgroup.usable  ? p->cgroup.why
             : p->cgroup.use_v1 ? "a cgroup v1 cgroup per execution (memory, pids, cpu)"
                                : "a cgroup v2 cgroup per execution (memory, pids, cpu)");
}

void vg_sandbox_probe(struct vg_sandbox_probe *out)
{
    pthread_once(&probe_once, probe_run);
    *out = probed;
}

json_t *vg_sandbox_probe_json(const struct vg_sandbox_probe *p, unsigned required)
{
    unsigned all = (1u << VG_SBX_LAYER_COUNT) - 1;
    return json_pack(
        "{s:o, s:o, s:o, s:o, s:b, s:i, s:b, s:b, s:s, s:o}", "offered",
        vg_sandbox_layers_json(p->offered), "applied", vg_sandbox_layers_json(p->offered),
        "missing", vg_sandbox_layers_json(all & ~p->offered), "required_missing",
        vg_sandbox_layers_json(required & ~p->offered), "can_run", !(required & ~p->offered),
        "landlock_abi", p->landlock_abi, "user_namespaces", p->userns, "host_root", p->host_root,
        "notes", p->notes, "cgroup", vg_sandbox_cgroup_json(&p->cgroup));
}

/* ---- spawn -------------------------------------------------------------------------------- */

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    ssize_t n = write(fd, text, strlen(text));
    int rc = n == (ssize_t)strlen(text) ? 0 : (n < 0 ? errno : EIO);
    close(fd);
    return rc;
}

/* The child's one uid and gid: 1000 inside, the host's ids (or sandbox_uid as root) outside. */
static int map_ids(pid_t pid, const struct vg_sandbox_spec *s, int root)
{
    char path[64], map[64];
    unsigned out_uid = root ? (unsigned)s->sandbox_uid : (unsigned)geteuid();
    unsigned out_gid = root ? (unsigned)s->sandbox_uid : (unsigned)getegid();
    int rc = 0;
    if (!root) { /* an unprivileged writer must give up setgroups first */
        snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
        rc = write_file(path, "deny");
    }
    snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
    snprintf(map, sizeof map, "%d %u 1", VG_SBX_INSIDE_ID, out_gid);
    if (!rc)
        rc = write_file(path, map);
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
    snprintf(map, sizeof map, "%d %u 1", VG_SBX_INSIDE_ID, out_uid);
    if (!rc)
        rc = write_file(path, map);
    return rc;
}

_Noreturn void vg_sandbox_child_fail(const char *step, int e)
{
    char msg[160];
    int n = snprintf(msg, sizeof msg, "sandbox: could not apply %s: %s\n", step, strerror(e));
    ssize_t w = write(2, msg, (size_t)n);
    (void)w;
    _exit(125);
}

/* The new process: wait for the host's go, become the unprivileged uid, confine, run. */
static void child_run(const struct vg_sandbox_launch *l, int go_fd)
{
    const struct vg_sandbox_spec *s = l->s;
    char b;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (read(go_fd, &b, 1) != 1) /* the host is gone or gave up */
        _exit(127);
    /* Enter the directory while still the host's uid: its parents need not be open to others. */
    if (chdir(s->workdir))
        vg_sandbox_child_fail("the working directory", errno);
    int e = s->enter ? s->enter(s, l->mask) : 0; /* the adapter's own (Deno's bind mount) */
    if (e)
        vg_sandbox_child_fail("the working directory", e);
    uid_t id = (l->mask & VG_SBX_USERNS) ? VG_SBX_INSIDE_ID : s->sandbox_uid;
    if (((l->mask & VG_SBX_USERNS) || geteuid() == 0) &&
        (setresgid(id, id, id) || setresuid(id, id, id)))
        vg_sandbox_child_fail("the sandbox uid", errno);
    /* A change of uid clears the parent-death signal: set it again, then make sure the host did
     * not die in between (it holds the go pipe open for the whole execution). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct pollfd host_alive = {.fd = go_fd, .events = POLLIN};
    if (poll(&host_alive, 1, 0) > 0) /* the host wrote its one byte: anything now is its end */
        _exit(127);
    close(go_fd);
    setsid();
    const char *step = "";
    int rc = !l->confine  ? 0
             : s->confine ? s->confine(s, l->mask, &step)
                          : vg_sandbox_confine(s, l->mask, &step);
    if (rc)
        vg_sandbox_child_fail(step, rc);
    _exit(l->fn(l->user));
}

/* The first fork: clone the real child as the host's sibling-made child, tell its pid, go. */
static void middle_run(const struct vg_sandbox_launch *l, int go[2], int tell[2])
{
    close(go[1]);
    close(tell[0]);
    if (geteuid() == 0 && setgroups(0, NULL)) /* no supplementary group of the host's */
        _exit(126);
    unsigned long flags = CLONE_PARENT | ((l->mask & VG_SBX_USERNS) ? l->ns_flags : 0);
    long pid = syscall(SYS_clone, flags, 0, NULL, NULL, 0);
    if (pid == 0) {
        close(tell[1]);
        child_run(l, go[0]);
    }
    int32_t v = (int32_t)(pid < 0 ? -errno : pid);
    ssize_t w = write(tell[1], &v, sizeof v);
    _exit(w == (ssize_t)sizeof v ? 0 : 126);
}

static vigil_code start_child(const struct vg_sandbox_launch *l, int go[2], int tell[2],
                              pid_t *child, vigil_error *err)
{
    pid_t mid = fork();
    if (mid < 0)
        return VG_FAIL(err, VIGIL_EIO, "could not start the sandbox: fork: %s", strerror(errno));
    if (mid == 0)
        middle_run(l, go, tell);
    close(tell[1]);
    tell[1] = -1;
    int32_t v = 0;
    ssize_t n;
    while ((n = read(tell[0], &v, sizeof v)) < 0 && errno == EINTR)
        ;
    int st;
    while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof v || v <= 0)
        return VG_FAIL(err, VIGIL_EIO, "could not start the sandbox: clone: %s",
                       n == (ssize_t)sizeof v ? strerror(-v) : "no answer");
    *child = (pid_t)v;
    return VIGIL_OK;
}

vigil_code vg_sandbox_check_layers(const struct vg_sandbox_spec *s, unsigned *mask,
                                   vigil_error *err)
{
    struct vg_sandbox_probe p;
    vg_sandbox_probe(&p);
    unsigned missing = s->required & ~p.offered;
    if (missing) {
        json_t *names = vg_sandbox_layers_json(missing);
        char *text = names ? vg_json_dumps(names, JSON_COMPACT) : NULL;
        vigil_code rc = VG_FAIL(err, VIGIL_EUNSUPPORTED,
                                "the sandbox needs %s, which this machine does not offer (%s); "
                                "list them in sandbox.accept_missing to run with less",
                                text ? text : "more layers", p.notes);
        free(text);
        json_decref(names);
        return rc;
    }
    *mask = p.offered;
    int e = (*mask & VG_SBX_SECCOMP) ? vg_sandbox_prepare() : 0;
    if (e)
        return VG_FAIL(err, VIGIL_EIO, "could not compile the sandbox's seccomp filter: %s",
                       strerror(e));
    if (p.host_root && chown(s->workdir, s->sandbox_uid, s->sandbox_uid))
        return VG_FAIL(err, VIGIL_EIO, "could not give the working directory %s to uid %u: %s",
                       s->workdir, (unsigned)s->sandbox_uid, strerror(errno));
    return VIGIL_OK;
}

static void close_pair(int p[2])
{
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0)
            close(p[i]), p[i] = -1;
}

vigil_code vg_sandbox_launch(const struct vg_sandbox_launch *l, struct vg_sandbox_child *out,
                             vigil_error *err)
{
    int go[2] = {-1, -1}, tell[2] = {-1, -1};
    memset(&out->cg, 0, sizeof out->cg);
    out->pid = -1;
    out->pidfd = -1;
    out->go_fd = -1;
    out->from_zygote = 0;
    vigil_code rc;
    /* go: a socket, so the host's send to a child that already died is EPIPE, never SIGPIPE */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) || pipe2(tell, O_CLOEXEC)) {
        rc = VG_FAIL(err, VIGIL_EIO, "could not make the sandbox's pipes: %s", strerror(errno));
        close_pair(go);
        close_pair(tell);
        return rc;
    }
    pid_t pid = -1;
    rc = start_child(l, go, tell, &pid, err);
    close_pair(tell);
    close(go[0]);
    if (!rc && (l->mask & VG_SBX_USERNS)) {
        int e = map_ids(pid, l->s, geteuid() == 0);
        if (e)
            rc = VG_FAIL(err, VIGIL_EIO, "could not map the sandbox's uid: %s", strerror(e));
    }
    out->pid = pid;
    out->applied = l->mask;
    if (!rc && l->confine)
        rc = vg_sandbox_cg_enter(l->s, out, err);
    if (!rc) {
        out->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        char b = 1;
        if (send(go[1], &b, 1, MSG_NOSIGNAL) != 1)
            rc = VG_FAIL(err, VIGIL_EIO, "the sandbox child died before it started");
    }
    out->go_fd = go[1]; /* open until the reap: the child's proof that the host lives */
    if (pid <= 0) {
        close(go[1]);
        out->go_fd = -1;
    }
    if (rc && pid > 0) {
        int st;
        int64_t cpu;
        vg_sandbox_kill(out);
        vg_sandbox_reap(out, &st, &cpu);
    }
    return rc;
}

vigil_code vg_sandbox_spawn(const struct vg_sandbox_spec *s, vg_sandbox_main_fn fn, void *user,
                            struct vg_sandbox_child *out, vigil_error *err)
{
    struct vg_sandbox_launch l = {
        .s = s, .ns_flags = VG_SBX_NS_FLAGS, .confine = 1, .fn = fn, .user = user};
    out->pid = out->pidfd = out->go_fd = -1;
    out->from_zygote = 0;
    vigil_code rc = vg_sandbox_check_layers(s, &l.mask, err);
    return rc ? rc : vg_sandbox_launch(&l, out, err);
}

void vg_sandbox_kill(const struct vg_sandbox_child *c)
{
    if (c->pid <= 0)
        return;
    kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL);
}

void vg_sandbox_reap(struct vg_sandbox_child *c, int *status, int64_t *cpu_ms)
{
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    *status = 0;
    vg_sandbox_zygote_answered(c); /* if the host did not say so at its answer */
    while (c->pid > 0 && wait4(c->pid, status, 0, &ru) < 0 && errno == EINTR)
        ;
    *cpu_ms = (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
              (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
    if (c->pidfd >= 0)
        close(c->pidfd);
    if (c->go_fd >= 0)
        close(c->go_fd);
    c->pidfd = c->go_fd = -1;
    c->pid = -1;
    vg_sandbox_cg_remove(&c->cg);
}

/* ---- reaping off the answer's path -------------------------------------------------------- */

/* A child that gave its result has been killed before the answer went back (nothing of it runs
 * after that), but the kernel's teardown of its address space takes milliseconds on some
 * machines: it is waited for here, on a thread of its own, and its cgroup removed after. */
struct reap_item {
    struct vg_sandbox_child c;
    struct reap_item *next;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct reap_item *queue;
    int running;       /* the reaper thread runs */
    unsigned unreaped; /* queued or being reaped */
} reaper = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0};

static pthread_once_t reaper_once = PTHREAD_ONCE_INIT;

/* A forked copy of the host has no reaper thread, and none of the host's children. */
static void reaper_after_fork(void)
{
    pthread_mutex_init(&reaper.lock, NULL);
    pthread_cond_init(&reaper.changed, NULL);
    reaper.queue = NULL;
    reaper.running = 0;
    reaper.unreaped = 0;
}

static void reaper_init(void)
{
    pthread_atfork(NULL, NULL, reaper_after_fork);
}

static void *reaper_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&reaper.lock);
    for (;;) {
        while (!reaper.queue)
            pthread_cond_wait(&reaper.changed, &reaper.lock);
        struct reap_item *it = reaper.queue;
        reaper.queue = it->next;
        pthread_mutex_unlock(&reaper.lock);
        int st;
        int64_t cpu;
        vg_sandbox_reap(&it->c, &st, &cpu);
        free(it);
        /* The next execution's spare gets its cgroup now, off that execution's path. */
        vg_sandbox_zygote_prepare();
        pthread_mutex_lock(&reaper.lock);
        reaper.unreaped--;
        pthread_cond_broadcast(&reaper.changed);
    }
    return NULL;
}

/* Under reaper.lock: the reaper thread runs, or 0 when it could not be started. */
static int reaper_started(void)
{
    if (reaper.running)
        return 1;
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    reaper.running = !pthread_create(&t, &a, reaper_main, NULL);
    pthread_attr_destroy(&a);
    return reaper.running;
}

void vg_sandbox_reap_later(struct vg_sandbox_child *c)
{
    pthread_once(&reaper_once, reaper_init);
    vg_sandbox_kill(c);
    struct reap_item *it = malloc(sizeof *it);
    pthread_mutex_lock(&reaper.lock);
    int queued = it && reaper_started();
    if (queued) {
        it->c = *c;
        it->next = reaper.queue;
        reaper.queue = it;
        reaper.unreaped++;
        pthread_cond_broadcast(&reaper.changed);
    }
    pthread_mutex_unlock(&reaper.lock);
    if (!queued) { /* no memory or no thread: reaped here, as before */
        free(it);
        int st;
        int64_t cpu;
        vg_sandbox_reap(c, &st, &cpu);
    }
    c->pid = c->pidfd = c->go_fd = -1;
    memset(&c->cg, 0, sizeof c->cg);
}

void vg_sandbox_reap_wait(void)
{
    pthread_once(&reaper_once, reaper_init);
    pthread_mutex_lock(&reaper.lock);
    while (reaper.unreaped)
        pthread_cond_wait(&reaper.changed, &reaper.lock);
    pthread_mutex_unlock(&reaper.lock);
    vg_sandbox_zygote_settle(); /* a dead zygote's spares are reaped by its keeper */
}

int vg_sandbox_cpu_ms(pid_t pid, int64_t *ms)
{
    clockid_t id;
    struct timespec ts;
    int e = clock_getcpuclockid(pid, &id);
    if (!e && clock_gettime(id, &ts))
        e = errno;
    if (!e)
        *ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return e;
}

vigil_code vg_sandbox_cg_enter(const struct vg_sandbox_spec *s, struct vg_sandbox_child *c,
                               vigil_error *err)
{
    memset(&c->cg, 0, sizeof c->cg);
    if (!(c->applied & VG_SBX_CGROUP))
        return VIGIL_OK;
    int e = vg_sandbox_cg_make(&c->cg, s->lim.memory_bytes + VG_CG_MEMORY_ROOM, VG_CG_MAX_PIDS);
    if (!e && (e = vg_sandbox_cg_place(&c->cg, c->pid)))
        vg_sandbox_cg_remove(&c->cg);
    return vg_sandbox_cg_missing(s, c, e, err);
}

vigil_code vg_sandbox_cg_missing(const struct vg_sandbox_spec *s, struct vg_sandbox_child *c, int e,
                                 vigil_error *err)
{
    if (!e)
        return VIGIL_OK;
    c->applied &= ~(unsigned)VG_SBX_CGROUP; /* it runs without one, unless one is required */
    if (!(s->required & VG_SBX_CGROUP))
        return VIGIL_OK;
    return VG_FAIL(err, VIGIL_EUNSUPPORTED,
                   "the sandbox needs [\"cgroup\"], but its cgroup could not be made: %s; list it "
                   "in sandbox.accept_missing to run with less",
                   strerror(e));
}
