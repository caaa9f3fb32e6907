/*
 * message.c: one JSON-RPC 2.0 message of MCP, read without trusting the sender: whatever the
 * line holds, the answer is a kind (request, notification, response) or INVALID with a reason.
 * Member order is free (the TypeScript SDK writes "result" before "jsonrpc" and "id").
 */
#include "mcp/mcp.h"

static enum vg_mcp_msg_kind invalid(struct vg_mcp_msg *m, const char *why)
{
    snprintf(m->why, sizeof m->why, "%s", why);
    return m->kind = VG_MCP_INVALID;
}

/* A request id: a string or an integer, never null or a real (MCP-01). */
static int id_ok(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

static enum vg_mcp_msg_kind read_response(struct vg_mcp_msg *m)
{
    json_t *v = m->root;
    m->id = json_object_get(v, "id");
    m->result = json_object_get(v, "result");
    m->error = json_object_get(v, "error");
    if (!m->id || !(id_ok(m->id) || json_is_null(m->id)))
        return invalid(m, "a response needs a string or integer id");
    if (!m->result == !m->error)
        return invalid(m, "a response holds exactly one of result and error");
    if (m->error &&
        (!json_is_object(m->error) || !json_is_integer(json_object_get(m->error, "code")) ||
         !json_is_string(json_object_get(m->error, "message"))))
        return invalid(m, "an error needs an integer code and a string message");
    if (m->result && json_is_null(m->id))
        return invalid(m, "a result needs the id of its request");
    return m->kind = VG_MCP_RESPONSE;
}

enum vg_mcp_msg_kind vg_mcp_msg_parse(const char *text, size_t len, struct vg_mcp_msg *m)
{
    json_error_t je;
    memset(m, 0, sizeof *m);
    m->root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!m->root) {
        snprintf(m->why, sizeof m->why, "not JSON: %.140s", je.text);
        return m->kind = VG_MCP_INVALID;
    }
    json_t *v = m->root;
    if (!json_is_object(v))
        return invalid(m, "not a JSON object (batches are not part of MCP)");
    if (!json_is_string(json_object_get(v, "jsonrpc")) ||
        strcmp(json_string_value(json_object_get(v, "jsonrpc")), "2.0") != 0)
        return invalid(m, "no \"jsonrpc\": \"2.0\"");
    json_t *method = json_object_get(v, "method");
    if (!method)
        return read_response(m);
    if (!json_is_string(method))
        return invalid(m, "method is not a string");
    m->method = json_string_value(method);
    m->params = json_object_get(v, "params");
    if (m->params && !json_is_object(m->params) && !json_is_array(m->params))
        return invalid(m, "params is neither an object nor an array");
    m->id = json_object_get(v, "id");
    if (!m->id)
        return m->kind = VG_MCP_NOTIFICATION;
    if (!id_ok(m->id))
        return invalid(m, "a request id must be a string or an integer");
    return m->kind = VG_MCP_REQUEST;
}

void vg_mcp_msg_release(struct vg_mcp_msg *m)
{
    json_decref(m->root);
    memset(m, 0, sizeof *m);
}

vigil_code vg_mcp_rpc_error(const char *server, const json_t *error, vigil_error *err)
{
    json_int_t code = json_integer_value(json_object_get(error, "code"));
    const char *text = json_string_value(json_object_get(error, "message"));
    vigil_code vc = code == -32601   ? VIGIL_EUNSUPPORTED
                    : code == -32602 ? VIGIL_EINVAL
                    : code == -32001 ? VIGIL_ETIMEOUT
                                     : VIGIL_EPROVIDER;
    return VG_FAIL(err, vc, "MCP server \"%s\" answered error %lld: %s", server, (long long)code,
                   text ? text : "(no message)");
}
