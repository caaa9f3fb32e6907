/*
 * doubt.c: a task whose run ended with a tool call in doubt (trial L3, docs/orchestration.md,
 * "A call in doubt"). The run completed, but a call of it was cut short (a crash, a timeout, a
 * server that died holding it) and may or may not have taken effect: the task is not done, and
 * what it blocks does not go on, until a person settles every such call of the run (`vigil
 * indoubt resolve`). Meanwhile the task is `attention` (its result kept, "in_doubt" naming the
 * run). Every call answered applied: the task is done. Any answered not applied (or retry): the
 * result stood on a call that did not happen, so the task is tried again while it has retries
 * left (its next attempt, a new run key, makes the call again), else it fails and what it blocks
 * is cancelled.
 */
#include "base/common.h"

#include "orch/orch_int.h"
#include "orch/task.h"

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

vigil_code vg_task_hold_in_doubt(struct vg_env *env, json_t *t, int64_t v, json_t *patch, int calls,
                                 vigil_error *err)
{
    const char *key = jstr(t, "run_key");
    json_t *d = json_pack("{s:s, s:i, s:I}", "run_key", key ? key : "", "calls", calls, "since_ms",
                          (json_int_t)vg_env_now(env));
    if (!d || json_object_set_new(patch, "in_doubt", d))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory holding a task in doubt");
    return vg_task_move(env, t, v, "attention", patch, err);
}

/* The in-doubt calls of one run as their items say: how many still wait, and how many a person
 * answered as not applied (or to run again). */
struct doubts {
    const char *run_key;
    int pending, not_applied;
};

static int doubt_cb(void *user, const struct vg_record *r)
{
    struct doubts *d = user;
    json_t *item = json_loads(r->body, 0, NULL);
    const char *key = jstr(item, "run_key");
    if (key && !strcmp(key, d->run_key)) {
        d->pending += !strcmp(r->k1, "pending");
        d->not_applied += strcmp(r->k1, "pending") && strcmp(r->k1, "applied");
    }
    json_decref(item);
    return 0;
}

static vigil_code settle(struct vg_env *env, json_t *t, int64_t v, const struct doubts *d,
                         vigil_error *err)
{
    const char *id = jstr(t, "id");
    json_t *p = json_pack("{s:s}", "settled", d->not_applied ? "not_applied" : "applied");
    vigil_code rc = p ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory settling a task");
    if (!rc && !d->not_applied) /* its result holds: what it blocks is ready by derivation */
        rc = vg_task_move(env, t, v, "done", p, err);
    else if (!rc && vg_orch_jint(t, "attempts") <= VG_TASK_MAX_RETRIES) {
        json_object_set_new(p, "reason", json_string("a call of its run did not take effect"));
        rc = vg_task_move(env, t, v, "ready", p, err);
    } else if (!rc) {
        json_object_set_new(p, "reason", json_string("a call of its last run did not take effect"));
        rc = vg_task_move(env, t, v, "failed", p, err);
        if (!rc)
            rc = vg_task_after_failed(env, id, "a task it waits for failed", err);
    }
    json_decref(p);
    return rc;
}

vigil_code vg_task_doubt_settled(struct vg_env *env, const char *agent, const char *run_key,
                                 vigil_error *err)
{
    json_t *t = NULL;
    int64_t v = 0;
    char id[101] = "";
    struct doubts d = {.run_key = run_key};
    vigil_code rc = vg_task_of_run(env, run_key, id, err);
    if (rc || !id[0])
        return rc;
    if ((rc = vg_store_begin(env->store, err)))
        return rc;
    /* the stamp before the task (graph.c), as every task writer takes them */
    if (!(rc = vg_task_graph_lock(env, err)) && !(rc = vg_task_get(env, id, &t, &v, err)) &&
        !strcmp(jstr(t, "status"), "attention")) {
        struct vg_query q = {.kind = "in_doubt", .owner = agent};
        rc = vg_store_scan(env->store, &q, doubt_cb, &d, err);
        if (!rc && !d.pending)
            rc = settle(env, t, v, &d, err);
    }
    json_decref(t);
    return vg_store_end(env->store, rc, err);
}
