/*
 * seed.c: first run. An agent without memory gets its core blocks from a persona file:
 * system (read_only: the agent cannot change how it works), persona and familiar (familiar:
 * changes need the human's approval). The file is markdown with one "# <label>" heading per
 * block; the shipped default lives at share/persona/default.md.
 */
#include "base/common.h"

#include "memory/memory_int.h"
#include "os/fs.h"

#ifndef VIGIL_SOURCE_DIR
#define VIGIL_SOURCE_DIR "."
#endif

static const struct {
    const char *label;
    enum vg_mem_perm perm;
} core_blocks[] = {
    {"system", VG_PERM_READ_ONLY},
    {"persona", VG_PERM_FAMILIAR},
    {"familiar", VG_PERM_FAMILIAR},
};

/* The text under "# label" up to the next "# " heading, trimmed (owned), or NULL. */
static char *section(const char *doc, const char *label)
{
    size_t ln = strlen(label);
    const char *p = doc;
    while (p && *p) {
        if (p[0] == '#' && p[1] == ' ' && strncmp(p + 2, label, ln) == 0 &&
            (p[2 + ln] == '\n' || p[2 + ln] == '\r' || p[2 + ln] == '\0')) {
            const char *b = strchr(p, '\n');
            b = b ? b + 1 : p + strlen(p);
            const char *e = b;
            while (*e && !(e[0] == '#' && e[1] == ' ' && (e == b || e[-1] == '\n')))
                e++;
            while (e > b && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' '))
                e--;
            while (b < e && (*b == '\n' || *b == '\r'))
                b++;
            return vg_strndup(b, (size_t)(e - b));
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return NULL;
}

vigil_code vg_memory_seed(struct vg_memory *m, const char *agent_id, const char *path, int *seeded,
                          vigil_error *err)
{
    char dflt[4096];
    char *doc = NULL;
    if (seeded)
        *seeded = 0;
    struct vg_query q = {.kind = "memory_block", .owner = agent_id};
    int64_t n = 0;
    vigil_code rc = vg_store_count(m->env->store, &q, &n, err);
    if (rc || n > 0)
        return rc;
    if (!path || !*path)
        path = vg_os_getenv("VIGIL_PERSONA");
    if (!path || !*path) {
        snprintf(dflt, sizeof dflt, "%s/share/persona/default.md", VIGIL_SOURCE_DIR);
        path = dflt;
    }
    if ((rc = vg_fs_read_file(path, 256 * 1024, &doc, NULL, err)))
        return rc;
    /* Every section read first, then the blocks written in one transaction: one commit (and
     * one log sync) for the three instead of one each, and a persona file that lacks a section
     * leaves no block behind (the count above would then never let the first run seed the
     * rest). */
    struct vg_memory_block_in in[VG_ARRAY_LEN(core_blocks)];
    char *text[VG_ARRAY_LEN(core_blocks)] = {0};
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(core_blocks); i++) {
        if (!(text[i] = section(doc, core_blocks[i].label))) {
            rc = VG_FAIL(err, VIGIL_EPARSE, "persona file \"%s\" has no \"# %s\" section", path,
                         core_blocks[i].label);
            break;
        }
        in[i] = (struct vg_memory_block_in){.agent_id = agent_id,
                                            .tier = VG_TIER_CORE,
                                            .label = core_blocks[i].label,
                                            .content = text[i],
                                            .permission = core_blocks[i].perm,
                                            .pinned = 1};
    }
    if (!rc)
        rc = vg_memory_create_missing(m, in, VG_ARRAY_LEN(core_blocks), "config", err);
    for (size_t i = 0; i < VG_ARRAY_LEN(core_blocks); i++)
        vg_free(text[i]);
    vg_free(doc);
    if (!rc && seeded)
        *seeded = 1;
    return rc;
}
