/*
 * state.c: what an agent has now, in a manifest's words: its subscriptions, its timers and the
 * blocks of its memory seeds as they are, not as the manifest last said (trials E14, E21). Apply
 * compares a manifest with these to name only what it writes; export prints them so that
 * applying the export gives back the same agent.
 */
#include "base/common.h"

#include "manifest/manifest_int.h"
#include "memory/memory.h"
#include "wake/wake.h"

static vigil_code oom(vigil_error *err)
{
    return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading an agent's state");
}

/* Set key to an array when it is not empty (taken either way); -1 out of memory. */
static int put_list(json_t *o, const char *key, json_t *list)
{
    if (!list)
        return -1;
    if (!json_array_size(list)) {
        json_decref(list);
        return 0;
    }
    return json_object_set_new(o, key, list);
}

/* A stored subscription (tokens [{class, token}], require, where [{field, equals}]) as a
 * manifest writes it: tokens, and require, where and linked_to when it has them. */
static json_t *sub_as_manifest(const json_t *s)
{
    json_t *m = json_object(), *tokens = json_array(), *where = json_array(), *it;
    size_t i;
    json_array_foreach (json_object_get(s, "tokens"), i, it)
        json_array_append(tokens, json_object_get(it, "token"));
    json_array_foreach (json_object_get(s, "where"), i, it) {
        char *kv = NULL;
        const char *f = json_string_value(json_object_get(it, "field"));
        const char *v = json_string_value(json_object_get(it, "equals"));
        size_t n = strlen(f ? f : "") + strlen(v ? v : "") + 2;
        if ((kv = vg_malloc(n))) {
            snprintf(kv, n, "%s=%s", f ? f : "", v ? v : "");
            json_array_append_new(where, json_string(kv));
        }
        vg_free(kv);
    }
    json_t *linked = json_object_get(s, "linked_to");
    if (!m || !tokens || json_object_set_new(m, "tokens", tokens) ||
        (json_object_get(s, "require") &&
         put_list(m, "require", json_deep_copy(json_object_get(s, "require")))) ||
        put_list(m, "where", where) ||
        (json_is_string(linked) && json_object_set(m, "linked_to", linked))) {
        json_decref(m);
        return NULL;
    }
    return m;
}

json_t *vg_manifest_sub_normal(const json_t *s)
{
    static const char *const lists[] = {"require", "where"};
    json_t *m = json_pack("{s:O}", "tokens", json_object_get(s, "tokens"));
    for (size_t i = 0; m && i < VG_ARRAY_LEN(lists); i++)
        if (json_object_get(s, lists[i]) &&
            put_list(m, lists[i], json_deep_copy(json_object_get(s, lists[i])))) {
            json_decref(m);
            return NULL;
        }
    json_t *linked = json_object_get(s, "linked_to");
    if (m && json_is_string(linked) && json_object_set(m, "linked_to", linked)) {
        json_decref(m);
        return NULL;
    }
    return m;
}

vigil_code vg_manifest_subs_of(struct vg_env *env, const char *agent_id, json_t **out,
                               vigil_error *err)
{
    json_t *have = NULL, *list = json_array(), *s;
    size_t i;
    vigil_code rc = list ? vg_sub_list(env, agent_id, &have, err) : oom(err);
    json_array_foreach (have, i, s) {
        json_t *m = sub_as_manifest(s);
        if (!rc && (!m || json_object_set(m, "id", json_object_get(s, "id")) ||
                    json_array_append(list, m)))
            rc = oom(err);
        json_decref(m);
    }
    json_decref(have);
    if (rc)
        json_decref(list);
    else
        *out = list;
    return rc;
}

vigil_code vg_manifest_timers_of(struct vg_env *env, const char *agent_id, json_t **out,
                                 vigil_error *err)
{
    json_t *have = NULL, *list = json_array(), *t;
    size_t i;
    vigil_code rc = list ? vg_timer_list(env, agent_id, &have, err) : oom(err);
    json_array_foreach (have, i, t) {
        const char *kind = json_string_value(json_object_get(t, "kind"));
        json_t *m = kind ? json_pack("{s:O, s:O}", kind, json_object_get(t, "spec"), "tz",
                                     json_object_get(t, "tz"))
                         : NULL;
        if (!rc && kind && (!m || json_array_append(list, m)))
            rc = oom(err);
        json_decref(m);
    }
    json_decref(have);
    if (rc)
        json_decref(list);
    else
        *out = list;
    return rc;
}

/* A block as a seed says it: label, content, tier, permission, and pinned when it is. */
static json_t *block_as_seed(const json_t *b)
{
    json_t *s = json_pack("{s:O, s:O, s:O, s:O}", "label", json_object_get(b, "label"), "content",
                          json_object_get(b, "content"), "tier", json_object_get(b, "tier"),
                          "permission", json_object_get(b, "permission"));
    if (s && json_is_true(json_object_get(b, "pinned")) &&
        json_object_set_new(s, "pinned", json_true())) {
        json_decref(s);
        return NULL;
    }
    return s;
}

vigil_code vg_manifest_blocks_of(struct vg_env *env, const char *agent_id, const json_t *seeds,
                                 json_t **out, vigil_error *err)
{
    struct vg_memory *m = NULL;
    json_t *list = json_array(), *seed;
    size_t i;
    vigil_code rc = list ? vg_memory_new(env, NULL, &m, err) : oom(err);
    json_array_foreach (seeds, i, seed) {
        json_t *b = NULL, *s = NULL;
        vigil_error missing = {0};
        const char *label = json_string_value(json_object_get(seed, "label"));
        vigil_code got =
            rc || !label ? VIGIL_ENOTFOUND : vg_memory_get(m, agent_id, label, &b, &missing);
        if (got == VIGIL_ENOTFOUND)
            continue; /* deleted since: the agent has no such block */
        if (got)
            rc = got, vg_error_copy(err, &missing);
        else if (!(s = block_as_seed(b)) || json_array_append(list, s))
            rc = oom(err);
        json_decref(s);
        json_decref(b);
    }
    vg_memory_free(m);
    if (rc)
        json_decref(list);
    else
        *out = list;
    return rc;
}
