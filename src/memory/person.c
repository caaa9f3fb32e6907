/*
 * person.c: a person's changes to an agent's memory (`vigil memory set` and `delete`, their
 * HTTP routes, vigil_memory_set and vigil_memory_delete). They apply at once, whatever the
 * block's permission, and are recorded in the event log with who made them; the agent's own
 * writes, checked against permissions, are in block.c. Each change is optimistic as the agent's
 * are: read, decide, embed outside any transaction, then write guarded by the block's revision,
 * again from the read when another writer came first.
 */
#include "base/common.h"

#include "memory/memory_int.h"

#define ATTEMPTS 8

static const char *who(const char *actor)
{
    return actor && *actor ? actor : "human";
}

static vigil_code check_in(const struct vg_memory_set_in *in, enum vg_mem_tier *tier,
                           enum vg_mem_perm *perm, vigil_error *err)
{
    vigil_code rc;
    if (!in->agent_id || !*in->agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "a memory block needs an agent id");
    if ((rc = vg_memory_check_label(in->label, err)) ||
        (rc = vg_memory_check_content(in->content, err)))
        return rc;
    if (in->tier && vg_mem_tier_parse(in->tier, tier))
        return VG_FAIL(err, VIGIL_EINVAL, "unknown memory tier \"%s\": core, working or archival",
                       in->tier);
    if (in->permission && vg_mem_perm_parse(in->permission, perm))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown memory permission \"%s\": read_only, familiar, append or "
                       "read_write",
                       in->permission);
    return VIGIL_OK;
}

/* A label the agent has not got: created, unless another writer created it first (*raced). */
static vigil_code create_new(struct vg_memory *m, const struct vg_memory_set_in *in,
                             enum vg_mem_tier tier, enum vg_mem_perm perm, int *raced,
                             vigil_error *err)
{
    vigil_error local = {0};
    struct vg_memory_block_in b = {.agent_id = in->agent_id,
                                   .tier = tier,
                                   .label = in->label,
                                   .content = in->content,
                                   .permission = perm};
    *raced = 0;
    if (!in->content)
        return VG_FAIL(err, VIGIL_ENOTFOUND,
                       "no memory block \"%s\": give its content to create it", in->label);
    vigil_code rc = vg_memory_create(m, &b, who(in->actor), &local);
    if (rc == VIGIL_EEXISTS) {
        *raced = 1;
        return VIGIL_OK;
    }
    if (rc)
        vg_error_copy(err, &local);
    return rc;
}

/* Give block the tier and permission asked for, keeping the old ones in extra: 1 when either
 * differs, 0 when neither does, -1 out of memory. A block moved to working is loaded, as a new
 * working block is; one moved out of it is not. */
static int retarget(json_t *block, const struct vg_memory_set_in *in, json_t *extra)
{
    static const char *const keys[] = {"tier", "permission"};
    const char *want[] = {in->tier, in->permission};
    int differs = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(keys); i++) {
        const char *have = vg_memory_str(block, keys[i]);
        char old[32];
        snprintf(old, sizeof old, "%s", have);
        if (!want[i] || !strcmp(want[i], old))
            continue;
        differs = 1;
        char name[40];
        snprintf(name, sizeof name, "old_%s", keys[i]);
        if (json_object_set_new(extra, name, json_string(old)) ||
            json_object_set_new(block, keys[i], json_string(want[i])))
            return -1;
        if (i == 0 &&
            json_object_set_new(block, "loaded", json_boolean(!strcmp(want[i], "working"))))
            return -1;
    }
    if (json_object_set(extra, "tier", json_object_get(block, "tier")) ||
        json_object_set(extra, "permission", json_object_get(block, "permission")))
        return -1;
    return differs;
}

/* Change an existing block at revision rev; *change says what happened. ECONFLICT: another
 * writer came first (the caller reads again). */
static vigil_code change_block(struct vg_memory *m, const struct vg_memory_set_in *in,
                               json_t *block, int64_t rev, const char **change, vigil_error *err)
{
    char *text = vg_strdup(in->content ? in->content : vg_memory_str(block, "content"));
    json_t *extra = json_pack("{s:s}", "actor", who(in->actor));
    int moved = text && extra ? retarget(block, in, extra) : -1;
    vigil_code rc = VIGIL_OK;
    float *vec = NULL;
    if (moved < 0) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing memory");
        goto out;
    }
    *change = "unchanged";
    if (!moved && !strcmp(text, vg_memory_str(block, "content")))
        goto out;
    vec = vg_memory_embed_text(m, in->label, text);
    if ((rc = vg_store_begin(m->env->store, err)))
        goto out;
    rc = vg_memory_apply(m, block, rev, text, "update", extra, vec, err);
    rc = vg_store_end(m->env->store, rc, err);
    *change = "updated";
out:
    vg_free(vec);
    vg_free(text);
    json_decref(extra);
    return rc;
}

static vigil_code answer(struct vg_memory *m, const char *agent_id, const char *label,
                         json_t *block, const char *change, json_t **out, vigil_error *err)
{
    if (!out)
        return VIGIL_OK;
    json_t *now = block ? json_incref(block) : NULL;
    vigil_code rc = now ? VIGIL_OK : vg_memory_read_block(m, agent_id, label, &now, NULL, err);
    if (rc)
        return rc;
    if (json_object_set_new(now, "change", json_string(change))) {
        json_decref(now);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing memory");
    }
    *out = now;
    return VIGIL_OK;
}

vigil_code vg_memory_set(struct vg_memory *m, const struct vg_memory_set_in *in, json_t **out,
                         vigil_error *err)
{
    enum vg_mem_tier tier = VG_TIER_CORE;
    enum vg_mem_perm perm = VG_PERM_READ_WRITE;
    vigil_code rc = check_in(in, &tier, &perm, err);
    for (int attempt = 0; !rc && attempt < ATTEMPTS; attempt++) {
        json_t *block = NULL;
        int64_t rev = 0;
        vigil_error local = {0};
        rc = vg_memory_read_block(m, in->agent_id, in->label, &block, &rev, &local);
        if (rc == VIGIL_ENOTFOUND) {
            int raced = 0;
            rc = create_new(m, in, tier, perm, &raced, err);
            if (!rc && !raced)
                return answer(m, in->agent_id, in->label, NULL, "created", out, err);
            continue;
        }
        const char *change = NULL;
        if (!rc)
            rc = change_block(m, in, block, rev, &change, &local);
        if (!rc)
            rc = answer(m, in->agent_id, in->label, block, change, out, &local);
        json_decref(block);
        if (rc == VIGIL_ECONFLICT) {
            rc = VIGIL_OK;
            continue;
        }
        if (rc)
            vg_error_copy(err, &local);
        return rc;
    }
    return rc ? rc
              : VG_FAIL(err, VIGIL_EBUSY, "memory block \"%s\" keeps changing: try again",
                        in->label);
}

vigil_code vg_memory_remove(struct vg_memory *m, const char *agent_id, const char *label,
                            const char *actor, json_t **out, vigil_error *err)
{
    vigil_code rc = vg_memory_check_label(label, err);
    if (!rc && (!agent_id || !*agent_id))
        rc = VG_FAIL(err, VIGIL_EINVAL, "a memory block needs an agent id");
    for (int attempt = 0; !rc && attempt < ATTEMPTS; attempt++) {
        json_t *block = NULL;
        int64_t rev = 0;
        vigil_error local = {0};
        json_t *extra = json_pack("{s:s}", "actor", who(actor));
        rc = extra ? vg_memory_read_block(m, agent_id, label, &block, &rev, &local)
                   : VG_FAIL(&local, VIGIL_ENOMEM, "out of memory deleting memory");
        if (!rc && !(rc = vg_store_begin(m->env->store, &local))) {
            rc = vg_memory_drop(m, block, rev, "delete", extra, &local);
            rc = vg_store_end(m->env->store, rc, &local);
        }
        json_decref(extra);
        if (rc == VIGIL_ECONFLICT) {
            json_decref(block);
            rc = VIGIL_OK;
            continue;
        }
        if (!rc && out)
            *out = json_incref(block);
        json_decref(block);
        if (rc)
            vg_error_copy(err, &local);
        return rc;
    }
    return rc ? rc
              : VG_FAIL(err, VIGIL_EBUSY, "memory block \"%s\" keeps changing: try again", label);
}
