/*
 * routes.c: the route table of /v1/ and the handlers that map a request onto include/vigil.h.
 * Each handler reads its path parameters, query and body, calls one API function on the
 * request's runtime and answers with the function's JSON or its error (the code table's HTTP
 * status). /openapi.json is generated from this table (openapi.c), so the document and the
 * server cannot drift apart; tests/http checks it against real answers.
 */
#include "base/common.h"
#include "base/json.h"

#include "http/http_int.h"
#include "http/mhd.h"
#include "os/fs.h"
#include "os/ids.h"

#include <sodium.h>
#include <unistd.h>

#define ID0 (r->params[0])
#define ID1 (r->params[1])

/* A body member that must be a string when present. */
#define BODY_STR(var, key)                                                                         \
    int var##_bad = 0;                                                                             \
    const char *var = vg_req_str(r, key, &var##_bad);                                              \
    if (var##_bad) {                                                                               \
        vg_req_error(r, VIGIL_EINVAL, "\"" key "\" must be a string");                             \
        return;                                                                                    \
    }

/* A list's agent= filter, an id or a name as under /v1/agents/{agent} (trial C7 of session 30:
 * a name was answered 404 "no agent"): *agent is NULL when absent; 1 when refused. */
static int agent_filter(struct vg_req *r, char buf[64], const char **agent)
{
    const char *q = vg_req_query(r, "agent");
    *agent = NULL;
    if (!q)
        return 0;
    if (vg_http_agent_id(r, q, buf, 64))
        return 1;
    *agent = buf;
    return 0;
}

static int limit_or_refuse(struct vg_req *r, int *limit)
{
    *limit = vg_req_limit(r);
    if (*limit < 0) {
        vg_req_error(r, VIGIL_EINVAL, "limit takes a number from 1 to 1000");
        return 1;
    }
    return 0;
}

void vg_http_by_id(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = r->route->by_id(r->rt, ID0, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* ---- meta -------------------------------------------------------------------------------------
 */

static void h_health(struct vg_req *r)
{
    vg_req_json(r, 200, vg_strdup("{\"ok\":true}"));
}

static void h_version(struct vg_req *r)
{
    char buf[128];
    snprintf(buf, sizeof buf, "{\"version\":\"%s\",\"version_number\":%d}", vigil_version(),
             vigil_version_number());
    vg_req_json(r, 200, vg_strdup(buf));
}

/* ---- agents -----------------------------------------------------------------------------------
 */

static void h_agents_list(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    int limit;
    if (limit_or_refuse(r, &limit))
        return;
    const char *all = vg_req_query(r, "all");
    vigil_code rc =
        vigil_agent_list_lifecycle(r->rt, vg_req_query(r, "lifecycle"), vg_req_query(r, "cursor"),
                                   limit, all && !strcmp(all, "1"), &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* Drop "file" (the temporary file: the client sent no file) from each entry of an array. */
static void drop_files(json_t *list)
{
    json_t *it;
    size_t i;
    json_array_foreach (list, i, it)
        json_object_del(it, "file");
}

/* A manifest as JSON, or as YAML (Content-Type: application/yaml): written to a private
 * temporary file, applied as `vigil agent apply` does. An invalid one answers the reader's list
 * of problems beside code and message. */
static void h_agents_create(struct vg_req *r)
{
    vigil_error err = {0};
    char dir[] = "/tmp/vigil-http-XXXXXX", path[64];
    char *out = NULL;
    const char *dry = vg_req_query(r, "dry_run");
    if (!r->body && !r->raw_len) {
        vg_req_error(r, VIGIL_EINVAL,
                     "send the agent's manifest as a JSON object, or as YAML with Content-Type: "
                     "application/yaml");
        return;
    }
    if (!mkdtemp(dir)) {
        vg_req_error(r, VIGIL_EIO, "could not make a temporary folder for the manifest");
        return;
    }
    snprintf(path, sizeof path, "%s/manifest.%s", dir, r->body ? "json" : "yaml");
    vigil_code rc = r->body ? (json_dump_file(r->body, path, 0) ? VIGIL_EIO : VIGIL_OK)
                            : vg_fs_write_file(path, r->raw, r->raw_len, &err);
    if (rc)
        VG_FAIL(&err, VIGIL_EIO, "could not write the manifest to a temporary file");
    else
        rc = vigil_agent_apply(r->rt, path, dry && !strcmp(dry, "1") ? VIGIL_APPLY_DRY_RUN : 0,
                               &out, &err);
    unlink(path);
    rmdir(dir);
    json_t *v = out ? json_loads(out, 0, NULL) : NULL;
    vigil_free(out);
    if (rc && json_is_object(v)) { /* {"errors": [...]} */
        const char *m =
            strncmp(err.message, path, strlen(path)) ? err.message : err.message + strlen(path);
        drop_files(json_object_get(v, "errors"));
        json_object_set_new(v, "code", json_string(vigil_code_name(rc)));
        json_object_set_new(v, "message", json_string(m[0] == ':' ? m + 1 : m));
        json_object_set_new(v, "status", json_integer(vigil_code_http_status(rc)));
        vg_req_value(r, vigil_code_http_status(rc), v);
        return;
    }
    if (rc) {
        json_decref(v);
        vg_req_fail(r, rc, &err);
        return;
    }
    drop_files(v);
    vg_req_value(r, 200, v);
}

static void h_agent_lifecycle(struct vg_req *r)
{
    vigil_error err = {0};
    BODY_STR(reason, "reason");
    const char *verb = strrchr(r->path, '/') + 1;
    vigil_code rc = !strcmp(verb, "pause")    ? vigil_agent_pause(r->rt, ID0, reason, &err)
                    : !strcmp(verb, "resume") ? vigil_agent_resume(r->rt, ID0, reason, &err)
                                              : vigil_agent_destroy(r->rt, ID0, reason, &err);
    char *out = NULL;
    if (!rc)
        rc = vigil_agent_show(r->rt, ID0, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_agent_delete(struct vg_req *r)
{
    vigil_error err = {0};
    vigil_code rc = vigil_agent_delete(r->rt, ID0, &err);
    if (rc)
        vg_req_fail(r, rc, &err);
}

static void h_agent_export(struct vg_req *r)
{
    vigil_error err = {0};
    char *yaml = NULL;
    vigil_code rc = vigil_agent_export(r->rt, ID0, &yaml, &err);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    vg_req_value(r, 200, json_pack("{s:s}", "manifest_yaml", yaml));
    vigil_free(yaml);
}

/* ---- wakes, notifications, subscriptions, timers -------------------------------------------- */

static void h_wake(struct vg_req *r)
{
    vigil_error err = {0};
    char key[65], buf[128];
    BODY_STR(message, "message");
    BODY_STR(session, "session");
    vigil_code rc = vigil_wake_agent(r->rt, ID0, message, session, key, &err);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    if (r->h->o.poke)
        r->h->o.poke(r->h->o.poke_user);
    snprintf(buf, sizeof buf, "{\"run_key\":\"%s\"}", key);
    vg_req_json(r, 202, vg_strdup(buf));
}

static void h_notify(struct vg_req *r)
{
    vigil_error err = {0};
    json_t *tokens = r->body ? json_object_get(r->body, "tokens") : NULL;
    const char *list[256];
    size_t n = json_array_size(tokens), i;
    if (!json_is_array(tokens) || n == 0 || n > VG_ARRAY_LEN(list)) {
        vg_req_error(r, VIGIL_EINVAL, "\"tokens\" must be an array of 1 to 256 strings");
        return;
    }
    for (i = 0; i < n; i++)
        if (!(list[i] = json_string_value(json_array_get(tokens, i)))) {
            vg_req_error(r, VIGIL_EINVAL, "\"tokens\" must be an array of 1 to 256 strings");
            return;
        }
    vigil_code rc = vigil_notify(r->rt, list, n, &err);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    if (r->h->o.poke)
        r->h->o.poke(r->h->o.poke_user);
    vg_req_json(r, 202, vg_strdup("{\"ok\":true}"));
}

static void h_wakes(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    char buf[64];
    const char *agent;
    int limit;
    if (limit_or_refuse(r, &limit) || agent_filter(r, buf, &agent))
        return;
    vigil_code rc = vigil_wake_runs(r->rt, agent, vg_req_query(r, "status"), limit, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_subs_add(struct vg_req *r)
{
    vigil_error err = {0};
    char *id = NULL, *spec = r->body ? vg_json_dumps(r->body, JSON_COMPACT) : NULL;
    if (!spec) {
        vg_req_error(r, VIGIL_EINVAL, "send the subscription as a JSON object with \"tokens\"");
        return;
    }
    vigil_code rc = vigil_subscription_add(r->rt, ID0, spec, &id, &err);
    free(spec);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    vg_req_value(r, 201, json_pack("{s:s}", "id", id));
    vigil_free(id);
}

static void h_subs_remove(struct vg_req *r)
{
    vigil_error err = {0};
    vigil_code rc = vigil_subscription_remove(r->rt, ID0, &err);
    if (rc)
        vg_req_fail(r, rc, &err);
}

static void h_timers_add(struct vg_req *r)
{
    vigil_error err = {0};
    char id[37], buf[64];
    BODY_STR(kind, "kind");
    BODY_STR(spec, "spec");
    BODY_STR(tz, "tz");
    if (!kind || !spec) {
        vg_req_error(r, VIGIL_EINVAL, "a timer needs \"kind\" (rrule, cron, at) and \"spec\"");
        return;
    }
    vigil_code rc = vigil_timer_add(r->rt, ID0, kind, spec, tz, id, &err);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    snprintf(buf, sizeof buf, "{\"id\":\"%s\"}", id);
    vg_req_json(r, 201, vg_strdup(buf));
}

static void h_timers_remove(struct vg_req *r)
{
    vigil_error err = {0};
    vigil_code rc = vigil_timer_remove(r->rt, ID0, &err);
    if (rc)
        vg_req_fail(r, rc, &err);
}

/* ---- runs --------------------------------------------------------------------------------------
 */

static void h_runs_list(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    char buf[64];
    const char *agent;
    int limit;
    if (limit_or_refuse(r, &limit) || agent_filter(r, buf, &agent))
        return;
    vigil_code rc = vigil_runs_list(r->rt, agent, vg_req_query(r, "status"),
                                    vg_req_query(r, "cursor"), limit, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_run_messages(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    int limit;
    if (limit_or_refuse(r, &limit))
        return;
    vigil_code rc = vigil_run_messages(r->rt, ID0, vg_req_query(r, "cursor"), limit, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_run_tools(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    int limit;
    if (limit_or_refuse(r, &limit))
        return;
    vigil_code rc = vigil_run_tools(r->rt, ID0, vg_req_query(r, "cursor"), limit, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* GET /v1/agents/{agent}/sessions/{session}/messages: a chat session's conversation, also the
 * turns another device ran (vigil chat --history). */
static void h_session_messages(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    int limit;
    if (limit_or_refuse(r, &limit))
        return;
    vigil_code rc = vigil_session_messages(r->rt, ID0, ID1, limit, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* GET /v1/agents/{agent}/tool-calls: the calls made by hand, newest first (vigil tool calls). */
static void h_hand_calls(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    int limit;
    if (limit_or_refuse(r, &limit))
        return;
    vigil_code rc =
        vigil_tool_calls_by_hand(r->rt, ID0, vg_req_query(r, "cursor"), limit, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* ---- an agent by its name ----------------------------------------------------------------------
 * The CLI takes an agent's name wherever it takes its id (cli/main.c, cli_agent); so do the routes
 * under /v1/agents/{agent}, the same way: a live agent of that name before a destroyed one, and
 * two of them refused with the CLI's words. */
struct named {
    char live[2][64], gone[2][64];
    int n_live, n_gone;
};

static void named_take(json_t *items, const char *name, struct named *m)
{
    size_t i;
    json_t *a;
    json_array_foreach (items, i, a) {
        const char *n = json_string_value(json_object_get(a, "name"));
        const char *lc = json_string_value(json_object_get(a, "lifecycle"));
        int gone = lc && !strcmp(lc, "destroyed");
        int *k = gone ? &m->n_gone : &m->n_live;
        if (n && !strcmp(n, name) && (*k)++ < 2)
            snprintf(gone ? m->gone[*k - 1] : m->live[*k - 1], 64, "%s",
                     json_string_value(json_object_get(a, "id")));
    }
}

static vigil_code named_collect(vigil_runtime *rt, const char *name, struct named *m,
                                vigil_error *err)
{
    char *cursor = NULL;
    vigil_code rc;
    do {
        char *text = NULL;
        rc = vigil_agent_list(rt, cursor, 1000, &text, err);
        vigil_free(cursor);
        json_t *v = rc ? NULL : json_loads(text, 0, NULL);
        vigil_free(text);
        named_take(json_object_get(v, "items"), name, m);
        const char *next = json_string_value(json_object_get(v, "next_cursor"));
        cursor = next ? vg_strdup(next) : NULL;
        json_decref(v);
    } while (cursor);
    return rc;
}

int vg_http_agent_id(struct vg_req *r, const char *arg, char *out, size_t out_len)
{
    if (out != arg)
        snprintf(out, out_len, "%s", arg);
    if (vg_id_valid(arg))
        return 0;
    struct named m = {0};
    vigil_error err = {0};
    if (named_collect(r->rt, arg, &m, &err)) {
        vg_req_fail(r, err.code, &err);
        return 1;
    }
    int n = m.n_live ? m.n_live : m.n_gone;
    char(*ids)[64] = m.n_live ? m.live : m.gone;
    if (n > 1) {
        char msg[256];
        snprintf(msg, sizeof msg, "%d %sagents are named \"%.60s\" (%s, %s%s): give an id", n,
                 m.n_live ? "" : "destroyed ", arg, ids[0], ids[1], n > 2 ? ", ..." : "");
        vg_req_error(r, VIGIL_EINVAL, msg);
        return 1;
    }
    if (n == 1) /* none: the caller answers `no agent "X"` */
        snprintf(out, out_len, "%s", ids[0]);
    return 0;
}

int vg_http_agent_by_name(struct vg_req *r)
{
    if (strncmp(r->route->pattern, "/v1/agents/{agent}", 18) || !r->params[0])
        return 0;
    return vg_http_agent_id(r, r->param_buf[0], r->param_buf[0], sizeof r->param_buf[0]);
}

/* ---- approvals, kill switches -----------------------------------------------------------------
 */

static void h_approvals(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL, buf[64];
    const char *agent;
    if (agent_filter(r, buf, &agent))
        return;
    vigil_code rc = vigil_approval_list(r->rt, agent, vg_req_query(r, "status"), &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_approval_resolve(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    BODY_STR(reason, "reason");
    BODY_STR(by, "by");
    int approve = !strcmp(strrchr(r->path, '/') + 1, "approve");
    vigil_code rc =
        vigil_approval_resolve(r->rt, ID0, approve, by ? by : "http", reason, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_kill_status(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_kill_status(r->rt, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_kill_set(struct vg_req *r)
{
    vigil_error err = {0};
    json_t *on = r->body ? json_object_get(r->body, "on") : NULL;
    BODY_STR(agent, "agent");
    BODY_STR(tool_class, "tool_class");
    BODY_STR(reason, "reason");
    if (!json_is_boolean(on)) {
        vg_req_error(r, VIGIL_EINVAL, "send {\"on\": true} or {\"on\": false}");
        return;
    }
    vigil_code rc = vigil_kill_set(r->rt, agent, tool_class, json_is_true(on), reason, &err);
    char *out = NULL;
    if (!rc)
        rc = vigil_kill_status(r->rt, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* The store and its fleet at a glance, as `vigil status` (docs/cli.md). */
static void h_status(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_status(r->rt, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* Retention (docs/storage.md, "Growth and retention"), as `vigil prune`. */
static void h_prune(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    BODY_STR(agent, "agent");
    json_t *budget = r->body ? json_object_get(r->body, "budget_bytes") : NULL;
    if (budget && (!json_is_integer(budget) || json_integer_value(budget) <= 0)) {
        vg_req_error(r, VIGIL_EINVAL, "\"budget_bytes\" must be a positive integer");
        return;
    }
    vigil_prune_options o = {.agent_id = agent,
                             .dry_run =
                                 r->body && json_is_true(json_object_get(r->body, "dry_run")),
                             .vacuum = r->body && json_is_true(json_object_get(r->body, "vacuum")),
                             .budget_bytes = budget ? json_integer_value(budget) : 0};
    vigil_code rc = vigil_prune(r->rt, &o, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* ---- memory ------------------------------------------------------------------------------------
 */

/* GET /v1/agents/{agent}/report?scope=&history=: a report read without a model call
 * (vigil_report_get). */
static void h_report(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL, *end = NULL;
    const char *h = vg_req_query(r, "history");
    long history = h ? strtol(h, &end, 10) : 0;
    if (h && (!*h || *end || history < 0 || history > 1000)) {
        vg_req_error(r, VIGIL_EINVAL, "history takes a number from 0 to 1000");
        return;
    }
    vigil_code rc =
        vigil_report_get(r->rt, ID0, vg_req_query(r, "scope"), (int)history, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_memory_list(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_memory_list(r->rt, ID0, vg_req_query(r, "tier"), &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_memory_show(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_memory_show(r->rt, ID0, ID1, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_memory_history(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_memory_history(r->rt, ID0, ID1, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* POST /v1/agents/{agent}/memory/{label} {"content"?, "tier"?, "permission"?}: a person's
 * change, as `vigil memory set`; DELETE the same path: `vigil memory delete`. */
static void h_memory_set(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    BODY_STR(content, "content");
    BODY_STR(tier, "tier");
    BODY_STR(permission, "permission");
    if (!content && !tier && !permission) {
        vg_req_error(r, VIGIL_EINVAL, "send {\"content\"} (and optionally tier, permission)");
        return;
    }
    vigil_code rc = vigil_memory_set(r->rt, ID0, ID1, content, tier, permission, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_memory_delete(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_memory_delete(r->rt, ID0, ID1, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_memory_search(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    const char *q = vg_req_query(r, "q"), *k = vg_req_query(r, "k");
    char *end = NULL;
    long kn = k ? strtol(k, &end, 10) : 0;
    if (!q || !*q || (k && (!*k || *end || kn < 1 || kn > 100))) {
        vg_req_error(r, VIGIL_EINVAL, "search takes q (the query) and optionally k (1 to 100)");
        return;
    }
    vigil_code rc = vigil_memory_search(r->rt, ID0, q, (int)kn, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_memory_pending(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL, buf[64];
    const char *agent;
    if (agent_filter(r, buf, &agent))
        return;
    vigil_code rc = vigil_memory_pending(r->rt, agent, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_memory_resolve(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    BODY_STR(reason, "reason");
    vigil_code rc;
    if (!strcmp(strrchr(r->path, '/') + 1, "approve"))
        rc = vigil_memory_approve(r->rt, ID0, &out, &err);
    else if (!reason || !*reason)
        rc = VG_FAIL(&err, VIGIL_EINVAL, "a rejection needs a \"reason\" for the agent");
    else
        rc = vigil_memory_reject(r->rt, ID0, reason, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* ---- tools, in-doubt operations, the model ------------------------------------------------- */

/* POST /v1/agents/{id}/tools/{name}/call {"arguments"?, "run_key"?}: through the full gate.
 * Without a run key the call gets a fresh one ("http-" and 32 random hex digits), so it never
 * replays another call's result; the answer names it, to repeat the call once approved. */
static void h_tool_call_gate(struct vg_req *r)
{
    vigil_error err = {0};
    char fresh[64], hex[33], *out = NULL, *args = NULL;
    unsigned char raw[16];
    BODY_STR(key, "run_key");
    json_t *a = r->body ? json_object_get(r->body, "arguments") : NULL;
    if (a && !json_is_object(a)) {
        vg_req_error(r, VIGIL_EINVAL, "\"arguments\" must be a JSON object");
        return;
    }
    if (!key) {
        randombytes_buf(raw, sizeof raw);
        sodium_bin2hex(hex, sizeof hex, raw, sizeof raw);
        snprintf(fresh, sizeof fresh, "http-%s", hex);
        key = fresh;
    }
    args = a ? vg_json_dumps(a, JSON_COMPACT) : NULL;
    vigil_code rc = vigil_tool_call(r->rt, ID0, key, ID1, args ? args : "{}", &out, &err);
    free(args);
    json_t *v = out ? json_loads(out, 0, NULL) : NULL;
    vigil_free(out);
    if (!v) {
        vg_req_answer(r, rc, NULL, &err);
        return;
    }
    json_object_set_new(v, "run_key", json_string(key));
    if (rc) { /* the recorded outcome (its own "status"), with the error's code and message */
        json_object_set_new(v, "code", json_string(vigil_code_name(rc)));
        json_object_set_new(v, "message", json_string(err.message));
    }
    vg_req_value(r, rc ? vigil_code_http_status(rc) : 200, v);
}

static void h_indoubt_list(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL, buf[64];
    const char *agent;
    if (agent_filter(r, buf, &agent))
        return;
    vigil_code rc = vigil_indoubt_list(r->rt, agent, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_indoubt_resolve(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    BODY_STR(answer, "answer");
    BODY_STR(by, "by");
    vigil_indoubt_answer a = !answer                          ? 0
                             : !strcmp(answer, "applied")     ? VIGIL_INDOUBT_APPLIED
                             : !strcmp(answer, "not_applied") ? VIGIL_INDOUBT_NOT_APPLIED
                             : !strcmp(answer, "retry")       ? VIGIL_INDOUBT_RETRY
                                                              : 0;
    if (!a) {
        vg_req_error(r, VIGIL_EINVAL, "\"answer\" is applied, not_applied or retry");
        return;
    }
    vigil_code rc = vigil_indoubt_resolve(r->rt, ID0, a, by ? by : "http", &err);
    if (!rc)
        rc = vigil_indoubt_show(r->rt, ID0, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_timer_zone(struct vg_req *r)
{
    vigil_error err = {0};
    BODY_STR(tz, "tz");
    if (!tz) {
        vg_req_error(r, VIGIL_EINVAL, "send {\"tz\": \"Area/City\"}");
        return;
    }
    vigil_code rc = vigil_timer_set_zone(r->rt, ID0, tz, &err);
    vg_req_answer(r, rc, NULL, &err);
}

/* GET /v1/mcp/servers?agent=: the MCP servers declared (the config file's, and the agents'),
 * as `vigil mcp list --json`. Their tools are an agent's tools: GET /v1/agents/{id}/tools
 * lists them and POST .../tools/{SERVER__TOOL}/call calls one through the gate. */
static void h_mcp_servers(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL, agent[64];
    const char *who = vg_req_query(r, "agent");
    if (who && vg_http_agent_id(r, who, agent, sizeof agent))
        return;
    vigil_code rc = vigil_mcp_servers(r->rt, who ? agent : NULL, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

static void h_model(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_model_describe(r->rt, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* ---- the table ---------------------------------------------------------------------------------
 */

const struct vg_route vg_http_routes[] = {
    {"GET", "/v1/health", h_health, 200, 0, "Liveness", NULL, NULL, NULL},
    {"GET", "/v1/version", h_version, 200, 0, "Library version", NULL, NULL, NULL},
    {"GET", "/v1/agents", h_agents_list, 200, 0, "List agents, oldest first", "cursor,limit,all",
     NULL, NULL},
    {"POST", "/v1/agents", h_agents_create, 200, 2, "Create or update agents from a manifest",
     "dry_run", NULL, NULL},
    {"GET", "/v1/agents/{agent}", vg_http_by_id, 200, 0, "Show an agent", NULL, vigil_agent_show,
     NULL},
    {"DELETE", "/v1/agents/{agent}", h_agent_delete, 204, 0, "Delete a destroyed agent", NULL, NULL,
     NULL},
    {"POST", "/v1/agents/{agent}/pause", h_agent_lifecycle, 200, 1, "Pause an agent", NULL, NULL,
     "reason"},
    {"POST", "/v1/agents/{agent}/resume", h_agent_lifecycle, 200, 1, "Resume an agent", NULL, NULL,
     "reason"},
    {"POST", "/v1/agents/{agent}/destroy", h_agent_lifecycle, 200, 1, "Destroy an agent", NULL,
     NULL, "reason"},
    {"GET", "/v1/agents/{agent}/manifest", h_agent_export, 200, 0, "The agent as a YAML manifest",
     NULL, NULL, NULL},
    {"POST", "/v1/agents/{agent}/chat", vg_http_chat_route, 200, 1,
     "One chat turn (Accept: text/event-stream streams it)", NULL, NULL, "text,session"},
    {"POST", "/v1/agents/{agent}/wake", h_wake, 202, 1, "Wake an agent now", NULL, NULL,
     "message,session"},
    {"GET", "/v1/agents/{agent}/budget", vg_http_by_id, 200, 0, "Today's budget usage", NULL,
     vigil_budget_usage, NULL},
    {"GET", "/v1/agents/{agent}/journal", vg_http_journal_export, 200, 0,
     "The agent's run journals as JSON lines (vigil journal export)", NULL, NULL, NULL},
    {"POST", "/v1/agents/{agent}/journal", vg_http_journal_import, 200, 0,
     "Import run journals: an export's JSON lines as the body (vigil journal import)", NULL, NULL,
     NULL},
    {"GET", "/v1/agents/{agent}/tree", vg_http_by_id, 200, 0,
     "Lineage: who spawned the agent, its spawned children and its spawn decisions", NULL,
     vigil_agent_tree, NULL},
    {"GET", "/v1/agents/{agent}/tools", vg_http_by_id, 200, 0, "Tools the agent may call", NULL,
     vigil_tool_list_for_agent, NULL},
    {"GET", "/v1/agents/{agent}/subscriptions", vg_http_by_id, 200, 0, "Subscriptions of an agent",
     NULL, vigil_subscription_list, NULL},
    {"POST", "/v1/agents/{agent}/subscriptions", h_subs_add, 201, 1, "Add a subscription", NULL,
     NULL, NULL},
    {"DELETE", "/v1/subscriptions/{subscription}", h_subs_remove, 204, 0, "Remove a subscription",
     NULL, NULL, NULL},
    {"GET", "/v1/agents/{agent}/timers", vg_http_by_id, 200, 0, "Timers of an agent", NULL,
     vigil_timer_list, NULL},
    {"POST", "/v1/agents/{agent}/timers", h_timers_add, 201, 1, "Add a timer", NULL, NULL,
     "kind,spec,tz"},
    {"DELETE", "/v1/timers/{timer}", h_timers_remove, 204, 0, "Remove a timer", NULL, NULL, NULL},
    {"GET", "/v1/agents/{agent}/report", h_report, 200, 0,
     "An agent's report of a scope, with its confidence, sources and whether it is stale",
     "scope,history", NULL, NULL},
    {"GET", "/v1/agents/{agent}/memory", h_memory_list, 200, 0, "Memory blocks of an agent", "tier",
     NULL, NULL},
    {"GET", "/v1/agents/{agent}/memory/{label}", h_memory_show, 200, 0, "One memory block", NULL,
     NULL, NULL},
    {"POST", "/v1/agents/{agent}/memory/{label}", h_memory_set, 200, 1,
     "Set a memory block as a person: at once, whatever its permission", NULL, NULL,
     "content,tier,permission"},
    {"DELETE", "/v1/agents/{agent}/memory/{label}", h_memory_delete, 200, 0,
     "Delete a memory block as a person (any tier, archival notes too)", NULL, NULL, NULL},
    {"GET", "/v1/agents/{agent}/memory/{label}/history", h_memory_history, 200, 0,
     "A memory block's history", NULL, NULL, NULL},
    {"GET", "/v1/agents/{agent}/memory-search", h_memory_search, 200, 0, "Search an agent's memory",
     "q,k", NULL, NULL},
    {"GET", "/v1/memory/pending", h_memory_pending, 200, 0, "Pending memory changes", "agent", NULL,
     NULL},
    {"POST", "/v1/memory/pending/{change}/approve", h_memory_resolve, 200, 1,
     "Approve a pending memory change", NULL, NULL, "reason"},
    {"POST", "/v1/memory/pending/{change}/reject", h_memory_resolve, 200, 1,
     "Reject a pending memory change (reason required)", NULL, NULL, "reason"},
    {"POST", "/v1/notify", h_notify, 202, 1, "Raise notification tokens", NULL, NULL, "tokens"},
    {"GET", "/v1/wakes", h_wakes, 200, 0, "The wake-run log, newest first", "agent,status,limit",
     NULL, NULL},
    {"GET", "/v1/runs", h_runs_list, 200, 0, "Runs, newest first", "agent,status,cursor,limit",
     NULL, NULL},
    {"GET", "/v1/runs/{run}", vg_http_by_id, 200, 0, "One run", NULL, vigil_run_show, NULL},
    {"GET", "/v1/runs/{run}/messages", h_run_messages, 200, 0, "A run's messages", "cursor,limit",
     NULL, NULL},
    {"GET", "/v1/runs/{run}/tools", h_run_tools, 200, 0, "A run's tool calls", "cursor,limit", NULL,
     NULL},
    {"GET", "/v1/runs/{run}/replay", vg_http_by_id, 200, 0, "Rebuild a run from its journal", NULL,
     vigil_run_replay, NULL},
    /* The run controls (runctl.c), as `vigil runs cancel|rerun|resume`. */
    {"POST", "/v1/runs/{run}/cancel", vg_http_run_cancel, 200, 1,
     "Cancel a run: a queued one never starts, a running one stops at its next safe point", NULL,
     NULL, "by"},
    {"POST", "/v1/runs/{run}/rerun", vg_http_run_again, 202, 1,
     "Run a run again as a new run (optionally another prompt, model or tool allowlist)", NULL,
     NULL, "prompt,model,tools"},
    {"POST", "/v1/runs/{run}/resume", vg_http_run_again, 202, 1,
     "Continue a sub-agent's ended run in its own conversation", NULL, NULL, "prompt"},
    /* Multi-device sync (sync.c), for `vigil sync --with http://...` on another machine. */
    {"POST", "/v1/sync/hello", vg_http_sync_route, 200, 1,
     "Sync: this store's marks, tops and holes per host (joins the store to sync)", NULL, NULL,
     NULL},
    {"POST", "/v1/sync/offer", vg_http_sync_route, 200, 1,
     "Sync: the log entries and records the sender of the hello (the body) lacks", NULL, NULL,
     NULL},
    {"POST", "/v1/sync/apply", vg_http_sync_route, 200, 1,
     "Sync: merge another store's offer (the body) into this one", NULL, NULL, NULL},
    {"POST", "/v1/sync/confirm", vg_http_sync_route, 200, 1,
     "Sync: record the marks another store holds after its apply (its hello, the body)", NULL, NULL,
     NULL},
    /* The task graph (graph.c), as `vigil task ...`; graph before {task, NULL}. */
    {"GET", "/v1/tasks", vg_http_tasks_list, 200, 0, "Tasks, oldest first", "status", NULL, NULL},
    {"GET", "/v1/tasks/graph", vg_http_tasks_graph, 200, 0,
     "The task graph: every task and every blocks edge", NULL, NULL, NULL},
    {"GET", "/v1/tasks/{task}", vg_http_by_id, 200, 0, "One task", NULL, vigil_task_show, NULL},
    {"POST", "/v1/tasks", vg_http_task_add, 201, 1, "Add a task (it may block others)", NULL, NULL,
     "title,kind,tags,blocks"},
    {"POST", "/v1/tasks/dispatch", vg_http_task_dispatch, 200, 1,
     "Start ready tasks as wakes of agents picked by rules", NULL, NULL, "slots"},
    {"POST", "/v1/tasks/{task}/blocks/{blocked}", vg_http_task_block, 200, 0,
     "The edge: the task blocks another (a cycle is refused)", NULL, NULL, NULL},
    {"POST", "/v1/tasks/{task}/cancel", vg_http_task_cancel, 200, 0,
     "Cancel a task and every task it blocks", NULL, NULL, NULL},
    {"GET", "/v1/messages/{message}", vg_http_by_id, 200, 0, "One message in full", NULL,
     vigil_run_message, NULL},
    {"GET", "/v1/tool-calls/{tool_call}", vg_http_by_id, 200, 0, "One tool call in full", NULL,
     vigil_run_tool, NULL},
    {"GET", "/v1/approvals", h_approvals, 200, 0, "Approvals, oldest first", "agent,status", NULL,
     NULL},
    {"POST", "/v1/approvals/{approval}/approve", h_approval_resolve, 200, 1, "Approve a tool call",
     NULL, NULL, "reason,by"},
    {"POST", "/v1/approvals/{approval}/reject", h_approval_resolve, 200, 1, "Reject a tool call",
     NULL, NULL, "reason,by"},
    {"POST", "/v1/agents/{agent}/tools/{tool}/call", h_tool_call_gate, 200, 1,
     "Call a tool as the agent, through the full gate", NULL, NULL, "arguments,run_key"},
    {"GET", "/v1/agents/{agent}/sessions/{session}/messages", h_session_messages, 200, 0,
     "A chat session's last messages, oldest first", "limit", NULL, NULL},
    {"GET", "/v1/agents/{agent}/tool-calls", h_hand_calls, 200, 0,
     "The tool calls made outside runs (by hand), newest first", "cursor,limit", NULL, NULL},
    {"GET", "/v1/indoubt", h_indoubt_list, 200, 0, "Operations a crash left in doubt", "agent",
     NULL, NULL},
    {"GET", "/v1/indoubt/{operation}", vg_http_by_id, 200, 0, "One in-doubt operation", NULL,
     vigil_indoubt_show, NULL},
    {"POST", "/v1/indoubt/{operation}/resolve", h_indoubt_resolve, 200, 1,
     "Answer an in-doubt operation (applied, not_applied, retry)", NULL, NULL, "answer,by"},
    {"POST", "/v1/timers/{timer}/zone", h_timer_zone, 200, 1, "Change a timer's zone", NULL, NULL,
     "tz"},
    {"GET", "/v1/model", h_model, 200, 0, "The model provider in use", NULL, NULL, NULL},
    {"GET", "/v1/mcp/servers", h_mcp_servers, 200, 0,
     "The MCP servers declared (config file and agents)", "agent", NULL, NULL},
    /* The code sandbox (sandbox.c), as `vigil sandbox check|run`. */
    {"GET", "/v1/sandbox", vg_http_sandbox_check, 200, 0,
     "What confinement this machine offers the code sandbox", NULL, NULL, NULL},
    {"POST", "/v1/sandbox/run", vg_http_sandbox_run, 200, 1,
     "Run one program as execute_code does (optionally through an agent's gate)", NULL, NULL,
     "code,language,agent"},
    {"GET", "/v1/status", h_status, 200, 0,
     "The store, its daemons, the wake queue, what waits for a person (vigil status)", NULL, NULL,
     NULL},
    {"GET", "/v1/kill", h_kill_status, 200, 0, "Kill switches", NULL, NULL, NULL},
    {"POST", "/v1/kill", h_kill_set, 200, 1, "Set a kill switch", NULL, NULL,
     "on,agent,tool_class,reason"},
    {"POST", "/v1/prune", h_prune, 200, 1, "Prune what is past its retention (vigil prune)", NULL,
     NULL, "agent,dry_run,vacuum,budget_bytes"},
    {"GET", "/v1/events", vg_http_events_route, 200, 0, "Live events (server-sent events)",
     "agent,kind", NULL, NULL},
    /* The task domain's person routes (todo.c): not /v1/tasks, the orchestrator's graph. */
    {"GET", "/v1/todo/categories/{category}/tasks", vg_http_todo_list, 200, 0,
     "A category's to-do tasks (the task domain; open unless status= says done, cancelled or "
     "all)",
     "status", NULL, NULL},
    {"POST", "/v1/todo/categories/{category}/tasks", vg_http_todo_add, 201, 1,
     "Add a to-do task (vigil todo add)", NULL, NULL, "title,estimate_minutes,due_date,priority"},
    {"GET", "/v1/todo/tasks/{task}", vg_http_todo_show, 200, 0,
     "A to-do task in full, with its agent (vigil todo show)", NULL, NULL, NULL},
    {"POST", "/v1/todo/tasks/{task}", vg_http_todo_edit, 200, 1,
     "Edit a to-do task's fields (vigil todo edit)", NULL, NULL,
     "title,estimate_minutes,due_date,priority"},
    {"DELETE", "/v1/todo/tasks/{task}", vg_http_todo_delete_restore, 200, 0,
     "Delete a to-do task: kept, out of every read, its agent dormant", NULL, NULL, NULL},
    {"POST", "/v1/todo/tasks/{task}/restore", vg_http_todo_delete_restore, 200, 0,
     "Restore a deleted to-do task (its agent active again)", NULL, NULL, NULL},
    {"POST", "/v1/todo/tasks/{task}/items", vg_http_todo_items_add, 201, 1,
     "Add checklist items to a to-do task (vigil todo item add)", NULL, NULL, "items"},
    {"POST", "/v1/todo/tasks/{task}/items/{item}", vg_http_todo_item_edit, 200, 1,
     "Edit a checklist item's text or done mark", NULL, NULL, "text,done"},
    {"POST", "/v1/todo/tasks/{task}/conclude", vg_http_todo_conclude, 200, 1,
     "Conclude a to-do task: open items go to a follow-up; its agent retires", NULL, NULL,
     "follow_up_title"},
    {"GET", "/metrics", vg_http_metrics_route, 200, 0, "Prometheus metrics", NULL, NULL, NULL},
    {"GET", "/openapi.json", vg_http_openapi_route, 200, 0, "This document", NULL, NULL, NULL},
    /* MCP server mode over Streamable HTTP (mcp.c); GET is answered 405 with this Allow. */
    {"POST", "/mcp", vg_http_mcp_route, 200, 0, "MCP (Streamable HTTP)", NULL, NULL, NULL},
    {"DELETE", "/mcp", vg_http_mcp_route, 200, 0, "End an MCP session", NULL, NULL, NULL},
};
const size_t vg_http_n_routes = VG_ARRAY_LEN(vg_http_routes);

int vg_http_route_waits(const struct vg_route *route)
{
    return route->fn == vg_http_chat_route || route->fn == h_tool_call_gate ||
           route->fn == vg_http_sandbox_run || route->fn == vg_http_sync_route ||
           (route->fn == vg_http_mcp_route && !strcmp(route->method, "POST"));
}

/* Does path match pattern, segment by segment? {name} takes one segment of id characters. */
/* Whether path fits pattern, its {...} parts copied into params. Only the first byte of each
 * param is cleared first: a param is read up to its NUL, so the rest of a slot need not be
 * zeroed for every route tried (768 bytes a route, most of what finding a late route cost:
 * docs/internals/PERF.md, session 36). */
static int match(const char *pattern, const char *path, char params[3][256])
{
    int np = 0;
    params[0][0] = params[1][0] = params[2][0] = '\0';
    while (*pattern && *path) {
        if (pattern[0] == '{') {
            size_t n = strcspn(path, "/");
            if (n == 0 || n >= 256 || np >= 3)
                return 0;
            for (size_t i = 0; i < n; i++) {
                char c = path[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == ':'))
                    return 0;
            }
            memcpy(params[np], path, n);
            params[np++][n] = '\0';
            pattern += strcspn(pattern, "}") + 1;
            path += n;
        } else if (*pattern++ != *path++) {
            return 0;
        }
    }
    return !*pattern && !*path;
}

int vg_http_route_find(const char *method, const char *path, const struct vg_route **out,
                       char params[3][256])
{
    int path_known = 0;
    for (size_t i = 0; i < vg_http_n_routes; i++) {
        if (!match(vg_http_routes[i].pattern, path, params))
            continue;
        path_known = 1;
        if (!strcmp(vg_http_routes[i].method, method)) {
            *out = &vg_http_routes[i];
            return 0;
        }
    }
    return path_known ? 405 : 404;
}
