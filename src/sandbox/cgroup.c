/*
 * cgroup.c: what this machine offers for the sandbox's cgroup layer (docs/sandbox.md). The
 * layer needs cgroup v2 (the unified hierarchy) with a subtree delegated to this process:
 * its own cgroup writable by it, with the memory, pids and cpu controllers available, so a
 * cgroup per execution could take memory.max, pids.max and cpu.max. cgroup v1 alone (or v2
 * holding none of those controllers, as on a hybrid host whose v1 hierarchies own them) does
 * not qualify, and nothing pretends otherwise: the probe says what is there and why the
 * layer is missing.
 */
#include "base/common.h"

#include "sandbox/sandbox.h"

#include <stdio.h>
#include <unistd.h>

static void copy_text(char *dst, size_t n, const char *src)
{
    size_t k = strnlen(src, n - 1);
    memcpy(dst, src, k);
    dst[k] = 0;
}

/* The mount point of the cgroup2 file system (out, "" when none), and whether any v1
 * hierarchy is mounted. */
static void find_mounts(char *v2, size_t n, int *v1)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[1024];
    *v2 = 0;
    *v1 = 0;
    while (f && fgets(line, sizeof line, f)) {
        char mnt[512], fstype[64];
        const char *dash = strstr(line, " - ");
        /* id parent major:minor root mount-point ... - fstype source options */
        if (!dash || sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1 ||
            sscanf(dash + 3, "%63s", fstype) != 1)
            continue;
        if (!strcmp(fstype, "cgroup2") && !*v2)
            copy_text(v2, n, mnt);
        else if (!strcmp(fstype, "cgroup"))
            *v1 = 1;
    }
    if (f)
        fclose(f);
}

/* This process's cgroup in the unified hierarchy ("0::/path"). */
static int own_cgroup(char *out, size_t n)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[1024];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3))
            continue;
        line[strcspn(line, "\n")] = 0;
        copy_text(out, n, line + 3);
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
    static const char *const need[] = {"memory", "pids", "cpu"};
    char missing[64] = "";
    for (size_t i = 0; i < VG_ARRAY_LEN(need); i++)
        if (!has_word(c->controllers, need[i]))
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
                     *missing ? ", " : "", need[i]);
    if (!*c->v2_mount)
        snprintf(c->why, sizeof c->why, "no cgroup v2 here%s",
                 c->v1 ? " (only cgroup v1, which the sandbox does not use)" : "");
    else if (*missing)
        snprintf(c->why, sizeof c->why,
                 "cgroup v2 at %.120s offers this process no %s controller%s%s", c->v2_mount,
                 missing, strchr(missing, ',') ? "s" : "",
                 c->v1 ? " (cgroup v1 hierarchies hold them)" : "");
    else if (!c->delegated)
        snprintf(c->why, sizeof c->why, "this process's cgroup %.180s is not delegated to it",
                 c->own);
    else
        c->usable = 1;
}

void vg_sandbox_cgroup_probe(struct vg_sandbox_cgroup *c)
{
    memset(c, 0, sizeof *c);
    find_mounts(c->v2_mount, sizeof c->v2_mount, &c->v1);
    if (*c->v2_mount && own_cgroup(c->own, sizeof c->own)) {
        char dir[1100];
        snprintf(dir, sizeof dir, "%s%s", c->v2_mount, c->own);
        read_line(dir, "cgroup.controllers", c->controllers, sizeof c->controllers);
        char procs[1200], subtree[1200];
        snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
        snprintf(subtree, sizeof subtree, "%s/cgroup.subtree_control", dir);
        c->delegated = !access(dir, W_OK) && !access(procs, W_OK) && !access(subtree, W_OK);
    }
    explain(c);
}

json_t *vg_sandbox_cgroup_json(const struct vg_sandbox_cgroup *c)
{
    const char *mode = *c->v2_mount ? (c->v1 ? "hybrid" : "v2") : (c->v1 ? "v1" : "none");
    return json_pack("{s:s, s:b, s:s, s:s, s:s, s:b, s:b, s:s}", "mode", mode, "v1_mounted", c->v1,
                     "v2_mount", c->v2_mount, "own", c->own, "controllers", c->controllers,
                     "delegated", c->delegated, "usable", c->usable, "why",
                     c->usable ? "" : c->why);
}
