/*
 * kill.c: kill switches (docs/tools.md), persisted as kill_switch records: one global, one per
 * agent, one per tool class. The executor refuses mutating tools while a matching switch is on;
 * the wake system and the loop ask vg_kill_active before each wake and step.
 */
#include "base/common.h"

#include "tool/tool.h"

static vigil_code switch_id(const char *agent_id, const char *tool_class, char *out, size_t n,
                            vigil_error *err)
{
    if (agent_id && tool_class)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "a kill switch is global, per agent or per tool "
                       "class, not both");
    if ((agent_id && !*agent_id) || (tool_class && !*tool_class))
        return VG_FAIL(err, VIGIL_EINVAL, "empty agent id or tool class");
    if (agent_id)
        snprintf(out, n, "agent:%s", agent_id);
    else if (tool_class)
        snprintf(out, n, "class:%s", tool_class);
    else
        snprintf(out, n, "global");
    return VIGIL_OK;
}

vigil_code vg_kill_set(struct vg_env *env, const char *agent_id, const char *tool_class, int on,
                       const char *reason, vigil_error *err)
{
    char id[256], at[32];
    json_t *body = NULL, *old = NULL;
    int64_t rev = 0;
    vigil_code rc = switch_id(agent_id, tool_class, id, sizeof id, err);
    if (rc)
        return rc;
    vg_time_format_ms(at, vg_env_now(env));
    body = json_pack("{s:s, s:b, s:s?, s:s?, s:s?, s:s}", "id", id, "on", on, "agent_id", agent_id,
                     "tool_class", tool_class, "reason", reason, "changed_at", at);
    if (!body)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory setting a kill switch");
    if ((rc = vg_store_begin(env->store, err)))
        goto out;
    vigil_error miss = {0};
    rc = vg_error_unless_missing(err, &miss,
                                 vg_env_get_json(env, "kill_switch", id, &old, &rev, &miss));
    if (rc == VIGIL_ENOTFOUND)
        rc = vg_env_put_json(env, "kill_switch", id, agent_id ? agent_id : "", on ? "on" : "off",
                             tool_class ? tool_class : "", vg_env_now(env), body, 0, err);
    else if (!rc)
        rc = vg_env_update_json(env, "kill_switch", id, agent_id ? agent_id : "", on ? "on" : "off",
                                tool_class ? tool_class : "", vg_env_now(env), body, rev, err);
    if (!rc) {
        const char *tokens[] = {"KILL_SWITCH_CHANGED", id};
        vg_env_notify(env, tokens, 2);
    }
    rc = vg_store_end(env->store, rc, err);
out:
    json_decref(old);
    json_decref(body);
    return rc;
}

static int is_on(struct vg_env *env, const char *id, vigil_code *rc, vigil_error *err)
{
    json_t *b = NULL;
    vigil_error miss = {0};
    vigil_code r = vg_error_unless_missing(
        err, &miss, vg_env_get_json(env, "kill_switch", id, &b, NULL, &miss));
    if (r == VIGIL_ENOTFOUND)
        return 0;
    if (r) {
        *rc = r;
        return 1; /* fail closed: an unreadable switch counts as on */
    }
    int on = json_is_true(json_object_get(b, "on"));
    json_decref(b);
    return on;
}

vigil_code vg_kill_active(struct vg_env *env, const char *agent_id, const char *tool_class, int *on,
                          vigil_error *err)
{
    char id[256];
    vigil_code rc = VIGIL_OK;
    int hit = is_on(env, "global", &rc, err);
    if (!hit && agent_id && *agent_id) {
        snprintf(id, sizeof id, "agent:%s", agent_id);
        hit = is_on(env, id, &rc, err);
    }
    if (!hit && tool_class && *tool_class) {
        snprintf(id, sizeof id, "class:%s", tool_class);
        hit = is_on(env, id, &rc, err);
    }
    if (rc)
        return rc;
    *on = hit;
    return VIGIL_OK;
}

struct list_ctx {
    json_t *out;
    int bad;
};

static int list_cb(void *user, const struct vg_record *r)
{
    struct list_ctx *c = user;
    json_t *b = json_loads(r->body, 0, NULL);
    if (!b || json_array_append_new(c->out, b)) {
        c->bad = 1;
        return 1;
    }
    return 0;
}

vigil_code vg_kill_list(struct vg_env *env, json_t **out, vigil_error *err)
{
    struct list_ctx c = {json_array(), 0};
    struct vg_query q = {.kind = "kill_switch"};
    if (!c.out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing kill switches");
    vigil_code rc = vg_store_scan(env->store, &q, list_cb, &c, err);
    if (!rc && c.bad)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing kill switches");
    if (rc) {
        json_decref(c.out);
        return rc;
    }
    *out = c.out;
    return VIGIL_OK;
}

static int on_cb(void *user, const struct vg_record *r)
{
    struct list_ctx *c = user;
    if (json_array_append_new(c->out, json_string(r->id)))
        return c->bad = 1;
    return 0;
}

vigil_code vg_kill_read_on(struct vg_env *env, struct vg_kill_on *out, vigil_error *err)
{
    /* k1 is the switch's state, written with its body (vg_kill_set) */
    struct vg_query q = {.kind = "kill_switch", .k1 = "on"};
    struct list_ctx c = {json_array(), 0};
    vigil_code rc = c.out ? vg_store_scan(env->store, &q, on_cb, &c, err) : VIGIL_OK;
    if (!rc && (!c.out || c.bad))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading kill switches");
    if (rc) {
        json_decref(c.out);
        return rc;
    }
    out->ids = c.out;
    return VIGIL_OK;
}

static int has_id(const struct vg_kill_on *k, const char *prefix, const char *name)
{
    size_t i, n = strlen(prefix);
    json_t *v;
    json_array_foreach (k->ids, i, v) {
        const char *id = json_string_value(v);
        if (id && !strncmp(id, prefix, n) && !strcmp(id + n, name))
            return 1;
    }
    return 0;
}

int vg_kill_on_for(const struct vg_kill_on *k, const char *agent_id, const char *tool_class)
{
    return has_id(k, "", "global") || (agent_id && *agent_id && has_id(k, "agent:", agent_id)) ||
           (tool_class && *tool_class && has_id(k, "class:", tool_class));
}

void vg_kill_on_release(struct vg_kill_on *k)
{
    json_decref(k->ids);
    k->ids = NULL;
}
