/*
 * loop_adapter.c: the gated executor behind the agent loop's executor interface
 * (src/loop/loop.h). The loop hands over the model's argument text; the executor records the
 * action/toolResult pair itself (records_messages), and a kill switch ends the run.
 */
#include "base/common.h"

#include "loop/loop.h"
#include "tool/tool.h"

static vigil_code visible(void *self, struct vg_env *env, const char *agent_id, json_t **out,
                          vigil_error *err)
{
    return vg_tool_executor_visible_tools(self, agent_id, out, err);
}

static vigil_code call(void *self, struct vg_env *env, const struct vg_loop_call_ctx *cc,
                       const char *name, const char *args_json, struct vg_loop_tool_outcome *out,
                       vigil_error *err)
{
    struct vg_tool_outcome o = {0};
    json_error_t je;
    json_t *args = args_json && *args_json ? json_loads(args_json, JSON_DECODE_ANY, &je)
                                           : json_object();
    /* Text that is not JSON still goes through the gate, as a string the schema refuses. */
    if (!args && !(args = json_string(args_json ? args_json : "")))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading tool arguments");
    const char *wake = cc->wake_reason;
    if (wake && !strcmp(wake, "user"))
        wake = "user_initiated"; /* the loop's name for an interactive turn */
    struct vg_tool_call_ctx ctx = {.agent_id = cc->agent_id,
                                   .run_key = cc->run_key,
                                   .thread_id = cc->thread_id,
                                   .run_id = cc->run_id,
                                   .wake_reason = wake};
    vigil_code rc = vg_tool_executor_call(self, &ctx, name, args, &o, err);
    json_decref(args);
    if (rc)
        return rc;
    json_t *j = vg_tool_outcome_json(&o);
    out->content = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    out->is_error = o.code != VG_TOOL_OK;
    snprintf(out->error_code, sizeof out->error_code, "%s", o.error_code);
    snprintf(out->operation_id, sizeof out->operation_id, "%s", o.operation_id);
    out->stop_run = o.code == VG_TOOL_KILLED;
    vg_tool_outcome_release(&o);
    if (!out->content)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a tool result");
    return VIGIL_OK;
}

void vg_tool_loop_executor(struct vg_tool_executor *x, struct vg_loop_executor *out)
{
    *out = (struct vg_loop_executor){
        .self = x, .records_messages = 1, .visible_tools = visible, .call = call};
}
