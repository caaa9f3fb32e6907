/*
 * tools.c: the task domain as tools of a runtime (vigil_tool_register), and a person's edits'
 * tokens raised on it (vigil_notify). Only include/vigil.h: this is what any program embedding
 * vigil with a domain of its own would write.
 *
 * Idempotency: a mutating tool is declared "idempotent" because the domain makes it so: the
 * operation id the gate hands the callback is recorded in the change's own transaction of
 * tasks.db, and a call with a recorded id answers the recorded reply and changes nothing. So
 * after a crash between the domain's commit and the gate's record of the call's end, the
 * gate's recovery runs the call again and gets the first reply; the change is never doubled.
 * No lookup (vigil_tool_lookup_fn) is registered on purpose: the gate prefers a lookup to a
 * rerun, and takes a lookup that finds nothing for "ask again later, then in doubt", where
 * here nothing found means nothing applied (the change and its record commit together).
 */
#include "todo/todo_int.h"
#include "base/json.h"

static vigil_code reply_text(const json_t *reply, char **out, vigil_error *err)
{
    char *text = vg_json_dumps(reply, JSON_COMPACT);
    /* The gate frees the reply with free(): hand it a copy made by malloc, not vg_malloc. */
    *out = text ? strdup(text) : NULL;
    free(text);
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering a tool call");
}

static vigil_code call_tool(void *user, const vigil_tool_call_info *call, const char *args_json,
                            char **out_result_json, vigil_error *err)
{
    struct vg_todo *t = user;
    json_t *args = json_loads(args_json, 0, NULL), *reply = NULL;
    vigil_code rc;
    if (!args)
        return VG_FAIL(err, VIGIL_EPARSE, "%s: the arguments are not JSON", call->tool);
    if (call->preview_only) {
        json_decref(args);
        return reply_text(json_pack("{s:{s:s, s:s}}", "result", "preview", call->tool, "note",
                                    "changes nothing until called"),
                          out_result_json, err);
    }
    rc = vg_todo_apply(t, call->tool, call->operation_id, args, &reply, err);
    json_decref(args);
    if (!rc)
        rc = reply_text(reply, out_result_json, err);
    json_decref(reply);
    return rc;
}

static int scope_of(void *user, const char *entity_id, char *out, size_t n)
{
    return vg_todo_scope_of(user, entity_id, out, n);
}

vigil_code vg_todo_register_tools(vigil_runtime *rt, struct vg_todo *t, vigil_error *err)
{
    for (const struct todo_op *o = todo_ops; o->name; o++) {
        if (!o->contract)
            continue; /* a person's operation only */
        vigil_tool_def def = {.name = o->name,
                              .description = o->description,
                              .input_schema_json = o->input_schema,
                              .contract_json = o->contract};
        vigil_code rc = vigil_tool_register(rt, &def, call_tool, t, err);
        if (rc)
            return rc;
    }
    /* The gate asks the domain, never the model, which category a target task is in. */
    vigil_tool_set_scope_resolver(rt, scope_of, t);
    /* A task's agent wakes with its task as it is (context.c). */
    vg_todo_set_wake_context(rt, t);
    return VIGIL_OK;
}

vigil_code vg_todo_notify(vigil_runtime *rt, const json_t *reply, vigil_error *err)
{
    const char *tokens[128];
    size_t n = 0, i;
    json_t *v;
    if (!json_object_get(reply, "result"))
        return VIGIL_OK;
    json_array_foreach (json_object_get(reply, "changed_tokens"), i, v)
        if (n < VG_ARRAY_LEN(tokens))
            tokens[n++] = json_string_value(v);
    json_array_foreach (json_object_get(reply, "changed_entity_ids"), i, v)
        if (n < VG_ARRAY_LEN(tokens))
            tokens[n++] = json_string_value(v);
    return n ? vigil_notify(rt, tokens, n, err) : VIGIL_OK;
}
