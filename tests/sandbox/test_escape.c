/*
 * test_escape.c: the confinement layers hold on their own, below the Lua environment: each
 * probe is C code run in a confined child exactly as a Lua program's child is confined
 * (vg_sandbox_spawn), trying one way out. A probe exits 0 when it was refused, 1 when it got
 * through; one the seccomp filter forbids dies of SIGSYS. Afterwards the file outside the
 * working directory is unchanged and no process is left.
 */
#include "base/common.h"

#include "sandbox/sandbox_helpers.h"
#include "os/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char wd[4096], outside[4200];

/* Start fn in a confined child as an execution's child is started (through the zygote). */
static void start_probe(int (*fn)(void *), struct vg_sandbox_child *c)
{
    struct vg_sandbox_spec s = {
        .workdir = wd, .required = VG_SBX_REQUIRED_DEFAULT, .sandbox_uid = 65534};
    vg_code_limits_default(&s.lim);
    s.lim.memory_bytes = 32u * 1024 * 1024;
    s.lim.cpu_ms = 1000;
    s.lim.file_bytes = 4096;
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    s.fd_in = s.fd_out = s.fd_err = null_fd;
    vigil_error err = {0};
    if (vg_sandbox_spawn_flat(&s, (vg_sandbox_main_fn)fn, NULL, 0, c, &err))
        TEST_FAIL_("spawn: %s", err.message);
    close(null_fd);
}

/* Run probe in a confined child; its wait status. */
static int probe(int (*fn)(void *), unsigned *applied)
{
    struct vg_sandbox_child c;
    start_probe(fn, &c);
    if (applied)
        *applied = c.applied;
    int st;
    int64_t cpu;
    vg_sandbox_reap(&c, &st, &cpu);
    return st;
}

#define DENIED_BY_SECCOMP(fn)                                                                      \
    do {                                                                                           \
        int st_ = probe(fn, NULL);                                                                 \
        if (!WIFSIGNALED(st_) || WTERMSIG(st_) != SIGSYS)                                          \
            TEST_FAIL_("%s: expected death by SIGSYS, got status %#x", #fn, st_);                  \
    } while (0)

/* Did not get through: refused, or killed on the way (a sanitizer's allocator may die of the
 * filter where the plain one returns NULL). */
#define CONTAINED(fn)                                                                              \
    do {                                                                                           \
        int st_ = probe(fn, NULL);                                                                 \
        if (WIFEXITED(st_) && WEXITSTATUS(st_) != 0)                                               \
            TEST_FAIL_("%s: got through (status %#x)", #fn, st_);                                  \
    } while (0)

#define REFUSED(fn)                                                                                \
    do {                                                                                           \
        int st_ = probe(fn, NULL);                                                                 \
        if (!WIFEXITED(st_) || WEXITSTATUS(st_) != 0)                                              \
            TEST_FAIL_("%s: expected a refusal (exit 0), got status %#x", #fn, st_);               \
    } while (0)

/* ---- process spawn and kernel surface: seccomp kills ---------------------------------------- */

static int p_exec(void *u)
{
    char *argv[] = {"/bin/true", NULL};
    execve("/bin/true", argv, environ);
    return 1;
}
static int p_fork(void *u)
{
    return fork() >= 0;
}
static int p_vfork(void *u)
{
    return (int)syscall(SYS_vfork) >= 0;
}
static int p_clone_thread(void *u)
{
    return (int)syscall(SYS_clone, CLONE_VM | CLONE_THREAD | CLONE_SIGHAND, 0, 0, 0, 0) >= 0;
}
static void *thread_fn(void *a)
{
    return a;
}
static int p_pthread(void *u)
{
    pthread_t t;
    return pthread_create(&t, NULL, thread_fn, NULL) == 0;
}
static int p_socket_inet(void *u)
{
    return socket(AF_INET, SOCK_STREAM, 0) >= 0;
}
static int p_socket_unix(void *u)
{
    return socket(AF_UNIX, SOCK_STREAM, 0) >= 0;
}
static int p_socketpair(void *u)
{
    int sv[2];
    return socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0;
}
static int p_ptrace(void *u)
{
    return ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0;
}
static int p_io_uring(void *u)
{
    return syscall(425 /* io_uring_setup */, 1, NULL) >= 0;
}
static int p_bpf(void *u)
{
    return syscall(SYS_bpf, 0, NULL, 0) >= 0;
}
static int p_perf(void *u)
{
    return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0) >= 0;
}
static int p_userfaultfd(void *u)
{
    return syscall(SYS_userfaultfd, 0) >= 0;
}
static int p_keyctl(void *u)
{
    return syscall(SYS_keyctl, 0, 0, 0, 0, 0) >= 0;
}
static int p_mount(void *u)
{
    return syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, NULL) == 0;
}
static int p_unshare(void *u)
{
    return syscall(SYS_unshare, CLONE_NEWUSER) == 0;
}
static int p_setns(void *u)
{
    return syscall(SYS_setns, 0, 0) == 0;
}
static int p_kill_init(void *u)
{
    return kill(1, SIGKILL) == 0;
}
static int p_kill_host(void *u)
{
    return kill(getppid(), 0) == 0;
}
static int p_setuid(void *u)
{
    return setuid(0) == 0;
}
static int p_chdir_up(void *u)
{
    return chdir("..") == 0;
}
static int p_exec_mem(void *u)
{
    return mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                0) != MAP_FAILED;
}
static int p_mprotect_exec(void *u)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return mprotect(p, 4096, PROT_READ | PROT_EXEC) == 0;
}
static int p_prctl(void *u)
{
    return syscall(SYS_prctl, PR_SET_DUMPABLE, 1, 0, 0, 0) == 0;
}
static int p_memfd(void *u)
{
    return syscall(SYS_memfd_create, "x", 0) >= 0;
}
static int p_pidfd(void *u)
{
    return syscall(SYS_pidfd_open, 1, 0) >= 0;
}
static int p_process_vm(void *u)
{
    return syscall(SYS_process_vm_readv, 1, NULL, 0, NULL, 0, 0) >= 0;
}

TEST(process_and_kernel_surface_killed)
{
    DENIED_BY_SECCOMP(p_exec);
    DENIED_BY_SECCOMP(p_fork);
    DENIED_BY_SECCOMP(p_vfork);
    DENIED_BY_SECCOMP(p_clone_thread);
    DENIED_BY_SECCOMP(p_pthread);
    DENIED_BY_SECCOMP(p_socket_inet);
    DENIED_BY_SECCOMP(p_socket_unix);
    DENIED_BY_SECCOMP(p_socketpair);
    DENIED_BY_SECCOMP(p_ptrace);
    DENIED_BY_SECCOMP(p_io_uring);
    DENIED_BY_SECCOMP(p_bpf);
    DENIED_BY_SECCOMP(p_perf);
    DENIED_BY_SECCOMP(p_userfaultfd);
    DENIED_BY_SECCOMP(p_keyctl);
    DENIED_BY_SECCOMP(p_mount);
    DENIED_BY_SECCOMP(p_unshare);
    DENIED_BY_SECCOMP(p_setns);
    DENIED_BY_SECCOMP(p_kill_init);
    DENIED_BY_SECCOMP(p_kill_host);
    DENIED_BY_SECCOMP(p_setuid);
    DENIED_BY_SECCOMP(p_chdir_up);
    DENIED_BY_SECCOMP(p_exec_mem);
    DENIED_BY_SECCOMP(p_mprotect_exec);
    DENIED_BY_SECCOMP(p_prctl);
    DENIED_BY_SECCOMP(p_memfd);
    DENIED_BY_SECCOMP(p_pidfd);
    DENIED_BY_SECCOMP(p_process_vm);
    sbx_assert_no_children();
}

/* ---- files: Landlock keeps the child beneath its working directory ------------------------- */

static int refused_open(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC, 0600);
    if (fd >= 0)
        return 1;
    return errno == EACCES || errno == EPERM ? 0 : 2;
}
static int p_dotdot(void *u)
{
    return refused_open("../outside.txt", O_RDONLY);
}
static int p_dotdot_write(void *u)
{
    return refused_open("../outside.txt", O_WRONLY | O_TRUNC);
}
static int p_absolute(void *u)
{
    return refused_open(outside, O_RDONLY);
}
static int p_etc_passwd(void *u)
{
    return refused_open("/etc/passwd", O_RDONLY);
}
static int p_symlink_out(void *u)
{
    return refused_open("link-out", O_RDONLY);
}
static int p_proc_environ(void *u)
{
    return refused_open("/proc/self/environ", O_RDONLY);
}
static int p_proc_host(void *u)
{
    return refused_open("/proc/1/cmdline", O_RDONLY);
}
static int p_dev_mem(void *u)
{
    return refused_open("/dev/null", O_RDWR);
}
static int p_root_dir(void *u)
{
    return refused_open("/", O_RDONLY | O_DIRECTORY);
}
static int p_create_outside(void *u)
{
    return refused_open("../planted.txt", O_WRONLY | O_CREAT);
}
static int p_hardlink_make(void *u)
{
    return syscall(SYS_link, outside, "stolen") == 0;
}
static int p_symlink_make(void *u)
{
    return syscall(SYS_symlink, "/etc/passwd", "sl") == 0;
}
static int p_inside_ok(void *u)
{
    int fd = open("inside.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    return fd >= 0 && write(fd, "ok", 2) == 2 ? 0 : 1;
}

TEST(files_outside_refused)
{
    /* planted before the run (sbx_plant): link-out, a symlink to the file outside */
    REFUSED(p_dotdot);
    REFUSED(p_dotdot_write);
    REFUSED(p_absolute);
    REFUSED(p_etc_passwd);
    REFUSED(p_symlink_out);
    REFUSED(p_proc_environ);
    REFUSED(p_proc_host);
    REFUSED(p_dev_mem);
    REFUSED(p_root_dir);
    REFUSED(p_create_outside);
    DENIED_BY_SECCOMP(p_hardlink_make); /* link and symlink are not in the allowlist at all */
    DENIED_BY_SECCOMP(p_symlink_make);
    REFUSED(p_inside_ok); /* and what is allowed works */
    char *text = NULL;
    size_t n = 0;
    vigil_error err = {0};
    ASSERT_OK(vg_fs_read_file(outside, 4096, &text, &n, &err));
    ASSERT_STREQ(text, "secret");
    vg_free(text);
    char planted[4200];
    snprintf(planted, sizeof planted, "%s/../planted.txt", wd);
    ASSERT(access(planted, F_OK) != 0);
    sbx_assert_no_children();
}

/* ---- environment, descriptors, identity, resources ---------------------------------------- */

static int p_env_empty(void *u)
{
    return environ[0] != NULL;
}
static int p_fds_closed(void *u)
{
    for (int fd = 3; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            return 1;
    return 0;
}
static int p_uid_not_root(void *u)
{
    return getuid() == 0 || geteuid() == 0;
}
static int p_pid_ns(void *u)
{
    return getpid() != 1;
} /* alone in its PID namespace */
/* Every page written through a volatile pointer: an optimizer may drop a malloc and memset
 * whose bytes nobody reads (clang does at -O1), and the probe would "get through". */
static int p_big_memory(void *u)
{
    volatile char *p = malloc((size_t)1 << 30);
    if (!p)
        return 0;
    for (size_t i = 0; i < ((size_t)1 << 30); i += 4096)
        p[i] = 1;
    return 1;
}
static int p_file_size(void *u)
{
    int fd = open("big.bin", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    static char block[8192];
    ssize_t w = write(fd, block, sizeof block);
    close(fd);
    return w == (ssize_t)sizeof block; /* the cap is 4096: a short write or EFBIG */
}
static int p_fd_exhaust(void *u)
{
    for (int i = 0; i < 64; i++)
        if (open(".", O_RDONLY | O_DIRECTORY) < 0)
            return errno == EMFILE ? 0 : 2;
    return 1;
}
static int p_spin(void *u)
{
    for (volatile unsigned long i = 0;; i++)
        ;
    return 1;
}

TEST(environment_identity_and_limits)
{
    unsigned applied = 0;
    int st = probe(p_env_empty, &applied);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    struct vg_sandbox_probe pr;
    vg_sandbox_probe(&pr);
    ASSERT_EQ(applied, pr.offered); /* the cgroup too, where this process may make cgroups */
    REFUSED(p_fds_closed);
    REFUSED(p_uid_not_root);
    if (applied & VG_SBX_PIDNS)
        REFUSED(p_pid_ns);
    CONTAINED(p_big_memory);
    REFUSED(p_file_size);
    REFUSED(p_fd_exhaust);
    st = probe(p_spin, NULL); /* RLIMIT_CPU (1 s): SIGKILL, even as its namespace's init */
    ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    sbx_assert_no_children();
}

/* A spare's filter also allows the calls that take its request and confine it (confine.c,
 * setup_calls); none of them widens anything. */
static int p_raise_limit(void *u)
{
    struct rlimit r = {RLIM_INFINITY, RLIM_INFINITY};
    return setrlimit(RLIMIT_NPROC, &r) == 0 || prlimit(0, RLIMIT_AS, &r, NULL) == 0;
}
static int p_landlock_widened(void *u)
{
    struct landlock_ruleset_attr attr = {.handled_access_fs = LANDLOCK_ACCESS_FS_READ_FILE};
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    struct landlock_path_beneath_attr rule = {.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE,
                                              .parent_fd = open("/", O_PATH | O_CLOEXEC)};
    if (rs >= 0 && rule.parent_fd >= 0)
        syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    if (rs >= 0)
        syscall(SYS_landlock_restrict_self, rs, 0);
    return open(outside, O_RDONLY | O_CLOEXEC) >= 0;
}
static int p_descriptor_dir(void *u)
{
    return fchdir(0) == 0 || fchdir(1) == 0 || fchdir(2) == 0;
}

TEST(setup_calls_only_narrow)
{
    REFUSED(p_raise_limit);
    REFUSED(p_landlock_widened);
    REFUSED(p_descriptor_dir);
    sbx_assert_no_children();
}

/* The child dies with its host: a host killed mid-execution (SIGKILL, no cleanup) takes its
 * confined child with it (PR_SET_PDEATHSIG), so nothing outlives a crashed daemon. */
TEST(child_dies_with_its_host)
{
    int pp[2];
    ASSERT_EQ(pipe(pp), 0);
    pid_t host = fork();
    if (host == 0) {
        struct vg_sandbox_spec s = {
            .workdir = wd, .required = VG_SBX_REQUIRED_DEFAULT, .sandbox_uid = 65534};
        vg_code_limits_default(&s.lim);
        s.lim.cpu_ms = 600000; /* only the host's death may end it here */
        int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        s.fd_in = s.fd_out = s.fd_err = null_fd;
        struct vg_sandbox_child c;
        vigil_error err = {0};
        if (vg_sandbox_spawn_flat(&s, (vg_sandbox_main_fn)p_spin, NULL, 0, &c, &err))
            _exit(2);
        int32_t pid = c.pid;
        if (write(pp[1], &pid, sizeof pid) != sizeof pid)
            _exit(3);
        for (;;)
            pause();
    }
    close(pp[1]);
    int32_t child = 0;
    ASSERT_EQ(read(pp[0], &child, sizeof child), (ssize_t)sizeof child);
    close(pp[0]);
    int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
    ASSERT(pidfd >= 0);
    kill(host, SIGKILL);
    int st;
    ASSERT_EQ(waitpid(host, &st, 0), host);
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    ASSERT_EQ(poll(&p, 1, 30000), 1); /* a long safety timeout: it ends at once */
    close(pidfd);
    sbx_assert_no_children();
}

/* Executions share the zygote's user, mount, network and IPC namespaces, but each is the init
 * of a PID namespace of its own: one cannot see another's processes, and its attempt to signal
 * anything (kill(-1), every process it could name) kills only itself, while the other runs on. */
static int p_kill_all(void *u)
{
    return kill(-1, SIGKILL) == 0;
}

TEST(executions_cannot_see_or_signal_each_other)
{
    struct vg_sandbox_child a;
    start_probe(p_spin, &a);
    /* In a session of its own, not the zygote's group (which a dead zygote's keeper kills). */
    ASSERT_EQ(getsid(a.pid), a.pid);
    ASSERT_EQ(getpgid(a.pid), a.pid);
    REFUSED(p_pid_ns); /* while a runs: alone, as pid 1 */
    DENIED_BY_SECCOMP(p_kill_all);
    DENIED_BY_SECCOMP(p_kill_host);
    struct pollfd alive = {.fd = a.pidfd, .events = POLLIN};
    ASSERT_EQ(poll(&alive, 1, 0), 0); /* a still runs */
    vg_sandbox_kill(&a);
    int st;
    int64_t cpu;
    vg_sandbox_reap(&a, &st, &cpu);
    ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    sbx_assert_no_children();
}

/* The zygote is started by the first execution, not before; when it dies, the spare it had
 * made serves the next execution, and the one after starts a new zygote and runs. */
TEST(zygote_is_lazy_and_replaced_when_it_dies)
{
    struct vg_sandbox_probe pr;
    vg_sandbox_probe(&pr);
    if (!(pr.offered & VG_SBX_USERNS))
        return; /* no namespaces here: executions start the direct way, with no zygote */
    REFUSED(p_pid_ns);
    pid_t first = vg_sandbox_zygote_pid();
    ASSERT(first > 0);
    ASSERT_EQ(kill(first, SIGKILL), 0);
    REFUSED(p_pid_ns);
    REFUSED(p_pid_ns);
    pid_t second = vg_sandbox_zygote_pid();
    ASSERT(second > 0 && second != first);
    ASSERT_EQ(kill(first, 0), -1); /* the dead one was reaped, not left a zombie */
    sbx_assert_no_children();
}

/* A zygote killed at any moment of its loop (making a spare, saying its pid, giving it its
 * turn, waiting for its request) leaves no process: the spares it said and the one it made but
 * had not said yet die and are reaped with it, and the next execution runs on a new zygote. */
TEST(zygote_killed_at_any_moment_leaves_no_process)
{
    struct vg_sandbox_probe pr;
    vg_sandbox_probe(&pr);
    if (!(pr.offered & VG_SBX_USERNS))
        return;
    for (int i = 0; i < 40; i++) {
        REFUSED(p_pid_ns);
        /* Not synchronised with the zygote: a varying number of system calls moves the kill
         * over the steps of its loop. */
        for (int k = 0; k < i * 20; k++)
            (void)getppid();
        pid_t z = vg_sandbox_zygote_pid();
        ASSERT(z > 0);
        int zfd = (int)syscall(SYS_pidfd_open, z, 0);
        ASSERT(zfd >= 0);
        ASSERT_EQ(kill(z, SIGKILL), 0);
        REFUSED(p_pid_ns); /* while it dies, or after */
        /* A killed process takes a moment to die (its descriptors close first, so a spare it
         * made may end before it): the check is for once it is dead. */
        struct pollfd dead = {.fd = zfd, .events = POLLIN};
        ASSERT_EQ(poll(&dead, 1, 30000), 1); /* a long safety timeout: it ends at once */
        close(zfd);
        sbx_assert_no_children();
    }
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A spare that never gets ready (stopped here) holds nothing up: the reaper's preparing of the
 * next spare does not wait for it under the lock every request needs, and the request that
 * needs it has it killed, with its zygote, and runs on a new one. */
TEST(stuck_spare_is_killed_and_replaced)
{
    struct vg_sandbox_probe pr;
    vg_sandbox_probe(&pr);
    if (!(pr.offered & VG_SBX_USERNS))
        return;
    REFUSED(p_pid_ns);
    pid_t first = vg_sandbox_zygote_pid();
    ASSERT(vg_sandbox_spare_pid() > 0);
    /* Said, but not given its turn before the ready spare takes a request: not ready yet. */
    pid_t stuck = vg_sandbox_next_spare_pid();
    ASSERT(stuck > 0);
    ASSERT_EQ(kill(stuck, SIGSTOP), 0);
    int64_t t0 = mono_ms();
    struct vg_code_result r;
    sbx_run(wd, "return 1", 0, NULL, &r); /* the ready spare; reaped on the reaper thread */
    ASSERT(r.ok);
    vg_code_result_release(&r);
    vg_sandbox_reap_wait();
    /* Before, the reaper waited up to 30 s for the stopped spare, holding the zygote's lock;
     * a spare is stuck after 5 s. */
    ASSERT(mono_ms() - t0 < 5000);
    REFUSED(p_pid_ns); /* finds the spare stuck: a new zygote serves it */
    ASSERT(vg_sandbox_zygote_pid() != first);
    ASSERT_EQ(kill(stuck, 0), -1); /* killed and reaped */
    sbx_assert_no_children();
}

/* SBX_ONLY=part runs only the cases whose name contains it (to repeat one under load). */
#define RUN_SOME(name)                                                                             \
    do {                                                                                           \
        const char *only_ = getenv("SBX_ONLY");                                                    \
        if (!only_ || strstr(#name, only_))                                                        \
            RUN(name);                                                                             \
    } while (0)

int main(void)
{
    sbx_plant("sandbox-escape/wd", wd, sizeof wd, outside, sizeof outside);
    ASSERT_EQ(vg_sandbox_zygote_pid(), -1); /* nothing ran yet: no zygote */
    RUN_SOME(process_and_kernel_surface_killed);
    RUN_SOME(files_outside_refused);
    RUN_SOME(environment_identity_and_limits);
    RUN_SOME(setup_calls_only_narrow);
    RUN_SOME(child_dies_with_its_host);
    RUN_SOME(executions_cannot_see_or_signal_each_other);
    RUN_SOME(zygote_is_lazy_and_replaced_when_it_dies);
    RUN_SOME(zygote_killed_at_any_moment_leaves_no_process);
    RUN_SOME(stuck_spare_is_killed_and_replaced);
    return 0;
}
