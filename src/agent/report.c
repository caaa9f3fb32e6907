/*
 * report.c: user-facing reports. Each report is an immutable snapshot; a head pointer per scope
 * (current, daily, weekly, monthly) names the latest. The report, its source-span link and the
 * head move are one transaction, so the head always names a committed report (docs/runs.md).
 * A report may carry the writer's confidence (0 to 1) and its sources (what it was made from);
 * readers see whether it is stale: older than its scope's freshness (the agent's
 * reports.fresh_for, else the defaults below), judged when it is read, never stored.
 */
#include "base/common.h"

#include "agent/agent_int.h"

static const char *const scopes[] = {"current", "daily", "weekly", "monthly"};
/* How long a report of each scope stays fresh unless the agent says otherwise: a current
 * report never turns stale by age (it is what the agent last knew); the others for their period
 * and a grace (2 h a day, 12 h a week, a day a month). Without the grace, a report written by a
 * run at the same hour each day went stale each morning until the day's run finished, for as
 * long as that run took more than yesterday's (a slower model, a retry, a queue), and a daily
 * timer on local time across a clock change fires 25 h after the last. */
#define HOUR_MS 3600000LL
static const int64_t fresh_default_ms[] = {-1, 26 * HOUR_MS, 7 * 24 * HOUR_MS + 12 * HOUR_MS,
                                           32 * 24 * HOUR_MS};

int vg_report_scope_valid(const char *scope)
{
    for (size_t i = 0; scope && i < VG_ARRAY_LEN(scopes); i++)
        if (strcmp(scope, scopes[i]) == 0)
            return 1;
    return 0;
}

/* The report's confidence and sources are what a person may rely on: checked whoever writes. */
static vigil_code check_extras(const struct vg_report_in *in, vigil_error *err)
{
    if (in->has_confidence && !(in->confidence >= 0 && in->confidence <= 1))
        return VG_FAIL(err, VIGIL_EINVAL, "a report's confidence is a number from 0 to 1");
    if (in->sources &&
        (!json_is_array(in->sources) || json_array_size(in->sources) > VG_REPORT_MAX_SOURCES))
        return VG_FAIL(err, VIGIL_EINVAL, "a report's sources are a list of at most %d texts",
                       VG_REPORT_MAX_SOURCES);
    size_t i;
    json_t *v;
    json_array_foreach (in->sources, i, v) {
        size_t n = json_string_length(v);
        if (!json_is_string(v) || n == 0 || n > VG_REPORT_MAX_SOURCE_BYTES)
            return VG_FAIL(err, VIGIL_EINVAL,
                           "a report's source is a text of 1 to %d bytes (source %zu is not)",
                           VG_REPORT_MAX_SOURCE_BYTES, i + 1);
    }
    return VIGIL_OK;
}

/* The report's record (owned), NULL when out of memory. */
static json_t *report_record(const char *id, const char *agent_id, const struct vg_report_in *in,
                             int64_t seq, const char *at)
{
    json_t *r =
        json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:{s:s?, s:s?}}", "id", id, "agent_id", agent_id,
                  "scope", in->scope, "markdown", in->markdown, "seq", (json_int_t)seq,
                  "created_at", at, "source_span", "start", in->span_start, "end", in->span_end);
    if (r && in->has_confidence && json_object_set_new(r, "confidence", json_real(in->confidence)))
        goto fail;
    if (r && in->sources && json_object_set_new(r, "sources", json_deep_copy(in->sources)))
        goto fail;
    return r;
fail:
    json_decref(r);
    return NULL;
}

vigil_code vg_report_write(struct vg_env *env, const char *agent_id, const struct vg_report_in *in,
                           char out_id[37], vigil_error *err)
{
    char id[37], key[128], at[32];
    json_t *report = NULL, *meta = NULL;
    struct vg_pointer head;
    vigil_lifecycle lc;
    vigil_code rc;
    if (!vg_report_scope_valid(in->scope))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown report scope \"%s\": use current, daily, weekly or monthly",
                       in->scope ? in->scope : "");
    if (!in->markdown)
        return VG_FAIL(err, VIGIL_EINVAL, "a report needs text");
    if ((rc = check_extras(in, err)))
        return rc;
    snprintf(key, sizeof key, "%s:%s", agent_id, in->scope);
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
    if (!(report = report_record(id, agent_id, in, seq, at))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a report");
        goto out;
    }
    rc = vg_env_put_json(env, "report", id, agent_id, in->scope, "", seq, report, 0, err);
    if (!rc && in->span_start) {
        meta = json_pack("{s:s?}", "end", in->span_end);
        rc = meta ? vg_link_add(env, agent_id, "report_source_span", id, in->span_start, meta, err)
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

vigil_code vg_report_set(struct vg_env *env, const char *agent_id, const char *scope,
                         const char *markdown, const char *span_start, const char *span_end,
                         char out_id[37], vigil_error *err)
{
    struct vg_report_in in = {
        .scope = scope, .markdown = markdown, .span_start = span_start, .span_end = span_end};
    return vg_report_write(env, agent_id, &in, out_id, err);
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

int64_t vg_report_fresh_for_ms(const json_t *agent_config, const char *scope)
{
    size_t i = 0;
    while (i < VG_ARRAY_LEN(scopes) && strcmp(scopes[i], scope ? scope : ""))
        i++;
    if (i == VG_ARRAY_LEN(scopes))
        return -1;
    const char *set = json_string_value(json_object_get(
        json_object_get(json_object_get(agent_config, "reports"), "fresh_for"), scope));
    int64_t ms;
    /* The manifest's schema checked the text; a config written otherwise falls back. */
    return set && !vg_duration_parse_ms(set, &ms) ? ms : fresh_default_ms[i];
}

json_t *vg_report_view(const json_t *report, const json_t *agent_config, int64_t now_ms)
{
    json_t *v = json_deep_copy(report);
    int64_t made = 0;
    if (!v)
        return NULL;
    int64_t fresh =
        vg_report_fresh_for_ms(agent_config, json_string_value(json_object_get(report, "scope")));
    json_t *stale_at = json_null(), *stale = json_false();
    if (fresh >= 0 &&
        !vg_time_parse_ms(json_string_value(json_object_get(report, "created_at")), &made)) {
        char at[32];
        vg_time_format_ms(at, made + fresh);
        stale_at = json_string(at);
        stale = json_boolean(now_ms >= made + fresh);
    }
    if (json_object_set_new(v, "stale_at", stale_at) || json_object_set_new(v, "stale", stale)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

/* Collects a scope's reports, newest first, as a scan finds them. */
struct history {
    json_t *items;
    int failed;
};

static int history_cb(void *user, const struct vg_record *r)
{
    struct history *h = user;
    json_t *v = json_loads(r->body, 0, NULL);
    if (!v || json_array_append_new(h->items, v)) {
        h->failed = 1;
        return 1;
    }
    return 0;
}

vigil_code vg_report_history(struct vg_env *env, const char *agent_id, const char *scope, int limit,
                             json_t **out, vigil_error *err)
{
    struct history h = {.items = json_array()};
    struct vg_query q = {
        .kind = "report", .owner = agent_id, .k1 = scope, .descending = 1, .limit = limit};
    if (!h.items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading reports");
    vigil_code rc = vg_store_scan(env->store, &q, history_cb, &h, err);
    if (!rc && h.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading reports");
    if (rc) {
        json_decref(h.items);
        return rc;
    }
    *out = h.items;
    return VIGIL_OK;
}

/* views (new array) of reports (borrowed), skipping the one whose id is skip_id. */
static json_t *views_of(const json_t *reports, const char *skip_id, const json_t *config,
                        int64_t now_ms, int limit)
{
    json_t *out = json_array(), *r;
    size_t i;
    json_array_foreach (reports, i, r) {
        const char *id = json_string_value(json_object_get(r, "id"));
        if ((skip_id && id && !strcmp(id, skip_id)) || (int)json_array_size(out) >= limit)
            continue;
        if (!out || json_array_append_new(out, vg_report_view(r, config, now_ms))) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static int id_order(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A report's "number" as people read it: its number, and when two devices each wrote a report
 * of the scope before they synced (trial K11: both numbered it #2), a letter telling them apart,
 * in the order of their ids ("2a", "2b"): the same on every device that holds both. */
static vigil_code number_view(struct vg_env *env, const char *agent_id, const char *scope,
                              json_t *view, vigil_error *err)
{
    const char *id = json_string_value(json_object_get(view, "id"));
    int64_t n = json_integer_value(json_object_get(view, "seq"));
    struct vg_query q = {.kind = "report",
                         .owner = agent_id,
                         .k1 = scope,
                         .has_seq_min = 1,
                         .seq_min = n,
                         .has_seq_max = 1,
                         .seq_max = n,
                         .limit = 27};
    struct vg_id_list same = {0};
    char number[40];
    if (!id)
        return VIGIL_OK;
    vigil_code rc = vg_store_scan_ids(env->store, &q, &same, err);
    snprintf(number, sizeof number, "%lld", (long long)n);
    if (!rc && same.n > 1) {
        qsort(same.ids, same.n, sizeof *same.ids, id_order);
        for (size_t i = 0; i < same.n && i < 26; i++)
            if (!strcmp(same.ids[i], id))
                snprintf(number, sizeof number, "%lld%c", (long long)n, 'a' + (int)i);
    }
    vg_id_list_release(&same);
    if (!rc && json_object_set_new(view, "number", json_string(number)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading reports");
    return rc;
}

static vigil_code number_views(struct vg_env *env, const char *agent_id, const char *scope,
                               json_t *v, vigil_error *err)
{
    size_t i;
    json_t *h;
    vigil_code rc = number_view(env, agent_id, scope, json_object_get(v, "report"), err);
    json_array_foreach (json_object_get(v, "history"), i, h)
        if (!rc)
            rc = number_view(env, agent_id, scope, h, err);
    return rc;
}

vigil_code vg_report_get(struct vg_env *env, const char *agent_id, const char *scope, int history,
                         json_t **out, vigil_error *err)
{
    json_t *agent = NULL, *report = NULL, *older = NULL, *v = NULL;
    if (!vg_report_scope_valid(scope))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown report scope \"%s\": use current, daily, weekly or monthly",
                       scope ? scope : "");
    vigil_code rc = vg_agent_get_shared(env, agent_id, &agent, err);
    if (!rc)
        rc = vg_report_current(env, agent_id, scope, &report, err);
    if (!rc && history > 0)
        rc = vg_report_history(env, agent_id, scope, history + 1, &older, err);
    if (!rc) {
        const json_t *config = json_object_get(agent, "config");
        int64_t now = vg_env_now(env);
        v = json_pack("{s:s, s:s, s:o}", "agent_id", agent_id, "scope", scope, "report",
                      vg_report_view(report, config, now));
        const char *id = json_string_value(json_object_get(report, "id"));
        if (v && history > 0 &&
            json_object_set_new(v, "history", views_of(older, id, config, now, history))) {
            json_decref(v);
            v = NULL;
        }
        if (!v)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading reports");
        else
            rc = number_views(env, agent_id, scope, v, err);
    }
    json_decref(agent);
    json_decref(report);
    json_decref(older);
    if (rc) {
        json_decref(v);
        v = NULL;
    }
    *out = v;
    return rc;
}
