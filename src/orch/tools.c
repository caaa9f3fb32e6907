/*
 * tools.c: the orchestrator's two built-in tools behind the tool port. Both require the
 * capability "spawn" (held when the manifest says spawn: {enabled: true}), so an agent whose
 * kind does not enable spawning is never shown them. spawn_agents is transactional: the
 * decisions, the child records and the child wakes commit with the operation that records the
 * call, so a crash keeps all of them or none, and a replayed call returns what was decided.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "orch/orch.h"

#define REASONS                                                                                    \
    "\"allowed_wake_reasons\":[\"subscription\",\"timer\",\"user_initiated\","                     \
    "\"recovery_catchup\",\"manual\"],"

static const char contracts[] =
    "["
    "{\"name\":\"list_available_agents\",\"version\":\"1.0.0\","
    "\"description\":\"List the agents you can delegate to: id, name, kind, visibility and "
    "description. Optionally only one kind.\","
    "\"input_schema\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"kind\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64}}},"
    "\"output_schema\":{\"type\":\"object\",\"required\":[\"agents\"],"
    "\"properties\":{\"agents\":{\"type\":\"array\"}}},"
    "\"capabilities\":[\"spawn\"],\"risk\":\"low\"," REASONS
    "\"scope\":{\"rule\":\"unscoped\",\"arguments\":[]},\"idempotency\":\"idempotent\","
    "\"mutating\":false,\"tool_class\":\"orchestration\","
    "\"side_effects\":{\"entity_types\":[],\"tokens\":[]},"
    "\"requires_approval\":false,\"preview\":false},"
    "{\"name\":\"spawn_agents\",\"version\":\"1.0.0\","
    "\"description\":\"Delegate work to other agents: one typed request per child. Each is "
    "admitted or denied with a reason; admitted children run on their own, and your next wake "
    "brings every child's result when the last one finishes.\","
    "\"input_schema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"requests\"],\"properties\":{\"requests\":{\"type\":\"array\","
    "\"minItems\":1,\"maxItems\":64,\"items\":{\"type\":\"object\","
    "\"additionalProperties\":false,\"required\":[\"goal\"],\"properties\":{"
    "\"kind\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64},"
    "\"agent\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":200},"
    "\"goal\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":20000},"
    "\"input_refs\":{\"type\":\"array\",\"maxItems\":50,\"items\":{\"type\":\"string\","
    "\"maxLength\":500}},"
    "\"allowed_tools\":{\"type\":\"array\",\"maxItems\":100,\"items\":{\"type\":\"string\","
    "\"maxLength\":200}},"
    "\"allowed_scopes\":{\"type\":\"array\",\"maxItems\":100,\"items\":{\"type\":\"string\","
    "\"maxLength\":200}},"
    "\"risk_tier\":{\"enum\":[\"low\",\"medium\",\"high\"]},"
    "\"priority\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},"
    "\"ttl_ms\":{\"type\":\"integer\",\"minimum\":1},"
    "\"max_runtime_ms\":{\"type\":\"integer\",\"minimum\":1},"
    "\"max_steps\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":500},"
    "\"cost_budget_usd\":{\"type\":\"number\",\"minimum\":0},"
    "\"request_id\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100},"
    "\"token_budget\":{\"type\":\"integer\",\"minimum\":1},"
    "\"required_approvals\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":1},"
    "\"success_criteria\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4000},"
    "\"on_complete\":{\"enum\":[\"wake_on_all\",\"wake_on_each\",\"none\"]},"
    "\"decision_key\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100}}}}}},"
    "\"output_schema\":{\"type\":\"object\",\"required\":[\"group\",\"children\"],"
    "\"properties\":{\"group\":{\"type\":\"string\"},\"children\":{\"type\":\"array\"}}},"
    "\"capabilities\":[\"spawn\"],\"risk\":\"medium\"," REASONS
    "\"scope\":{\"rule\":\"agent\",\"arguments\":[]},\"idempotency\":\"idempotent\","
    "\"mutating\":true,\"tool_class\":\"orchestration\","
    "\"side_effects\":{\"entity_types\":[\"spawn_child\"],\"tokens\":[]},"
    "\"requires_approval\":false,\"preview\":false}"
    "]";

json_t *vg_orch_tool_contracts(void)
{
    return json_loads(contracts, 0, NULL);
}

/* The first line of the prompt, cut: what an agent is for, as its manifest says it. */
static json_t *describe(json_t *agent)
{
    const char *p = json_string_value(json_object_get(agent, "prompt"));
    if (!p)
        return json_string("");
    size_t n = strcspn(p, "\n");
    return json_stringn(p, n > 200 ? 200 : n);
}

static int wanted(json_t *a, const char *kind)
{
    const char *lc = json_string_value(json_object_get(a, "lifecycle"));
    const char *k = json_string_value(json_object_get(a, "kind"));
    return !(lc && !strcmp(lc, "destroyed")) && (!kind || (k && !strcmp(k, kind)));
}

struct listing {
    const char *kind;
    json_t *list;
};

static vigil_code list_one(void *user, json_t *a, vigil_error *err)
{
    struct listing *l = user;
    if (wanted(a, l->kind) &&
        json_array_append_new(
            l->list,
            json_pack("{s:O, s:O, s:O, s:O, s:o, s:O*}", "id", json_object_get(a, "id"), "name",
                      json_object_get(a, "name"), "kind", json_object_get(a, "kind"), "visibility",
                      json_object_get(a, "visibility"), "description", describe(a), "tags",
                      json_object_get(json_object_get(a, "config"), "tags"))))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing agents");
    return VIGIL_OK;
}

vigil_code vg_orch_list_agents(struct vg_env *env, const char *kind, json_t **out, vigil_error *err)
{
    struct listing l = {kind, json_array()};
    if (!l.list)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing agents");
    vigil_code rc = vg_agent_each(env, list_one, &l, err);
    if (rc)
        json_decref(l.list);
    else
        *out = l.list;
    return rc;
}

static vigil_code o_list(struct vg_tool_provider *p, json_t **out, vigil_error *err)
{
    (void)p;
    if (!(*out = vg_orch_tool_contracts()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing the orchestrator's tools");
    return VIGIL_OK;
}

static vigil_code o_call(struct vg_tool_provider *p, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err)
{
    (void)p;
    json_t *v = NULL;
    vigil_code rc;
    if (!strcmp(q->tool, "list_available_agents")) {
        const char *kind = json_string_value(json_object_get(q->args, "kind"));
        if ((rc = vg_orch_list_agents(q->env, kind, &v, err)))
            return rc;
        r->result = json_pack("{s:o}", "agents", v);
    } else if (!strcmp(q->tool, "spawn_agents")) {
        if (q->preview_only) {
            r->result =
                json_pack("{s:I}", "would_request",
                          (json_int_t)json_array_size(json_object_get(q->args, "requests")));
        } else {
            return vg_orch_spawn(q->env, q, r, err);
        }
    } else {
        vg_tool_response_fail(r, VG_TOOL_UNKNOWN_TOOL, "no orchestrator tool \"%s\"", q->tool);
        return VIGIL_OK;
    }
    return r->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering %s", q->tool);
}

static const struct vg_tool_provider_methods orch_methods = {
    .version = 1,
    .name = "orchestrator",
    .caps = VG_TOOL_PROVIDER_CAP_TRANSACTIONAL,
    .list = o_list,
    .call = o_call,
};

static struct vg_tool_provider orch_provider = {&orch_methods};

struct vg_tool_provider *vg_orch_tool_provider(void)
{
    return &orch_provider;
}
