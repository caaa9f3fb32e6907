/*
 * source_ref.c: source references (S0-116), the host entities an agent relies on, each a record
 * of (agent, source type, source id). The agent domain keeps the host's entities by id only
 * (DESIGN 3.2): a reference is how a host finds every agent that relies on an entity it is about
 * to change or delete (a deleted task makes its agents dormant, not broken), and how an agent's
 * inspector sees what it watches, without a key across the two stores.
 *
 * Record: kind source_ref, id "<agent>|<type>|<source id>" (hashed when longer than an id may
 * be), owner the agent, k1 the source type, k2 "<type>:<source id>", seq the time it was added.
 * So an agent's references of a type are one range of (kind, owner, k1, seq), the agents relying
 * on one entity one range of (kind, k2, seq), and one reference is read by its id: adding it
 * twice stores it once. Removing one deletes its row and leaves a tombstone (for sync).
 */
#include "base/common.h"

#include "agent/agent_int.h"
#include "base/hash.h"

#define SOURCE_TYPE_MAX 64

/* 1 to 64 of a-z, 0-9, _, - and . ("task", "todo.task", "calendar-event"). */
static int source_type_valid(const char *t)
{
    size_t n = t ? strlen(t) : 0;
    if (n == 0 || n > SOURCE_TYPE_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* 1 to 200 bytes, no control character (the id is the host's own, shown to people). */
static int source_id_valid(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > 200)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)id[i] < 0x20 || id[i] == 0x7f)
            return 0;
    return 1;
}

static vigil_code check_ref(const char *type, const char *source_id, vigil_error *err)
{
    if (!source_type_valid(type))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "invalid source type \"%.70s\": use 1 to 64 of a-z, 0-9, _, - and .",
                       type ? type : "");
    if (!source_id_valid(source_id))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "invalid source id: 1 to 200 bytes without control characters");
    return VIGIL_OK;
}

/* The reference's record id, and its k2 ("<type>:<source id>", at most 265 bytes). */
static void ref_keys(const char *agent_id, const char *type, const char *source_id,
                     char id[VG_RECORD_ID_MAX], char k2[SOURCE_TYPE_MAX + 202])
{
    int n = snprintf(id, VG_RECORD_ID_MAX, "%s|%s|%s", agent_id, type, source_id);
    if (n < 0 || n >= VG_RECORD_ID_MAX) {
        const char *parts[] = {agent_id, type, source_id};
        vg_sha256_hex_parts(id, parts, 3);
    }
    vg_join(k2, SOURCE_TYPE_MAX + 202, type, ':', source_id);
}

vigil_code vg_source_ref_add(struct vg_env *env, const char *agent_id, const char *type,
                             const char *source_id, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX], k2[SOURCE_TYPE_MAX + 202], at[32];
    vigil_lifecycle lc;
    vigil_code rc = check_ref(type, source_id, err);
    if (rc)
        return rc;
    ref_keys(agent_id, type, source_id, id, k2);
    int64_t now = vg_env_now(env);
    vg_time_format_ms(at, now);
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:i}", "agent_id", agent_id, "source_type", type,
                             "source_id", source_id, "created_at", at, "schema_version", 1);
    if (!body)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding a source reference");
    if ((rc = vg_store_begin(env->store, err)))
        goto out;
    rc = vg_agent_lifecycle(env, agent_id, &lc, err);
    if (!rc && lc == VIGIL_LIFECYCLE_DESTROYED)
        rc = VG_FAIL(err, VIGIL_ESTATE, "agent \"%s\" is destroyed", agent_id);
    if (!rc)
        rc = vg_env_put_json(env, "source_ref", id, agent_id, type, k2, now, body, VG_PUT_IF_ABSENT,
                             err);
    rc = vg_store_end(env->store, rc, err);
out:
    json_decref(body);
    return rc;
}

vigil_code vg_source_ref_remove(struct vg_env *env, const char *agent_id, const char *type,
                                const char *source_id, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX], k2[SOURCE_TYPE_MAX + 202];
    vigil_error miss = {0};
    vigil_code rc = check_ref(type, source_id, err);
    if (rc)
        return rc;
    ref_keys(agent_id, type, source_id, id, k2);
    if ((rc = vg_store_begin(env->store, err)))
        return rc;
    rc = vg_error_unless_missing(err, &miss, vg_store_remove(env->store, "source_ref", id, &miss));
    if (rc == VIGIL_ENOTFOUND) /* never there, or removed already: nothing to do */
        rc = VIGIL_OK;
    else if (!rc) /* written again when made anew and removed again, so it travels again */
        rc = vg_tombstone_put(env, agent_id, "source_ref", id, err);
    return vg_store_end(env->store, rc, err);
}

struct refs_ctx {
    json_t *out;
    const char *field; /* the member each item is (NULL: the whole body) */
    int failed;
};

static int refs_cb(void *user, const struct vg_record *r)
{
    struct refs_ctx *c = user;
    json_t *body = json_loads(r->body, 0, NULL);
    json_t *item = body && c->field ? json_incref(json_object_get(body, c->field)) : body;
    if (body && c->field)
        json_decref(body);
    if (!item || json_array_append_new(c->out, item))
        c->failed = 1;
    return c->failed;
}

static vigil_code refs_scan(struct vg_env *env, struct vg_query *q, const char *field, json_t **out,
                            vigil_error *err)
{
    struct refs_ctx c = {json_array(), field, 0};
    if (!c.out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading source references");
    vigil_code rc = vg_store_scan(env->store, q, refs_cb, &c, err);
    if (!rc && c.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading source references");
    if (rc)
        json_decref(c.out);
    else
        *out = c.out;
    return rc;
}

vigil_code vg_source_refs(struct vg_env *env, const char *agent_id, const char *type, json_t **out,
                          vigil_error *err)
{
    if (type && !source_type_valid(type))
        return check_ref(type, "x", err);
    struct vg_query q = {.kind = "source_ref", .owner = agent_id, .k1 = type};
    return refs_scan(env, &q, NULL, out, err);
}

vigil_code vg_source_ref_agents(struct vg_env *env, const char *type, const char *source_id,
                                json_t **out, vigil_error *err)
{
    char id[VG_RECORD_ID_MAX], k2[SOURCE_TYPE_MAX + 202];
    vigil_code rc = check_ref(type, source_id, err);
    if (rc)
        return rc;
    ref_keys("", type, source_id, id, k2);
    struct vg_query q = {.kind = "source_ref", .k2 = k2};
    return refs_scan(env, &q, "agent_id", out, err);
}
