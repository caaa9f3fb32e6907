/*
 * builtin.c: the built-in tools that write only the agent's own records: set_report (a new
 * report for a scope, over vg_report_set) and record_observations (observation messages on
 * the run's thread). The provider is transactional: the executor runs it inside the
 * transaction that also records the finished operation, so a crash can never split them.
 * The contracts below must match docs/agent_tools/tool_contracts.json (parity test).
 */
#include "base/common.h"

#include "agent/agent.h"
#include "tool/tool.h"

static const char contracts[] =
    "["
    "{\"name\":\"set_report\",\"version\":\"1.1.0\","
    "\"description\":\"Replace the agent's report for a scope (current, daily, weekly or "
    "monthly) with new markdown; optionally say how sure you are (confidence, 0 to 1) and what "
    "it rests on (sources: ids, names or links).\","
    "\"input_schema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"scope\",\"markdown\"],\"properties\":{"
    "\"scope\":{\"type\":\"string\",\"enum\":[\"current\",\"daily\",\"weekly\",\"monthly\"]},"
    "\"markdown\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100000},"
    "\"confidence\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1},"
    "\"sources\":{\"type\":\"array\",\"maxItems\":32,\"items\":{\"type\":\"string\","
    "\"minLength\":1,\"maxLength\":500}}}},"
    "\"output_schema\":{\"type\":\"object\",\"required\":[\"report_id\"],"
    "\"properties\":{\"report_id\":{\"type\":\"string\"}}},"
    "\"capabilities\":[],\"risk\":\"low\","
    "\"allowed_wake_reasons\":[\"subscription\",\"timer\",\"user_initiated\","
    "\"recovery_catchup\",\"manual\"],"
    "\"scope\":{\"rule\":\"agent\",\"arguments\":[]},\"idempotency\":\"idempotent\","
    "\"mutating\":true,\"tool_class\":\"agent_self\","
    "\"side_effects\":{\"entity_types\":[\"report\"],\"tokens\":[\"AGENT_REPORT_CHANGED\"]},"
    "\"requires_approval\":false,\"preview\":false},"
    "{\"name\":\"record_observations\",\"version\":\"1.0.0\","
    "\"description\":\"Record private observation notes for later wakes.\","
    "\"input_schema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"notes\"],\"properties\":{\"notes\":{\"type\":\"array\",\"minItems\":1,"
    "\"maxItems\":50,\"items\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4000}}}},"
    "\"output_schema\":{\"type\":\"object\",\"required\":[\"message_ids\"],"
    "\"properties\":{\"message_ids\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}},"
    "\"capabilities\":[],\"risk\":\"low\","
    "\"allowed_wake_reasons\":[\"subscription\",\"timer\",\"user_initiated\","
    "\"recovery_catchup\",\"manual\"],"
    "\"scope\":{\"rule\":\"agent\",\"arguments\":[]},\"idempotency\":\"non_idempotent\","
    "\"mutating\":true,\"tool_class\":\"agent_self\","
    "\"side_effects\":{\"entity_types\":[\"message\"],"
    "\"tokens\":[\"AGENT_OBSERVATION_RECORDED\"]},"
    "\"requires_approval\":false,\"preview\":false}"
    "]";

json_t *vg_tool_builtin_contracts(void)
{
    return json_loads(contracts, 0, NULL);
}

static vigil_code b_list(struct vg_tool_provider *p, json_t **out, vigil_error *err)
{
    if (!(*out = vg_tool_builtin_contracts()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing built-in tools");
    return VIGIL_OK;
}

static vigil_code set_report(const struct vg_tool_request *q, struct vg_tool_response *r,
                             vigil_error *err)
{
    const char *scope = json_string_value(json_object_get(q->args, "scope"));
    const char *md = json_string_value(json_object_get(q->args, "markdown"));
    char id[37];
    if (q->preview_only) {
        r->result = json_pack("{s:s, s:I}", "would_set_scope", scope, "markdown_bytes",
                              (json_int_t)strlen(md));
        return r->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    }
    json_t *confidence = json_object_get(q->args, "confidence");
    struct vg_report_in in = {.scope = scope,
                              .markdown = md,
                              .has_confidence = json_is_number(confidence),
                              .confidence = json_number_value(confidence),
                              .sources = json_object_get(q->args, "sources")};
    vigil_code rc = vg_report_write(q->env, q->agent_id, &in, id, err);
    if (rc)
        return rc;
    r->result = json_pack("{s:s}", "report_id", id);
    r->changed_entity_ids = json_pack("[s]", id);
    if (!r->result || !r->changed_entity_ids)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering set_report");
    return VIGIL_OK;
}

static vigil_code record_observations(const struct vg_tool_request *q, struct vg_tool_response *r,
                                      vigil_error *err)
{
    json_t *notes = json_object_get(q->args, "notes"), *n;
    size_t i;
    json_t *ids = json_array();
    if (!ids)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering record_observations");
    json_array_foreach (notes, i, n) {
        char id[37];
        struct vg_message_in m = {.agent_id = q->agent_id,
                                  .thread_id = q->thread_id,
                                  .kind = VG_MSG_OBSERVATION,
                                  .content = json_string_value(n),
                                  .run_id = q->run_id};
        vigil_code rc = q->preview_only ? VIGIL_OK : vg_message_append(q->env, &m, id, err);
        if (rc) {
            json_decref(ids);
            return rc;
        }
        if (!q->preview_only)
            json_array_append_new(ids, json_string(id));
    }
    r->result = json_pack("{s:O}", "message_ids", ids);
    r->changed_entity_ids = ids;
    if (!r->result)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering record_observations");
    return VIGIL_OK;
}

static vigil_code b_call(struct vg_tool_provider *p, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err)
{
    if (!strcmp(q->tool, "set_report"))
        return set_report(q, r, err);
    if (!strcmp(q->tool, "record_observations"))
        return record_observations(q, r, err);
    vg_tool_response_fail(r, VG_TOOL_UNKNOWN_TOOL, "no built-in tool \"%s\"", q->tool);
    return VIGIL_OK;
}

static const struct vg_tool_provider_methods builtin_methods = {
    .version = 1,
    .name = "builtin",
    .caps = VG_TOOL_PROVIDER_CAP_TRANSACTIONAL,
    .list = b_list,
    .call = b_call,
};

static struct vg_tool_provider builtin = {&builtin_methods};

struct vg_tool_provider *vg_tool_builtin_provider(void)
{
    return &builtin;
}
