/*
 * tool_provider.c: the execute_code tool (docs/sandbox.md). One call runs one program in the
 * code runtime, in the agent's own working directory (<sandbox.root>/<agent id>, kept between
 * its executions and never shared with another agent), with the limits of the config's
 * sandbox.limits overlaid by the agent's config.sandbox.limits. The program's vigil.call goes
 * back through the same executor as the agent's own calls — resolution, gates, operation ids
 * and journal — with a run key derived from this call's operation id and the call's number,
 * so a replayed execution makes the same operation ids. The result names the layers applied,
 * so the toolResult message in the agent's journal records them.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "os/fs.h"
#include "sandbox/sandbox.h"
#include "sandbox/tool_provider.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

struct code_provider {
    struct vg_tool_provider base; /* must stay first */
    struct vg_tool_executor *x;   /* borrowed: the executor that owns this provider */
    json_t *cfg;                  /* owned: the config's sandbox section (or {}) */
    char root[4096];
    unsigned required;
    uid_t uid;
    char risk[16];
    struct vg_code_runtime *deno; /* the TypeScript adapter (sandbox.deno, else VIGIL_DENO, PATH) */
};

static const char contract_fmt[] =
    "{\"name\":\"execute_code\",\"version\":\"1.0.0\","
    "\"description\":\"Run a Lua 5.4 program in a confined sandbox and get its return value "
    "and printed output. The program has no files, network or processes of its own; the "
    "global table vigil gives it: vigil.call(tool, args) to call a tool you may use, "
    "vigil.read(path), vigil.write(path, text), vigil.append(path, text), vigil.list(dir), "
    "vigil.remove(path) for files in your working directory (kept between executions), "
    "vigil.fetch(url) for a URL on the operator's allowlist ({status, url, body}), "
    "vigil.json_encode(value), vigil.json_decode(text) and vigil.null. A failed vigil "
    "function raises an error table {code, message, op} that pcall can catch. Limits: code "
    "size, wall time, CPU, memory, output and tool calls; each violation is an error with a "
    "code (timeout, cpu_limit, memory_limit, tool_limit, code_too_large, syntax_error, "
    "runtime_error, bridge_error, sandbox_violation). With language typescript (or "
    "javascript) the program is TypeScript (or plain JavaScript) run by Deno (when the operator "
    "installed it): the same vigil "
    "functions, synchronous, throwing a VigilError {code, message, op}; console.log is the "
    "output and a top-level return the result.\","
    "\"input_schema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"code\"],\"properties\":{"
    "\"code\":{\"type\":\"string\",\"minLength\":1,\"description\":\"the program; its "
    "return value is the result\"},"
    "\"language\":{\"type\":\"string\",\"enum\":[\"lua\",\"typescript\",\"javascript\"],"
    "\"description\":"
    "\"the program's language (default: the agent's or the config's sandbox.language, else "
    "lua)\"}}},"
    "\"capabilities\":[\"code_execution\"],\"risk\":\"%s\","
    "\"allowed_wake_reasons\":[\"subscription\",\"timer\",\"user_initiated\","
    "\"recovery_catchup\",\"manual\"],"
    "\"scope\":{\"rule\":\"agent\",\"arguments\":[]},\"idempotency\":\"non_idempotent\","
    "\"mutating\":true,\"tool_class\":\"code\","
    "\"side_effects\":{\"entity_types\":[],\"tokens\":[]},"
    "\"requires_approval\":%s,\"preview\":false}";

static vigil_code c_list(struct vg_tool_provider *p, json_t **out, vigil_error *err)
{
    struct code_provider *c = (struct code_provider *)p;
    char text[sizeof contract_fmt + 32];
    /* Written out, not left to the contract's default, so that the risk the operator set
     * decides: high means a person approves every program (sandbox.md). */
    const char *approval = strcmp(c->risk, "high") ? "false" : "true";
    snprintf(text, sizeof text, contract_fmt, c->risk, approval);
    json_t *one = json_loads(text, 0, NULL);
    if (!one || !(*out = json_pack("[o]", one)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing execute_code");
    return VIGIL_OK;
}

/* An agent id names a directory only when it is a plain name. */
static int plain_name(const char *s)
{
    if (!*s || *s == '.' || strlen(s) > 200)
        return 0;
    for (; *s; s++)
        if (!(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') || ('0' <= *s && *s <= '9') ||
              *s == '-' || *s == '_' || *s == '.' || *s == ':'))
            return 0;
    return 1;
}

/* ---- the bridge's tool calls -------------------------------------------------------------- */

struct host_ctx {
    struct code_provider *c;
    const struct vg_tool_request *q;
    int n;
};

static int host_call_tool(void *user, const char *tool, json_t *args, json_t **result,
                          char code[32], char msg[256])
{
    struct host_ctx *h = user;
    if (!strcmp(tool, "execute_code")) {
        snprintf(code, 32, "not_allowed");
        snprintf(msg, 256, "execute_code cannot be called from inside an execution");
        return -1;
    }
    char run_key[512];
    snprintf(run_key, sizeof run_key, "%s/code/%.16s/%d", h->q->run_key ? h->q->run_key : "",
             h->q->operation_id ? h->q->operation_id : "", h->n++);
    /* In a run, the call is one of the run's journal too, marked with this key (trial L4). */
    struct vg_tool_call_ctx ctx = {.agent_id = h->q->agent_id,
                                   .run_key = run_key,
                                   .thread_id = h->q->thread_id,
                                   .run_id = h->q->run_id,
                                   .wake_reason = h->q->wake_reason,
                                   .journal_run = h->q->journal_run,
                                   .journal_via = h->q->journal_run ? run_key : NULL};
    struct vg_tool_outcome o;
    memset(&o, 0, sizeof o);
    vigil_error err = {0};
    if (vg_tool_executor_call(h->c->x, &ctx, tool, args, &o, &err)) {
        snprintf(code, 32, "tool_failed");
        snprintf(msg, 256, "%s", err.message);
        vg_tool_outcome_release(&o);
        return -1;
    }
    int rc = 0;
    if (o.code != VG_TOOL_OK) {
        snprintf(code, 32, "%s", o.error_code);
        snprintf(msg, 256, "%s", o.error_message);
        rc = -1;
    } else {
        *result = o.result ? json_incref(o.result) : json_null();
    }
    vg_tool_outcome_release(&o);
    return rc;
}

/* ---- one call ----------------------------------------------------------------------------- */

/* The agent's own config.sandbox.limits, over the config's, and its config.sandbox.language
 * (into lang; left as it is when the agent names none). */
static vigil_code agent_limits(const struct vg_tool_request *q, struct vg_code_limits *l,
                               char lang[16], vigil_error *err)
{
    json_t *agent = NULL;
    vigil_code rc = vg_agent_get(q->env, q->agent_id, &agent, NULL, err);
    json_t *sbx = json_object_get(json_object_get(agent, "config"), "sandbox");
    if (!rc)
        rc = vg_code_limits_from_json(json_object_get(sbx, "limits"), l, err);
    const char *al = json_string_value(json_object_get(sbx, "language"));
    if (!rc && al)
        snprintf(lang, 16, "%s", al);
    json_decref(agent);
    return rc;
}

const char *vg_code_language_adapter(const char *name)
{
    if (name && !strcmp(name, "lua"))
        return "lua";
    if (name && (!strcmp(name, "typescript") || !strcmp(name, "javascript")))
        return "typescript";
    return NULL;
}

/* The adapter for a language: lua, or Deno for typescript and javascript. */
static struct vg_code_runtime *runtime_for(struct code_provider *c, const char *lang)
{
    return !strcmp(vg_code_language_adapter(lang), "typescript") ? c->deno : vg_code_runtime_lua();
}

static int known_language(const char *lang)
{
    return vg_code_language_adapter(lang) != NULL;
}

vigil_code vg_sandbox_provider_settings(struct vg_tool_provider *p, const char *agent, char *wd,
                                        size_t n, struct vg_code_request *q, vigil_error *err)
{
    struct code_provider *c = (struct code_provider *)p;
    if (!plain_name(agent))
        return VG_FAIL(err, VIGIL_EINVAL, "agent id \"%s\" cannot name a directory", agent);
    int w = snprintf(wd, n, "%s/%s", c->root, agent);
    if (w < 0 || (size_t)w >= n)
        return VG_FAIL(err, VIGIL_ETOOBIG, "the sandbox's working directory path is too long");
    q->workdir = wd;
    q->required = c->required;
    q->sandbox_uid = c->uid;
    q->fetch_policy = json_object_get(c->cfg, "fetch");
    vg_code_limits_default(&q->lim);
    return vg_code_limits_from_json(json_object_get(c->cfg, "limits"), &q->lim, err);
}

static vigil_code c_call(struct vg_tool_provider *p, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err)
{
    struct code_provider *c = (struct code_provider *)p;
    const char *code = json_string_value(json_object_get(q->args, "code"));
    char wd[4400];
    struct vg_code_request req = {.code = code,
                                  .code_len = strlen(code),
                                  .halt = q->halt,
                                  .cancelled = q->cancelled,
                                  .cancelled_user = q->cancelled_user};
    vigil_error e2 = {0};
    if (vg_sandbox_provider_settings(p, q->agent_id, wd, sizeof wd, &req, &e2)) {
        vg_tool_response_fail(r, VG_TOOL_FAILED, "%s", e2.message);
        return VIGIL_OK;
    }
    char lang[16];
    const char *cl = json_string_value(json_object_get(c->cfg, "language"));
    snprintf(lang, sizeof lang, "%s", cl ? cl : "lua");
    vigil_code rc = agent_limits(q, &req.lim, lang, err);
    if (rc)
        return rc;
    const char *asked = json_string_value(json_object_get(q->args, "language"));
    if (asked)
        snprintf(lang, sizeof lang, "%s", asked);
    if (!known_language(lang)) {
        vg_tool_response_fail(r, VG_TOOL_FAILED, "language \"%s\": use " VG_CODE_LANGUAGES, lang);
        return VIGIL_OK;
    }
    if (q->preview_only) {
        r->result =
            json_pack("{s:s, s:I}", "would_run", lang, "code_bytes", (json_int_t)req.code_len);
        return r->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    }
    if ((rc = vg_fs_mkdir_p(wd, err)))
        return rc;
    chmod(wd, 0700);
    struct host_ctx h = {c, q, 0};
    struct vg_code_host host = {host_call_tool, &h};
    req.host = &host;
    struct vg_code_result res;
    if ((rc = vg_code_run(runtime_for(c, lang), &req, &res, err)))
        return rc;
    json_t *out = vg_code_result_json(&res);
    if (!out) {
        vg_code_result_release(&res);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering execute_code");
    }
    if (res.ok) {
        r->result = out;
    } else { /* the error's code and message, and the whole answer (output, layers) beside */
        /* Killed because vigil stopped: cut short as a command tool is (tool/command.c), so
         * the executor's rules for a timeout apply (a program that may have acted is in doubt). */
        int halted = !strcmp(res.error_code, "interrupted");
        /* Killed because a person cancelled the run: its effects are what it wrote in its own
         * folder and the bridge calls it made, each recorded as its own operation, so the call
         * is canceled, not in doubt (trial L6). */
        int canceled = !strcmp(res.error_code, "canceled");
        vg_tool_response_fail(r,
                              halted     ? VG_TOOL_TIMEOUT
                              : canceled ? VG_TOOL_CANCELED
                                         : VG_TOOL_FAILED,
                              "%s: %s", res.error_code, res.error_message);
        r->result = out;
    }
    vg_code_result_release(&res);
    return VIGIL_OK;
}

static void c_destroy(struct vg_tool_provider *p)
{
    struct code_provider *c = (struct code_provider *)p;
    json_decref(c->cfg);
    if (c->deno)
        c->deno->methods->destroy(c->deno);
    vg_free(c);
}

static const struct vg_tool_provider_methods code_methods = {.version = 1,
                                                             .name = "sandbox",
                                                             .caps = 0,
                                                             .list = c_list,
                                                             .call = c_call,
                                                             .destroy = c_destroy};

static vigil_code default_root(char *out, size_t n, vigil_error *err)
{
    const char *v;
    int w;
    if ((v = vg_os_getenv("XDG_STATE_HOME")) && *v)
        w = snprintf(out, n, "%s/vigil/sandbox", v);
    else if ((v = vg_os_getenv("HOME")) && *v)
        w = snprintf(out, n, "%s/.local/state/vigil/sandbox", v);
    else
        w = snprintf(out, n, "/tmp/vigil-sandbox-%u", (unsigned)getuid());
    if (w < 0 || (size_t)w >= n)
        return VG_FAIL(err, VIGIL_ETOOBIG, "the sandbox root path is too long");
    return VIGIL_OK;
}

vigil_code vg_sandbox_required_from_json(const json_t *cfg, unsigned *out, vigil_error *err)
{
    size_t i;
    json_t *v;
    *out = VG_SBX_REQUIRED_DEFAULT;
    json_array_foreach (json_object_get(cfg, "accept_missing"), i, v) {
        unsigned bit = vg_sandbox_layer_parse(json_string_value(v));
        if (!bit)
            return VG_FAIL(err, VIGIL_EINVAL,
                           "sandbox.accept_missing: unknown layer \"%s\" (known: userns, pidns, "
                           "mountns, netns, ipcns, seccomp, landlock, rlimits, no_new_privs, "
                           "cgroup, descriptors, pdeathsig)",
                           json_string_value(v) ? json_string_value(v) : "?");
        *out &= ~bit;
    }
    return VIGIL_OK;
}

/* The config's agent.max_code_size, code_timeout and max_tool_calls_per_exec (the seed's
 * names) under sandbox.limits. */
static json_t *config_limits(const json_t *cfg, const json_t *agent_cfg)
{
    json_t *l = json_object();
    static const char *const from[][2] = {{"max_code_size", "code_bytes"},
                                          {"code_timeout", "wall_ms"},
                                          {"max_tool_calls_per_exec", "tool_calls"}};
    for (size_t i = 0; l && i < VG_ARRAY_LEN(from); i++) {
        json_t *v = json_object_get(agent_cfg, from[i][0]);
        if (v)
            json_object_set(l, from[i][1], v);
    }
    if (l && json_is_object(json_object_get(cfg, "limits")))
        json_object_update(l, json_object_get(cfg, "limits"));
    return l;
}

vigil_code vg_sandbox_tool_provider(struct vg_tool_executor *x, const json_t *cfg,
                                    const json_t *agent_cfg, struct vg_tool_provider **out,
                                    vigil_error *err)
{
    struct code_provider *c = vg_calloc(1, sizeof *c);
    if (!c)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory making execute_code");
    c->base.methods = &code_methods;
    c->x = x;
    c->cfg = json_is_object(cfg) ? json_deep_copy(cfg) : json_object();
    if (c->cfg)
        json_object_set_new(c->cfg, "limits", config_limits(cfg, agent_cfg));
    const char *root = json_string_value(json_object_get(c->cfg, "root"));
    const char *risk = json_string_value(json_object_get(c->cfg, "risk"));
    json_t *uid = json_object_get(c->cfg, "uid");
    struct vg_code_limits l;
    vg_code_limits_default(&l);
    vigil_code rc = c->cfg ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc && root)
        snprintf(c->root, sizeof c->root, "%s", root);
    else if (!rc)
        rc = default_root(c->root, sizeof c->root, err);
    if (!rc && risk && strcmp(risk, "low") && strcmp(risk, "medium") && strcmp(risk, "high"))
        rc = VG_FAIL(err, VIGIL_EINVAL, "sandbox.risk must be low, medium or high");
    snprintf(c->risk, sizeof c->risk, "%s", risk ? risk : "medium");
    c->uid = json_is_integer(uid) ? (uid_t)json_integer_value(uid) : 65534;
    const char *lang = json_string_value(json_object_get(c->cfg, "language"));
    if (!rc && lang && !known_language(lang))
        rc = VG_FAIL(err, VIGIL_EINVAL, "sandbox.language must be " VG_CODE_LANGUAGES);
    if (!rc &&
        !(c->deno = vg_code_runtime_deno(json_string_value(json_object_get(c->cfg, "deno")))))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory making execute_code");
    if (!rc)
        rc = vg_sandbox_required_from_json(c->cfg, &c->required, err);
    if (!rc)
        rc = vg_code_limits_from_json(json_object_get(c->cfg, "limits"), &l, err);
    if (rc) {
        c_destroy(&c->base);
        return rc;
    }
    *out = &c->base;
    return VIGIL_OK;
}
