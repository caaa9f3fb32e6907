/*
 * fuzz_mcpserve_message.c: arbitrary bytes as one stdio line to `vigil mcp serve`
 * (src/mcpserve): the message reader and the dispatch must answer anything without crashing,
 * leaking or waiting, and keep their promises: what the reader accepts has a method or an id,
 * and an id is a string or an integer; every reply is one JSON-RPC 2.0 object with exactly one
 * of result and error, an integer error code, and the request's id or null; a notification is
 * never answered. The server runs on an empty store it has initialized (no agent, so no model
 * call). Seeds: fuzz/corpus/mcpserve_message/.
 */
#include "base/common.h"

#include "mcpserve/mcpserve.h"

#include <unistd.h>

static struct vg_mcpserve *server;

static void start(void)
{
    static char dir[] = "/tmp/fuzz-mcpserve.XXXXXX", path[64];
    vigil_error err = {0};
    vigil_runtime *rt = NULL;
    if (!mkdtemp(dir))
        abort();
    snprintf(path, sizeof path, "%s/v.db", dir);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path, .create_if_missing = 1};
    struct vg_mcpserve_options so = {.page_size = 2};
    if (vigil_runtime_open(&o, &rt, &err) || (so.rt = rt, vg_mcpserve_new(&so, &server, &err)))
        abort();
    static const char init[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
        "\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}";
    json_decref(vg_mcpserve_handle(server, init, sizeof init - 1));
}

static void check_reply(const json_t *reply, const struct vg_rpc_message *m, int read_ok)
{
    json_t *result = json_object_get(reply, "result"), *error = json_object_get(reply, "error");
    json_t *id = json_object_get(reply, "id");
    if (!json_is_object(reply) || !!result == !!error ||
        strcmp(json_string_value(json_object_get(reply, "jsonrpc")), "2.0") || !id)
        abort();
    if (error && !json_is_integer(json_object_get(error, "code")))
        abort();
    if (read_ok && (!m->id || !json_equal(id, m->id)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server)
        start();
    struct vg_rpc_message m;
    json_t *bad = vg_rpc_read((const char *)data, size, &m);
    if (!bad && ((!m.method && !m.id) || (m.id && !json_is_string(m.id) && !json_is_integer(m.id))))
        abort();
    json_t *reply = vg_mcpserve_handle(server, (const char *)data, size);
    if (reply)
        check_reply(reply, &m, !bad);
    else if (bad || (m.method && m.id))
        abort(); /* an unreadable message and a request are always answered */
    json_decref(reply);
    json_decref(bad);
    vg_rpc_message_clear(&m);
    return 0;
}
