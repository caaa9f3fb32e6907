/*
 * tree.c: lineage. An agent's spawned children, theirs in turn (at most VG_ORCH_MAX_DEPTH
 * levels), and every admission decision the agent got, admitted or denied, with its reason.
 * Decisions are kept in two forms (orch.h): a spawn_agents call's as one spawn_call record,
 * a person's answer as a spawn_decision record of its own; a store written before spawn_call
 * holds every decision as a spawn_decision. Both are read, as one list oldest first. Upwards,
 * the agents that spawned this one: each spawned run's wake (reason "spawn") is keyed by its
 * spawn_child record's run key, which names the parent.
 */
#include "base/common.h"

#include "base/json.h"

#include "agent/agent.h"
#include "orch/orch_int.h"

struct scan_ctx {
    json_t *items;              /* [seq, run key, body] */
    const char *parent_run_key; /* NULL: every record */
};

static int collect_cb(void *user, const struct vg_record *r)
{
    struct scan_ctx *s = user;
    json_t *b = json_loads(r->body, 0, NULL);
    if (!b)
        return 0;
    const char *prk = json_string_value(json_object_get(b, "parent_run_key"));
    if (!s->parent_run_key || (prk && !strcmp(prk, s->parent_run_key)))
        json_array_append_new(s->items, json_pack("[I, s, O]", (json_int_t)r->seq, r->id, b));
    json_decref(b);
    return 0;
}

/* A child its call's record keeps while it waits for a slot (child.c), as its own record. */
static vigil_code collect_kept_cb(void *user, json_t *child, int64_t seq, vigil_error *err)
{
    json_t *b = json_deep_copy(child);
    const char *key = json_string_value(json_object_get(child, "run_key"));
    if (!b || !key || json_array_append_new(user, json_pack("[I, s, o]", (json_int_t)seq, key, b)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    return VIGIL_OK;
}

int vg_orch_by_seq_then_key(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t sx = json_integer_value(json_array_get(x, 0));
    json_int_t sy = json_integer_value(json_array_get(y, 0));
    if (sx != sy)
        return (sx > sy) - (sx < sy);
    return strcmp(json_string_value(json_array_get(x, 1)), json_string_value(json_array_get(y, 1)));
}

/* The spawn_child records of owner (of the run parent_run_key, when not NULL), and the children
 * its calls keep waiting, in the order of a scan of the records (seq, then run key); each
 * body with its "run_key" (a new array). */
static vigil_code scan_children(struct vg_env *env, const char *owner, const char *parent_run_key,
                                json_t **out, vigil_error *err)
{
    struct scan_ctx s = {json_array(), parent_run_key};
    json_t *list = json_array(), *item;
    size_t i;
    struct vg_query q = {.kind = "spawn_child", .owner = owner};
    vigil_code rc = s.items && list ? vg_store_scan(env->store, &q, collect_cb, &s, err)
                                    : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    if (!rc)
        rc = vg_orch_waiting_each(env, owner, parent_run_key, collect_kept_cb, s.items, err);
    if (!rc && vg_json_array_sort(s.items, vg_orch_by_seq_then_key))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    json_array_foreach (s.items, i, item) {
        json_t *b = json_array_get(item, 2);
        if (!rc &&
            (json_object_set(b, "run_key", json_array_get(item, 1)) || json_array_append(list, b)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    }
    json_decref(s.items);
    if (rc)
        json_decref(list);
    else
        *out = list;
    return rc;
}

/* A child's status as its record says it, but `queued` for one admitted to run whose wake no
 * worker has claimed yet: with no daemon, a tree that said `running` waited for nothing (trial
 * C1 of session 30). */
static vigil_code child_status(struct vg_env *env, json_t *child, const char *key, vigil_error *err)
{
    json_t *w = NULL;
    const char *st = json_string_value(json_object_get(child, "status"));
    if (!st || strcmp(st, "running"))
        return VIGIL_OK;
    vigil_code rc = vg_env_get_json(env, "wake_run", key, &w, NULL, err);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    const char *ws = json_string_value(json_object_get(w, "status"));
    if (!rc && ws && !strcmp(ws, "queued") &&
        json_object_set_new(child, "status", json_string("queued")))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    json_decref(w);
    return rc;
}

/* The children an agent's run spawned, a run of the child spawns in turn, and so on. A child's
 * later runs (the wakes bringing its own children's results) are aliases of its run key. */
static vigil_code children_of(struct vg_env *env, const char *agent, const char *run_key, int level,
                              json_t **out, vigil_error *err)
{
    json_t *kids = NULL, *k;
    size_t i;
    vigil_code rc = scan_children(env, agent, run_key, &kids, err);
    json_array_foreach (kids, i, k) {
        const char *ca = json_string_value(json_object_get(k, "child_agent"));
        const char *ck = json_string_value(json_object_get(k, "run_key"));
        json_t *sub = NULL;
        if (rc || (rc = child_status(env, k, ck, err)))
            break;
        if (level < VG_ORCH_MAX_DEPTH && !(rc = children_of(env, ca, ck, level + 1, &sub, err)))
            json_object_set_new(k, "children", sub);
        json_object_del(k, "parent_thread");
    }
    if (rc)
        json_decref(kids);
    else
        *out = kids;
    return rc;
}

/* Each decision a record holds, as one object with the fields of a one-decision record
 * (group, index, decision, reason, child_agent, run_key, depth, parent_run_key, request) and
 * at_ms, the record's time. */
static int decisions_cb(void *user, const struct vg_record *r)
{
    json_t *b = json_loads(r->body, 0, NULL), *list = json_object_get(b, "decisions"), *d;
    size_t i;
    if (!b)
        return 0;
    if (!json_is_array(list)) { /* a spawn_decision: one decision */
        json_object_set_new(b, "at_ms", json_integer(r->seq));
        json_array_append_new(user, b);
        return 0;
    }
    json_array_foreach (list, i, d) {
        static const char *const shared[] = {"group", "depth", "parent_run_key"};
        for (size_t k = 0; k < VG_ARRAY_LEN(shared); k++)
            json_object_set(d, shared[k], json_object_get(b, shared[k]));
        json_object_set_new(d, "at_ms", json_integer(r->seq));
        json_array_append(user, d);
    }
    json_decref(b);
    return 0;
}

/* The decisions of both record kinds that q (its owner or k2) selects, oldest first; of one
 * time, a call's before a person's answer. */
static vigil_code decisions_of(struct vg_env *env, struct vg_query q, json_t **out,
                               vigil_error *err)
{
    json_t *calls = json_array(), *singles = json_array(), *all = json_array();
    vigil_code rc = calls && singles && all
                        ? VIGIL_OK
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading spawn decisions");
    q.kind = "spawn_call";
    if (!rc)
        rc = vg_store_scan(env->store, &q, decisions_cb, calls, err);
    q.kind = "spawn_decision";
    if (!rc)
        rc = vg_store_scan(env->store, &q, decisions_cb, singles, err);
    size_t a = 0, b = 0, na = json_array_size(calls), nb = json_array_size(singles);
    while (!rc && (a < na || b < nb)) {
        json_t *x = json_array_get(calls, a), *y = json_array_get(singles, b);
        int take_a = b >= nb || (a < na && vg_orch_jint(x, "at_ms") <= vg_orch_jint(y, "at_ms"));
        if (json_array_append(all, take_a ? x : y))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading spawn decisions");
        take_a ? a++ : b++;
    }
    json_decref(calls);
    json_decref(singles);
    if (rc)
        json_decref(all);
    else
        *out = all;
    return rc;
}

#define SPAWNED_BY_MAX 50 /* the newest spawns of an agent its lineage names */

static int wake_key_cb(void *user, const struct vg_record *r)
{
    return json_array_append_new(user, json_pack("[I, s]", (json_int_t)r->seq, r->id)) != 0;
}

static int newer_first(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_array_get(*(json_t *const *)a, 0));
    json_int_t y = json_integer_value(json_array_get(*(json_t *const *)b, 0));
    return (x < y) - (x > y);
}

/* The keys of the agent's spawned runs, newest first: its wakes queued as `spawn`, and those
 * a crash re-queued as `recovery` (their record keeps the run key, not the reason: a child the
 * kill -9 of a daemon cut short is found only so). A recovered run no spawn made has no child
 * record and is skipped by the caller. */
static vigil_code spawn_keys(struct vg_env *env, const char *agent_id, json_t **out,
                             vigil_error *err)
{
    static const char *const reasons[] = {"spawn", "recovery"};
    json_t *pairs = json_array(), *keys = json_array(), *p;
    vigil_code rc =
        pairs && keys ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    for (size_t r = 0; !rc && r < 2; r++) {
        struct vg_query q = {.kind = "wake_run",
                             .owner = agent_id,
                             .k2 = reasons[r],
                             .descending = 1,
                             .limit = SPAWNED_BY_MAX};
        rc = vg_store_scan(env->store, &q, wake_key_cb, pairs, err);
    }
    size_t i;
    if (!rc && vg_json_array_sort(pairs, newer_first))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    json_array_foreach (pairs, i, p)
        if (!rc && i < SPAWNED_BY_MAX && json_array_append(keys, json_array_get(p, 1)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    json_decref(pairs);
    if (rc)
        json_decref(keys);
    else
        *out = keys;
    return rc;
}

/* Who spawned the agent, newest first: for each of its spawned runs (at most SPAWNED_BY_MAX),
 * {run_key, status, request, parent_agent, parent_name, parent_run_key}. */
static vigil_code spawned_by(struct vg_env *env, const char *agent_id, json_t **out,
                             vigil_error *err)
{
    json_t *keys = NULL, *list = json_array(), *k;
    size_t i;
    vigil_code rc = list ? spawn_keys(env, agent_id, &keys, err)
                         : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    json_array_foreach (keys, i, k) {
        json_t *child = NULL, *parent = NULL;
        if (rc || (rc = vg_orch_child_get(env, json_string_value(k), &child, NULL, err))) {
            rc = rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc; /* a spawn wake with no record: skipped */
            continue;
        }
        const char *pa = json_string_value(json_object_get(child, "parent_agent"));
        if (pa && vg_agent_get(env, pa, &parent, NULL, NULL) != VIGIL_OK)
            parent = NULL; /* deleted since: its id is still said */
        if (json_array_append_new(list, json_pack("{s:O, s:O?, s:O?, s:s?, s:O?, s:O?}", "run_key",
                                                  k, "status", json_object_get(child, "status"),
                                                  "request", json_object_get(child, "request"),
                                                  "parent_agent", pa, "parent_name",
                                                  json_object_get(parent, "name"), "parent_run_key",
                                                  json_object_get(child, "parent_run_key"))))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
        json_decref(child);
        json_decref(parent);
    }
    json_decref(keys);
    if (rc)
        json_decref(list);
    else
        *out = list;
    return rc;
}

vigil_code vg_orch_tree(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err)
{
    json_t *agent = NULL, *kids = NULL, *decisions = NULL, *parents = NULL;
    vigil_code rc = vg_agent_get(env, agent_id, &agent, NULL, err);
    if (!rc)
        rc = children_of(env, agent_id, NULL, 0, &kids, err);
    struct vg_query q = {.owner = agent_id};
    if (!rc)
        rc = decisions_of(env, q, &decisions, err);
    if (!rc)
        rc = spawned_by(env, agent_id, &parents, err);
    if (!rc) {
        *out = json_pack("{s:s, s:O, s:O, s:o, s:o, s:o}", "agent", agent_id, "name",
                         json_object_get(agent, "name"), "kind", json_object_get(agent, "kind"),
                         "children", kids, "decisions", decisions, "spawned_by", parents);
        kids = decisions = parents = NULL;
        if (!*out)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    }
    json_decref(agent);
    json_decref(kids);
    json_decref(decisions);
    json_decref(parents);
    return rc;
}

vigil_code vg_orch_run_decisions(struct vg_env *env, const char *run_key, json_t **out,
                                 vigil_error *err)
{
    json_t *items = NULL, *d;
    size_t i;
    /* A child's later runs continue its first run key, under which its decisions are kept. */
    json_t *me = NULL;
    vigil_error miss = {0}; /* a run no spawn made: not an error */
    vigil_code rc =
        vg_error_unless_missing(err, &miss, vg_orch_child_get(env, run_key, &me, NULL, &miss));
    if (rc == VIGIL_ENOTFOUND)
        rc = VIGIL_OK;
    const char *key = me ? json_string_value(json_object_get(me, "run_key")) : NULL;
    struct vg_query q = {.k2 = key ? key : run_key};
    if (!rc)
        rc = decisions_of(env, q, &items, err);
    json_decref(me);
    json_array_foreach (items, i, d)
        json_object_del(d, "parent_run_key");
    if (!rc)
        *out = items;
    return rc;
}

vigil_code vg_orch_run_lineage(struct vg_env *env, const char *agent_id, const char *run_key,
                               json_t **parent, json_t **children, vigil_error *err)
{
    json_t *me = NULL, *kids = NULL, *list = json_array(), *k;
    size_t i;
    vigil_error miss = {0}; /* a run no spawn made: not an error */
    vigil_code rc =
        list
            ? vg_error_unless_missing(err, &miss, vg_orch_child_get(env, run_key, &me, NULL, &miss))
            : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    if (rc == VIGIL_ENOTFOUND)
        rc = VIGIL_OK;
    if (!rc)
        rc = scan_children(env, agent_id, run_key, &kids, err);
    json_array_foreach (kids, i, k) {
        const char *ck = json_string_value(json_object_get(k, "run_key"));
        if (rc || (rc = child_status(env, k, ck, err)))
            break;
        if (json_array_append_new(list, json_pack("{s:s, s:O?, s:O?}", "run_key", ck, "agent_id",
                                                  json_object_get(k, "child_agent"), "status",
                                                  json_object_get(k, "status"))))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    }
    *parent = NULL;
    if (!rc && me &&
        !(*parent = json_pack("{s:O?, s:O?}", "run_key", json_object_get(me, "parent_run_key"),
                              "agent_id", json_object_get(me, "parent_agent"))))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading lineage");
    json_decref(me);
    json_decref(kids);
    if (rc)
        json_decref(list);
    else
        *children = list;
    return rc;
}
