/*
 * retention.c: pruning (docs/storage.md, "Growth and retention"). A prune lists, agent by
 * agent, what each class holds past its time to live (candidates), sorts them by class in the
 * fixed order of enum vg_retention_class, then by age and id, and removes them in that order;
 * a storage budget exceeded lists every finished thing regardless of age and removes in the
 * same order until the bytes in use are under it. Nothing of an agent or run on hold, and
 * nothing of a run not finished, is ever listed. The unit of a run's trace is the run
 * (vg_journal_prune_trace); the other classes' are records.
 */
#include "base/common.h"
#include "base/json.h"

#include "agent/agent.h"
#include "journal/journal.h"
#include "runtime/retention.h"
#include "runtime/runtime_int.h"
#include "store/store.h"
#include "config/config.h"
#include "wake/wake.h"

#define HOLD_KIND "retention_hold"

struct candidate {
    int cls;
    int64_t at;
    char kind[24];
    char *id;
    int64_t bytes;
};

struct prune {
    vigil_runtime *rt;
    struct vg_env *env;
    int dry, over_budget, oom;
    int64_t budget;      /* the budget in force, -1: none */
    int64_t now, cutoff; /* cutoff: what is older goes (the class being listed) */
    int cls;             /* the class being listed */
    const char *agent;   /* the agent being listed ("" for records of no agent) */
    json_t *held;        /* "agent:ID" / "run:ID" of the holds */
    struct candidate *c; /* the list */
    size_t n, cap;
    int64_t records[VG_RET_NCLASS], bytes[VG_RET_NCLASS];
    int64_t held_agents, runs;
    json_t *head_scopes; /* report: scopes whose newest report was seen */
    json_t *counted;     /* a dry run's "kind:id" of what it counted */
};

static int add_candidate(struct prune *p, const char *kind, const char *id, int64_t at,
                         int64_t bytes)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        struct candidate *c = vg_realloc(p->c, cap * sizeof *c);
        if (!c)
            return p->oom = 1;
        p->c = c;
        p->cap = cap;
    }
    struct candidate *c = &p->c[p->n];
    c->id = vg_strdup(id);
    if (!c->id)
        return p->oom = 1;
    c->cls = p->cls;
    c->at = at;
    c->bytes = bytes;
    snprintf(c->kind, sizeof c->kind, "%s", kind);
    p->n++;
    return 0;
}

static int64_t record_bytes(const struct vg_record *r)
{
    return (int64_t)(strlen(r->body) + strlen(r->id) + strlen(r->k1) + strlen(r->k2));
}

/* A record whose body names a run on hold (its run_id). */
static int run_held(struct prune *p, const struct vg_record *r)
{
    const char *at = strstr(r->body, "\"run_id\":\"");
    char key[64];
    if (!at)
        return 0;
    snprintf(key, sizeof key, "run:%.36s", at + 10);
    return json_object_get(p->held, key) != NULL;
}

static int finished_wake(const char *status)
{
    return !strcmp(status, "completed") || !strcmp(status, "skipped") ||
           !strcmp(status, "failed") || !strcmp(status, "canceled") || !strcmp(status, "cancelled");
}

static int list_record_cb(void *user, const struct vg_record *r)
{
    struct prune *p = user;
    if (r->at >= p->cutoff || run_held(p, r))
        return 0;
    if (!strcmp(r->kind, "wake_run") && !finished_wake(r->k1))
        return 0;
    if (!strcmp(r->kind, "report")) { /* the newest of each scope is its head: kept */
        int head = !json_object_get(p->head_scopes, r->k1);
        if (head && json_object_set_new(p->head_scopes, r->k1, json_true()))
            return p->oom = 1;
        if (head)
            return 0;
    }
    return add_candidate(p, r->kind, r->id, r->at, record_bytes(r));
}

static int list_run_cb(void *user, const struct vg_record *r)
{
    struct prune *p = user;
    char key[64];
    int64_t pruned_at = 0;
    snprintf(key, sizeof key, "run:%s", r->id);
    if (r->at >= p->cutoff || !strcmp(r->k1, "running") || !strcmp(r->k1, "queued") ||
        json_object_get(p->held, key))
        return 0;
    if (vg_journal_trace_pruned(p->env->store, r->id, &pruned_at, NULL, NULL) || pruned_at)
        return 0;
    return add_candidate(p, "run", r->id, r->at, 0);
}

/* The queries of a class over one agent (owner "" for the records of no agent). */
static vigil_code list_class(struct prune *p, vigil_error *err)
{
    struct vg_query q = {.owner = p->agent};
    vigil_code rc = VIGIL_OK;
    int by_agent = *p->agent != 0;
    switch (p->cls) {
    case VG_RET_RUNTIME:
        if (!by_agent) {
            struct vg_query n = {.kind = "notification", .k1 = "taken"};
            struct vg_query b = {.kind = "wake_batch"};
            rc = vg_store_scan(p->env->store, &n, list_record_cb, p, err);
            return rc ? rc : vg_store_scan(p->env->store, &b, list_record_cb, p, err);
        }
        q.kind = "wake_run";
        break;
    case VG_RET_TRACE:
        q.kind = "run";
        return by_agent ? vg_store_scan(p->env->store, &q, list_run_cb, p, err) : VIGIL_OK;
    case VG_RET_ACTION:
        q.kind = "operation";
        q.k1 = "finished";
        break;
    case VG_RET_REPORT:
        q.kind = "report";
        q.descending = 1;
        json_object_clear(p->head_scopes);
        break;
    default:
        q.kind = "compaction_job";
        q.k2 = "done";
    }
    return by_agent ? vg_store_scan(p->env->store, &q, list_record_cb, p, err) : VIGIL_OK;
}

static int64_t class_cutoff(const struct prune *p, int64_t ttl)
{
    if (p->over_budget)
        return INT64_MAX;
    return ttl == VG_RET_NEVER ? INT64_MIN : p->now - ttl;
}

/* One agent's candidates under its policy (the config's, its own block over it). */
static vigil_code list_agent(struct prune *p, const struct vg_retention_policy *base,
                             const char *agent_id, vigil_error *err)
{
    struct vg_retention_policy pol = *base;
    json_t *agent = NULL;
    char key[64];
    vigil_code rc = VIGIL_OK;
    if (*agent_id) {
        if ((rc = vg_agent_get_shared(p->env, agent_id, &agent, err)))
            return rc;
        pol.hold = 0;
        rc = vg_retention_policy_apply(
            &pol, json_object_get(json_object_get(agent, "config"), "retention"),
            "the agent's config.retention", err);
        json_decref(agent);
        snprintf(key, sizeof key, "agent:%s", agent_id);
        if (!rc && (pol.hold || json_object_get(p->held, key))) {
            p->held_agents++;
            return VIGIL_OK;
        }
    }
    p->agent = agent_id;
    for (p->cls = 0; !rc && p->cls < VG_RET_NCLASS; p->cls++) {
        p->cutoff = class_cutoff(p, pol.ttl_ms[p->cls]);
        rc = list_class(p, err);
        if (!rc && p->oom)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing what to prune");
    }
    return rc;
}

static int hold_cb(void *user, const struct vg_record *r)
{
    struct prune *p = user;
    return json_object_set_new(p->held, r->id, json_true()) ? (p->oom = 1) : 0;
}

static int agent_id_cb(void *user, const struct vg_record *r)
{
    return json_array_append_new(user, json_string(r->id));
}

/* Every agent's candidates (or one agent's), then those of no agent's. */
static vigil_code list_all(struct prune *p, const struct vg_retention_policy *base,
                           const char *only, vigil_error *err)
{
    struct vg_query holds = {.kind = HOLD_KIND};
    struct vg_query agents = {.kind = "agent"};
    json_t *ids = json_array();
    vigil_code rc = ids ? vg_store_scan(p->env->store, &holds, hold_cb, p, err)
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory pruning");
    if (!rc && only)
        rc = json_array_append_new(ids, json_string(only))
                 ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory pruning")
                 : VIGIL_OK;
    else if (!rc)
        rc = vg_store_scan(p->env->store, &agents, agent_id_cb, ids, err);
    size_t i;
    json_t *id;
    json_array_foreach (ids, i, id) {
        if (rc)
            break;
        rc = list_agent(p, base, json_string_value(id), err);
    }
    if (!rc && !only)
        rc = list_agent(p, base, "", err);
    json_decref(ids);
    return rc;
}

static int candidate_order(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* Remove one candidate (a run's trace, or a record) and count it. */
static vigil_code prune_one(struct prune *p, struct candidate *c, vigil_error *err)
{
    int64_t n = 1, bytes = c->bytes;
    vigil_code rc = VIGIL_OK;
    if (!strcmp(c->kind, "run")) {
        rc = vg_journal_prune_trace(p->env->store, c->id, p->now, p->dry, &n, &bytes, err);
        c->bytes = bytes;
        p->runs++;
    } else if (!p->dry) {
        rc = vg_store_remove(p->env->store, c->kind, c->id, err);
        if (rc == VIGIL_ENOTFOUND) /* gone meanwhile (the daemon's own batch upkeep) */
            rc = VIGIL_OK, n = 0, bytes = 0;
    }
    p->records[c->cls] += n;
    p->bytes[c->cls] += bytes;
    return rc;
}

static int64_t used_bytes(struct prune *p)
{
    int64_t used = -1;
    if (vg_store_control(p->env->store, VG_STORE_CTRL_USED_BYTES, &used, NULL))
        return -1;
    return used;
}

/* A dry run removes nothing, so its budget pass lists again what its TTL pass counted: the
 * second pass skips those (their bytes are already counted as freed). 1 when c was counted. */
static int counted_before(struct prune *p, const struct candidate *c)
{
    char key[256];
    snprintf(key, sizeof key, "%s:%s", c->kind, c->id);
    if (json_object_get(p->counted, key))
        return p->over_budget;
    json_object_set_new(p->counted, key, json_true());
    return 0;
}

/* In order; with a budget, only until what is left fits it (*used: what is in use now). */
static vigil_code prune_listed(struct prune *p, int64_t budget, int64_t used, vigil_error *err)
{
    int64_t freed = 0;
    vigil_code rc = VIGIL_OK;
    if (p->n)
        qsort(p->c, p->n, sizeof *p->c, candidate_order);
    for (size_t i = 0; !rc && i < p->n; i++) {
        if (budget >= 0 && used - freed <= budget)
            break;
        if (p->dry && counted_before(p, &p->c[i])) /* a dry TTL pass counted it: still here */
            continue;
        rc = prune_one(p, &p->c[i], err);
        freed += p->c[i].bytes;
    }
    return rc;
}

static void candidates_free(struct prune *p)
{
    for (size_t i = 0; i < p->n; i++)
        vg_free(p->c[i].id);
    vg_free(p->c);
    p->c = NULL;
    p->n = p->cap = 0;
}

static json_t *report_json(const struct prune *p, int64_t budget, int64_t used_before,
                           int64_t used_after, int vacuumed)
{
    json_t *classes = json_object();
    int64_t records = 0, bytes = 0;
    for (int i = 0; classes && i < VG_RET_NCLASS; i++) {
        json_object_set_new(classes, vg_retention_class_name(i),
                            json_pack("{s:I,s:I}", "records", (json_int_t)p->records[i], "bytes",
                                      (json_int_t)p->bytes[i]));
        records += p->records[i];
        bytes += p->bytes[i];
    }
    return json_pack("{s:b,s:o,s:I,s:I,s:I,s:I,s:b,s:o,s:o,s:b}", "dry_run", p->dry, "classes",
                     classes, "records", (json_int_t)records, "bytes", (json_int_t)bytes,
                     "runs_pruned", (json_int_t)p->runs, "agents_held", (json_int_t)p->held_agents,
                     "over_budget", p->over_budget, "budget",
                     budget >= 0 ? json_integer(budget) : json_null(), "used_bytes",
                     used_before >= 0 ? json_pack("{s:I,s:I}", "before", (json_int_t)used_before,
                                                  "after", (json_int_t)used_after)
                                      : json_null(),
                     "vacuumed", vacuumed);
}

/* The config file's policy and budget. */
static vigil_code config_policy(vigil_runtime *rt, struct vg_retention_policy *pol, int64_t *budget,
                                vigil_error *err)
{
    vigil_code rc = rt->config ? VIGIL_OK : vg_config_load(rt->config_path, &rt->config, err);
    json_t *block = rc ? NULL : vg_config_get(rt->config, "retention");
    vg_retention_policy_defaults(pol);
    *budget = -1;
    if (!rc)
        rc = vg_retention_policy_apply(pol, block, "retention", err);
    json_t *b = json_object_get(block, "budget");
    if (!rc && b)
        rc = vg_retention_size(b, "retention.budget", budget, err);
    return rc;
}

/* TTL pass, then (a budget exceeded) the budget pass over what is left. */
static vigil_code prune_passes(struct prune *p, const vigil_prune_options *o, int64_t budget,
                               int64_t *used_before, vigil_error *err)
{
    struct vg_retention_policy pol;
    int64_t cfg_budget;
    vigil_code rc = config_policy(p->rt, &pol, &cfg_budget, err);
    if (budget < 0)
        budget = cfg_budget;
    p->budget = budget;
    *used_before = used_bytes(p);
    if (!rc)
        rc = list_all(p, &pol, o->agent_id, err);
    if (!rc)
        rc = prune_listed(p, -1, 0, err);
    candidates_free(p);
    int64_t used = p->dry ? *used_before : used_bytes(p);
    if (rc || budget < 0 || used < 0 || used <= budget || o->agent_id)
        return rc;
    p->over_budget = 1;
    json_object_clear(p->held); /* listed again */
    int64_t freed_so_far = *used_before - used;
    if (p->dry) /* the TTL pass removed nothing: count what it would have freed */
        for (int i = 0; i < VG_RET_NCLASS; i++)
            freed_so_far += p->bytes[i];
    if ((rc = list_all(p, &pol, NULL, err)) == VIGIL_OK)
        rc = prune_listed(p, budget, *used_before - freed_so_far, err);
    candidates_free(p);
    return rc;
}

vigil_code vigil_prune(vigil_runtime *rt, const vigil_prune_options *o, char **report,
                       vigil_error *err)
{
    vigil_prune_options none = {0};
    if (!rt)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");
    o = o ? o : &none;
    vigil_code rc = o->agent_id ? vg_runtime_agent_check(rt, o->agent_id, err) : VIGIL_OK;
    if (rc)
        return rc;
    struct prune p = {.rt = rt, .env = &rt->env, .dry = o->dry_run, .now = vg_env_now(&rt->env)};
    int64_t used_before = -1, after;
    p.held = json_object();
    p.head_scopes = json_object();
    p.counted = json_object();
    if (p.held && p.head_scopes && p.counted)
        rc = prune_passes(&p, o, o->budget_bytes > 0 ? o->budget_bytes : -1, &used_before, err);
    else
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory pruning");
    int vacuumed = 0;
    /* Over a budget, the space goes back at once: what is in use is measured in pages, which
     * removed rows free only when whole ones empty, so the next prune would find it still over
     * and remove more than it needs to. */
    if (!rc && !o->dry_run && (o->vacuum || p.over_budget)) {
        rc = vg_store_control(rt->env.store, VG_STORE_CTRL_COMPACT, NULL, err);
        vacuumed = rc == VIGIL_OK;
    }
    after = p.dry ? used_before : used_bytes(&p);
    json_t *out = rc ? NULL : report_json(&p, p.budget, used_before, after, vacuumed);
    char *text = out ? vg_json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!rc && !text)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reporting a prune");
    if (!rc && report)
        *report = text, text = NULL;
    vg_free(text);
    json_decref(out);
    json_decref(p.held);
    json_decref(p.head_scopes);
    json_decref(p.counted);
    candidates_free(&p);
    return rc;
}

/* ---- holds ----------------------------------------------------------------------------------- */

/* "agent:ID" or "run:ID" of target, an agent id or a run id, and the agent it belongs to. */
static vigil_code hold_target(vigil_runtime *rt, const char *target, char key[64], char owner[64],
                              vigil_error *err)
{
    struct vg_record *r = NULL;
    static const char *const kinds[] = {"agent", "run"};
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++) {
        vigil_code rc = vg_store_get_copy(rt->env.store, kinds[i], target, &r, NULL);
        if (rc == VIGIL_ENOTFOUND || rc == VIGIL_EINVAL)
            continue;
        if (rc)
            return vg_store_get_copy(rt->env.store, kinds[i], target, &r, err);
        snprintf(key, 64, "%s:%s", kinds[i], r->id);
        snprintf(owner, 64, "%s", r->owner);
        vg_free(r);
        return VIGIL_OK;
    }
    return VG_FAIL(err, VIGIL_ENOTFOUND, "no agent or run \"%.80s\"", target);
}

vigil_code vigil_retention_hold(vigil_runtime *rt, const char *target, int on, vigil_error *err)
{
    char key[64], owner[64], body[160];
    if (!rt || !target)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or target given");
    vigil_code rc = hold_target(rt, target, key, owner, err);
    if (rc)
        return rc;
    int64_t now = vg_env_now(&rt->env);
    snprintf(body, sizeof body, "{\"at\":%lld,\"target\":\"%s\"}", (long long)now, key);
    struct vg_record r = {.kind = HOLD_KIND,
                          .id = key,
                          .owner = owner,
                          .k1 = "",
                          .k2 = "",
                          .seq = now,
                          .at = now,
                          .body = body};
    if (on)
        return vg_store_put(rt->env.store, &r, VG_PUT_IF_ABSENT, NULL, err);
    rc = vg_store_remove(rt->env.store, HOLD_KIND, key, err);
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

static int hold_list_cb(void *user, const struct vg_record *r)
{
    return json_array_append_new(user, json_loads(r->body, 0, NULL));
}

vigil_code vigil_retention_holds(vigil_runtime *rt, char **json_out, vigil_error *err)
{
    struct vg_query q = {.kind = HOLD_KIND};
    if (!rt || !json_out)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    json_t *a = json_array();
    vigil_code rc = a ? vg_store_scan(rt->env.store, &q, hold_list_cb, a, err)
                      : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing holds");
    char *text = rc ? NULL : vg_json_dumps(a, JSON_COMPACT);
    json_decref(a);
    if (!rc && !text)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing holds");
    *json_out = text;
    return rc;
}

/* ---- erasure --------------------------------------------------------------------------------- */

struct mention {
    const char *agent_id;
    json_t *ids;
};

/* A record of no agent (a notification, a matched batch) whose body names the agent. */
static int mention_cb(void *user, const struct vg_record *r)
{
    struct mention *m = user;
    if (!strstr(r->body, m->agent_id))
        return 0;
    return json_array_append_new(m->ids, json_string(r->id));
}

static vigil_code erase_mentions(vigil_runtime *rt, const char *agent_id, vigil_error *err)
{
    static const char *const kinds[] = {"notification", "wake_batch"};
    vigil_code rc = VIGIL_OK;
    for (size_t k = 0; !rc && k < VG_ARRAY_LEN(kinds); k++) {
        struct mention m = {.agent_id = agent_id, .ids = json_array()};
        struct vg_query q = {.kind = kinds[k], .owner = ""};
        rc = m.ids ? vg_store_scan(rt->env.store, &q, mention_cb, &m, err)
                   : VG_FAIL(err, VIGIL_ENOMEM, "out of memory erasing");
        for (size_t i = 0; !rc && i < json_array_size(m.ids); i++)
            rc = vg_store_remove(rt->env.store, kinds[k],
                                 json_string_value(json_array_get(m.ids, i)), err);
        json_decref(m.ids);
    }
    return rc;
}

vigil_code vigil_agent_erase(vigil_runtime *rt, const char *agent_id, vigil_error *err)
{
    vigil_lifecycle lc;
    char key[64];
    json_t *agent = NULL;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = vg_agent_get_shared(&rt->env, agent_id, &agent, err)))
        return rc;
    struct vg_retention_policy pol;
    vg_retention_policy_defaults(&pol);
    (void)vg_retention_policy_apply(
        &pol, json_object_get(json_object_get(agent, "config"), "retention"), "", NULL);
    json_decref(agent);
    snprintf(key, sizeof key, "agent:%s", agent_id);
    struct vg_record *hold = NULL;
    rc = vg_store_get_copy(rt->env.store, HOLD_KIND, key, &hold, NULL);
    vg_free(hold);
    if (pol.hold || rc == VIGIL_OK)
        return VG_FAIL(err, VIGIL_ESTATE,
                       "agent \"%s\" is on hold: release the hold before erasing it", agent_id);
    if ((rc = vg_store_begin(rt->env.store, err)))
        return rc;
    rc = vg_agent_lifecycle(&rt->env, agent_id, &lc, err);
    if (!rc && lc != VIGIL_LIFECYCLE_DESTROYED)
        rc = vigil_agent_destroy(rt, agent_id, "erased", err);
    if (!rc)
        rc = vg_agent_delete(&rt->env, agent_id, err);
    if (!rc)
        rc = erase_mentions(rt, agent_id, err);
    if ((rc = vg_store_end(rt->env.store, rc, err)))
        return rc;
    /* Removed rows leave their bytes in free pages and the log until these are rewritten. */
    rc = vg_store_control(rt->env.store, VG_STORE_CTRL_COMPACT, NULL, err);
    return rc == VIGIL_EUNSUPPORTED ? VIGIL_OK : rc;
}

/* ---- the daemon's upkeep --------------------------------------------------------------------- */

vigil_code vg_runtime_retention_tick(struct vg_env *env, vigil_error *err)
{
    /* The daemon's env is a runtime's (its host opens one: wake_runner.c). */
    vigil_runtime *rt = (vigil_runtime *)((char *)env - offsetof(struct vigil_runtime, env));
    int64_t now = vg_env_now(env), every = 3600000LL;
    vigil_code rc = rt->config ? VIGIL_OK : vg_config_load(rt->config_path, &rt->config, err);
    const char *text = rc ? NULL : vg_config_get_string(rt->config, "retention.interval", "1h");
    if (rc || (rc = vg_retention_duration(text, "retention.interval", &every, err)))
        return rc;
    if (every == VG_RET_NEVER || (rt->retention_last_ms && now - rt->retention_last_ms < every))
        return VIGIL_OK;
    rt->retention_last_ms = now;
    char *report = NULL;
    rc = vigil_prune(rt, NULL, &report, err);
    json_t *r = report ? json_loads(report, 0, NULL) : NULL;
    json_int_t n = json_integer_value(json_object_get(r, "records"));
    if (n > 0)
        fprintf(stderr, "vigil serve: retention: pruned %lld records (%lld bytes)\n", (long long)n,
                (long long)json_integer_value(json_object_get(r, "bytes")));
    json_decref(r);
    vg_free(report);
    return rc;
}
