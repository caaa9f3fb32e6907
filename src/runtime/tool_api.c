/*
 * tool_api.c: the tools section of include/vigil.h, and the composition of the runtime's tools:
 * its executor is created on first use with the built-in tools, the memory tools (over the
 * configured embedder), and the declared command tools and MCP servers (tool_sources.c, kept
 * in step with agents' manifests); registrations add providers to it. Public functions check their
 * arguments and turn JSON into owned text.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "config/config.h"
#include "manifest/manifest.h"
#include "runtime/runtime_int.h"
#include "runtime/wake_runner.h"
#include "wake/wake.h"
#include "tool/tool.h"
#include "memory/tool_provider.h"
#include "sandbox/tool_provider.h"
#include "orch/orch.h"
#include "orch/task.h"

/* The runtime's own tools into x: the built-in, orch and memory tools and execute_code.
 * offline: the memory tools over the offline embedder (for their names only). */
static vigil_code add_own_tools(vigil_runtime *rt, struct vg_tool_executor *x, int offline,
                                vigil_error *err)
{
    vigil_code rc = vg_tool_executor_add(x, vg_tool_builtin_provider(), err);
    if (!rc) /* list_available_agents, spawn_agents (src/orch) */
        rc = vg_tool_executor_add(x, vg_orch_tool_provider(), err);
    struct vg_tool_provider *mem = NULL;
    struct vg_embedder *emb = NULL;
    if (!rc && offline && !(rc = vg_memory_tool_provider(&rt->env, NULL, &mem, err)))
        rc = vg_tool_executor_add(x, mem, err);
    else if (!rc && !offline && !(rc = vg_runtime_embedder(rt, &emb, err)) &&
             !(rc = vg_memory_tool_provider_own(&rt->env, emb, &mem, err)))
        rc = vg_tool_executor_add(x, mem, err);
    if (!rc && !rt->config)
        rc = vg_config_load(rt->config_path, &rt->config, err);
    struct vg_tool_provider *code = NULL; /* execute_code (src/sandbox) */
    json_t *sandbox = rc ? NULL : vg_runtime_sandbox_config(rt);
    if (!rc && vg_config_get_bool(rt->config, "sandbox.enabled", 1) &&
        !(rc =
              vg_sandbox_tool_provider(x, sandbox, vg_config_get(rt->config, "agent"), &code, err)))
        rc = vg_tool_executor_add(x, code, err);
    json_decref(sandbox);
    return rc;
}

vigil_code vg_runtime_own_tools(vigil_runtime *rt, struct vg_tool_executor **out, vigil_error *err)
{
    vigil_code rc = vg_tool_executor_new(&rt->env, out, err);
    if (!rc && (rc = add_own_tools(rt, *out, 1, err))) {
        vg_tool_executor_free(*out);
        *out = NULL;
    }
    return rc;
}

vigil_code vg_runtime_tools(vigil_runtime *rt, struct vg_tool_executor **out, vigil_error *err)
{
    if (!rt)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");
    if (!rt->tools) {
        struct vg_tool_executor *x = NULL;
        vigil_code rc = vg_tool_executor_new(&rt->env, &x, err);
        if (!rc)
            rc = add_own_tools(rt, x, 0, err);
        if (!rc) /* command tools and MCP servers of the config file and agents' manifests */
            rc = vg_runtime_tool_sources_sync(rt, x, err);
        if (rc) {
            /* The sources' sets only borrow the providers x owns: forget them with it, or the
             * next build would read providers freed here. */
            vg_tool_executor_free(x);
            vg_runtime_tool_sources_free(rt);
            return rc;
        }
        rt->tools = x;
    }
    *out = rt->tools;
    return VIGIL_OK;
}

/* The contract of a public tool definition as a JSON object (owned). */
static vigil_code def_contract(const vigil_tool_def *def, json_t **out, vigil_error *err)
{
    json_error_t je;
    json_t *c = NULL, *schema = NULL;
    if (!def || !def->name || !def->description)
        return VG_FAIL(err, VIGIL_EINVAL, "a tool definition needs a name and a description");
    if (def->contract_json) {
        c = json_loads(def->contract_json, 0, &je);
        if (!json_is_object(c)) {
            json_decref(c);
            return VG_FAIL(err, VIGIL_EINVAL, "tool \"%s\": contract_json is not a JSON object%s%s",
                           def->name, c ? "" : ": ", c ? "" : je.text);
        }
    } else if (!(c = json_object())) {
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a tool definition");
    }
    if (def->input_schema_json) {
        schema = json_loads(def->input_schema_json, JSON_DECODE_ANY, &je);
        if (!schema) {
            json_decref(c);
            return VG_FAIL(err, VIGIL_EINVAL, "tool \"%s\": input schema is not JSON: %s",
                           def->name, je.text);
        }
        json_object_set_new(c, "input_schema", schema);
    }
    json_object_set_new(c, "name", json_string(def->name));
    json_object_set_new(c, "description", json_string(def->description));
    *out = c;
    return VIGIL_OK;
}

vigil_code vigil_tool_register(vigil_runtime *rt, const vigil_tool_def *def, vigil_tool_fn fn,
                               void *user, vigil_error *err)
{
    struct vg_tool_executor *x = NULL;
    struct vg_tool_provider *p = NULL;
    json_t *c = NULL;
    vigil_code rc = vg_runtime_tools(rt, &x, err);
    if (!rc)
        rc = def_contract(def, &c, err);
    if (!rc)
        rc = vg_tool_callback_provider(c, fn, def->lookup, user, &p, err);
    if (!rc)
        rc = vg_tool_executor_add(x, p, err);
    json_decref(c);
    return rc;
}

vigil_code vigil_tool_register_command(vigil_runtime *rt, const vigil_tool_def *def,
                                       const char *const *argv, int timeout_ms, size_t max_output,
                                       vigil_error *err)
{
    struct vg_tool_executor *x = NULL;
    struct vg_tool_provider *p = NULL;
    json_t *c = NULL;
    struct vg_tool_command_options o = {
        .argv = argv, .timeout_ms = timeout_ms, .max_output = max_output, .clock = NULL};
    vigil_code rc = vg_runtime_tools(rt, &x, err);
    if (!rc)
        rc = def_contract(def, &c, err);
    if (!rc)
        rc = vg_tool_command_provider(c, &o, &p, err);
    if (!rc)
        rc = vg_tool_executor_add(x, p, err);
    json_decref(c);
    return rc;
}

void vigil_tool_set_scope_resolver(vigil_runtime *rt, vigil_scope_resolver_fn fn, void *user)
{
    struct vg_tool_executor *x = NULL;
    if (vg_runtime_tools(rt, &x, NULL) == VIGIL_OK)
        vg_tool_executor_set_scope_resolver(x, fn, user);
}

vigil_code vigil_tool_call(vigil_runtime *rt, const char *agent_id, const char *run_key,
                           const char *tool_name, const char *args_json, char **out_result_json,
                           vigil_error *err)
{
    struct vg_tool_executor *x = NULL;
    struct vg_tool_outcome o = {0};
    json_t *args = NULL;
    json_error_t je;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = vg_runtime_tools(rt, &x, err)))
        return rc;
    /* A tool this runtime does not know may be the agent's, declared since it was built. Only
     * then: reading the agent again on every call would cost each call a store read. */
    if (tool_name && !vg_tool_executor_find(x, tool_name) &&
        (rc = vg_runtime_tool_sources_refresh(rt, agent_id, err)))
        return rc;
    if (!out_result_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no place for the tool result");
    if (args_json && !(args = json_loads(args_json, JSON_DECODE_ANY, &je)))
        return VG_FAIL(err, VIGIL_EPARSE, "tool arguments are not JSON: %s", je.text);
    struct vg_tool_call_ctx ctx = {.agent_id = agent_id, .run_key = run_key, .args_fresh = 1};
    rc = vg_tool_executor_call(x, &ctx, tool_name, args, &o, err);
    json_decref(args);
    if (rc)
        return rc;
    /* The result's text as the executor recorded it: a large result is not encoded again. */
    char *text = vg_tool_outcome_text(&o);
    enum vg_tool_code code = o.code;
    char msg[320];
    snprintf(msg, sizeof msg, "%s: %s", o.error_code, o.error_message);
    vg_tool_outcome_release(&o);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a tool result");
    *out_result_json = text;
    if (code)
        return VG_FAIL(err, vg_tool_code_vigil(code), "%s", msg);
    return VIGIL_OK;
}

vigil_code vigil_tool_list_for_agent(vigil_runtime *rt, const char *agent_id, char **out_json,
                                     vigil_error *err)
{
    struct vg_tool_executor *x = NULL;
    json_t *v = NULL;
    vigil_code rc = agent_id ? vg_runtime_agent_check(rt, agent_id, err) : VIGIL_OK;
    if (!rc)
        rc = vg_runtime_tools(rt, &x, err);
    if (!rc)
        rc = vg_runtime_tool_sources_refresh(rt, agent_id, err);
    if (!rc)
        rc = vg_tool_executor_describe(x, agent_id, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_approval_list(vigil_runtime *rt, const char *agent_id, const char *status,
                               char **out_json, vigil_error *err)
{
    json_t *v = NULL;
    if (!rt || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    vigil_code rc = agent_id ? vg_runtime_agent_check(rt, agent_id, err) : VIGIL_OK;
    if (!rc)
        rc = vg_approval_list(&rt->env, agent_id, status, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

/* A tool call's approval that a run asked for, just answered (not a high-risk child's, not a
 * call made by hand, not a repeat answer), wakes its agent: the run that picks the answer up
 * (and runs an approved operation) starts now, not at whatever wakes the agent next (trial
 * F13). The wake is a manual one, merged into a wake already queued; its run key goes in the
 * answer as "wake_run_key" ("" when the agent could not take it: dormant, kill switch). */
static vigil_code approval_wake(vigil_runtime *rt, json_t *v, vigil_error *err)
{
    const json_t *req = json_object_get(v, "request");
    const char *run_id = json_string_value(json_object_get(req, "run_id"));
    const char *agent = json_string_value(json_object_get(v, "agent_id"));
    if (json_is_true(json_object_get(v, "already")) || json_object_get(req, "spawn_child") ||
        !run_id || !*run_id || !agent)
        return VIGIL_OK;
    struct vg_wake w;
    char key[65] = "";
    enum vg_enqueue_result res;
    vigil_code rc = vg_runtime_wake_init(&w, &rt->env, NULL, err);
    if (rc)
        return rc;
    json_t *meta = json_pack("{s:O?}", "approval", json_object_get(v, "id"));
    struct vg_wake_req wr = {.reason = VG_REASON_MANUAL, .agent_id = agent, .meta = meta};
    rc = meta ? vg_wake_enqueue(&w, &wr, key, &res, err)
              : VG_FAIL(err, VIGIL_ENOMEM, "out of memory waking an agent");
    if (!rc &&
        json_object_set_new(v, "wake_run_key", json_string(res == VG_ENQ_SKIPPED ? "" : key)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory waking an agent");
    json_decref(meta);
    vg_wake_release(&w);
    return rc;
}

vigil_code vigil_approval_resolve(vigil_runtime *rt, const char *approval_id, int approve,
                                  const char *by, const char *reason, char **out_json,
                                  vigil_error *err)
{
    json_t *v = NULL;
    if (!rt)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");
    vigil_code rc = vg_store_begin(rt->env.store, err);
    if (rc)
        return rc;
    rc = vg_approval_resolve(&rt->env, approval_id, approve, by, reason, &v, err);
    /* A high-risk child's approval starts or denies the child in the same transaction; an
     * expired one (ESTATE, its expiry written) denies it, and the caller still hears ESTATE. */
    vigil_code resolved = rc;
    if (!rc || rc == VIGIL_ESTATE) {
        vigil_error e2 = {0};
        rc = vg_orch_approval_settle(&rt->env, NULL, approval_id, resolved ? &e2 : err);
        if (rc && resolved && err)
            *err = e2;
    }
    if (!rc && !resolved)
        rc = approval_wake(rt, v, err);
    rc = vg_store_end(rt->env.store, rc, err);
    if (!rc)
        rc = resolved;
    if (rc) {
        json_decref(v);
        return rc;
    }
    if (!out_json) {
        json_decref(v);
        return VIGIL_OK;
    }
    return vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_indoubt_list(vigil_runtime *rt, const char *agent_id, char **out_json,
                              vigil_error *err)
{
    json_t *v = NULL;
    if (!rt || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    vigil_code rc = VIGIL_OK;
    if (agent_id && (rc = vg_agent_get(&rt->env, agent_id, &v, NULL, err)) == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no agent \"%.60s\"", agent_id);
    json_decref(v);
    if (!rc)
        rc = vg_tool_in_doubt_list(&rt->env, agent_id, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_indoubt_show(vigil_runtime *rt, const char *operation_id, char **out_json,
                              vigil_error *err)
{
    json_t *v = NULL;
    if (!rt || !operation_id || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime, operation id or output given");
    vigil_code rc = vg_tool_in_doubt_show(&rt->env, operation_id, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_indoubt_resolve(vigil_runtime *rt, const char *operation_id,
                                 vigil_indoubt_answer answer, const char *by, vigil_error *err)
{
    int already = 0;
    json_t *item = NULL;
    if (!rt || !operation_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or operation id given");
    if (answer < VIGIL_INDOUBT_APPLIED || answer > VIGIL_INDOUBT_RETRY)
        return VG_FAIL(err, VIGIL_EINVAL, "an in-doubt answer is applied, not applied or retry");
    /* The answer and what it settles of a task held for it (trial L3): one transaction. */
    vigil_code rc = vg_store_begin(rt->env.store, err);
    if (!rc)
        rc = vg_tool_in_doubt_answer(&rt->env, operation_id, (enum vg_in_doubt_answer)answer, by,
                                     &already, err);
    if (!rc && !already && !(rc = vg_tool_in_doubt_show(&rt->env, operation_id, &item, err)))
        rc = vg_task_doubt_settled(&rt->env, json_string_value(json_object_get(item, "agent_id")),
                                   json_string_value(json_object_get(item, "run_key")), err);
    json_decref(item);
    item = NULL;
    rc = vg_store_end(rt->env.store, rc, err);
    if (rc || !already)
        return rc;
    rc = vg_tool_in_doubt_show(&rt->env, operation_id, &item, err);
    if (!rc)
        rc = VG_FAIL(err, VIGIL_ESTATE, "operation \"%.80s\" was already resolved: %s by %s",
                     operation_id, json_string_value(json_object_get(item, "status")),
                     json_string_value(json_object_get(item, "resolved_by"))
                         ? json_string_value(json_object_get(item, "resolved_by"))
                         : "human");
    json_decref(item);
    return rc;
}

vigil_code vigil_kill_set(vigil_runtime *rt, const char *agent_id, const char *tool_class, int on,
                          const char *reason, vigil_error *err)
{
    if (!rt)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");
    /* A switch no tool can match would stop nothing while saying it stops (trial H9); one set
     * before this check can still be turned off. */
    if (on && tool_class && !vg_tool_class_name_ok(tool_class))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "no tool can have the class \"%.64s\": a tool class is a lowercase letter, "
                       "then up to 63 of a-z, 0-9, _ and .",
                       tool_class);
    vigil_code rc = agent_id ? vg_runtime_agent_check(rt, agent_id, err) : VIGIL_OK;
    return rc ? rc : vg_kill_set(&rt->env, agent_id, tool_class, on, reason, err);
}

vigil_code vigil_kill_status(vigil_runtime *rt, char **out_json, vigil_error *err)
{
    json_t *v = NULL;
    if (!rt || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    vigil_code rc = vg_kill_list(&rt->env, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_kill_active(vigil_runtime *rt, const char *agent_id, const char *tool_class,
                             int *on, vigil_error *err)
{
    if (!rt || !on)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    vigil_code rc = agent_id ? vg_runtime_agent_check(rt, agent_id, err) : VIGIL_OK;
    return rc ? rc : vg_kill_active(&rt->env, agent_id, tool_class, on, err);
}

vigil_code vigil_budget_usage(vigil_runtime *rt, const char *agent_id, char **out_json,
                              vigil_error *err)
{
    json_t *v = NULL;
    if (!rt || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime or output given");
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (!rc)
        rc = vg_budget_usage(&rt->env, agent_id, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}
