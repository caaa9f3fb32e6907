/*
 * report.c: user-facing reports. Each report is an immutable snapshot; a head pointer per scope
 * (current, daily, weekly, monthly) names the latest. The report, its source-span link and the
 * head move are one transaction, so the head always names a committed report (docs/runs.md).
 */
#include "base/common.h"

#include "agent/agent_int.h"

static const char *const scopes[] = {"current", "daily", "weekly", "monthly"};

int vg_report_scope_valid(const char *scope)
{
    for (size_t i = 0; scope && i < VG_ARRAY_LEN(scopes); i++)
        if (strcmp(scope, scopes[i]) == 0)
            return 1;
    return 0;
}

vigil_code vg_report_set(struct vg_env *env, const char *agent_id, const char *scope,
                         const char *markdown, const char *span_start, const char *span_end,
                         char out_id[37], vigil_error *err)
{
    char id[37], key[128], at[32];
    json_t *report = NULL, *meta = NULL;
    struct vg_pointer head;
    vigil_lifecycle lc;
    vigil_code rc;
    if (!vg_report_scope_valid(scope))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown report scope \"%s\": use current, daily, weekly or monthly",
                       scope ? scope : "");
    if (!markdown)
        return VG_FAIL(err, VIGIL_EINVAL, "a report needs text");
    snprintf(key, sizeof key, "%s:%s", agent_id, scope);
    if ((rc = vg_store_begin(env->store, err)))
        return rc;
    if ((rc = vg_agent_lifecycle(env, agent_id, &lc, err)))
        goto out;
    if (lc == VIGIL_LIFECYCLE_DESTROYED) {
        rc = VG_FAIL(err, VIGIL_ESTATE, "agent \"%s\" is destroyed", agent_id);
        goto out;
    }
    if ((rc = vg_pointer_read(env, "agent_report_head", key, &head, err)))
        goto out;
    int64_t seq = head.seq + 1;
    vg_ids_new(env->ids, id);
    vg_time_format_ms(at, vg_env_now(env));
    report = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:{s:s?, s:s?}}", "id", id, "agent_id",
                       agent_id, "scope", scope, "markdown", markdown, "seq", (json_int_t)seq,
                       "created_at", at, "source_span", "start", span_start, "end", span_end);
    if (!report) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a report");
        goto out;
    }
    rc = vg_env_put_json(env, "report", id, agent_id, scope, "", seq, report, 0, err);
    if (!rc && span_start) {
        meta = json_pack("{s:s?}", "end", span_end);
        rc = meta ? vg_link_add(env, agent_id, "report_source_span", id, span_start, meta, err)
                  : VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a report");
    }
    if (!rc)
        rc = vg_pointer_write(env, agent_id, "agent_report_head", key, id, seq, &head, err);
    if (!rc) {
        const char *tokens[] = {VIGIL_TOKEN_AGENT_CHANGED, agent_id, id};
        vg_env_notify(env, tokens, VG_ARRAY_LEN(tokens));
    }
out:
    rc = vg_store_end(env->store, rc, err);
    if (!rc && out_id)
        memcpy(out_id, id, sizeof id);
    json_decref(report);
    json_decref(meta);
    return rc;
}

vigil_code vg_report_current(struct vg_env *env, const char *agent_id, const char *scope,
                             json_t **out, vigil_error *err)
{
    char key[128], id[201];
    if (!vg_report_scope_valid(scope))
        return VG_FAIL(err, VIGIL_EINVAL, "unknown report scope \"%s\"", scope ? scope : "");
    snprintf(key, sizeof key, "%s:%s", agent_id, scope);
    vigil_code rc = vg_link_pointer_get(env, "agent_report_head", key, id, sizeof id, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "agent \"%s\" has no %s report yet", agent_id, scope);
    if (rc)
        return rc;
    return vg_env_get_json(env, "report", id, out, NULL, err);
}
