/*
 * test_cgroup.c: the cgroup layer (docs/sandbox.md, "The cgroup layer"). Where this process may
 * make cgroups (root on this host's cgroup v1 hierarchies, or a delegated v2 subtree), each
 * execution gets one of its own before it runs: a memory bomb and a fork bomb are stopped by
 * it (its own counters say so), and nothing is left afterwards. Where it may not (an
 * unprivileged user), the layer is reported absent and a run does not fail for it, unless the
 * configuration requires it.
 */
#include "base/common.h"

#include "sandbox/sandbox_helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char wd[4096];

/* The bombs run with no layer of their own (no seccomp, no rlimits): only the cgroup stops
 * them. */
static int confine_nothing(const struct vg_sandbox_spec *s, unsigned mask, const char **step)
{
    (void)s, (void)mask, (void)step;
    return 0;
}

static int memory_bomb(void *user)
{
    (void)user;
    for (int i = 0; i < 4096; i++) {        /* 4 GiB, touched page by page */
        volatile char *p = malloc(1 << 20); /* volatile: the stores must happen */
        if (!p)
            return 2;
        for (size_t k = 0; k < (1u << 20); k += 4096)
            p[k] = 1;
    }
    return 1; /* got it all: the cap did not hold */
}

static int fork_bomb(void *user)
{
    (void)user;
    for (int i = 0; i < 1000; i++) {
        pid_t p = fork();
        if (p == 0) {
            pause(); /* killed with the namespace when its init ends */
            _exit(0);
        }
        if (p < 0)
            return errno == EAGAIN ? 0 : 2; /* refused at pids.max */
    }
    return 1;
}

static void run_bomb(int (*fn)(void *), struct vg_sandbox_child *c, int *status)
{
    struct vg_sandbox_spec s = {.workdir = wd,
                                .required = VG_SBX_REQUIRED_DEFAULT | VG_SBX_CGROUP,
                                .sandbox_uid = 65534,
                                .confine = confine_nothing};
    vg_code_limits_default(&s.lim);
    s.lim.memory_bytes = 16u * 1024 * 1024; /* cap: this + VG_CG_MEMORY_ROOM */
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    s.fd_in = s.fd_out = s.fd_err = null_fd;
    vigil_error err = {0};
    if (vg_sandbox_spawn(&s, fn, NULL, c, &err))
        TEST_FAIL_("spawn: %s", err.message);
    close(null_fd);
    ASSERT(c->applied & VG_SBX_CGROUP);
    char dirs[VG_CG_COUNT][900];
    memcpy(dirs, c->cg.dir, sizeof dirs);
    for (int i = 0; i < VG_CG_COUNT; i++)
        ASSERT_EQ(access(dirs[i], F_OK), 0); /* made before it ran */
    int64_t cpu;
    vg_sandbox_reap(c, status, &cpu);
    for (int i = 0; i < VG_CG_COUNT; i++) /* and removed after */
        ASSERT(access(dirs[i], F_OK) != 0 && errno == ENOENT);
    sbx_assert_no_children();
}

TEST(memory_bomb_stopped_by_the_cgroup)
{
    struct vg_sandbox_child c;
    int st = 0;
    run_bomb(memory_bomb, &c, &st);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) /* the cgroup's OOM kill */
        TEST_FAIL_("status %#x, %lld memory hits", st, c.cg.memory_hits);
    ASSERT(c.cg.memory_hits > 0);
}

TEST(fork_bomb_stopped_by_the_cgroup)
{
    struct vg_sandbox_child c;
    int st = 0;
    run_bomb(fork_bomb, &c, &st);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ASSERT(c.cg.pids_refused > 0);
}

/* An execution through the zygote gets one too; the answer records the layer and its
 * counters. */
TEST(execution_records_the_layer)
{
    struct vg_code_result r;
    sbx_run(wd, "return 1", 0, NULL, &r);
    ASSERT(r.ok);
    ASSERT(r.layers & VG_SBX_CGROUP);
    struct vg_sandbox_probe p;
    vg_sandbox_probe(&p);
    if (p.cgroup.use_v1) /* the child was in it while it ran: its pages were counted there */
        ASSERT(r.cg_memory_peak > 0);
    json_t *j = vg_code_result_json(&r);
    char *text = json_dumps(j, JSON_COMPACT);
    ASSERT_CONTAINS(text, "\"cgroup\"");
    ASSERT_CONTAINS(text, "\"pids_refused\":0");
    free(text);
    json_decref(j);
    vg_code_result_release(&r);
}

/* Without the layer (an unprivileged user here), a run goes on without it and says so; one
 * that requires it is refused. */
static void without_the_layer(void)
{
    struct vg_code_result r;
    sbx_run(wd, "return 1", 0, NULL, &r);
    ASSERT(r.ok);
    ASSERT(!(r.layers & VG_SBX_CGROUP));
    vg_code_result_release(&r);
    sbx_expect_cgroup_refused(wd);
}

/* A cgroup a killed host left (its pid gone, the cgroup empty) is removed by the next host's
 * first execution; made here before this process made any. */
static char stale[1400];

static void plant_stale(const struct vg_sandbox_cgroup *c)
{
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    ASSERT(gone > 0);
    ASSERT_EQ(waitpid(gone, NULL, 0), gone);
    const char *parent = c->use_v1 ? c->v1_dir[VG_CG_PIDS] : NULL;
    char v2[800];
    snprintf(v2, sizeof v2, "%s%s", c->v2_mount, c->own);
    snprintf(stale, sizeof stale, "%s/vigil-sandbox-%d-0", parent ? parent : v2, (int)gone);
    ASSERT_EQ(mkdir(stale, 0700), 0);
}

TEST(stale_cgroups_removed)
{
    ASSERT(access(stale, F_OK) != 0 && errno == ENOENT);
}

int main(void)
{
    sbx_workdir("sandbox-cgroup", wd, sizeof wd);
    struct vg_sandbox_probe p;
    vg_sandbox_probe(&p);
    if (!(p.offered & VG_SBX_CGROUP)) {
        printf("cgroup layer absent here (%s): runs go on without it\n", p.cgroup.why);
        without_the_layer();
        return 0;
    }
    plant_stale(&p.cgroup);
    RUN(memory_bomb_stopped_by_the_cgroup);
    RUN(stale_cgroups_removed);
    RUN(fork_bomb_stopped_by_the_cgroup);
    RUN(execution_records_the_layer);
    return 0;
}
