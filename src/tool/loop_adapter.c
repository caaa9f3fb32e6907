/*
 * loop_adapter.c: the gated executor behind the agent loop's executor interface
 * (src/loop/loop.h). The loop hands over the model's argument text; the executor records the
 * action/toolResult pair itself (records_messages) and makes its own durable barrier before a
 * tool's effect (fences_effects), and a kill switch ends the run. That barrier is the loop's
 * own transaction holding the call's start, left open for it (start_open). The executor leaves
 * the transaction that records the call's end open (tx_open): the loop's end of the call joins
 * it.
 */
#include "base/common.h"
#include "base/json.h"

#include "loop/loop.h"
#include "tool/tool.h"

static vigil_code visible(void *self, struct vg_env *env, const char *agent_id, const char *run_key,
                          json_t **out, vigil_error *err)
{
    return vg_tool_executor_visible_tools(self, agent_id, run_key, out, err);
}

/* A model call's charge: its tokens, cost and wall time, and one step. */
static struct vg_budget_charge model_call_charge(int64_t tokens, int64_t cost_micros,
                                                 int64_t wall_ms)
{
    struct vg_budget_charge c = {{0}};
    c.v[VG_BUDGET_TOKENS] = tokens;
    c.v[VG_BUDGET_COST] = cost_micros;
    c.v[VG_BUDGET_STEPS] = 1;
    c.v[VG_BUDGET_WALL_MS] = wall_ms;
    return c;
}

/* The gate's name (a tool's allowed_wake_reasons) for the reason the loop's run names: a turn
 * (src/wake: vg_wake_reason_is_turn) is user_initiated, a failed or crashed run's retry
 * recovery_catchup. A retry that kept "recovery" matched no tool's list, the default "all"
 * included, and every call of it was refused (trial G8). */
static const char *gate_wake_reason(const char *wake)
{
    if (!wake)
        return NULL;
    if (!strcmp(wake, "user") || !strcmp(wake, "spawn") || !strcmp(wake, "children") ||
        !strcmp(wake, "task") || !strcmp(wake, "rerun") || !strcmp(wake, "resume"))
        return "user_initiated";
    return strcmp(wake, "recovery") ? wake : "recovery_catchup";
}

static vigil_code call(void *self, struct vg_env *env, const struct vg_loop_call_ctx *cc,
                       const char *name, const char *args_json, struct vg_loop_tool_outcome *out,
                       vigil_error *err)
{
    struct vg_tool_outcome o = {0};
    json_error_t je;
    json_t *args =
        args_json && *args_json ? json_loads(args_json, JSON_DECODE_ANY, &je) : json_object();
    /* Text that is not JSON still goes through the gate, as a string the schema refuses. */
    if (!args && !(args = json_string(args_json ? args_json : "")))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading tool arguments");
    struct vg_budget_charge carry = {{0}};
    if (cc->turn_charge)
        carry = model_call_charge(cc->turn_charge->tokens, cc->turn_charge->cost_micros,
                                  cc->turn_charge->wall_ms);
    struct vg_tool_call_ctx ctx = {.agent_id = cc->agent_id,
                                   .run_key = cc->run_key,
                                   .operation_key = cc->operation_key,
                                   .halt = cc->halt,
                                   .cancelled = cc->cancelled,
                                   .cancelled_user = cc->cancelled_user,
                                   .journal_run = cc->run,
                                   .thread_id = cc->thread_id,
                                   .run_id = cc->run_id,
                                   .wake_reason = gate_wake_reason(cc->wake_reason),
                                   .fence = cc->fence,
                                   .fence_user = cc->fence_user,
                                   .args_fresh = 1,  /* parsed here, dropped after */
                                   .finish_open = 1, /* the loop's end of the call joins it */
                                   .start_open = cc->start_open,
                                   .started = cc->started,
                                   .started_user = cc->started_user,
                                   .carry = cc->turn_charge ? &carry : NULL,
                                   .carry_written = cc->turn_charge_written,
                                   .result_end = cc->result_end,
                                   .result_end_user = cc->result_end_user,
                                   .action_start = cc->action_start,
                                   .action_start_user = cc->action_start_user};
    vigil_code rc = vg_tool_executor_call(self, &ctx, name, args, &o, err);
    json_decref(args);
    if (rc) { /* what the executor had made of its outcome before it failed */
        vg_tool_outcome_release(&o);
        return rc;
    }
    if (o.content) { /* the recorded result, as a later process reads it */
        out->content = o.content;
        o.content = NULL;
    } else {
        json_t *j = vg_tool_outcome_json(&o);
        out->content = j ? vg_json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(j);
    }
    out->is_error = o.code != VG_TOOL_OK;
    snprintf(out->error_code, sizeof out->error_code, "%s", o.error_code);
    snprintf(out->operation_id, sizeof out->operation_id, "%s", o.operation_id);
    out->stop_run = o.code == VG_TOOL_KILLED;
    out->tx_open = o.tx_open;
    out->decisions = json_incref(o.decisions);
    vg_tool_outcome_release(&o);
    if (!out->content)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a tool result");
    return VIGIL_OK;
}

/* Before each model call: a kill switch (global or the agent's) or an exhausted budget stops
 * the run deterministically, before anything else is spent. */
static vigil_code gate(void *self, struct vg_env *env, const char *agent_id, char *stop, size_t n,
                       vigil_error *err)
{
    int on = 0;
    const char *exceeded = NULL;
    vigil_code rc = vg_kill_active(env, agent_id, NULL, &on, err);
    if (rc)
        return rc;
    if (on) {
        snprintf(stop, n, "killed");
        return VIGIL_OK;
    }
    if ((rc = vg_budget_check(env, agent_id, &exceeded, err)))
        return rc;
    if (exceeded)
        snprintf(stop, n, "budget_exceeded:%s", exceeded);
    return VIGIL_OK;
}

static vigil_code charge(void *self, struct vg_env *env, const char *agent_id, int64_t tokens,
                         int64_t cost_micros, int64_t wall_ms, vigil_error *err)
{
    struct vg_budget_charge c = model_call_charge(tokens, cost_micros, wall_ms);
    return vg_budget_charge(env, agent_id, &c, err);
}

/* Who approved a call and why, as the run's journal records it ("approval ID approved by BY at
 * AT: REASON"). */
static void approval_words(const json_t *a, char *out, size_t n)
{
    const char *by = json_string_value(json_object_get(a, "resolved_by"));
    const char *at = json_string_value(json_object_get(a, "resolved_at"));
    const char *reason = json_string_value(json_object_get(a, "reason"));
    snprintf(out, n, "approval %s approved by %s at %s%s%s",
             json_string_value(json_object_get(a, "id")), by ? by : "a person", at ? at : "?",
             reason ? ": " : "", reason ? reason : "");
}

/* The approved operation's run, for the loop to journal as a tool call of the run that resumed
 * it (loop.h, notes): name, operation id, input, output, failure and the approval. */
static json_t *approved_call(const json_t *a, const struct vg_tool_outcome *o, const char *output)
{
    char approval[512];
    approval_words(a, approval, sizeof approval);
    const json_t *req = json_object_get(a, "request");
    const json_t *args = json_object_get(req, "arguments");
    int failed = o->code != VG_TOOL_OK || o->error_message[0];
    return json_pack("{s:O?, s:s, s:O?, s:s, s:b, s:s?, s:s}", "name", json_object_get(a, "tool"),
                     "operation_id", o->operation_id, "input", args, "output",
                     output ? output : "null", "is_error", failed, "error_code",
                     o->error_code[0] ? o->error_code : NULL, "approval", approval);
}

/* One resolved approval as a note (loop.h: {"note", "tool_call"?}); an approved one runs its
 * exact operation (once) first, and the note says what it did. */
static vigil_code approval_note(struct vg_tool_executor *x, const json_t *a, json_t **item,
                                vigil_error *err)
{
    const char *id = json_string_value(json_object_get(a, "id"));
    const char *status = json_string_value(json_object_get(a, "status"));
    const char *tool = json_string_value(json_object_get(a, "tool"));
    const char *reason = json_string_value(json_object_get(a, "reason"));
    json_t *call = NULL;
    struct vg_buf b;
    vg_buf_init(&b, 0);
    if (status && !strcmp(status, "approved") && id) {
        struct vg_tool_outcome o = {0};
        vigil_code rc = vg_tool_executor_run_approved(x, id, &o, err);
        if (rc) {
            vg_buf_release(&b);
            return rc;
        }
        json_t *j = vg_tool_outcome_json(&o);
        char *text = j ? vg_json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        vg_buf_printf(&b, "A person approved your pending call of %s (approval %s); it ran: %s",
                      tool ? tool : "a tool", id, text ? text : "(no result)");
        if (!(call = approved_call(a, &o, o.content ? o.content : text)))
            b.fail = VIGIL_ENOMEM;
        vg_free(text);
        json_decref(j);
        vg_tool_outcome_release(&o);
    } else {
        vg_buf_printf(&b, "Your pending call of %s (approval %s) was %s%s%s; it did not run.",
                      tool ? tool : "a tool", id ? id : "?", status ? status : "resolved",
                      reason ? ": " : "", reason ? reason : "");
    }
    if (b.fail)
        json_decref(call);
    else if (!(*item = json_pack("{s:s, s:o?}", "note", b.data, "tool_call", call)))
        b.fail = VIGIL_ENOMEM;
    vigil_code rc = vg_buf_finish(&b, err);
    vg_buf_release(&b);
    return rc;
}

/* Resolved approvals become notes for the model. Each is marked seen only after it ran: a
 * crash before leaves it unseen, and the next step runs it again, which replays the finished
 * operation instead of repeating it. */
static vigil_code notes(void *self, struct vg_env *env, const struct vg_loop_call_ctx *cc,
                        json_t **out, vigil_error *err)
{
    json_t *resolved = NULL, *list = json_array();
    vigil_code rc = list ? vg_approval_unseen(env, cc->agent_id, &resolved, err)
                         : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading approvals");
    for (size_t i = 0; !rc && i < json_array_size(resolved); i++) {
        json_t *a = json_array_get(resolved, i), *item = NULL;
        const char *id = json_string_value(json_object_get(a, "id"));
        rc = approval_note(self, a, &item, err);
        if (!rc && json_array_append_new(list, item))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading approvals");
        if (!rc && id)
            rc = vg_approval_mark_seen(env, id, err);
    }
    json_decref(resolved);
    if (rc) {
        json_decref(list);
        return rc;
    }
    *out = list;
    return VIGIL_OK;
}

void vg_tool_loop_executor(struct vg_tool_executor *x, struct vg_loop_executor *out)
{
    *out = (struct vg_loop_executor){.self = x,
                                     .records_messages = 1,
                                     .fences_effects = 1,
                                     .takes_turn_charge = 1,
                                     .visible_tools = visible,
                                     .call = call,
                                     .gate = gate,
                                     .charge = charge,
                                     .notes = notes};
}
