/*
 * approval.c: approvals as durable objects (docs/tools.md). A high-risk call without an
 * approval creates a pending approval record carrying the exact operation (operation id, tool,
 * arguments, run key) and a preview; a human approves or rejects it once (a second resolution
 * reports the first), it expires by the clock port, and the agent learns the outcome through
 * vg_approval_take_resolved on its next step or wake. Approving lets that same operation id run
 * once (vg_tool_executor_run_approved, or the same call made again in its run).
 */
#include "base/common.h"

#include "agent/agent.h"
#include "tool/tool.h"

#define STATUS_PENDING "pending"

struct scan_ctx {
    json_t *out; /* array of bodies */
    int bad;
};

static int collect_cb(void *user, const struct vg_record *r)
{
    struct scan_ctx *c = user;
    json_t *b = json_loads(r->body, 0, NULL);
    if (!b || json_array_append_new(c->out, b)) {
        c->bad = 1;
        return 1;
    }
    return 0;
}

static vigil_code scan(struct vg_env *env, struct vg_query *q, json_t **out, vigil_error *err)
{
    struct scan_ctx c = {json_array(), 0};
    if (!c.out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading approvals");
    vigil_code rc = vg_store_scan(env->store, q, collect_cb, &c, err);
    if (!rc && c.bad)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading approvals");
    if (rc) {
        json_decref(c.out);
        return rc;
    }
    *out = c.out;
    return VIGIL_OK;
}

/* Pending but past its expiry: reads as expired (the sweep makes it durable). */
static void lazy_expire(struct vg_env *env, json_t *b)
{
    const char *st = json_string_value(json_object_get(b, "status"));
    json_int_t exp = json_integer_value(json_object_get(b, "expires_at_ms"));
    if (st && !strcmp(st, STATUS_PENDING) && exp <= vg_env_now(env))
        json_object_set_new(b, "status", json_string("expired"));
}

static vigil_code write_body(struct vg_env *env, json_t *b, int64_t rev, vigil_error *err)
{
    return vg_env_update_json(env, "approval", json_string_value(json_object_get(b, "id")),
                              json_string_value(json_object_get(b, "agent_id")),
                              json_string_value(json_object_get(b, "status")),
                              json_string_value(json_object_get(b, "operation_id")),
                              json_integer_value(json_object_get(b, "created_at_ms")), b, rev, err);
}

vigil_code vg_approval_for_operation(struct vg_env *env, const char *operation_id, json_t **out,
                                     vigil_error *err)
{
    json_t *all = NULL;
    struct vg_query q = {.kind = "approval", .k2 = operation_id, .descending = 1, .limit = 1};
    vigil_code rc = scan(env, &q, &all, err);
    if (rc)
        return rc;
    json_t *b = json_array_get(all, 0);
    if (!b) {
        json_decref(all);
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no approval for operation \"%s\"", operation_id);
    }
    json_incref(b);
    json_decref(all);
    lazy_expire(env, b);
    *out = b;
    return VIGIL_OK;
}

vigil_code vg_approval_get(struct vg_env *env, const char *approval_id, json_t **out,
                           vigil_error *err)
{
    vigil_code rc = vg_env_get_json(env, "approval", approval_id, out, NULL, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no approval \"%s\"", approval_id);
    if (!rc)
        lazy_expire(env, *out);
    return rc;
}

vigil_code vg_approval_request(struct vg_env *env, const char *agent_id, const char *operation_id,
                               json_t *request, json_t *preview, int64_t ttl_ms, char out_id[37],
                               vigil_error *err)
{
    json_t *old = NULL, *b = NULL;
    char id[37], at[32], exp[32];
    vigil_code rc = vg_approval_for_operation(env, operation_id, &old, err);
    const char *old_status = old ? json_string_value(json_object_get(old, "status")) : NULL;
    if (!rc && old_status && !strcmp(old_status, STATUS_PENDING)) {
        snprintf(out_id, 37, "%s", json_string_value(json_object_get(old, "id")));
        json_decref(old);
        return VIGIL_OK;
    }
    json_decref(old);
    if (rc && rc != VIGIL_ENOTFOUND)
        return rc;
    int64_t now = vg_env_now(env);
    vg_ids_new(env->ids, id);
    vg_time_format_ms(at, now);
    vg_time_format_ms(exp, now + ttl_ms);
    b = json_pack("{s:s, s:s, s:s, s:O, s:O?, s:s, s:s, s:I, s:s, s:I, s:s, s:b}", "id", id,
                  "agent_id", agent_id, "operation_id", operation_id, "request", request, "preview",
                  preview, "status", STATUS_PENDING, "created_at", at, "created_at_ms",
                  (json_int_t)now, "expires_at", exp, "expires_at_ms", (json_int_t)(now + ttl_ms),
                  "resolvable_by", "human", "seen", 0);
    if (!b)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating an approval");
    json_object_set(b, "tool", json_object_get(request, "tool"));
    if ((rc = vg_store_begin(env->store, err)))
        goto out;
    rc = vg_env_put_json(env, "approval", id, agent_id, STATUS_PENDING, operation_id, now, b, 0,
                         err);
    if (!rc) {
        const char *tokens[] = {"TOOL_APPROVAL_PENDING", agent_id, id};
        vg_env_notify(env, tokens, 3);
    }
    rc = vg_store_end(env->store, rc, err);
    if (!rc)
        snprintf(out_id, 37, "%s", id);
out:
    json_decref(b);
    return rc;
}

/* An approval left pending when its agent was destroyed (by a version before destroy rejected
 * them): approving it would answer "approved" for a call nothing will ever make (trial H13). */
static vigil_code check_agent_acts(struct vg_env *env, const json_t *b, vigil_error *err)
{
    vigil_lifecycle lc;
    const char *agent = json_string_value(json_object_get(b, "agent_id"));
    vigil_code rc = vg_agent_lifecycle(env, agent, &lc, err);
    if (rc == VIGIL_ENOTFOUND) /* deleted with its records: nothing to act either */
        lc = VIGIL_LIFECYCLE_DESTROYED, rc = VIGIL_OK;
    if (!rc && lc == VIGIL_LIFECYCLE_DESTROYED)
        rc = VG_FAIL(err, VIGIL_ESTATE,
                     "agent %s is destroyed: it will never act on approval \"%s\" (reject it)",
                     agent, json_string_value(json_object_get(b, "id")));
    return rc;
}

vigil_code vg_approval_resolve(struct vg_env *env, const char *approval_id, int approve,
                               const char *by, const char *reason, json_t **out, vigil_error *err)
{
    json_t *b = NULL;
    int64_t rev;
    char at[32];
    if (!approval_id || !*approval_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no approval id given");
    by = by && *by ? by : "human";
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    /* Two people (or scripts) answering at once: the second waits for the first and then
     * reads its answer ("already"), instead of failing its compare-and-swap on PostgreSQL. */
    rc = vg_store_lock_for_write(env->store, "approval", approval_id, err);
    if (!rc)
        rc = vg_env_get_json(env, "approval", approval_id, &b, &rev, err);
    if (rc == VIGIL_ENOTFOUND)
        rc = VG_FAIL(err, VIGIL_ENOTFOUND, "no approval \"%s\"", approval_id);
    if (rc)
        goto out;
    const char *st = json_string_value(json_object_get(b, "status"));
    if (strcmp(st, STATUS_PENDING) != 0) {
        /* Already resolved: a no-op that reports the first resolution. */
        if (!strcmp(st, "expired")) {
            rc = VG_FAIL(err, VIGIL_ESTATE, "approval \"%s\" expired at %s", approval_id,
                         json_string_value(json_object_get(b, "expires_at")));
            goto out;
        }
        json_object_set_new(b, "already", json_true());
        goto out;
    }
    if (!strcmp(by, json_string_value(json_object_get(b, "agent_id")))) {
        rc = VG_FAIL(err, VIGIL_EDENIED, "an agent cannot resolve its own approval \"%s\"",
                     approval_id);
        goto out;
    }
    if (approve && (rc = check_agent_acts(env, b, err)))
        goto out;
    int64_t now = vg_env_now(env);
    vg_time_format_ms(at, now);
    int expired = json_integer_value(json_object_get(b, "expires_at_ms")) <= now;
    json_object_set_new(b, "status",
                        json_string(expired   ? "expired"
                                    : approve ? "approved"
                                              : "rejected"));
    json_object_set_new(b, "resolved_at", json_string(at));
    if (!expired) {
        json_object_set_new(b, "resolved_by", json_string(by));
        if (reason)
            json_object_set_new(b, "reason", json_string(reason));
    }
    if ((rc = write_body(env, b, rev, err)))
        goto out;
    const char *tokens[] = {"TOOL_APPROVAL_RESOLVED",
                            json_string_value(json_object_get(b, "agent_id")), approval_id};
    vg_env_notify(env, tokens, 3);
    if (expired) {
        /* Commit the expiry, then report it. */
        rc = vg_store_end(env->store, VIGIL_OK, err);
        json_decref(b);
        return rc ? rc
                  : VG_FAIL(err, VIGIL_ESTATE, "approval \"%s\" expired before it was resolved",
                            approval_id);
    }
out:
    rc = vg_store_end(env->store, rc, err);
    if (rc || !out)
        json_decref(b);
    else
        *out = b;
    return rc;
}

vigil_code vg_approval_reject_pending(struct vg_env *env, const char *agent_id, const char *reason,
                                      int *n, vigil_error *err)
{
    json_t *all = NULL, *b;
    size_t i;
    int count = 0;
    struct vg_query q = {.kind = "approval", .owner = agent_id, .k1 = STATUS_PENDING};
    vigil_code rc = scan(env, &q, &all, err);
    json_array_foreach (rc ? NULL : all, i, b) {
        json_t *res = NULL;
        vigil_error e2 = {0};
        vigil_code one = vg_approval_resolve(env, json_string_value(json_object_get(b, "id")), 0,
                                             "destroy", reason, &res, &e2);
        json_decref(res);
        if (one == VIGIL_ESTATE) /* expired meanwhile: recorded as such, nothing to reject */
            one = VIGIL_OK;
        else if (!one)
            count++;
        if (one) {
            rc = one;
            vg_error_copy(err, &e2);
            break;
        }
    }
    json_decref(all);
    if (!rc && n)
        *n = count;
    return rc;
}

static int approval_status_known(const char *status)
{
    static const char *const known[] = {STATUS_PENDING, "approved", "rejected", "expired"};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (!strcmp(status, known[k]))
            return 1;
    return 0;
}

vigil_code vg_approval_list(struct vg_env *env, const char *agent_id, const char *status,
                            json_t **out, vigil_error *err)
{
    /* A misspelt status would otherwise read as "nothing waiting" (an empty list). */
    if (status && !approval_status_known(status))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown approval status \"%.40s\": use pending, approved, rejected or "
                       "expired",
                       status);
    json_t *all = NULL, *res = json_array(), *b;
    size_t i;
    /* Pending is filtered after lazy expiry, so the index column cannot narrow it. */
    struct vg_query q = {.kind = "approval",
                         .owner = agent_id,
                         .k1 = status && strcmp(status, STATUS_PENDING) && strcmp(status, "expired")
                                   ? status
                                   : NULL};
    if (!res)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing approvals");
    vigil_code rc = scan(env, &q, &all, err);
    if (rc) {
        json_decref(res);
        return rc;
    }
    json_array_foreach (all, i, b) {
        lazy_expire(env, b);
        if (!status || !strcmp(status, json_string_value(json_object_get(b, "status"))))
            json_array_append(res, b);
    }
    json_decref(all);
    *out = res;
    return VIGIL_OK;
}

vigil_code vg_approval_expire(struct vg_env *env, int *n, vigil_error *err)
{
    json_t *all = NULL, *b;
    size_t i;
    int count = 0;
    struct vg_query q = {.kind = "approval", .k1 = STATUS_PENDING};
    vigil_code rc = scan(env, &q, &all, err);
    if (rc)
        return rc;
    json_array_foreach (all, i, b) {
        json_t *res = NULL;
        if (json_integer_value(json_object_get(b, "expires_at_ms")) > vg_env_now(env))
            continue;
        vigil_error e2 = {0};
        /* resolve() on an expired pending approval records the expiry and says ESTATE. */
        rc = vg_approval_resolve(env, json_string_value(json_object_get(b, "id")), 0, "clock", NULL,
                                 &res, &e2);
        json_decref(res);
        if (rc == VIGIL_ESTATE)
            count++, rc = VIGIL_OK;
        if (rc) {
            vg_error_copy(err, &e2);
            break;
        }
    }
    json_decref(all);
    if (!rc && n)
        *n = count;
    return rc;
}

vigil_code vg_approval_unseen(struct vg_env *env, const char *agent_id, json_t **out,
                              vigil_error *err)
{
    json_t *all = NULL, *res = NULL, *b;
    size_t i;
    vigil_code rc = vg_approval_expire(env, NULL, err);
    if (rc)
        return rc;
    struct vg_query q = {.kind = "approval", .owner = agent_id};
    if ((rc = scan(env, &q, &all, err)))
        return rc;
    if (!(res = json_array())) {
        json_decref(all);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading approvals");
    }
    json_array_foreach (all, i, b) {
        const char *status = json_string_value(json_object_get(b, "status"));
        if (json_is_true(json_object_get(b, "seen")) || !status || !strcmp(status, STATUS_PENDING))
            continue;
        if (json_array_append(res, b)) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading approvals");
            break;
        }
    }
    json_decref(all);
    if (rc) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return VIGIL_OK;
}

vigil_code vg_approval_mark_seen(struct vg_env *env, const char *approval_id, vigil_error *err)
{
    json_t *cur = NULL;
    int64_t rev;
    vigil_code rc = vg_env_get_json(env, "approval", approval_id, &cur, &rev, err);
    if (rc)
        return rc;
    if (!json_is_true(json_object_get(cur, "seen"))) {
        json_object_set_new(cur, "seen", json_true());
        rc = write_body(env, cur, rev, err);
    }
    json_decref(cur);
    return rc;
}

vigil_code vg_approval_take_resolved(struct vg_env *env, const char *agent_id, json_t **out,
                                     vigil_error *err)
{
    json_t *res = NULL, *b;
    size_t i;
    vigil_code rc = vg_approval_unseen(env, agent_id, &res, err);
    if (rc)
        return rc;
    if ((rc = vg_store_begin(env->store, err)))
        goto out;
    json_array_foreach (res, i, b) {
        if ((rc = vg_approval_mark_seen(env, json_string_value(json_object_get(b, "id")), err)))
            break;
        json_object_set_new(b, "seen", json_true());
    }
    rc = vg_store_end(env->store, rc, err);
out:
    if (rc) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return VIGIL_OK;
}
