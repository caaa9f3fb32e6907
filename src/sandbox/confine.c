/*
 * confine.c: the layers a child applies to itself once it runs in its namespaces, in an order
 * where each step still has what it needs: descriptors and environment first, then limits,
 * no_new_privs, Landlock (files under the working directory only, no TCP, no signals or
 * abstract sockets out of its domain), and the seccomp allowlist last, since it forbids the
 * calls the earlier steps make (a spare loads it before its request, with those few calls
 * allowed: setup_calls). Runs in the child only: it never returns an error to a host.
 */
#include "base/common.h"

#include "sandbox/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

/* The calls a Lua interpreter and the bridge need; everything else kills the process. open
 * and friends stay: Landlock, not seccomp, decides which files (one layer per concern). */
const int vg_sandbox_base_calls[] = {
    SCMP_SYS(read),
    SCMP_SYS(write),
    SCMP_SYS(readv),
    SCMP_SYS(writev),
    SCMP_SYS(close),
    SCMP_SYS(exit),
    SCMP_SYS(exit_group),
    SCMP_SYS(brk),
    SCMP_SYS(munmap),
    SCMP_SYS(mremap),
    SCMP_SYS(madvise),
    SCMP_SYS(rt_sigreturn),
    SCMP_SYS(rt_sigprocmask),
    SCMP_SYS(futex),
    SCMP_SYS(clock_gettime),
    SCMP_SYS(clock_getres),
    SCMP_SYS(gettimeofday),
    SCMP_SYS(time),
    SCMP_SYS(getpid),
    SCMP_SYS(gettid),
    SCMP_SYS(getuid),
    SCMP_SYS(getgid),
    SCMP_SYS(geteuid),
    SCMP_SYS(getegid),
    SCMP_SYS(getrusage),
    SCMP_SYS(times),
    SCMP_SYS(fstat),
    SCMP_SYS(newfstatat),
    SCMP_SYS(statx),
    SCMP_SYS(lseek),
    SCMP_SYS(openat),
    SCMP_SYS(getdents64),
    SCMP_SYS(unlinkat),
    SCMP_SYS(mkdirat),
    SCMP_SYS(ftruncate),
    SCMP_SYS(fcntl),
    SCMP_SYS(restart_syscall),
    SCMP_SYS(sched_yield),
    SCMP_SYS(getrandom),
    SCMP_SYS(sigaltstack),
    SCMP_SYS(getcwd),
    SCMP_SYS(nanosleep),
    SCMP_SYS(clock_nanosleep),
    SCMP_SYS(poll),
    SCMP_SYS(ppoll),
    SCMP_SYS(pread64),
    SCMP_SYS(pwrite64),
};
const size_t vg_sandbox_base_call_count = VG_ARRAY_LEN(vg_sandbox_base_calls);

/* The calls a spare makes after its request until it runs the program: taking the request
 * (recvmsg on its socket), entering its directory, placing its descriptors, its limits and
 * Landlock. Each only moves the process's own descriptors or narrows its own rights (limits
 * lowered in a PID namespace it is alone in, Landlock restrictions added), so a spare loads
 * its one filter before its request with these allowed too (make_filter(1)): loading a filter
 * costs 0.1-0.3 ms whatever its size on this kind of machine (the kernel's per-filter setup
 * and JIT), which is then not on the execution's path. A child started without a spare loads
 * the allowlist alone, last. */
static const int setup_calls[] = {
    SCMP_SYS(recvmsg),
    SCMP_SYS(fchdir),
    SCMP_SYS(dup2),
    SCMP_SYS(dup3),
    SCMP_SYS(close_range),
    SCMP_SYS(setrlimit),
    SCMP_SYS(prlimit64),
    SCMP_SYS(landlock_create_ruleset),
    SCMP_SYS(landlock_add_rule),
    SCMP_SYS(landlock_restrict_self),
};

/* The allowlist; with_setup: and the setup calls besides (a spare's first filter). */
static scmp_filter_ctx make_filter(int with_setup)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
    int rc = ctx ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < vg_sandbox_base_call_count; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, vg_sandbox_base_calls[i], 0);
    for (size_t i = 0; !rc && with_setup && i < VG_ARRAY_LEN(setup_calls); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, setup_calls[i], 0);
    /* Memory, but never executable: no code but the interpreter's runs. */
    if (!rc)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
                              SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    if (!rc)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
                              SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    if (!rc) /* setting a disposition (SIGXFSZ ignored) sends no signal anywhere */
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rt_sigaction), 0);
    if (rc && ctx) {
        seccomp_release(ctx);
        ctx = NULL;
    }
    return ctx;
}

/* The filters are compiled once per host process (libseccomp takes milliseconds) and loaded by
 * each child as finished BPF programs. */
static struct sock_fprog filter, early_filter;
static int filter_err, early_filter_err;
static pthread_once_t filter_once = PTHREAD_ONCE_INIT;

int vg_sandbox_export_filter(void *seccomp_ctx, struct sock_fprog *out)
{
    scmp_filter_ctx ctx = seccomp_ctx;
    int fd = ctx ? memfd_create("vigil-seccomp", MFD_CLOEXEC) : -1;
    off_t size = fd >= 0 && seccomp_export_bpf(ctx, fd) == 0 ? lseek(fd, 0, SEEK_END) : -1;
    void *prog = size > 0 ? malloc((size_t)size) : NULL;
    int rc = 0;
    if (prog && pread(fd, prog, (size_t)size, 0) == size) {
        out->filter = prog;
        out->len = (unsigned short)((size_t)size / sizeof(struct sock_filter));
    } else {
        free(prog);
        rc = errno ? errno : EINVAL;
    }
    if (fd >= 0)
        close(fd);
    if (ctx)
        seccomp_release(ctx);
    return rc;
}

int vg_sandbox_load_filter(const struct sock_fprog *f, int compile_err)
{
    if (!f->filter)
        return compile_err ? compile_err : EINVAL;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, f, 0, 0) ? errno : 0;
}

static void compile_filter(void)
{
    filter_err = vg_sandbox_export_filter(make_filter(0), &filter);
    early_filter_err = vg_sandbox_export_filter(make_filter(1), &early_filter);
}

int vg_sandbox_prepare(void)
{
    pthread_once(&filter_once, compile_filter);
    return filter_err;
}

static int apply_seccomp(void)
{
    return vg_sandbox_load_filter(&filter, filter_err);
}

static int landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v < 0 ? 0 : (int)v;
}

/* Every filesystem right the ABI knows is handled (so denied unless a rule grants it). */
static uint64_t landlock_fs_rights(int abi)
{
    uint64_t r =
        LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
        LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR |
        LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
        LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
        LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2)
        r |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        r |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return r;
}

/* The ruleset struct grows with the ABI; the kernel takes the size we pass. */
struct vg_landlock_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

int vg_sandbox_landlock_open(int *abi_out)
{
    int abi = landlock_abi();
    *abi_out = abi;
    if (abi < 1)
        return -ENOSYS;
    struct vg_landlock_attr attr = {.handled_access_fs = landlock_fs_rights(abi)};
    size_t size = sizeof(uint64_t);
    if (abi >= 4) {
        attr.handled_access_net = 3; /* LANDLOCK_ACCESS_NET_BIND_TCP | CONNECT_TCP */
        size = 2 * sizeof(uint64_t);
    }
    if (abi >= 6) {
        attr.scoped = 3; /* LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL */
        size = sizeof attr;
    }
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    return rs < 0 ? -errno : rs;
}

int vg_sandbox_landlock_allow(int rs, int abi, const char *path, uint64_t access)
{
    struct landlock_path_beneath_attr rule = {.allowed_access = access & landlock_fs_rights(abi)};
    rule.parent_fd = open(path, O_PATH | O_CLOEXEC);
    int rc = 0;
    if (rule.parent_fd < 0 ||
        syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0)
        rc = errno;
    if (rule.parent_fd >= 0)
        close(rule.parent_fd);
    return rc;
}

static int apply_landlock(const char *workdir)
{
    int abi = 0, rs = vg_sandbox_landlock_open(&abi);
    if (rs < 0)
        return -rs;
    int rc = vg_sandbox_landlock_allow(rs, abi, workdir, VG_SBX_LANDLOCK_WORKDIR);
    if (!rc && syscall(SYS_landlock_restrict_self, rs, 0) < 0)
        rc = errno;
    close(rs);
    return rc;
}

/* The address space the child has already mapped (it is a copy of the host). Read without
 * stdio, whose buffers and list of streams would be written into pages copied from the host. */
static rlim_t mapped_bytes(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = 0;
    unsigned long long pages = strtoull(buf, NULL, 10);
    return (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
}

int vg_sandbox_set_limit(int which, rlim_t v)
{
    struct rlimit r = {v, v};
    return setrlimit(which, &r) ? errno : 0;
}

/* What a spare applied before its request (vg_sandbox_confine_early), in this process. */
static struct {
    int done;
    int seccomp;   /* its filter is loaded, with the setup calls allowed */
    rlim_t mapped; /* mapped_bytes() then: nothing is mapped between there and the request */
} early;

/* The limits every execution has, whatever its own. */
static int apply_fixed_rlimits(void)
{
    /* the one process it is; a second fails (the uid is not root, so this binds) */
    int rc = vg_sandbox_set_limit(RLIMIT_NPROC, 1);
    if (!rc)
        rc = vg_sandbox_set_limit(RLIMIT_CORE, 0);
    if (!rc)
        rc = vg_sandbox_set_limit(RLIMIT_MEMLOCK, 0);
    if (!rc)
        rc = vg_sandbox_set_limit(RLIMIT_MSGQUEUE, 0);
    if (!rc)
        rc = vg_sandbox_set_limit(RLIMIT_LOCKS, 0);
    return rc;
}

/* The limits of this execution (and the fixed ones, unless applied early). */
static int apply_rlimits(const struct vg_sandbox_spec *s)
{
    const struct vg_code_limits *l = &s->lim;
    rlim_t cpu_s = (rlim_t)(l->cpu_ms + 999) / 1000;
    /* Room for the interpreter's own allocations beyond the heap cap Lua enforces. */
    rlim_t as = (early.done ? early.mapped + (rlim_t)s->received_bytes : mapped_bytes()) +
                (rlim_t)l->memory_bytes + (rlim_t)64 * 1024 * 1024 +
                VG_LUA_ARENA_MAX; /* the interpreter's arena, reserved beside its heap */
    int rc = vg_sandbox_set_limit(RLIMIT_AS, as);
    if (!rc)
        rc = vg_sandbox_set_limit(RLIMIT_CPU,
                                  cpu_s ? cpu_s : 1); /* soft = hard: SIGKILL, even as init */
    if (!rc)
        rc = vg_sandbox_set_limit(RLIMIT_FSIZE, (rlim_t)l->file_bytes);
    if (!rc)
        rc = vg_sandbox_set_limit(RLIMIT_NOFILE, (rlim_t)l->fds);
    if (!rc && !early.done)
        rc = apply_fixed_rlimits();
    return rc;
}

static char *empty_env[] = {NULL};

/* A file at its cap: EFBIG, not a crash; a pipe closed: EPIPE. */
static void ignore_signals(void)
{
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
}

int vg_sandbox_confine_early(unsigned mask, const char **step)
{
    int rc = 0;
    ignore_signals();
    /* No environment; emptied now also because the first write to the C library's page that
     * holds it is a copy of that page (a fault, 50-100 us on a virtual machine) */
    if (mask & VG_SBX_FDS)
        environ = empty_env;
    if ((mask & VG_SBX_RLIMITS) && (rc = apply_fixed_rlimits()))
        return *step = "rlimits", rc;
    early.mapped = mapped_bytes();
    if ((mask & VG_SBX_NONEWPRIVS) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        return *step = "no_new_privs", errno;
    if ((mask & VG_SBX_SECCOMP) && (rc = vg_sandbox_load_filter(&early_filter, early_filter_err)))
        return *step = "seccomp", rc;
    early.seccomp = (mask & VG_SBX_SECCOMP) != 0;
    early.done = 1;
    return 0;
}

/* fd_in/out/err become 0/1/2; every other descriptor is closed; the environment is emptied. */
int vg_sandbox_settle_fds(const struct vg_sandbox_spec *s)
{
    int fds[3] = {s->fd_in, s->fd_out, s->fd_err};
    int placed = fds[0] == 0 && fds[1] == 1 && fds[2] == 2; /* a spare received them so */
    /* Move them above 2 first so dup2 never overwrites one still needed. */
    for (int i = 0; !placed && i < 3; i++)
        if ((fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10)) < 0)
            return errno;
    for (int i = 0; !placed && i < 3; i++)
        if (dup2(fds[i], i) < 0)
            return errno;
    if (syscall(SYS_close_range, 3u, ~0u, 0u) < 0)
        for (int fd = 3; fd < 65536; fd++)
            close(fd);
    environ = empty_env;
    return 0;
}

int vg_sandbox_confine(const struct vg_sandbox_spec *s, unsigned mask, const char **step)
{
    int rc = 0;
    if (!early.done)
        ignore_signals();
    /* Descriptors before the descriptor limit; limits read /proc before Landlock closes it. */
    if ((mask & VG_SBX_FDS) && (rc = vg_sandbox_settle_fds(s)))
        return *step = "descriptors", rc;
    if ((mask & VG_SBX_RLIMITS) && (rc = apply_rlimits(s)))
        return *step = "rlimits", rc;
    if ((mask & VG_SBX_NONEWPRIVS) && !early.done && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        return *step = "no_new_privs", errno;
    if ((mask & VG_SBX_LANDLOCK) && (rc = apply_landlock(".")))
        return *step = "landlock", rc;
    if ((mask & VG_SBX_SECCOMP) && !early.seccomp && (rc = apply_seccomp()))
        return *step = "seccomp", rc;
    return 0;
}
