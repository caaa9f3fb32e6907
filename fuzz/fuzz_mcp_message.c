/*
 * fuzz_mcp_message.c: arbitrary bytes as one line from an MCP server: the message reader must
 * classify anything without crashing and keep its promises (a response holds exactly one of
 * result and error, a request id is a string or an integer); what it accepts then goes on
 * where a server's answer goes: a result read as text for the model, tools turned into
 * contracts, a 2026-07-28 input_required turned into the follow-up request's params. Seeds:
 * fuzz/corpus/mcp_message/ (every line of the reference captures).
 */
#include "base/common.h"

#include "mcp/mcp.h"
#include "mcp/proc.h"

static void use_result(const json_t *result)
{
    json_t *m = vg_mcp_result_for_model(result, 4096);
    json_decref(m);
    size_t i;
    json_t *t;
    json_array_foreach (json_object_get(result, "tools"), i, t) {
        json_t *c = NULL;
        vigil_error err = {0};
        if (vg_mcp_tool_contract("fuzz", t, NULL, &c, &err) == VIGIL_OK && !c)
            abort();
        json_decref(c);
    }
    if (vg_mcp_modern_input_required(result)) {
        json_t *next = NULL, *params = json_pack("{s:s}", "name", "t");
        vigil_error err = {0};
        if (vg_mcp_modern_follow_up("fuzz", params, result, &next, &err) == VIGIL_OK &&
            !json_is_object(json_object_get(next, "inputResponses")))
            abort();
        json_decref(next);
        json_decref(params);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct vg_mcp_msg m;
    enum vg_mcp_msg_kind k = vg_mcp_msg_parse((const char *)data, size, &m);
    switch (k) {
    case VG_MCP_RESPONSE:
        if (!m.result == !m.error)
            abort();
        if (m.result)
            use_result(m.result);
        else {
            vigil_error err = {0};
            if (vg_mcp_rpc_error("fuzz", m.error, &err) == VIGIL_OK)
                abort();
        }
        break;
    case VG_MCP_REQUEST:
        if (!json_is_string(m.id) && !json_is_integer(m.id))
            abort();
        /* fall through */
    case VG_MCP_NOTIFICATION:
        if (!m.method)
            abort();
        break;
    case VG_MCP_INVALID:
        if (!m.why[0])
            abort();
        break;
    }
    vg_mcp_msg_release(&m);
    return 0;
}
