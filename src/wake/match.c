/*
 * match.c: persisted subscriptions and the matching of a notification batch against them.
 *
 * A subscription is one "subscription" record plus one "sub_token" index record per token it
 * matches, keyed k1 = "<class>:<token>". Matching a batch does one indexed lookup per batch
 * token, so its cost follows the batch size, not the number of subscriptions. Predicates on
 * changed entities are checked after that prefilter, with one bulk entity lookup per batch and
 * only for entity-id tokens (semantic keys and subtypes are never looked up).
 */
#include "base/common.h"
#include "base/json.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "wake/wake_int.h"

/* ---- subscriptions --------------------------------------------------------------------------- */

static vigil_code oom(vigil_error *err)
{
    return VG_FAIL(err, VIGIL_ENOMEM, "out of memory matching subscriptions");
}

static int token_ok(const char *t)
{
    return t && *t && strlen(t) <= 190;
}

vigil_code vg_sub_add(struct vg_env *env, const struct vg_sub_spec *s, char out_id[201],
                      vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    json_t *body = NULL, *toks = NULL, *req = NULL, *where = NULL;
    char id[201];
    int tagged;
    const char *saved;
    vigil_lifecycle lc;
    if (!s->agent_id || !vg_id_valid(s->agent_id))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid agent id \"%s\"",
                       s->agent_id ? s->agent_id : "");
    if (!s->n_tokens)
        return VG_FAIL(err, VIGIL_EINVAL, "a subscription needs at least one token");
    if (s->id && (!*s->id || strlen(s->id) > 100))
        return VG_FAIL(err, VIGIL_EINVAL, "a subscription id has 1 to 100 bytes");
    if (!(toks = json_array()) || !(req = json_array()) || !(where = json_array()))
        goto nomem;
    for (size_t i = 0; i < s->n_tokens; i++) {
        if (!token_ok(s->tokens[i])) {
            rc = VG_FAIL(err, VIGIL_EINVAL, "invalid token \"%.40s\": use 1 to 190 bytes",
                         s->tokens[i] ? s->tokens[i] : "");
            goto out;
        }
        json_t *t =
            json_pack("{s:s, s:s}", "class", vg_token_class_name(vg_token_classify(s->tokens[i])),
                      "token", s->tokens[i]);
        if (!t || json_array_append_new(toks, t))
            goto nomem;
    }
    for (size_t i = 0; i < s->n_require; i++) {
        if (!token_ok(s->require[i])) {
            rc = VG_FAIL(err, VIGIL_EINVAL, "invalid required token");
            goto out;
        }
        if (json_array_append_new(req, json_string(s->require[i])))
            goto nomem;
    }
    for (size_t i = 0; i < s->n_where; i++) {
        const char *eq = s->where[i] ? strchr(s->where[i], '=') : NULL;
        if (!eq || eq == s->where[i] || strlen(s->where[i]) > 400) {
            rc = VG_FAIL(err, VIGIL_EINVAL, "invalid predicate \"%.60s\": use FIELD=VALUE",
                         s->where[i] ? s->where[i] : "");
            goto out;
        }
        json_t *p = json_pack("{s:s%, s:s}", "field", s->where[i], (size_t)(eq - s->where[i]),
                              "equals", eq + 1);
        if (!p || json_array_append_new(where, p))
            goto nomem;
    }
    if (s->id)
        snprintf(id, sizeof id, "%s", s->id);
    else
        vg_ids_new(env->ids, id);
    char at[32];
    vg_time_format_ms(at, vg_env_now(env));
    body = json_pack("{s:s, s:s, s:O, s:O, s:O, s:s?, s:s}", "id", id, "agent_id", s->agent_id,
                     "tokens", toks, "require", req, "where", where, "linked_to", s->linked_to,
                     "created_at", at);
    if (!body)
        goto nomem;
    if ((rc = vg_wake_tx_begin(env, &tagged, &saved, err)))
        goto out;
    rc = vg_agent_lifecycle(env, s->agent_id, &lc, err);
    if (!rc) { /* an existing id is replaced, never duplicated (restarts re-adding are safe) */
        vigil_error miss = {0};
        rc = vg_error_unless_missing(err, &miss,
                                     vg_store_remove(env->store, "subscription", id, &miss));
        if (rc == VIGIL_ENOTFOUND)
            rc = VIGIL_OK;
    }
    if (!rc)
        rc = vg_sub_index_drop(env, id, err);
    if (!rc)
        rc = vg_env_put_json(env, "subscription", id, s->agent_id, "", "", vg_env_now(env), body, 0,
                             err);
    if (!rc)
        rc = vg_sub_index_put(env, id, s->agent_id, toks, err);
    rc = vg_wake_tx_end(env, rc, tagged, saved, err);
    if (!rc && out_id)
        snprintf(out_id, 201, "%s", id);
    goto out;
nomem:
    rc = oom(err);
out:
    json_decref(body);
    json_decref(toks);
    json_decref(req);
    json_decref(where);
    return rc;
}

vigil_code vg_sub_remove(struct vg_env *env, const char *sub_id, vigil_error *err)
{
    int tagged;
    const char *saved;
    vigil_code rc = vg_wake_tx_begin(env, &tagged, &saved, err);
    if (rc)
        return rc;
    struct vg_record *r = NULL;
    rc = vg_store_get_copy(env->store, "subscription", sub_id, &r, err);
    if (!rc)
        rc = vg_store_remove(env->store, "subscription", sub_id, err);
    if (rc == VIGIL_ENOTFOUND)
        rc = VG_FAIL(err, VIGIL_ENOTFOUND, "no subscription \"%s\"", sub_id);
    if (!rc)
        rc = vg_sub_index_drop(env, sub_id, err);
    if (!rc) /* so that the deletion reaches the other devices (docs/sync.md) */
        rc = vg_tombstone_put(env, r->owner, "subscription", sub_id, err);
    vg_free(r);
    return vg_wake_tx_end(env, rc, tagged, saved, err);
}

struct list_ctx {
    json_t *items;
    int oom;
};

static int list_cb(void *user, const struct vg_record *r)
{
    struct list_ctx *c = user;
    json_t *b = json_loads(r->body, 0, NULL);
    if (!b || json_array_append_new(c->items, b)) {
        c->oom = 1;
        return 1;
    }
    return 0;
}

vigil_code vg_wake_list_kind(struct vg_env *env, const char *kind, const char *owner, json_t **out,
                             vigil_error *err)
{
    struct vg_query q = {.kind = kind, .owner = owner};
    struct list_ctx c = {json_array(), 0};
    if (!c.items)
        return oom(err);
    vigil_code rc = vg_store_scan(env->store, &q, list_cb, &c, err);
    if (!rc && c.oom)
        rc = oom(err);
    if (rc) {
        json_decref(c.items);
        return rc;
    }
    *out = c.items;
    return VIGIL_OK;
}

vigil_code vg_wake_forget_agent(struct vg_env *env, const char *agent_id, int *removed,
                                vigil_error *err)
{
    static const char *const kinds[] = {"timer", "subscription"};
    vigil_code rc = VIGIL_OK;
    int n = 0;
    for (size_t k = 0; !rc && k < VG_ARRAY_LEN(kinds); k++) {
        json_t *list = NULL, *it;
        size_t i;
        if ((rc = vg_wake_list_kind(env, kinds[k], agent_id, &list, err)))
            break;
        json_array_foreach (list, i, it) {
            const char *id = json_string_value(json_object_get(it, "id"));
            if (!id || (rc = k ? vg_sub_remove(env, id, err) : vg_timer_remove(env, id, err)))
                break;
            n++;
        }
        json_decref(list);
    }
    if (removed)
        *removed = n;
    return rc;
}

vigil_code vg_sub_list(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err)
{
    return vg_wake_list_kind(env, "subscription", agent_id, out, err);
}

/* ---- entity lookup --------------------------------------------------------------------------- */

vigil_code vg_entity_lookup_store(void *user, struct vg_env *env, const char *const *ids, size_t n,
                                  json_t **out, vigil_error *err)
{
    json_t *all = json_object();
    if (!all)
        return oom(err);
    for (size_t i = 0; i < n; i++) {
        json_t *e = NULL;
        vigil_code rc = vg_env_get_json(env, "host_entity", ids[i], &e, NULL, err);
        if (rc == VIGIL_ENOTFOUND)
            continue;
        if (rc) {
            json_decref(all);
            return rc;
        }
        if (json_object_set_new(all, ids[i], e)) {
            json_decref(all);
            return oom(err);
        }
    }
    *out = all;
    return VIGIL_OK;
}

/* ---- matching -------------------------------------------------------------------------------- */

struct hit {
    char sub[201];
    char agent[37];
};

struct hits_ctx {
    struct hit *v;
    size_t n, cap;
    int oom;
};

static int hits_cb(void *user, const struct vg_record *r)
{
    struct hits_ctx *h = user;
    for (size_t i = 0; i < h->n; i++) /* a subscription matched by two tokens counts once */
        if (!strcmp(h->v[i].sub, r->k2))
            return 0;
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 8;
        void *p = vg_realloc(h->v, cap * sizeof *h->v);
        if (!p) {
            h->oom = 1;
            return 1;
        }
        h->v = p;
        h->cap = cap;
    }
    snprintf(h->v[h->n].sub, sizeof h->v[h->n].sub, "%s", r->k2);
    snprintf(h->v[h->n].agent, sizeof h->v[h->n].agent, "%s", r->owner);
    h->n++;
    return 0;
}

static int cmp_hit(const void *a, const void *b)
{
    const struct hit *x = a, *y = b;
    int c = strcmp(x->agent, y->agent);
    return c ? c : strcmp(x->sub, y->sub);
}

static int value_equals(json_t *v, const char *want)
{
    char buf[64];
    if (json_is_string(v))
        return !strcmp(json_string_value(v), want);
    if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return !strcmp(buf, want);
    }
    if (json_is_true(v))
        return !strcmp(want, "true");
    if (json_is_false(v))
        return !strcmp(want, "false");
    return 0;
}

/* Does some changed entity of the batch satisfy every predicate of the subscription? */
static int predicates_hold(json_t *sub, json_t *entities, const struct vg_wake_batch *b)
{
    json_t *where = json_object_get(sub, "where");
    const char *linked = json_string_value(json_object_get(sub, "linked_to"));
    for (size_t i = 0; i < b->n; i++) {
        json_t *e = json_object_get(entities, b->tokens[i]);
        if (!json_is_object(e))
            continue;
        int ok = 1;
        size_t k;
        json_t *p;
        json_array_foreach (where, k, p) {
            json_t *v = json_object_get(e, json_string_value(json_object_get(p, "field")));
            if (!value_equals(v, json_string_value(json_object_get(p, "equals")))) {
                ok = 0;
                break;
            }
        }
        if (ok && linked) {
            json_t *links = json_object_get(e, "links"), *l;
            int found = 0;
            json_array_foreach (links, k, l)
                if (json_is_string(l) && !strcmp(json_string_value(l), linked)) {
                    found = 1;
                    break;
                }
            ok = found;
        }
        if (ok)
            return 1;
    }
    return 0;
}

static int needs_entities(json_t *sub)
{
    return json_array_size(json_object_get(sub, "where")) > 0 ||
           json_is_string(json_object_get(sub, "linked_to"));
}

/* Enqueue the wake of one matched subscription. An agent gone or unreadable (its subscription
 * left behind, a damaged record) is skipped, its enqueue rolled back: the batch, consumed once,
 * still wakes the others, instead of failing for all of them at every retry. The store's own
 * failures (busy, full, out of memory) fail the batch, to be tried again whole. */
static vigil_code enqueue_match(struct vg_wake *w, const struct vg_wake_batch *b,
                                const struct hit *hit, struct vg_match_stats *st, vigil_error *err)
{
    struct vg_wake_req req = {.reason = VG_REASON_SUBSCRIPTION,
                              .agent_id = hit->agent,
                              .reason_id = hit->sub,
                              .batch_identity = b->identity,
                              .tokens = (const char *const *)b->tokens,
                              .n_tokens = b->n};
    enum vg_enqueue_result res;
    char key[65];
    vigil_error one = {0};
    vigil_code rc = vg_wake_enqueue(w, &req, key, &res, &one);
    if (rc == VIGIL_ENOTFOUND || rc == VIGIL_ECORRUPT) {
        st->broken++;
        return VIGIL_OK;
    }
    if (rc) {
        vg_error_copy(err, &one);
        return rc;
    }
    if (res == VG_ENQ_NEW)
        st->enqueued++;
    else if (res == VG_ENQ_MERGED)
        st->merged++;
    return VIGIL_OK;
}

vigil_code vg_wake_batch_process(struct vg_wake *w, const struct vg_wake_batch *b,
                                 struct vg_match_stats *st, vigil_error *err)
{
    struct vg_env *env = w->env;
    struct hits_ctx h = {0};
    struct vg_match_stats local = {0};
    json_t **subs = NULL, *entities = NULL, *mark = NULL;
    const char **ents = NULL;
    int tagged, inserted = 0;
    const char *saved;
    vigil_code rc;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    if ((rc = vg_wake_tx_begin(env, &tagged, &saved, err)))
        return rc;
    /* The batch is consumed once: its identity record and the wakes commit together. */
    if (!(mark = json_pack("{s:s, s:i, s:s?}", "identity", b->identity, "tokens", (int)b->n,
                           "source", b->source))) {
        rc = oom(err);
        goto out;
    }
    {
        char *text = vg_json_dumps(mark, JSON_COMPACT);
        struct vg_record r = {.kind = "wake_batch",
                              .id = b->identity,
                              .owner = "",
                              .k1 = "",
                              .k2 = "",
                              .seq = vg_env_now(env),
                              .at = vg_env_now(env),
                              .body = text};
        rc = text ? vg_store_put(env->store, &r, VG_PUT_IF_ABSENT, &inserted, err) : oom(err);
        vg_free(text);
    }
    if (rc)
        goto out;
    for (size_t i = 0; !rc && i < b->n_records; i++) {
        rc = vg_store_remove(env->store, "notification", b->record_ids[i], err);
        if (rc == VIGIL_ENOTFOUND)
            rc = VIGIL_OK;
    }
    if (rc)
        goto out;
    if (!inserted) {
        st->duplicate = 1;
        goto out;
    }
    /* Prefilter: one indexed lookup per token, whatever its class. */
    for (size_t i = 0; !rc && i < b->n; i++) {
        char k1[256];
        snprintf(k1, sizeof k1, "%s:%s", vg_token_class_name(vg_token_classify(b->tokens[i])),
                 b->tokens[i]);
        struct vg_query q = {.kind = "sub_token", .k1 = k1};
        rc = vg_store_scan(env->store, &q, hits_cb, &h, err);
        if (!rc && h.oom)
            rc = oom(err);
    }
    if (rc || !h.n)
        goto out;
    qsort(h.v, h.n, sizeof *h.v, cmp_hit);
    if (!(subs = vg_calloc(h.n, sizeof *subs))) {
        rc = oom(err);
        goto out;
    }
    int need = 0;
    for (size_t i = 0; !rc && i < h.n; i++) {
        /* Self-suppression runs before anything else is looked at (S3-043). */
        if ((b->source && !strcmp(b->source, h.v[i].agent)) ||
            (!b->source && vg_suppress_covers(w, h.v[i].agent, b))) {
            st->suppressed++;
            continue;
        }
        vigil_error one = {0};
        rc = vg_env_get_json(env, "subscription", h.v[i].sub, &subs[i], NULL, &one);
        if (rc == VIGIL_ENOTFOUND) { /* index without its subscription: ignore */
            rc = VIGIL_OK;
            continue;
        }
        if (rc == VIGIL_ECORRUPT) { /* one agent's broken subscription holds up no other's */
            rc = VIGIL_OK;
            st->broken++;
            continue;
        }
        if (rc) {
            vg_error_copy(err, &one);
            break;
        }
        size_t k;
        json_t *r;
        json_array_foreach (json_object_get(subs[i], "require"), k, r)
            if (!vg_wake_batch_has(b, json_string_value(r))) {
                json_decref(subs[i]);
                subs[i] = NULL;
                break;
            }
        if (subs[i] && needs_entities(subs[i]))
            need = 1;
    }
    if (rc)
        goto out;
    if (need) { /* one bulk lookup, entity ids only */
        size_t ne = 0;
        if (!(ents = vg_calloc(b->n + 1, sizeof *ents))) {
            rc = oom(err);
            goto out;
        }
        for (size_t i = 0; i < b->n; i++)
            if (vg_token_classify(b->tokens[i]) == VG_TOKEN_ENTITY)
                ents[ne++] = b->tokens[i];
        if (ne) {
            if ((rc = w->lookup(w->lookup_user, env, ents, ne, &entities, err)))
                goto out;
        }
    }
    for (size_t i = 0; !rc && i < h.n; i++) {
        if (!subs[i])
            continue;
        if (needs_entities(subs[i]) && !predicates_hold(subs[i], entities, b))
            continue;
        st->matched_subs++;
        rc = enqueue_match(w, b, &h.v[i], st, err);
    }
out:
    rc = vg_wake_tx_end(env, rc, tagged, saved, err);
    for (size_t i = 0; subs && i < h.n; i++)
        json_decref(subs[i]);
    vg_free(subs);
    vg_free(h.v);
    vg_free(ents);
    json_decref(entities);
    json_decref(mark);
    return rc;
}
