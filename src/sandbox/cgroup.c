/*
 * cgroup.c: the sandbox's cgroup layer (docs/sandbox.md): a cgroup per execution with a
 * memory cap, a cap on processes and threads, and one CPU's worth of time, made before the
 * child runs untrusted code and removed after its reap. Where: a delegated cgroup v2 subtree
 * (this process's own cgroup writable, with the memory, pids and cpu controllers), else
 * writable cgroup v1 hierarchies of those three controllers (a hybrid host or a v1-only one,
 * as root). The probe says which is used, or why the layer is missing.
 */
#include "base/common.h"

#include "sandbox/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static void copy_text(char *dst, size_t n, const char *src)
{
    size_t k = strnlen(src, n - 1);
    memcpy(dst, src, k);
    dst[k] = 0;
}

static const char *const cg_controller[VG_CG_COUNT] = {"memory", "pids", "cpu"};

/* Whether word is an item of the comma-separated list. */
static int has_item(const char *list, const char *word)
{
    size_t k = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += k)
        if ((p == list || p[-1] == ',') && (p[k] == 0 || p[k] == ','))
            return 1;
    return 0;
}

/* The mount point of the cgroup2 file system (v2, "" when none), whether any v1 hierarchy is
 * mounted, and for each controller the v1 hierarchy's mount point and root (v1_mnt, v1_root). */
static void find_mounts(char *v2, size_t n, int *v1, char v1_mnt[][256], char v1_root[][256])
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[1024];
    *v2 = 0;
    *v1 = 0;
    while (f && fgets(line, sizeof line, f)) {
        char root[256], mnt[256], fstype[64], opts[256] = "";
        const char *dash = strstr(line, " - ");
        /* id parent major:minor root mount-point ... - fstype source options */
        if (!dash || sscanf(line, "%*s %*s %*s %255s %255s", root, mnt) != 2 ||
            sscanf(dash + 3, "%63s %*s %255s", fstype, opts) < 1)
            continue;
        if (!strcmp(fstype, "cgroup2") && !*v2)
            copy_text(v2, n, mnt);
        if (strcmp(fstype, "cgroup"))
            continue;
        *v1 = 1;
        for (int i = 0; i < VG_CG_COUNT; i++)
            if (has_item(opts, cg_controller[i]) && !*v1_mnt[i]) {
                copy_text(v1_mnt[i], 256, mnt);
                copy_text(v1_root[i], 256, root);
            }
    }
    if (f)
        fclose(f);
}

/* This process's cgroup in the hierarchy whose /proc/self/cgroup line starts with prefix
 * ("0::" for v2), or in the v1 hierarchy holding controller (prefix NULL). */
static int own_cgroup(const char *prefix, const char *controller, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[1024];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = 0;
        if (prefix ? strncmp(line, prefix, 2) || c2 != c1 + 1 : !has_item(c1 + 1, controller))
            continue;
        copy_text(out, n, c2 + 1);
        found = 1;
    }
    if (f)
        fclose(f);
    return found;
}

static void read_line(const char *dir, const char *file, char *out, size_t n)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "re");
    *out = 0;
    if (f && fgets(out, (int)n, f))
        out[strcspn(out, "\n")] = 0;
    if (f)
        fclose(f);
}

static int has_word(const char *list, const char *word)
{
    size_t k = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += k)
        if ((p == list || p[-1] == ' ') && (p[k] == 0 || p[k] == ' '))
            return 1;
    return 0;
}

static void explain(struct vg_sandbox_cgroup *c)
{
    char missing[64] = "";
    int v1_ok = 1;
    for (size_t i = 0; i < VG_CG_COUNT; i++) {
        if (!has_word(c->controllers, cg_controller[i]))
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
                     *missing ? ", " : "", cg_controller[i]);
        v1_ok &= *c->v1_dir[i] != 0;
    }
    /* cgroup v2 gives a cgroup's children controllers only while it holds no process itself
     * (the root excepted); vigil does not yet move itself into a leaf, so a v2 cgroup per
     * execution works only from the root cgroup. */
    int v2_root = !strcmp(c->own, "/");
    if (*c->v2_mount && !*missing && c->delegated && v2_root) {
        c->usable = 1;
        return;
    }
    if (v1_ok) { /* v2 does not qualify; the v1 hierarchies do */
        c->usable = c->use_v1 = 1;
        return;
    }
    const char *v1_why = c->v1 ? "; cgroup v1: memory, pids, cpu not all writable" : "";
    if (!*c->v2_mount)
        snprintf(c->why, sizeof c->why, "no cgroup v2 here%s", v1_why);
    else if (*missing)
        snprintf(c->why, sizeof c->why,
                 "cgroup v2 at %.80s offers this process no %s controller%s%s", c->v2_mount,
                 missing, strchr(missing, ',') ? "s" : "", v1_why);
    else if (!c->delegated)
        snprintf(c->why, sizeof c->why, "this process's cgroup %.80s is not delegated to it%s",
                 c->own, v1_why);
    else
        snprintf(c->why, sizeof c->why,
                 "cgroup %.60s holds processes: v2 gives its children no controllers (no "
                 "move to a leaf yet)%s",
                 c->own, v1_why);
}

/* Each v1 hierarchy of memory, pids and cpu where this process's cgroup is writable. */
static void probe_v1(struct vg_sandbox_cgroup *c, char mnt[][256], char root[][256])
{
    for (int i = 0; i < VG_CG_COUNT; i++) {
        char own[512];
        if (!*mnt[i] || !own_cgroup(NULL, cg_controller[i], own, sizeof own))
            continue;
        /* The mount shows the hierarchy from root (a container's view): own is below it. */
        size_t k = strcmp(root[i], "/") ? strlen(root[i]) : 0;
        const char *rel = strncmp(own, root[i], k) ? own : own + k;
        char dir[1300], procs[1400];
        snprintf(dir, sizeof dir, "%s%s", mnt[i], strcmp(rel, "/") ? rel : "");
        snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
        if (!access(dir, W_OK) && !access(procs, W_OK))
            copy_text(c->v1_dir[i], sizeof c->v1_dir[i], dir);
    }
}

void vg_sandbox_cgroup_probe(struct vg_sandbox_cgroup *c)
{
    char mnt[VG_CG_COUNT][256] = {""}, root[VG_CG_COUNT][256] = {""};
    memset(c, 0, sizeof *c);
    find_mounts(c->v2_mount, sizeof c->v2_mount, &c->v1, mnt, root);
    if (*c->v2_mount && own_cgroup("0:", NULL, c->own, sizeof c->own)) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s%s", c->v2_mount, c->own);
        read_line(dir, "cgroup.controllers", c->controllers, sizeof c->controllers);
        char procs[1200], subtree[1200];
        snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
        snprintf(subtree, sizeof subtree, "%s/cgroup.subtree_control", dir);
        c->delegated = !access(dir, W_OK) && !access(procs, W_OK) && !access(subtree, W_OK);
    }
    if (c->v1)
        probe_v1(c, mnt, root);
    explain(c);
}

json_t *vg_sandbox_cgroup_json(const struct vg_sandbox_cgroup *c)
{
    const char *mode = *c->v2_mount ? (c->v1 ? "hybrid" : "v2") : (c->v1 ? "v1" : "none");
    const char *used = !c->usable ? "none" : c->use_v1 ? "v1" : "v2";
    json_t *dirs = json_object();
    for (int i = 0; dirs && i < VG_CG_COUNT; i++)
        if (*c->v1_dir[i])
            json_object_set_new(dirs, cg_controller[i], json_string(c->v1_dir[i]));
    return json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:b, s:o, s:b, s:s}", "mode", mode, "used",
                     used, "v1_mounted", c->v1, "v2_mount", c->v2_mount, "own", c->own,
                     "controllers", c->controllers, "delegated", c->delegated, "v1_dirs", dirs,
                     "usable", c->usable, "why", c->usable ? "" : c->why);
}

/* ---- one execution's cgroup --------------------------------------------------------------- */

static int write_text(const char *dir, const char *file, const char *text)
{
    char path[1000];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    ssize_t n = write(fd, text, strlen(text));
    int rc = n == (ssize_t)strlen(text) ? 0 : n < 0 ? errno : EIO;
    close(fd);
    return rc;
}

/* The number after key in a "key N" file (pids.events, memory.events); the first number when
 * key is NULL (memory.failcnt). */
static long long read_count(const char *dir, const char *file, const char *key)
{
    char path[1000], line[128];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "re");
    long long v = 0;
    while (f && fgets(line, sizeof line, f)) {
        size_t k = key ? strlen(key) : 0;
        if (!key || (!strncmp(line, key, k) && line[k] == ' ')) {
            v = strtoll(line + k, NULL, 10);
            break;
        }
    }
    if (f)
        fclose(f);
    return v;
}

/* The caps, in the v2 or the v1 files of each directory. */
static int write_caps(const struct vg_sandbox_cg *cg, size_t memory_bytes, int pids)
{
    char mem[32], n[32];
    snprintf(mem, sizeof mem, "%zu", memory_bytes);
    snprintf(n, sizeof n, "%d", pids);
    if (cg->v2) {
        int rc = write_text(cg->dir[VG_CG_MEMORY], "memory.max", mem);
        if (!rc)
            rc = write_text(cg->dir[VG_CG_MEMORY], "memory.swap.max", "0");
        if (rc == ENOENT) /* no swap accounting: nothing to cap */
            rc = 0;
        if (!rc)
            rc = write_text(cg->dir[VG_CG_PIDS], "pids.max", n);
        return rc ? rc : write_text(cg->dir[VG_CG_CPU], "cpu.max", "100000 100000");
    }
    int rc = write_text(cg->dir[VG_CG_MEMORY], "memory.limit_in_bytes", mem);
    if (!rc)
        rc = write_text(cg->dir[VG_CG_PIDS], "pids.max", n);
    if (!rc)
        rc = write_text(cg->dir[VG_CG_CPU], "cpu.cfs_period_us", "100000");
    return rc ? rc : write_text(cg->dir[VG_CG_CPU], "cpu.cfs_quota_us", "100000");
}

/* The cgroups a vigil process killed with executions running left in parent (empty: their
 * processes died with it): removed when that process is gone. rmdir takes only empty ones. */
static void sweep_stale(const char *parent)
{
    DIR *d = opendir(parent);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int pid = 0;
        unsigned n = 0;
        if (sscanf(e->d_name, "vigil-sandbox-%d-%u", &pid, &n) != 2 || pid <= 0 ||
            pid == (int)getpid() || !(kill(pid, 0) && errno == ESRCH))
            continue;
        char path[1300];
        snprintf(path, sizeof path, "%s/%s", parent, e->d_name);
        rmdir(path);
    }
    if (d)
        closedir(d);
}

static void sweep_all_stale(void)
{
    struct vg_sandbox_probe p;
    vg_sandbox_probe(&p);
    char own[800];
    snprintf(own, sizeof own, "%s%s", p.cgroup.v2_mount, p.cgroup.own);
    if (p.cgroup.usable && !p.cgroup.use_v1)
        sweep_stale(own);
    for (int i = 0; p.cgroup.usable && p.cgroup.use_v1 && i < VG_CG_COUNT; i++)
        sweep_stale(p.cgroup.v1_dir[i]);
}

int vg_sandbox_cg_make(struct vg_sandbox_cg *cg, size_t memory_bytes, int pids)
{
    static pthread_once_t swept = PTHREAD_ONCE_INIT;
    pthread_once(&swept, sweep_all_stale);
    static atomic_uint seq;
    struct vg_sandbox_probe p;
    vg_sandbox_probe(&p);
    const struct vg_sandbox_cgroup *c = &p.cgroup;
    memset(cg, 0, sizeof *cg);
    if (!c->usable)
        return ENOTSUP;
    cg->v2 = !c->use_v1;
    unsigned n = atomic_fetch_add(&seq, 1);
    int rc = 0;
    if (cg->v2) { /* the controllers for the children of this process's cgroup */
        char own[800];
        snprintf(own, sizeof own, "%s%s", c->v2_mount, c->own);
        rc = write_text(own, "cgroup.subtree_control", "+memory +pids +cpu");
    }
    for (int i = 0; !rc && i < VG_CG_COUNT; i++) {
        if (cg->v2)
            snprintf(cg->dir[i], sizeof cg->dir[i], "%s%s/vigil-sandbox-%d-%u", c->v2_mount, c->own,
                     (int)getpid(), n);
        else
            snprintf(cg->dir[i], sizeof cg->dir[i], "%s/vigil-sandbox-%d-%u", c->v1_dir[i],
                     (int)getpid(), n);
        if (!cg->v2 || i == 0) {
            if (mkdir(cg->dir[i], 0700))
                rc = errno;
            else
                cg->made |= 1 << i;
        }
    }
    if (!rc)
        rc = write_caps(cg, memory_bytes, pids);
    if (rc)
        vg_sandbox_cg_remove(cg);
    return rc;
}

int vg_sandbox_cg_place(const struct vg_sandbox_cg *cg, pid_t pid)
{
    char text[32];
    snprintf(text, sizeof text, "%d", (int)pid);
    int rc = 0;
    for (int i = 0; !rc && i < VG_CG_COUNT; i++)
        if (cg->made & (1 << i))
            rc = write_text(cg->dir[i], "cgroup.procs", text);
    return rc;
}

int vg_sandbox_cg_set_memory(const struct vg_sandbox_cg *cg, size_t memory_bytes)
{
    char mem[32];
    snprintf(mem, sizeof mem, "%zu", memory_bytes);
    return write_text(cg->dir[VG_CG_MEMORY], cg->v2 ? "memory.max" : "memory.limit_in_bytes", mem);
}

void vg_sandbox_cg_read(struct vg_sandbox_cg *cg)
{
    if (!cg->made)
        return;
    const char *mem = cg->dir[VG_CG_MEMORY], *pids = cg->dir[VG_CG_PIDS];
    if (cg->v2) {
        cg->memory_hits = read_count(mem, "memory.events", "max");
        cg->oom_kills = read_count(mem, "memory.events", "oom_kill");
        cg->memory_peak = read_count(mem, "memory.peak", NULL);
    } else {
        cg->memory_hits = read_count(mem, "memory.failcnt", NULL);
        cg->memory_peak = read_count(mem, "memory.max_usage_in_bytes", NULL);
    }
    cg->pids_refused = read_count(pids, "pids.events", "max");
    cg->counted = 1;
}

void vg_sandbox_cg_remove(struct vg_sandbox_cg *cg)
{
    if (!cg->made)
        return;
    if (!cg->counted)
        vg_sandbox_cg_read(cg);
    /* Its processes are reaped; the kernel may still be letting the last one go. */
    for (int i = 0; i < VG_CG_COUNT; i++)
        for (int tries = 0; (cg->made & (1 << i)) && tries < 100; tries++)
            if (!rmdir(cg->dir[i]) || errno != EBUSY)
                cg->made &= ~(1 << i);
            else
                sched_yield();
    cg->made = 0;
}
