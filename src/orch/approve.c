/*
 * approve.c: a person's say over a high-risk child (docs/orchestration.md, "Approval"). Such a
 * request, once nothing else denies it, is recorded as a child awaiting approval
 * (spawn_child status "approval") and a pending approval of the parent agent, which `vigil
 * approvals` lists with the request as the arguments of spawn_agents. The child does not start
 * and its group stays open, so the parent, whose run has ended, stays parked in records. The
 * answer settles it in the transaction that resolves the approval: approved, the child starts
 * (or waits for a slot) as any admitted child; rejected or expired, it is a denied decision with
 * the person's reason, and when it was the group's last open child the parent wakes with every
 * result. An approval nobody answers expires by itself: the daemon's sweep
 * (vg_orch_approvals_sweep, once a second) records the expiry and settles the child as denied.
 */
#include "base/common.h"

#include "orch/orch_int.h"

/* How long a person has to answer when the request names no TTL. */
#define APPROVAL_TTL_MS (24LL * 3600 * 1000)

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* What the approval is about: a high-risk child, or one whose request requires approval. */
static const char *what(json_t *child)
{
    const char *tier = jstr(json_object_get(child, "request"), "risk_tier");
    return tier && !strcmp(tier, "high") ? "high-risk child" : "child";
}

vigil_code vg_orch_approval_ask(struct vg_env *env, json_t *child, vigil_error *err)
{
    json_t *req = json_object_get(child, "request");
    int64_t ttl = vg_orch_jint(req, "ttl_ms");
    char id[37], op[80];
    snprintf(op, sizeof op, "spawn:%s", jstr(child, "run_key"));
    json_t *args = json_pack("{s:[O]}", "requests", req);
    json_t *ask =
        json_pack("{s:s, s:o, s:s, s:s, s:s, s:s}", "tool", "spawn_agents", "arguments", args,
                  "run_key", jstr(child, "parent_run_key"), "wake_reason", "spawn", "spawn_child",
                  jstr(child, "run_key"), "child_agent", jstr(child, "child_agent"));
    json_t *preview =
        json_pack("{s:s, s:O, s:O, s:i}", "summary",
                  strcmp(what(child), "child") ? "start a high-risk child agent"
                                               : "start a child agent (its request requires "
                                                 "approval)",
                  "child_name", json_object_get(child, "child_name"), "goal",
                  json_object_get(req, "goal"), "depth", (int)vg_orch_jint(child, "depth"));
    vigil_code rc = ask && preview
                        ? vg_approval_request(env, jstr(child, "parent_agent"), op, ask, preview,
                                              ttl > 0 ? ttl : APPROVAL_TTL_MS, id, err)
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory asking approval");
    json_decref(ask);
    json_decref(preview);
    return rc;
}

/* The person's answer as a second decision of the same request. */
static vigil_code record_answer(struct vg_env *env, json_t *rec, json_t *a, int admitted,
                                const char *reason, vigil_error *err)
{
    char did[64];
    snprintf(did, sizeof did, "%s:%d:approval", jstr(rec, "group"),
             (int)vg_orch_jint(rec, "index"));
    json_t *d = json_pack(
        "{s:O, s:O, s:s, s:s, s:O, s:O, s:O, s:O, s:O, s:O, s:O?}", "group",
        json_object_get(rec, "group"), "index", json_object_get(rec, "index"), "decision",
        admitted ? "admitted" : "denied", "reason", reason, "child_agent",
        json_object_get(rec, "child_agent"), "run_key", json_object_get(rec, "run_key"),
        "parent_run_key", json_object_get(rec, "parent_run_key"), "depth",
        json_object_get(rec, "depth"), "request", json_object_get(rec, "request"), "approval_id",
        json_object_get(a, "id"), "resolved_by", json_object_get(a, "resolved_by"));
    vigil_code rc =
        d ? vg_env_put_json(env, "spawn_decision", did, jstr(rec, "parent_agent"),
                            admitted ? "admitted" : "denied", jstr(rec, "parent_run_key"),
                            vg_env_now(env), d, VG_PUT_IF_ABSENT, err)
          : VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording a spawn decision");
    json_decref(d);
    return rc;
}

/* Approved: the child starts now when its parent and the store have a slot, else waits. */
static vigil_code admit(struct vg_env *env, struct vg_wake *w, json_t *rec, int64_t rev, json_t *a,
                        vigil_error *err)
{
    const char *key = jstr(rec, "run_key");
    json_t *now = NULL;
    vigil_code rc = vg_orch_child_set_status(env, key, rec, rev, "waiting", err);
    if (!rc) /* waiting children take the free slots in the order they were admitted */
        rc = vg_orch_start_waiting(env, w, jstr(rec, "parent_agent"), err);
    if (!rc)
        rc = vg_env_get_json(env, "spawn_child", key, &now, NULL, err);
    const char *st = rc ? NULL : jstr(now, "status");
    char reason[128];
    snprintf(reason, sizeof reason, "a person approved this %s%s", what(rec),
             st && !strcmp(st, "waiting") ? "; it runs when a slot is free" : "");
    if (!rc)
        rc = record_answer(env, rec, a, 1, reason, err);
    json_decref(now);
    return rc;
}

/* Rejected or expired: a denied decision with the person's reason; the child never runs. */
static vigil_code deny(struct vg_env *env, struct vg_wake *w, json_t *rec, int64_t rev, json_t *a,
                       vigil_error *err)
{
    char reason[600];
    const char *st = jstr(a, "status"), *why = jstr(a, "reason");
    if (!strcmp(st, "expired"))
        snprintf(reason, sizeof reason,
                 "no person answered the approval of this %s before it expired", what(rec));
    else
        snprintf(reason, sizeof reason, "a person rejected this %s%s%.500s", what(rec),
                 why ? ": " : "", why ? why : "");
    if (json_object_set_new(rec, "result", json_string(reason)) ||
        json_object_set_new(rec, "ended_ms", json_integer(vg_env_now(env))))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory denying a child");
    vigil_code rc = vg_orch_child_set_status(env, jstr(rec, "run_key"), rec, rev, "denied", err);
    if (!rc)
        rc = record_answer(env, rec, a, 0, reason, err);
    if (!rc)
        rc = vg_orch_finish_group(env, w, rec, err);
    return rc;
}

static vigil_code settle(struct vg_env *env, struct vg_wake *w, json_t *a, const char *key,
                         vigil_error *err)
{
    json_t *rec = NULL;
    int64_t rev = 0;
    vigil_code rc = vg_env_get_json(env, "spawn_child", key, &rec, &rev, err);
    if (rc == VIGIL_ENOTFOUND)
        rc =
            VG_FAIL(err, VIGIL_ECORRUPT, "approval %.36s names no child %.16s", jstr(a, "id"), key);
    const char *st = rc ? NULL : jstr(rec, "status");
    if (st && !strcmp(st, "approval")) /* else settled already */
        rc = !strcmp(jstr(a, "status"), "approved") ? admit(env, w, rec, rev, a, err)
                                                    : deny(env, w, rec, rev, a, err);
    /* The parent learns the answer from its results wake, not as a note of a pending call. */
    if (!rc)
        rc = vg_approval_mark_seen(env, jstr(a, "id"), err);
    json_decref(rec);
    return rc;
}

vigil_code vg_orch_approval_settle(struct vg_env *env, struct vg_wake *w, const char *approval_id,
                                   vigil_error *err)
{
    json_t *a = NULL;
    struct vg_wake own;
    vigil_code rc = vg_approval_get(env, approval_id, &a, err);
    if (rc)
        return rc;
    const char *key = jstr(json_object_get(a, "request"), "spawn_child");
    const char *st = jstr(a, "status");
    if (!key || !st || !strcmp(st, "pending")) { /* not a spawn's, or not answered */
        json_decref(a);
        return VIGIL_OK;
    }
    int mine = !w;
    if (mine && !(rc = vg_wake_init(&own, env, NULL, err)))
        w = &own;
    if (!rc && !(rc = vg_store_begin(env->store, err)))
        rc = vg_store_end(env->store, settle(env, w, a, key, err), err);
    if (mine && w == &own)
        vg_wake_release(&own);
    json_decref(a);
    return rc;
}

/* One child awaiting approval (its run key): settled when its approval is answered or expired
 * (the expiry made durable first). *done 1 when it was settled. */
static vigil_code sweep_one(struct vg_env *env, struct vg_wake *w, const char *key, int *done,
                            vigil_error *err)
{
    char op[80];
    json_t *a = NULL;
    *done = 0;
    snprintf(op, sizeof op, "spawn:%s", key);
    vigil_code rc = vg_approval_for_operation(env, op, &a, err);
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK; /* asked in a transaction not yet committed, or lost: nothing to do */
    const char *st = rc ? NULL : jstr(a, "status");
    if (!st || !strcmp(st, "pending") || (rc = vg_store_begin(env->store, err))) {
        json_decref(a);
        return rc;
    }
    /* The expiry and the child's settling: one transaction. */
    if (!strcmp(st, "expired")) {
        /* Read as expired: resolving it records the expiry (and says ESTATE, as it always
         * does for an expired approval, recorded now or before). */
        vigil_error e2 = {0};
        rc = vg_approval_resolve(env, jstr(a, "id"), 0, "clock", NULL, NULL, &e2);
        if (rc == VIGIL_ESTATE)
            rc = VIGIL_OK;
        else if (rc)
            vg_error_copy(err, &e2);
    }
    if (!rc)
        rc = vg_orch_approval_settle(env, w, jstr(a, "id"), err);
    rc = vg_store_end(env->store, rc, err);
    *done = !rc;
    json_decref(a);
    return rc;
}

vigil_code vg_orch_approvals_sweep(struct vg_env *env, struct vg_wake *w, int *settled,
                                   vigil_error *err)
{
    struct vg_id_list ids = {0};
    struct vg_query q = {.kind = "spawn_child", .k1 = "approval"};
    int n = 0;
    vigil_code rc = vg_store_scan_ids(env->store, &q, &ids, err);
    /* A child that cannot be settled (a conflict with another daemon, a parent gone) does not
     * hold up the ones after it; the first failure is reported. */
    for (size_t i = 0; i < ids.n; i++) {
        int done = 0;
        vigil_error e = {0};
        vigil_code one = sweep_one(env, w, ids.ids[i], &done, &e);
        if (one && !rc) {
            rc = one;
            vg_error_copy(err, &e);
        }
        n += done;
    }
    vg_id_list_release(&ids);
    if (settled)
        *settled = n;
    return rc;
}
