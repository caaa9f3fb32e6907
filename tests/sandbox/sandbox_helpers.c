#include "base/common.h"

#include "sandbox/sandbox_helpers.h"

#include "os/fs.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>

const char *sbx_workdir(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s", vg_test_tmpdir(name));
    return buf;
}

void sbx_plant(const char *name, char *wd, size_t n, char *outside, size_t on)
{
    vigil_error err = {0};
    char dir[4300], p[4400];
    sbx_workdir(name, wd, n);
    snprintf(dir, sizeof dir, "%s/..", wd);
    snprintf(outside, on, "%s/outside.txt", dir);
    if (vg_fs_write_file(outside, "secret", 6, &err))
        TEST_FAIL_("%s", err.message);
    static const char *const dirs[] = {"sub"};
    static const char *const dir_links[] = {"dirlink", "sub/dirlink"};
    snprintf(p, sizeof p, "%s/%s", wd, dirs[0]);
    ASSERT_EQ(mkdir(p, 0700), 0);
    for (size_t i = 0; i < VG_ARRAY_LEN(dir_links); i++) {
        snprintf(p, sizeof p, "%s/%s", wd, dir_links[i]);
        ASSERT_EQ(symlink(dir, p), 0);
    }
    snprintf(p, sizeof p, "%s/link-out", wd);
    ASSERT_EQ(symlink(outside, p), 0);
    snprintf(p, sizeof p, "%s/hard", wd);
    ASSERT_EQ(link(outside, p), 0);
    snprintf(p, sizeof p, "%s/fifo", wd);
    ASSERT_EQ(mkfifo(p, 0600), 0);
}

struct vg_code_runtime *sbx_runtime;

void sbx_run(const char *workdir, const char *code, int wall_ms, const struct vg_code_host *host,
             struct vg_code_result *r)
{
    struct vg_code_request q = {.code = code,
                                .code_len = strlen(code),
                                .workdir = workdir,
                                .required = VG_SBX_REQUIRED_DEFAULT,
                                .sandbox_uid = 65534,
                                .host = host};
    vg_code_limits_default(&q.lim);
    if (wall_ms > 0)
        q.lim.wall_ms = wall_ms;
    q.lim.cpu_ms = 2000;
    q.lim.memory_bytes = 64u * 1024 * 1024;
    vigil_error err = {0};
    if (vg_code_run(sbx_runtime ? sbx_runtime : vg_code_runtime_lua(), &q, r, &err) != VIGIL_OK)
        TEST_FAIL_("vg_code_run: %s", err.message);
}

void sbx_expect_cgroup_refused(const char *workdir)
{
    struct vg_code_request q = {.code = "return 1",
                                .code_len = 8,
                                .workdir = workdir,
                                .required = VG_SBX_REQUIRED_DEFAULT | VG_SBX_CGROUP,
                                .sandbox_uid = 65534};
    vg_code_limits_default(&q.lim);
    struct vg_code_result r;
    vigil_error err = {0};
    ASSERT_EQ(vg_code_run(vg_code_runtime_lua(), &q, &r, &err), VIGIL_OK);
    ASSERT(!r.ok);
    ASSERT_STREQ(r.error_code, "sandbox_unavailable");
    ASSERT_CONTAINS(r.error_message, "cgroup");
    ASSERT_CONTAINS(r.error_message, "accept_missing");
    vg_code_result_release(&r);
    sbx_assert_no_children();
}

void sbx_expect_error(const char *workdir, const char *code, const char *error_code,
                      const char *msg_part)
{
    struct vg_code_result r;
    sbx_run(workdir, code, 0, NULL, &r);
    if (r.ok || strcmp(r.error_code, error_code))
        TEST_FAIL_("%s: expected %s, got ok=%d %s: %s (output %s)", code, error_code, r.ok,
                   r.error_code, r.error_message, r.output ? r.output : "");
    if (msg_part)
        ASSERT_CONTAINS(r.error_message, msg_part);
    vg_code_result_release(&r);
    sbx_assert_no_children();
}

int sbx_last_refusals;

const char *sbx_expect_ok(const char *workdir, const char *code)
{
    return sbx_expect_ok_host(workdir, code, NULL);
}

const char *sbx_expect_ok_host(const char *workdir, const char *code,
                               const struct vg_code_host *host)
{
    static char text[65536];
    struct vg_code_result r;
    sbx_run(workdir, code, 0, host, &r);
    sbx_last_refusals = r.refusals_total;
    if (!r.ok)
        TEST_FAIL_("%s: expected success, got %s: %s (output %s)", code, r.error_code,
                   r.error_message, r.output ? r.output : "");
    char *s = json_dumps(r.result, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
    snprintf(text, sizeof text, "%s", s ? s : "?");
    free(s);
    vg_code_result_release(&r);
    sbx_assert_no_children();
    return text;
}

/* The pids in /proc/self/task/TID/children of every thread, but the zygote's and its two
 * spares' (the ready one and the one it makes next). */
static int other_children(pid_t zygote, pid_t spare, pid_t next, pid_t *first)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) {
        char path[300];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/children", e->d_name);
        FILE *f = fopen(path, "re");
        long pid;
        while (f && fscanf(f, "%ld", &pid) == 1)
            if ((pid_t)pid != zygote && (pid_t)pid != spare && (pid_t)pid != next && !n++)
                *first = (pid_t)pid;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

void sbx_assert_no_children(void)
{
    /* Every child was reaped by the runtime; the only ones left are the zygote, which makes
     * them (and has none of its own: they are the host's children), the spare it keeps ready
     * for the next execution and the one it makes meanwhile. */
    pid_t p = 0;
    /* A child that gave its result is reaped on the reaper thread after the answer: wait for
     * that, deterministically, before looking. */
    vg_sandbox_reap_wait();
    pid_t zygote = vg_sandbox_zygote_pid();
    pid_t spare = zygote > 0 ? vg_sandbox_spare_pid() : -1;
    pid_t next = zygote > 0 ? vg_sandbox_next_spare_pid() : -1;
    if (other_children(zygote, spare, next, &p)) {
        char path[64], stat[256] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
        FILE *f = fopen(path, "re");
        if (f && !fgets(stat, sizeof stat, f))
            stat[0] = 0;
        if (f)
            fclose(f);
        TEST_FAIL_("a child process is left after the execution (pid %d: %s; zygote %d, spares "
                   "%d, %d)",
                   (int)p, stat, (int)zygote, (int)spare, (int)next);
    }
}

static void deno_skip(const char *why)
{
    const char *req = getenv("VIGIL_REQUIRE_DENO");
    if (req && !strcmp(req, "1")) {
        fprintf(stderr, "FAIL: VIGIL_REQUIRE_DENO=1 but %s (run scripts/npm.sh)\n", why);
        exit(1);
    }
    fprintf(stderr, "skip: %s (scripts/npm.sh installs deno)\n", why);
    exit(77);
}

const char *sbx_deno_path(void)
{
    static char path[4200];
    const char *env = getenv("VIGIL_DENO");
    if (env && *env)
        snprintf(path, sizeof path, "%s", env);
    else
        snprintf(path, sizeof path, "%s/.deps/npm/node_modules/deno/deno", VIGIL_SOURCE_DIR);
    char version[256];
    if (access(path, X_OK) != 0 || vg_deno_version(path, version, sizeof version)) {
        char why[4400];
        snprintf(why, sizeof why, "no deno at %s", path);
        deno_skip(why);
    }
    return path;
}
