/*
 * deno_confine.c: the layers of a Deno child. The same layers as a Lua child (confine.c), in
 * the same order, with what a V8 process needs and a C interpreter does not; each difference
 * is listed in docs/sandbox.md ("TypeScript: what differs"):
 *  - seccomp: one execve (Landlock lets it run only the deno binary), threads (clone only with
 *    CLONE_THREAD; clone3 answers ENOSYS so glibc falls back to clone, whose flags a filter can
 *    see), epoll, eventfd, socketpair, and the file calls Deno's runtime makes; executable
 *    memory only as file mappings (the dynamic loader), never anonymous (V8 runs --jitless);
 *  - Landlock: besides the working directory, read-only the execution's scratch folder, the
 *    deno binary (execute), its dynamic loader (execute), the system library folders, and its
 *    own /proc/self/maps;
 *  - the working directory is bind-mounted (in the child's own mount namespace) on a folder in
 *    the scratch folder, and deno works there: deno opens files by absolute path, and the
 *    directory's real parents may be closed to the sandbox's uid (the host's state folder);
 *  - rlimits: RLIMIT_DATA in place of RLIMIT_AS (V8 reserves far more address space than it
 *    uses), RLIMIT_NPROC at 64 threads (every thread counts; a process cannot be made at all;
 *    96 with the cgroup layer, whose cap of 64 then binds first and counts), and at least 64
 *    descriptors.
 */
#include "base/common.h"

#include "sandbox/confine.h"
#include "sandbox/deno.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif

/* What Deno's runtime calls beyond the base list, with no argument worth a condition. */
static const int deno_calls[] = {
    SCMP_SYS(execve),
    SCMP_SYS(mkdir),
    SCMP_SYS(rmdir),
    SCMP_SYS(unlink),
    SCMP_SYS(rename),
    SCMP_SYS(renameat),
    SCMP_SYS(renameat2),
    SCMP_SYS(readlink),
    SCMP_SYS(readlinkat),
    SCMP_SYS(lstat),
    SCMP_SYS(stat),
    SCMP_SYS(access),
    SCMP_SYS(faccessat),
    SCMP_SYS(faccessat2),
    SCMP_SYS(sched_getaffinity),
    SCMP_SYS(set_robust_list),
    SCMP_SYS(rseq),
    SCMP_SYS(uname),
    SCMP_SYS(sysinfo),
    SCMP_SYS(arch_prctl),
    SCMP_SYS(set_tid_address),
    SCMP_SYS(pkey_alloc),
    SCMP_SYS(pkey_free),
    SCMP_SYS(eventfd2),
    SCMP_SYS(epoll_create1),
    SCMP_SYS(epoll_ctl),
    SCMP_SYS(epoll_wait),
    SCMP_SYS(epoll_pwait),
    SCMP_SYS(epoll_pwait2),
    SCMP_SYS(pipe2),
    SCMP_SYS(dup),
    SCMP_SYS(dup3),
    SCMP_SYS(fsync),
    SCMP_SYS(fdatasync),
    SCMP_SYS(fchmod),
    SCMP_SYS(fchmodat),
    SCMP_SYS(utimensat),
    SCMP_SYS(copy_file_range),
    SCMP_SYS(sendfile),
    SCMP_SYS(flock),
    SCMP_SYS(statfs),
    SCMP_SYS(fstatfs),
    SCMP_SYS(membarrier),
    SCMP_SYS(getppid),
    SCMP_SYS(getresuid),
    SCMP_SYS(getresgid),
    SCMP_SYS(rt_sigaction),
    SCMP_SYS(rt_sigtimedwait),
    SCMP_SYS(sched_getparam),
    SCMP_SYS(sched_getscheduler),
    SCMP_SYS(recvfrom),
    SCMP_SYS(sendto),
    SCMP_SYS(recvmsg),
    SCMP_SYS(sendmsg),
};

static int add_conditional_rules(scmp_filter_ctx ctx)
{
    int rc = 0;
    /* Memory never both anonymous and executable: only the loader's file mappings run. */
    rc = rc ? rc
            : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
                               SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    rc = rc ? rc
            : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
                               SCMP_A3(SCMP_CMP_MASKED_EQ, MAP_ANONYMOUS, 0));
    rc = rc ? rc
            : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
                               SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    rc = rc ? rc
            : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(pkey_mprotect), 1,
                               SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    /* Threads, never processes. */
    rc = rc ? rc
            : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                               SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
    rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* Its own memory, read the safe way by Deno's panic report (pid 1: the init of its own PID
     * namespace); without it the report is cut before it says what went wrong. */
    rc = rc ? rc
            : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(process_vm_readv), 1,
                               SCMP_A0(SCMP_CMP_EQ, 1, 0));
    /* Only a pair of connected UNIX sockets (the runtime's own wake-up channel). */
    rc = rc ? rc
            : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
                               SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0));
    /* Reading limits, never setting them. */
    rc = rc ? rc
            : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1,
                               SCMP_A2(SCMP_CMP_EQ, 0, 0));
    /* Thread names and the allocator's names for its mappings. */
    static const unsigned long prctl_ops[] = {PR_SET_NAME, PR_GET_NAME, PR_SET_VMA};
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(prctl_ops); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
                              SCMP_A0(SCMP_CMP_EQ, prctl_ops[i], 0));
    /* Is this a terminal? (It never is.) */
    static const unsigned long ioctl_ops[] = {TCGETS, FIONBIO, FIOCLEX};
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(ioctl_ops); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_EQ, ioctl_ops[i], 0));
    return rc;
}

/* notify: a forbidden call goes to the host (a user notification), which learns its number and
 * kills the process; else the kernel kills it, and the host learns only that one was made. */
static scmp_filter_ctx make_filter(int notify)
{
    scmp_filter_ctx ctx = seccomp_init(notify ? SCMP_ACT_NOTIFY : SCMP_ACT_KILL_PROCESS);
    int rc = ctx ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < vg_sandbox_base_call_count; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, vg_sandbox_base_calls[i], 0);
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(deno_calls); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, deno_calls[i], 0);
    if (!rc)
        rc = add_conditional_rules(ctx);
    if (rc && ctx) {
        seccomp_release(ctx);
        ctx = NULL;
    }
    return ctx;
}

static struct sock_fprog filter, notify_filter;
static int filter_err, notify_filter_err;
static pthread_once_t filter_once = PTHREAD_ONCE_INIT;

static void compile_filter(void)
{
    filter_err = vg_sandbox_export_filter(make_filter(0), &filter);
    notify_filter_err = vg_sandbox_export_filter(make_filter(1), &notify_filter);
}

int vg_deno_prepare(void)
{
    pthread_once(&filter_once, compile_filter);
    return filter_err;
}

/* With a cgroup its pids cap binds first, so that a thread refused is counted (pids.events) and
 * the answer can say process_limit; without one RLIMIT_NPROC is the cap. */
#define DENO_NPROC(mask) ((mask)&VG_SBX_CGROUP ? VG_CG_MAX_PIDS + 32 : VG_CG_MAX_PIDS)

static int apply_rlimits(const struct vg_code_limits *l, unsigned mask)
{
    rlim_t cpu_s = (rlim_t)(l->cpu_ms + 999) / 1000;
    /* The heap V8 is told (--max-old-space-size) plus room for the runtime's own data. */
    rlim_t data = (rlim_t)l->memory_bytes + (rlim_t)512 * 1024 * 1024;
    const struct {
        int which;
        rlim_t v;
    } limits[] = {
        {RLIMIT_DATA, data},
        {RLIMIT_CPU, cpu_s ? cpu_s : 1},
        {RLIMIT_NPROC, DENO_NPROC(mask)},
        {RLIMIT_FSIZE, (rlim_t)l->file_bytes},
        {RLIMIT_NOFILE, (rlim_t)VG_MAX(l->fds, 64)},
        {RLIMIT_CORE, 0},
        {RLIMIT_MEMLOCK, 0},
        {RLIMIT_MSGQUEUE, 0},
        {RLIMIT_LOCKS, 0},
    };
    int rc = 0;
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(limits); i++)
        rc = vg_sandbox_set_limit(limits[i].which, limits[i].v);
    return rc;
}

/* The folders the dynamic loader reads libraries from (those that exist here). */
static const char *const lib_dirs[] = {"/lib", "/lib64", "/usr/lib", "/usr/lib64",
                                       "/etc/ld.so.cache"};

static int apply_landlock(const struct vg_deno_child *d)
{
    int abi = 0, rs = vg_sandbox_landlock_open(&abi);
    if (rs < 0)
        return -rs;
    int rc = vg_sandbox_landlock_allow(rs, abi, ".", VG_SBX_LANDLOCK_WORKDIR);
    if (!rc)
        rc = vg_sandbox_landlock_allow(rs, abi, d->scratch,
                                       LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR);
    if (!rc)
        rc = vg_sandbox_landlock_allow(rs, abi, d->deno,
                                       LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE);
    if (!rc && *d->interp)
        rc = vg_sandbox_landlock_allow(rs, abi, d->interp,
                                       LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE);
    /* Its own memory map: glibc reads it for the main thread's stack bounds, which Deno asks
     * for when it builds a stack trace (and panics without). */
    if (!rc)
        rc = vg_sandbox_landlock_allow(rs, abi, "/proc/self/maps", LANDLOCK_ACCESS_FS_READ_FILE);
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(lib_dirs); i++)
        if (access(lib_dirs[i], F_OK) == 0)
            rc = vg_sandbox_landlock_allow(rs, abi, lib_dirs[i], LANDLOCK_ACCESS_FS_READ_FILE);
    if (!rc && syscall(SYS_landlock_restrict_self, rs, 0) < 0)
        rc = errno;
    close(rs);
    return rc;
}

int vg_deno_enter(const struct vg_sandbox_spec *s, unsigned mask)
{
    const struct vg_deno_child *d = s->confine_user;
    if (!(mask & VG_SBX_MOUNTNS))
        return 0; /* no mount namespace: deno works in the directory by its own path */
    if (mount(".", d->work, NULL, MS_BIND | MS_REC, NULL) || chdir(d->work))
        return errno;
    return 0;
}

/* Give the host the listener of the notifying filter, over the bridge's answer socket (a
 * stream socket pair, so it carries descriptors both ways), before deno runs. */
static int send_listener(int sock, int listener)
{
    char byte = 'L', ctl[CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct iovec io = {.iov_base = &byte, .iov_len = 1};
    struct msghdr m = {
        .msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &listener, sizeof(int));
    int rc = sendmsg(sock, &m, MSG_NOSIGNAL) == 1 ? 0 : errno;
    close(listener); /* never the program's: it could answer its own calls */
    return rc;
}

/* The notifying filter, its listener sent to the host; where the kernel refuses a listener (an
 * older one, or one already in this process's filter tree, e.g. a container's), the killing one. */
static int load_filter(const struct vg_sandbox_spec *s, unsigned mask)
{
    if (!notify_filter.filter)
        return vg_sandbox_load_filter(&filter, filter_err);
    long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                      &notify_filter);
    if (fd < 0)
        return vg_sandbox_load_filter(&filter, filter_err);
    return send_listener((mask & VG_SBX_FDS) ? 0 : s->fd_in, (int)fd);
}

int vg_deno_confine(const struct vg_sandbox_spec *s, unsigned mask, const char **step)
{
    const struct vg_deno_child *d = s->confine_user;
    int rc = 0;
    signal(SIGXFSZ, SIG_IGN); /* a file at its cap: EFBIG, not a crash (kept across exec) */
    if ((mask & VG_SBX_FDS) && (rc = vg_sandbox_settle_fds(s)))
        return *step = "descriptors", rc;
    if ((mask & VG_SBX_RLIMITS) && (rc = apply_rlimits(&s->lim, mask)))
        return *step = "rlimits", rc;
    if ((mask & VG_SBX_NONEWPRIVS) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        return *step = "no_new_privs", errno;
    if ((mask & VG_SBX_LANDLOCK) && (rc = apply_landlock(d)))
        return *step = "landlock", rc;
    if ((mask & VG_SBX_SECCOMP) && (rc = load_filter(s, mask)))
        return *step = "seccomp", rc;
    return 0;
}
