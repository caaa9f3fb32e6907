/*
 * tree.c: lineage. An agent's spawned children, theirs in turn (at most VG_ORCH_MAX_DEPTH
 * levels), and every admission decision the agent got, admitted or denied, with its reason.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "orch/orch_int.h"

struct scan_ctx {
    json_t *items;
    const char *parent_run_key; /* NULL: every record */
};

static int collect_cb(void *user, const struct vg_record *r)
{
    struct scan_ctx *s = user;
    json_t *b = json_loads(r->body, 0, NULL);
    if (!b)
        return 0;
    const char *prk = json_string_value(json_object_get(b, "parent_run_key"));
    if (!s->parent_run_key || (prk && !strcmp(prk, s->parent_run_key))) {
        json_object_set_new(b, "run_key", json_string(r->id));
        json_array_append(s->items, b);
    }
    json_decref(b);
    return 0;
}

static vigil_code scan(struct vg_env *env, const char *kind, const char *owner,
                       const char *parent_run_key, json_t **out, vigil_error *err)
{
    struct scan_ctx s = {json_array(), parent_run_key};
    struct vg_query q = {.kind = kind, .owner = owner};
    vigil_code rc = s.items ? vg_store_scan(env->store, &q, collect_cb, &s, err)
                            : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    if (rc)
        json_decref(s.items);
    else
        *out = s.items;
    return rc;
}

/* The children an agent's run spawned, a run of the child spawns in turn, and so on. A child's
 * later runs (the wakes bringing its own children's results) are aliases of its run key. */
static vigil_code children_of(struct vg_env *env, const char *agent, const char *run_key, int level,
                              json_t **out, vigil_error *err)
{
    json_t *kids = NULL, *k;
    size_t i;
    vigil_code rc = scan(env, "spawn_child", agent, run_key, &kids, err);
    json_array_foreach (kids, i, k) {
        const char *ca = json_string_value(json_object_get(k, "child_agent"));
        const char *ck = json_string_value(json_object_get(k, "run_key"));
        json_t *sub = NULL;
        if (rc || level >= VG_ORCH_MAX_DEPTH)
            break;
        if (!(rc = children_of(env, ca, ck, level + 1, &sub, err)))
            json_object_set_new(k, "children", sub);
        json_object_del(k, "parent_thread");
    }
    if (rc)
        json_decref(kids);
    else
        *out = kids;
    return rc;
}

vigil_code vg_orch_tree(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err)
{
    json_t *agent = NULL, *kids = NULL, *decisions = NULL;
    vigil_code rc = vg_agent_get(env, agent_id, &agent, NULL, err);
    if (!rc)
        rc = children_of(env, agent_id, NULL, 0, &kids, err);
    if (!rc)
        rc = scan(env, "spawn_decision", agent_id, NULL, &decisions, err);
    if (!rc) {
        size_t i;
        json_t *d;
        json_array_foreach (decisions, i, d)
            json_object_del(d, "run_key");
        *out = json_pack("{s:s, s:O, s:O, s:o, s:o}", "agent", agent_id, "name",
                         json_object_get(agent, "name"), "kind", json_object_get(agent, "kind"),
                         "children", kids, "decisions", decisions);
        kids = decisions = NULL;
        if (!*out)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    }
    json_decref(agent);
    json_decref(kids);
    json_decref(decisions);
    return rc;
}

static int decision_cb(void *user, const struct vg_record *r)
{
    json_t *b = json_loads(r->body, 0, NULL);
    if (b) {
        json_object_del(b, "parent_run_key");
        json_object_set_new(b, "at_ms", json_integer(r->seq));
        json_array_append_new(user, b);
    }
    return 0;
}

vigil_code vg_orch_run_decisions(struct vg_env *env, const char *run_key, json_t **out,
                                 vigil_error *err)
{
    json_t *items = json_array();
    /* A child's later runs continue its first run key, under which its decisions are kept. */
    json_t *me = NULL;
    vigil_code rc = items ? vg_orch_child_get(env, run_key, &me, NULL, err)
                          : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading spawn decisions");
    if (rc == VIGIL_ENOTFOUND)
        rc = VIGIL_OK;
    const char *key = me ? json_string_value(json_object_get(me, "run_key")) : NULL;
    struct vg_query q = {.kind = "spawn_decision", .k2 = key ? key : run_key};
    if (!rc)
        rc = vg_store_scan(env->store, &q, decision_cb, items, err);
    json_decref(me);
    if (rc)
        json_decref(items);
    else
        *out = items;
    return rc;
}
