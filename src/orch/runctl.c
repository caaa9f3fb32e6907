/*
 * runctl.c: a person's controls over one run (docs/runs.md): cancel it, or run it again with
 * an override. A run is named by its run key (the wake log's) or its run id (the journal's).
 * A queued run that is cancelled never starts: its wake-log entry becomes `cancelled`, which
 * no claim takes. A run under way gets a cancel request (a `run_cancel` record) that its runner
 * reads between model calls, its next safe point. A re-run is a new wake of the same agent
 * whose run key derives from the old one and the number of re-runs before it; the override
 * and the old run key are in its wake-log entry (meta.rerun_of, meta.override), and a
 * `run_rerun` record links the two. A unique prefix of a run key names its run too (`vigil
 * wakes` shows the first 16 characters), as git takes a commit's.
 */
#include "base/common.h"

#include "orch/orch_int.h"
#include "orch/task.h"

struct prefix_ctx {
    const char *prefix;
    size_t len;
    char key[201];
    int n;
};

static int prefix_cb(void *user, const struct vg_record *r)
{
    struct prefix_ctx *p = user;
    if (strncmp(r->id, p->prefix, p->len))
        return 0;
    if (!p->n++)
        snprintf(p->key, sizeof p->key, "%s", r->id);
    return p->n > 1;
}

/* The wake-log entry whose run key starts with `run` (at least 8 characters), if one only. */
static vigil_code find_by_prefix(struct vg_env *env, const char *run, json_t **out, int64_t *rev,
                                 vigil_error *err)
{
    struct prefix_ctx p = {.prefix = run, .len = strlen(run)};
    struct vg_query q = {.kind = "wake_run"};
    vigil_code rc = p.len < 8 ? VIGIL_OK : vg_store_scan(env->store, &q, prefix_cb, &p, err);
    if (rc)
        return rc;
    if (p.n > 1)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "\"%s\" is the start of more than one run key: give more of it", run);
    if (!p.n)
        return VG_FAIL(err, VIGIL_ENOTFOUND,
                       "no run \"%s\" (neither a run key, nor the start of one, nor a run id)",
                       run);
    return vg_env_get_json(env, "wake_run", p.key, out, rev, err);
}

/* The wake-log entry of a run key, a unique prefix of one, or a run id (*out owned, *rev its
 * revision). A chat turn has none: resume (nonzero) refuses it as it refuses any run no spawn
 * made (EINVAL), cancel and re-run as a state (ESTATE). */
static vigil_code find_run(struct vg_env *env, const char *run, int resume, json_t **out,
                           int64_t *rev, vigil_error *err)
{
    json_t *r = NULL;
    if (!run || !*run || strlen(run) > 100)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no run \"%.100s\"", run ? run : "");
    vigil_code rc = vg_env_get_json(env, "wake_run", run, out, rev, err);
    if (rc != VIGIL_ENOTFOUND)
        return rc;
    if ((rc = vg_env_get_json(env, "run", run, &r, NULL, err)) == VIGIL_ENOTFOUND)
        return find_by_prefix(env, run, out, rev, err);
    const char *key = json_string_value(json_object_get(r, "run_key"));
    rc = rc    ? rc
         : key ? vg_env_get_json(env, "wake_run", key, out, rev, err)
               : VG_FAIL(err, VIGIL_ENOTFOUND, "run %.60s has no run key", run);
    if (rc == VIGIL_ENOTFOUND && resume) /* as a wake's run no spawn made (exit 2) */
        rc = VG_FAIL(err, VIGIL_EINVAL,
                     "run %.60s is a chat turn (not started by a wake): only a sub-agent's run "
                     "can be resumed",
                     run);
    else if (rc == VIGIL_ENOTFOUND) /* the run is there: it is what it is that refuses */
        rc = VG_FAIL(err, VIGIL_ESTATE,
                     "run %.60s is a chat turn (not started by a wake): only a wake's run "
                     "can be cancelled or re-run",
                     run);
    json_decref(r);
    return rc;
}

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

vigil_code vg_run_wake_entry(struct vg_env *env, const char *run, json_t **out, vigil_error *err)
{
    return find_run(env, run, 0, out, NULL, err);
}

vigil_code vg_run_cancel(struct vg_env *env, const char *run, const char *by, int *was_queued,
                         vigil_error *err)
{
    json_t *w = NULL;
    int64_t rev = 0;
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    if (!(rc = find_run(env, run, 0, &w, &rev, err))) {
        const char *st = jstr(w, "status"), *key = jstr(w, "run_key");
        json_t *req =
            json_pack("{s:s, s:I}", "by", by ? by : "human", "at_ms", (json_int_t)vg_env_now(env));
        *was_queued = st && !strcmp(st, "queued");
        if (!req)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory cancelling a run");
        else if (*was_queued) {
            /* The task graph's stamp before the wake, as the dispatcher takes them (graph.c). */
            rc = vg_task_graph_lock(env, err);
            /* Who cancelled it, in the wake log as in the run's end (trial C13 of session 30). */
            char said[200];
            snprintf(said, sizeof said, "cancelled by %.100s before it started", by ? by : "human");
            if (!rc)
                rc = vg_wake_cancel_queued(env, w, rev, said, err);
            /* It never runs, so nothing else reports its end: a task waiting for it ends, and a
             * spawned child ends for its parent (whose results wake comes once its last child
             * has ended: without this, one cancelled child parked the whole delegation). */
            struct vg_orch_outcome o = {.status = "cancelled", .text = said};
            if (!rc)
                rc = vg_orch_run_ended(env, NULL, key, &o, err);
        } else if (st && !strcmp(st, "started")) {
            rc = vg_env_put_json(env, "run_cancel", key, jstr(w, "agent_id"), "", "",
                                 vg_env_now(env), req, VG_PUT_IF_ABSENT, err);
        } else {
            rc = VG_FAIL(err, VIGIL_ESTATE,
                         "run %.64s is %s: only a queued or running run can "
                         "be cancelled",
                         key, st ? st : "?");
        }
        json_decref(req);
    }
    json_decref(w);
    return vg_store_end(env->store, rc, err);
}

int vg_run_cancel_requested(struct vg_env *env, const char *run_key, char *by, size_t n)
{
    json_t *r = NULL;
    if (vg_env_get_json(env, "run_cancel", run_key, &r, NULL, NULL))
        return 0;
    if (by && n)
        snprintf(by, n, "%s", jstr(r, "by") ? jstr(r, "by") : "human");
    json_decref(r);
    return 1;
}

const char *vg_run_override_model(json_t *wake_meta)
{
    return json_string_value(json_object_get(json_object_get(wake_meta, "override"), "model"));
}

/* A spawned child's run is not re-run: its grant and depth are its parent's, and a re-run, a
 * run of the agent's own, would have neither (its tools widened, its spawns judged as a
 * top-level agent's: trial C23 of session 30). It is continued with resume instead. */
static vigil_code not_a_child(struct vg_env *env, const char *key, vigil_error *err)
{
    json_t *child = NULL;
    vigil_code rc = vg_orch_child_get(env, key, &child, NULL, err);
    json_decref(child);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (rc)
        return rc;
    return VG_FAIL(err, VIGIL_EINVAL,
                   "run %.16s is a spawned child's: a re-run would lose the grant and depth its "
                   "parent gave it; continue it with `vigil runs resume %.16s` (POST "
                   "/v1/runs/{run}/resume)",
                   key, key);
}

vigil_code vg_run_rerun(struct vg_env *env, const char *run, json_t *override, char out_key[65],
                        vigil_error *err)
{
    const char *prompt = json_string_value(json_object_get(override, "prompt"));
    json_t *tools = json_object_get(override, "tools");
    json_t *w = NULL, *meta = NULL, *seed = NULL, *link = NULL;
    int n = 0;
    char session[128], turn[32];
    struct vg_wake wk;
    vigil_code rc = find_run(env, run, 0, &w, NULL, err);
    if (rc)
        return rc;
    const char *key = jstr(w, "run_key"), *agent = jstr(w, "agent_id");
    if ((rc = not_a_child(env, key, err)) || (rc = vg_wake_init(&wk, env, NULL, err))) {
        json_decref(w);
        return rc;
    }
    if (!(rc = vg_store_begin(env->store, err))) {
        rc = vg_orch_count(env, "run_rerun", NULL, key, NULL, &n, err);
        snprintf(session, sizeof session, "rerun:%.64s", key);
        snprintf(turn, sizeof turn, "%d", n + 1);
        /* The input: the override, else the old run's own (its user text, or its wake delta). */
        seed = prompt ? json_string(prompt)
               : json_is_string(json_object_get(w, "seed_input"))
                   ? json_incref(json_object_get(w, "seed_input"))
                   : json_sprintf("Run again: the run %s (woken by %s).", key, jstr(w, "reason"));
        meta = override ? json_pack("{s:s, s:O}", "rerun_of", key, "override", override)
                        : json_pack("{s:s, s:{}}", "rerun_of", key, "override");
        if (!rc && (!seed || !meta))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory re-running a run");
        if (!rc) {
            enum vg_enqueue_result res;
            struct vg_wake_req r = {.reason = VG_REASON_USER,
                                    .label = "rerun",
                                    .agent_id = agent,
                                    .session_id = session,
                                    .turn_id = turn,
                                    .seed_input = seed,
                                    .meta = meta};
            rc = vg_wake_enqueue(&wk, &r, out_key, &res, err);
            if (!rc && res == VG_ENQ_SKIPPED) /* refused: the transaction writes nothing */
                rc = VG_FAIL(err, VIGIL_ESTATE,
                             "agent %s takes no wakes now (dormant, destroyed or stopped by a "
                             "kill switch): resume it or turn the switch off, then re-run",
                             agent);
        }
        if (!rc && !(link = json_pack("{s:s, s:s, s:O}", "run_key", out_key, "rerun_of", key,
                                      "override", json_object_get(meta, "override"))))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory re-running a run");
        if (!rc)
            rc = vg_env_put_json(env, "run_rerun", out_key, agent, key, "", vg_env_now(env), link,
                                 0, err);
        /* The tools the override allows, as the run's grant: it narrows, never widens. */
        if (!rc && tools)
            rc = vg_tool_grant_put(env, out_key, agent, tools, NULL, err);
        if (!rc)
            rc = vg_task_run_replaced(env, key, out_key, agent, err);
        rc = vg_store_end(env->store, rc, err);
    }
    vg_wake_release(&wk);
    json_decref(w);
    json_decref(meta);
    json_decref(seed);
    json_decref(link);
    return rc;
}

/* The continuation prompt: what the earlier run did, then the operator's words. */
static json_t *resume_input(json_t *child, const char *key, const char *prompt)
{
    json_t *spent = json_object_get(child, "spent");
    const char *status = jstr(child, "status");
    return json_sprintf("You are resuming your earlier run %.16s, delegated to you by agent %s. "
                        "That run ended %s after %lld steps (%lld tokens); your conversation so "
                        "far is above and continues here.%s%s",
                        key, jstr(child, "parent_agent"), status ? status : "?",
                        (long long)vg_orch_jint(spent, "steps"),
                        (long long)vg_orch_jint(spent, "tokens"), prompt ? "\n\n" : "",
                        prompt ? prompt : "");
}

static vigil_code enqueue_resume(struct vg_env *env, json_t *child, const char *key,
                                 const char *prompt, char out_key[65], vigil_error *err)
{
    int n = 0;
    char turn[32];
    struct vg_wake wk;
    json_t *seed = resume_input(child, key, prompt), *link = NULL;
    json_t *meta = json_pack("{s:s}", "resume_of", key);
    vigil_code rc = seed && meta ? vg_orch_count(env, "run_resume", NULL, key, NULL, &n, err)
                                 : VG_FAIL(err, VIGIL_ENOMEM, "out of memory resuming a run");
    snprintf(turn, sizeof turn, "resume-%d", n + 1);
    if (!rc && !(rc = vg_wake_init(&wk, env, NULL, err))) {
        enum vg_enqueue_result res;
        /* The child's own session: the loop continues that thread, its exact conversation. */
        struct vg_wake_req r = {.reason = VG_REASON_USER,
                                .label = "resume",
                                .agent_id = jstr(child, "child_agent"),
                                .session_id = jstr(child, "session"),
                                .turn_id = turn,
                                .seed_input = seed,
                                .meta = meta};
        rc = vg_wake_enqueue(&wk, &r, out_key, &res, err);
        vg_wake_release(&wk);
    }
    if (!rc && !(link = json_pack("{s:s, s:s, s:s?}", "run_key", out_key, "resume_of", key,
                                  "prompt", prompt)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory resuming a run");
    if (!rc)
        rc = vg_env_put_json(env, "run_resume", out_key, jstr(child, "child_agent"), key, "",
                             vg_env_now(env), link, 0, err);
    if (!rc) /* it runs under the grant its parent gave */
        rc = vg_orch_grant(env, out_key, child, err);
    json_decref(seed);
    json_decref(meta);
    json_decref(link);
    return rc;
}

vigil_code vg_run_resume(struct vg_env *env, const char *run, const char *prompt, char out_key[65],
                         vigil_error *err)
{
    json_t *w = NULL, *child = NULL;
    vigil_code rc = find_run(env, run, 1, &w, NULL, err);
    if (rc)
        return rc;
    const char *key = jstr(w, "run_key"), *st = jstr(w, "status");
    if (!(rc = vg_store_begin(env->store, err))) {
        rc = vg_orch_child_get(env, key, &child, NULL, err);
        if (rc == VIGIL_ENOTFOUND)
            rc = VG_FAIL(err, VIGIL_EINVAL,
                         "run %.16s is not a sub-agent's run: `vigil runs rerun` runs any run "
                         "again",
                         key);
        else if (!rc && st && (!strcmp(st, "queued") || !strcmp(st, "started")))
            rc = VG_FAIL(err, VIGIL_ESTATE, "run %.16s is %s: only an ended run can be resumed",
                         key, st);
        if (!rc)
            rc = enqueue_resume(env, child, key, prompt, out_key, err);
        rc = vg_store_end(env->store, rc, err);
    }
    json_decref(child);
    json_decref(w);
    return rc;
}
