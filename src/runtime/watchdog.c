/*
 * watchdog.c: the daemon's watchdog over its runs (docs/runs.md, "The watchdog"). A run stops
 * itself at its own timeout, but only where the loop looks (before a model call, between
 * steps); a model call slow to answer, retries that keep waiting or a tool that does not
 * return can hold a run, its agent's lease and a worker's slot long past it. Once a second the
 * daemon's sweep looks at the runs under way: one past its deadline (its start, plus its
 * timeout, plus a grace) is cancelled as a person's `vigil runs cancel` would: the runner sees
 * the request where it looks (also while a model call streams or waits to retry) and ends the
 * run `canceled`, by "watchdog". A run the cancel cannot reach is named in the daemon's log.
 */
#include "base/common.h"

#include "orch/orch.h"
#include "runtime/runtime.h"
#include "runtime/runtime_int.h"
#include "os/say.h"

#define WATCHDOG_MAX_RUNS 1000 /* started runs looked at a sweep: at most the workers' fibers */

struct started {
    json_t *runs; /* [{run_key, agent_id, started_at}] */
};

static int started_cb(void *user, const struct vg_record *r)
{
    struct started *s = user;
    return json_array_append_new(
               s->runs, json_pack("{s:s, s:s}", "run_key", r->id, "agent_id", r->owner)) != 0;
}

/* When the run's start plus its timeout plus the grace has passed: *deadline (0: unknown). */
static vigil_code deadline_of(struct vg_env *env, const char *run_key, const char *agent,
                              int64_t *deadline, vigil_error *err)
{
    json_t *run = NULL;
    int64_t started = 0;
    struct vg_loop_limits limits = {0};
    vigil_code rc = vg_env_get_json(env, "wake_run", run_key, &run, NULL, err);
    *deadline = 0;
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (!rc && (!json_string_value(json_object_get(run, "started_at")) ||
                vg_time_parse_ms(json_string_value(json_object_get(run, "started_at")), &started)))
        started = 0; /* no start time: nothing to measure from */
    json_decref(run);
    if (!rc && (rc = vg_runtime_agent_limits(env, agent, &limits, err)) == VIGIL_ENOTFOUND)
        rc = VIGIL_OK; /* deleted since: the default */
    if (!rc)
        rc = vg_orch_child_limits(env, run_key, &limits, err);
    if (!rc && started)
        *deadline = started + (limits.timeout_ms > 0 ? limits.timeout_ms : VG_LOOP_TIMEOUT_MS) +
                    VG_WATCHDOG_GRACE_MS;
    return rc;
}

static vigil_code watch_one(struct vg_env *env, json_t *run, int *cancelled, vigil_error *err)
{
    const char *key = json_string_value(json_object_get(run, "run_key"));
    const char *agent = json_string_value(json_object_get(run, "agent_id"));
    int64_t deadline = 0, now = vg_env_now(env);
    int queued = 0;
    vigil_code rc = deadline_of(env, key, agent, &deadline, err);
    if (rc || !deadline || now < deadline)
        return rc;
    if (vg_run_cancel_requested(env, key, NULL, 0)) { /* asked: the runner has not looked */
        if ((now - deadline) / 1000 % 60 == 0)
            vg_say("vigil serve: watchdog: run %.16s of agent %s is %lld s past its deadline "
                   "and has not stopped (a tool or model call that does not return)\n",
                   key, agent, (long long)((now - deadline) / 1000));
        return VIGIL_OK;
    }
    rc = vg_run_cancel(env, key, "watchdog", &queued, err);
    if (rc == VIGIL_ESTATE || rc == VIGIL_ENOTFOUND) /* it ended meanwhile */
        return VIGIL_OK;
    if (!rc) {
        (*cancelled)++;
        vg_say("vigil serve: watchdog: run %.16s of agent %s is past its deadline: "
               "cancelled\n",
               key, agent);
    }
    return rc;
}

vigil_code vg_runtime_watchdog(struct vg_env *env, int *cancelled, vigil_error *err)
{
    struct started s = {json_array()};
    struct vg_query q = {.kind = "wake_run", .k1 = "started", .limit = WATCHDOG_MAX_RUNS};
    size_t i;
    json_t *run;
    int n = 0;
    vigil_code rc = s.runs ? vg_store_scan(env->store, &q, started_cb, &s, err)
                           : VG_FAIL(err, VIGIL_ENOMEM, "out of memory watching runs");
    json_array_foreach (s.runs, i, run)
        if (!rc)
            rc = watch_one(env, run, &n, err);
    json_decref(s.runs);
    if (cancelled)
        *cancelled = n;
    return rc;
}
