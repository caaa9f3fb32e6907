/*
 * wake_api.c: the wakes section of include/vigil.h: notifications, manual and user wakes, the
 * in-process tick, subscriptions, timers and the run log, on top of the wake module.
 */
#include "base/common.h"
#include "base/json.h"

#include "agent/agent.h"
#include "os/fs.h"
#include "runtime/runtime_int.h"
#include "runtime/wake_runner.h"
#include "wake/wake.h"

#define CHECK_RT(rt)                                                                               \
    do {                                                                                           \
        if (!(rt))                                                                                 \
            return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");                                 \
    } while (0)

vigil_code vigil_notify(vigil_runtime *rt, const char *const *tokens, size_t n_tokens,
                        vigil_error *err)
{
    CHECK_RT(rt);
    if (!tokens && n_tokens)
        return VG_FAIL(err, VIGIL_EINVAL, "no tokens given");
    return vg_wake_notify_durable(&rt->env, tokens, n_tokens, NULL, err);
}

vigil_code vigil_wake_agent(vigil_runtime *rt, const char *agent_id, const char *message,
                            const char *session_id, char out_run_key[65], vigil_error *err)
{
    struct vg_wake w;
    char key[65], turn[37];
    enum vg_enqueue_result res;
    json_t *seed = NULL;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = vg_runtime_wake_init(&w, &rt->env, NULL, err)))
        return rc;
    struct vg_wake_req req = {.reason = VG_REASON_MANUAL, .agent_id = agent_id};
    if (message) {
        vg_ids_new(rt->env.ids, turn);
        if (!(seed = json_string(message))) {
            rc = VG_FAIL(err, VIGIL_EINVAL, "the message is not valid UTF-8");
            goto out;
        }
        req.reason = VG_REASON_USER;
        req.session_id = session_id && *session_id ? session_id : "default";
        req.turn_id = turn;
        req.seed_input = seed;
    }
    if ((rc = vg_wake_enqueue(&w, &req, key, &res, err)))
        goto out;
    if (res == VG_ENQ_SKIPPED) {
        json_t *run = NULL;
        const char *why = "the agent cannot take wakes";
        if (vg_env_get_json(&rt->env, "wake_run", key, &run, NULL, NULL) == VIGIL_OK &&
            json_is_string(json_object_get(run, "skip_reason")))
            why = json_string_value(json_object_get(run, "skip_reason"));
        /* One cause, one code: a kill switch refuses a wake as it refuses a chat turn (423
         * over HTTP, exit 10), a dormant or destroyed agent is its state (409, exit 4). */
        rc = VG_FAIL(err, strcmp(why, VG_WAKE_SKIP_KILLED) ? VIGIL_ESTATE : VIGIL_EKILLED,
                     "agent \"%s\" was not woken: %s", agent_id, why);
        json_decref(run);
        goto out;
    }
    if (out_run_key)
        memcpy(out_run_key, key, sizeof key);
out:
    json_decref(seed);
    vg_wake_release(&w);
    return rc;
}

vigil_code vigil_wake_process(vigil_runtime *rt, int max_runs, int *ran, vigil_error *err)
{
    struct vg_wake w;
    struct vg_wake_runner *runner = NULL;
    int taken = 0, fired = 0, n = 0, recovered = 0;
    CHECK_RT(rt);
    vigil_code rc =
        vg_wake_runner_new(vg_os_getenv("VIGIL_WAKE_RUNNER"), vg_wake_runner_loop(), &runner, err);
    if (rc)
        return rc;
    if ((rc = vg_runtime_wake_init(&w, &rt->env, NULL, err))) {
        vg_wake_runner_free(runner);
        return rc;
    }
    /* Without a daemon there is no debounce window to wait for: pending notifications form
     * one batch now. */
    if (!(rc = vg_wake_recover(&w, NULL, &recovered, err)) &&
        !(rc = vg_wake_intake_durable(&w, 0, &taken, err)) &&
        !(rc = vg_wake_intake_flush(&w, 1, NULL, err)) &&
        !(rc = vg_timer_fire_due(&w, 0, &fired, err)))
        rc = vg_wake_drain(&w, runner, max_runs, &n, err);
    if (!rc && ran)
        *ran = n;
    vg_wake_release(&w);
    vg_wake_runner_free(runner);
    return rc;
}

static vigil_code strings_of(json_t *spec, const char *key, const char ***out, size_t *n,
                             vigil_error *err)
{
    json_t *a = json_object_get(spec, key), *v;
    size_t i;
    *out = NULL;
    *n = 0;
    if (!a)
        return VIGIL_OK;
    if (!json_is_array(a))
        return VG_FAIL(err, VIGIL_EINVAL, "subscription \"%s\" must be an array of text", key);
    if (json_array_size(a) > 1000)
        return VG_FAIL(err, VIGIL_ETOOBIG, "subscription \"%s\" has more than 1000 items", key);
    if (json_array_size(a) && !(*out = vg_calloc(json_array_size(a), sizeof **out)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a subscription");
    json_array_foreach (a, i, v) {
        if (!json_is_string(v)) {
            vg_free(*out);
            *out = NULL;
            return VG_FAIL(err, VIGIL_EINVAL, "subscription \"%s\" must be an array of text", key);
        }
        (*out)[(*n)++] = json_string_value(v);
    }
    return VIGIL_OK;
}

vigil_code vigil_subscription_add(vigil_runtime *rt, const char *agent_id, const char *spec_json,
                                  char **out_id, vigil_error *err)
{
    json_error_t je;
    json_t *spec = NULL;
    struct vg_sub_spec s = {.agent_id = agent_id};
    char id[201];
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc)
        return rc;
    if (!spec_json || !(spec = json_loads(spec_json, 0, &je)) || !json_is_object(spec)) {
        json_decref(spec);
        return VG_FAIL(err, VIGIL_EINVAL, "subscription spec is not a JSON object");
    }
    json_t *sid = json_object_get(spec, "id"), *linked = json_object_get(spec, "linked_to");
    if ((sid && !json_is_string(sid)) ||
        (linked && !json_is_null(linked) && !json_is_string(linked))) {
        rc = VG_FAIL(err, VIGIL_EINVAL, "subscription \"id\" and \"linked_to\" must be text");
        goto out;
    }
    s.id = json_string_value(sid);
    s.linked_to = json_string_value(linked);
    if ((rc = strings_of(spec, "tokens", (const char ***)&s.tokens, &s.n_tokens, err)) ||
        (rc = strings_of(spec, "require", (const char ***)&s.require, &s.n_require, err)) ||
        (rc = strings_of(spec, "where", (const char ***)&s.where, &s.n_where, err)))
        goto out;
    if ((rc = vg_sub_add(&rt->env, &s, id, err)))
        goto out;
    if (out_id && !(*out_id = vg_strdup(id)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding a subscription");
out:
    vg_free((void *)s.tokens);
    vg_free((void *)s.require);
    vg_free((void *)s.where);
    json_decref(spec);
    return rc;
}

vigil_code vigil_subscription_remove(vigil_runtime *rt, const char *sub_id, vigil_error *err)
{
    CHECK_RT(rt);
    if (!sub_id || !*sub_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no subscription id given");
    return vg_sub_remove(&rt->env, sub_id, err);
}

/* Each item of a list (a subscription, a timer) gets its agent's name as "agent_name" (null
 * for an agent gone), so a person reads whom it wakes (trial G12); each agent read once. */
static vigil_code name_agents(vigil_runtime *rt, json_t *items, vigil_error *err)
{
    json_t *names = json_object(), *item;
    size_t i;
    vigil_code rc = names ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory naming agents");
    json_array_foreach (items, i, item) {
        const char *id = json_string_value(json_object_get(item, "agent_id"));
        json_t *agent = NULL, *name = id ? json_object_get(names, id) : NULL;
        vigil_error miss = {0};
        if (rc || !id)
            continue;
        if (!name) {
            rc = vg_error_unless_missing(err, &miss,
                                         vg_agent_get(&rt->env, id, &agent, NULL, &miss));
            name = json_object_get(agent, "name");
            name = json_is_string(name) ? name : json_null();
            rc = rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
            if (!rc && json_object_set(names, id, name))
                rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory naming agents");
        }
        if (!rc && json_object_set(item, "agent_name", name))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory naming agents");
        json_decref(agent);
    }
    json_decref(names);
    return rc;
}

vigil_code vigil_subscription_list(vigil_runtime *rt, const char *agent_id, char **out_json,
                                   vigil_error *err)
{
    json_t *v = NULL;
    CHECK_RT(rt);
    vigil_code rc = agent_id ? vg_runtime_agent_check(rt, agent_id, err) : VIGIL_OK;
    if (!rc)
        rc = vg_sub_list(&rt->env, agent_id, &v, err);
    if (!rc)
        rc = name_agents(rt, v, err);
    if (rc) {
        json_decref(v);
        return rc;
    }
    return vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_timer_add(vigil_runtime *rt, const char *agent_id, const char *kind,
                           const char *spec, const char *tz, char out_id[37], vigil_error *err)
{
    enum vg_timer_kind k;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc)
        return rc;
    if (!kind)
        kind = "";
    if (!strcmp(kind, "rrule"))
        k = VG_TIMER_RRULE;
    else if (!strcmp(kind, "cron"))
        k = VG_TIMER_CRON;
    else if (!strcmp(kind, "at"))
        k = VG_TIMER_AT;
    else
        return VG_FAIL(err, VIGIL_EINVAL, "unknown timer kind \"%s\": use rrule, cron or at", kind);
    return vg_timer_add(&rt->env, agent_id, k, spec, tz, out_id, err);
}

vigil_code vigil_timer_remove(vigil_runtime *rt, const char *timer_id, vigil_error *err)
{
    CHECK_RT(rt);
    if (!timer_id || !*timer_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no timer id given");
    return vg_timer_remove(&rt->env, timer_id, err);
}

vigil_code vigil_timer_set_zone(vigil_runtime *rt, const char *timer_id, const char *tz,
                                vigil_error *err)
{
    CHECK_RT(rt);
    if (!timer_id || !*timer_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no timer id given");
    return vg_timer_set_zone(&rt->env, timer_id, tz, err);
}

vigil_code vigil_timer_list(vigil_runtime *rt, const char *agent_id, char **out_json,
                            vigil_error *err)
{
    json_t *v = NULL;
    CHECK_RT(rt);
    vigil_code rc = agent_id ? vg_runtime_agent_check(rt, agent_id, err) : VIGIL_OK;
    if (!rc)
        rc = vg_timer_list(&rt->env, agent_id, &v, err);
    if (!rc)
        rc = name_agents(rt, v, err);
    if (rc) {
        json_decref(v);
        return rc;
    }
    return vg_runtime_json_out(v, out_json, err);
}

struct runs_ctx {
    json_t *items;
    int oom;
    int keyed; /* each item [seq, id, body], to be merged (runs_newest) */
};

static int runs_cb(void *user, const struct vg_record *r)
{
    struct runs_ctx *c = user;
    json_t *b = json_loads(r->body, 0, NULL);
    if (b && c->keyed)
        b = json_pack("[I, s, o]", (json_int_t)r->seq, r->id, b);
    if (!b || json_array_append_new(c->items, b)) {
        c->oom = 1;
        return 1;
    }
    return 0;
}

/* Newest first: (seq, id) descending, as the store's descending scan orders. */
static int newest_first(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    json_int_t sx = json_integer_value(json_array_get(x, 0));
    json_int_t sy = json_integer_value(json_array_get(y, 0));
    if (sx != sy)
        return (sx < sy) - (sx > sy);
    return -strcmp(json_string_value(json_array_get(x, 1)),
                   json_string_value(json_array_get(y, 1)));
}

/*
 * Every status's newest `limit` wakes (of one agent, or all), merged, the newest `limit` kept.
 * A wake is in no index by agent alone or by age alone (src/store/sqlite/sqlite.c, schema 25:
 * two index entries a wake's insert, not four), so one query over every status would read and
 * sort the whole log; each status's newest are at the end of its run in the status indexes.
 * "canceled": the spelling an older vigil may have stored.
 */
static vigil_code runs_newest(vigil_runtime *rt, const char *agent_id, int limit,
                              struct runs_ctx *c, vigil_error *err)
{
    static const char *const stored[] = {"queued", "started",   "completed", "skipped",
                                         "failed", "cancelled", "canceled",  "stopped"};
    json_t *all = c->items;
    vigil_code rc = VIGIL_OK;
    c->keyed = 1;
    for (size_t i = 0; !rc && !c->oom && i < VG_ARRAY_LEN(stored); i++) {
        struct vg_query q = {.kind = "wake_run",
                             .owner = agent_id,
                             .k1 = stored[i],
                             .descending = 1,
                             .limit = limit};
        rc = vg_store_scan(rt->env.store, &q, runs_cb, c, err);
    }
    if (rc || c->oom)
        return rc;
    json_t *newest = json_array();
    if (!newest || vg_json_array_sort(all, newest_first)) {
        json_decref(newest);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing runs");
    }
    c->items = newest;
    size_t i;
    json_t *item;
    json_array_foreach (all, i, item)
        if ((int)i < limit && json_array_append(c->items, json_array_get(item, 2)))
            c->oom = 1;
    json_decref(all);
    return VIGIL_OK;
}

/* The statuses a wake run moves through (src/wake/queue.c); "cancelled": a person cancelled it
 * (vigil_run_cancel), as the log lists it. */
static const char *const wake_run_statuses[] = {"queued", "started",   "completed", "skipped",
                                                "failed", "cancelled", "stopped"};

static int wake_run_status_known(const char *status)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(wake_run_statuses); i++)
        if (!strcmp(status, wake_run_statuses[i]))
            return 1;
    return 0;
}

vigil_code vigil_wake_runs(vigil_runtime *rt, const char *agent_id, const char *status, int limit,
                           char **out_json, vigil_error *err)
{
    CHECK_RT(rt);
    status = vg_cancel_spelling(status, "cancelled");
    if (status && !wake_run_status_known(status))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown wake status \"%.40s\": use queued, started, completed, skipped, "
                       "failed, cancelled or stopped",
                       status);
    vigil_code rc = agent_id ? vg_runtime_agent_check(rt, agent_id, err) : VIGIL_OK;
    if (rc)
        return rc;
    if (limit == 0)
        limit = 50;
    if (limit < 1 || limit > 1000)
        return VG_FAIL(err, VIGIL_EINVAL, "limit %d is out of range 1..1000", limit);
    struct vg_query q = {
        .kind = "wake_run", .owner = agent_id, .k1 = status, .descending = 1, .limit = limit};
    struct runs_ctx c = {json_array(), 0, 0};
    if (!c.items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing runs");
    rc = status ? vg_store_scan(rt->env.store, &q, runs_cb, &c, err)
                : runs_newest(rt, agent_id, limit, &c, err);
    if (!rc && c.oom)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing runs");
    size_t i;
    json_t *run;
    json_array_foreach (c.items, i, run) { /* a started wake nobody runs says so (trial G2) */
        const char *st = json_string_value(json_object_get(run, "status"));
        if (!rc && st && !strcmp(st, "started"))
            rc = vg_runtime_note_gone_holder(
                rt, json_string_value(json_object_get(run, "agent_id")), run, err);
    }
    if (rc) {
        json_decref(c.items);
        return rc;
    }
    return vg_runtime_json_out(c.items, out_json, err);
}

vigil_code vigil_daemon_list(vigil_runtime *rt, char **out_json, vigil_error *err)
{
    CHECK_RT(rt);
    struct vg_query q = {.kind = "daemon"};
    struct runs_ctx c = {json_array(), 0, 0};
    size_t i;
    json_t *d;
    if (!c.items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing daemons");
    vigil_code rc = vg_store_scan(rt->env.store, &q, runs_cb, &c, err);
    if (!rc && c.oom)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing daemons");
    /* Leases a holder holds name it in k1 (src/wake/queue.c); a released one has k1 "". */
    json_array_foreach (c.items, i, d) {
        const char *holder = json_string_value(json_object_get(d, "holder"));
        struct vg_query held = {.kind = "agent_lease", .k1 = holder};
        int64_t n = 0;
        if (rc || !holder || !*holder)
            break;
        if (!(rc = vg_store_count(rt->env.store, &held, &n, err)) &&
            json_object_set_new(d, "leases", json_integer(n)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing daemons");
    }
    if (rc) {
        json_decref(c.items);
        return rc;
    }
    return vg_runtime_json_out(c.items, out_json, err);
}
