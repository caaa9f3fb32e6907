/*
 * memory_api.c: the memory section of include/vigil.h. Each call builds a memory manager over the
 * runtime's ports with the configured embedder (the offline one unless embed.provider names
 * another) and turns the result into owned JSON text.
 */
#include "base/common.h"

#include "memory/memory.h"
#include "runtime/runtime_int.h"

struct mgr {
    struct vg_embedder *emb;
    struct vg_memory *m;
};

static vigil_code mgr_open(vigil_runtime *rt, struct mgr *g, vigil_error *err)
{
    memset(g, 0, sizeof *g);
    if (!rt)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");
    vigil_code rc = vg_runtime_embedder(rt, &g->emb, err);
    if (!rc)
        rc = vg_memory_new(vg_runtime_env(rt), g->emb, &g->m, err);
    if (rc)
        vg_embed_close(g->emb);
    return rc;
}

static void mgr_close(struct mgr *g)
{
    vg_memory_free(g->m);
    vg_embed_close(g->emb);
}

static vigil_code finish(vigil_code rc, json_t *value, char **out, vigil_error *err)
{
    if (rc) {
        json_decref(value);
        return rc;
    }
    if (!out) {
        json_decref(value);
        return VIGIL_OK;
    }
    return vg_runtime_json_out(value, out, err);
}

static vigil_code need(const char *s, const char *what, vigil_error *err)
{
    if (!s || !*s)
        return VG_FAIL(err, VIGIL_EINVAL, "no %s given", what);
    return VIGIL_OK;
}

vigil_code vigil_memory_list(vigil_runtime *rt, const char *agent_id, const char *tier,
                             char **out_json, vigil_error *err)
{
    struct mgr g;
    json_t *v = NULL;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = mgr_open(rt, &g, err)))
        return rc;
    rc = vg_memory_list(g.m, agent_id, tier, &v, err);
    mgr_close(&g);
    return finish(rc, v, out_json, err);
}

vigil_code vigil_memory_show(vigil_runtime *rt, const char *agent_id, const char *label,
                             char **out_json, vigil_error *err)
{
    struct mgr g;
    json_t *v = NULL;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = need(label, "label", err)) || (rc = mgr_open(rt, &g, err)))
        return rc;
    rc = vg_memory_get(g.m, agent_id, label, &v, err);
    mgr_close(&g);
    return finish(rc, v, out_json, err);
}

vigil_code vigil_memory_search(vigil_runtime *rt, const char *agent_id, const char *query, int k,
                               char **out_json, vigil_error *err)
{
    struct mgr g;
    json_t *v = NULL;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = mgr_open(rt, &g, err)))
        return rc;
    rc = vg_memory_search(g.m, agent_id, query, VG_SEARCH_HYBRID, k ? k : 10, &v, err);
    mgr_close(&g);
    return finish(rc, v, out_json, err);
}

vigil_code vigil_memory_history(vigil_runtime *rt, const char *agent_id, const char *label,
                                char **out_json, vigil_error *err)
{
    struct mgr g;
    json_t *v = NULL;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = need(label, "label", err)) || (rc = mgr_open(rt, &g, err)))
        return rc;
    rc = vg_memory_history(g.m, agent_id, label, &v, err);
    mgr_close(&g);
    return finish(rc, v, out_json, err);
}

vigil_code vigil_memory_pending(vigil_runtime *rt, const char *agent_id, char **out_json,
                                vigil_error *err)
{
    struct mgr g;
    json_t *v = NULL;
    vigil_code rc = agent_id ? vg_runtime_agent_check(rt, agent_id, err) : VIGIL_OK;
    if (rc || (rc = mgr_open(rt, &g, err)))
        return rc;
    rc = vg_memory_pending_list(g.m, agent_id, &v, err);
    mgr_close(&g);
    return finish(rc, v, out_json, err);
}

vigil_code vigil_memory_approve(vigil_runtime *rt, const char *pending_id, char **out_json,
                                vigil_error *err)
{
    struct mgr g;
    json_t *v = NULL;
    vigil_code rc = need(pending_id, "pending change id", err);
    if (rc || (rc = mgr_open(rt, &g, err)))
        return rc;
    rc = vg_memory_approve(g.m, pending_id, "human", &v, err);
    mgr_close(&g);
    return finish(rc, v, out_json, err);
}

vigil_code vigil_memory_reject(vigil_runtime *rt, const char *pending_id, const char *reason,
                               char **out_json, vigil_error *err)
{
    struct mgr g;
    json_t *v = NULL;
    vigil_code rc = need(pending_id, "pending change id", err);
    if (rc || (rc = mgr_open(rt, &g, err)))
        return rc;
    rc = vg_memory_reject(g.m, pending_id, reason, "human", &v, err);
    mgr_close(&g);
    return finish(rc, v, out_json, err);
}

vigil_code vigil_memory_set(vigil_runtime *rt, const char *agent_id, const char *label,
                            const char *content, const char *tier, const char *permission,
                            char **out_json, vigil_error *err)
{
    struct mgr g;
    json_t *v = NULL;
    struct vg_memory_set_in in = {.agent_id = agent_id,
                                  .label = label,
                                  .content = content,
                                  .tier = tier,
                                  .permission = permission,
                                  .actor = "human"};
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = need(label, "label", err)) || (rc = mgr_open(rt, &g, err)))
        return rc;
    rc = vg_memory_set(g.m, &in, &v, err);
    mgr_close(&g);
    return finish(rc, v, out_json, err);
}

vigil_code vigil_memory_delete(vigil_runtime *rt, const char *agent_id, const char *label,
                               char **out_json, vigil_error *err)
{
    struct mgr g;
    json_t *v = NULL;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = need(label, "label", err)) || (rc = mgr_open(rt, &g, err)))
        return rc;
    rc = vg_memory_remove(g.m, agent_id, label, "human", &v, err);
    mgr_close(&g);
    return finish(rc, v, out_json, err);
}

vigil_code vigil_memory_seed(vigil_runtime *rt, const char *agent_id, const char *persona_path,
                             int *seeded, vigil_error *err)
{
    struct mgr g;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = mgr_open(rt, &g, err)))
        return rc;
    rc = vg_memory_seed(g.m, agent_id, persona_path, seeded, err);
    mgr_close(&g);
    return rc;
}
