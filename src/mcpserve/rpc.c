/*
 * rpc.c: the server's JSON-RPC 2.0 message reader and reply builders (MCP-01..05 of
 * docs/internals/MCP.md): one object per message, no batches, ids kept with their JSON type.
 */
#include "base/common.h"

#include "base/json.h"

#include "mcpserve/mcpserve.h"

#include <stdarg.h>

void vg_rpc_message_clear(struct vg_rpc_message *m)
{
    json_decref(m->root);
    memset(m, 0, sizeof *m);
}

json_t *vg_rpc_result(json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result",
                     result ? result : json_object());
}

json_t *vg_rpc_error(json_t *id, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* A parse error quotes the text near it, which may be bytes of a character cut in two or
     * no UTF-8 at all: jansson would refuse the message string, and the error go unanswered. */
    if (!vg_utf8_valid(msg))
        for (char *c = msg; *c; c++)
            if ((unsigned char)*c >= 0x80)
                *c = '?';
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                     "error", "code", code, "message", msg);
}

/* An id is a string or an integer (never null, a float or a structure). */
static int id_valid(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

/* Check the envelope of a parsed object; NULL when it is a message we can act on. */
static json_t *check_envelope(json_t *root, struct vg_rpc_message *m)
{
    json_t *id = json_object_get(root, "id"), *method = json_object_get(root, "method");
    json_t *params = json_object_get(root, "params");
    json_t *good_id = id_valid(id) ? id : NULL;
    if (!json_is_string(json_object_get(root, "jsonrpc")) ||
        strcmp(json_string_value(json_object_get(root, "jsonrpc")), "2.0"))
        return vg_rpc_error(good_id, VG_RPC_INVALID_REQUEST, "jsonrpc must be \"2.0\"");
    if (id && !good_id)
        return vg_rpc_error(NULL, VG_RPC_INVALID_REQUEST, "id must be a string or an integer");
    if (method && !json_is_string(method))
        return vg_rpc_error(good_id, VG_RPC_INVALID_REQUEST, "method must be a string");
    if (!method && !id)
        return vg_rpc_error(NULL, VG_RPC_INVALID_REQUEST, "a message needs a method or an id");
    /* A notification is never answered, even a malformed one; it is ignored all the same. */
    if (params && !json_is_object(params) && !(method && !id))
        return vg_rpc_error(good_id, VG_RPC_INVALID_PARAMS, "params must be an object");
    m->root = root;
    m->method = method ? json_string_value(method) : NULL;
    m->id = good_id;
    m->params = json_is_object(params) ? params : NULL;
    return NULL;
}

json_t *vg_rpc_read(const char *text, size_t len, struct vg_rpc_message *m)
{
    json_error_t jerr;
    memset(m, 0, sizeof *m);
    if (len > VG_MCPSERVE_MAX_MESSAGE)
        return vg_rpc_error(NULL, VG_RPC_INVALID_REQUEST, "message over %u bytes",
                            VG_MCPSERVE_MAX_MESSAGE);
    /* JSON_REJECT_DUPLICATES: one meaning per message; no NUL bytes inside strings. */
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return vg_rpc_error(NULL, VG_RPC_PARSE_ERROR, "parse error: %s", jerr.text);
    if (json_is_array(root)) {
        json_decref(root);
        return vg_rpc_error(NULL, VG_RPC_INVALID_REQUEST, "batches are not supported");
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return vg_rpc_error(NULL, VG_RPC_INVALID_REQUEST, "a message is a JSON object");
    }
    json_t *reply = check_envelope(root, m);
    if (reply)
        json_decref(root);
    return reply;
}
