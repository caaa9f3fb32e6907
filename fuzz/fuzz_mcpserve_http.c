/*
 * fuzz_mcpserve_http.c: arbitrary requests to the MCP server's Streamable HTTP transport
 * (src/mcpserve/streamable.c, the daemon's /mcp). The input is "METHOD\n", header lines
 * "Name: value\n" (Accept, Content-Type, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method,
 * Mcp-Name; a session id "open" names the session the target opened at start), an empty line,
 * then the body. The transport must answer anything without crashing, leaking or waiting, and
 * keep its promises: a status it documents; 202 and 204 carry no body, every other answer one
 * JSON-RPC 2.0 object with exactly one of result and error; a session id only on a 200 that
 * answers initialize. A streamed answer (a tools/call with a progress token) is run at once: its
 * events are "event: message" with one JSON-RPC message each, the last one the response. The
 * server runs on an empty store (no agent, so no model call).
 * Seeds: fuzz/corpus/mcpserve_http/.
 */
#include "base/common.h"

#include "base/buf.h"
#include "mcpserve/mcpserve.h"

#include <strings.h>
#include <unistd.h>

static struct vg_mcpserve_sessions *sessions;
static vigil_runtime *rt;
static char open_id[72];

/* Open the session inputs name "open" (again, after an input ended it). */
static void open_session(void)
{
    static const char init[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
        "\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}";
    struct vg_mcpserve_http_request q = {.method = "POST",
                                         .accept = "application/json, text/event-stream",
                                         .content_type = "application/json",
                                         .body = init,
                                         .len = sizeof init - 1};
    struct vg_mcpserve_http_answer a;
    vg_mcpserve_http(sessions, rt, &q, &a);
    if (a.status != 200 || !a.session[0])
        abort();
    memcpy(open_id, a.session, sizeof open_id);
    vg_free(a.body);
}

static void start(void)
{
    static char dir[] = "/tmp/fuzz-mcpserve-http.XXXXXX", path[64];
    vigil_error err = {0};
    if (!mkdtemp(dir))
        abort();
    snprintf(path, sizeof path, "%s/v.db", dir);
    vigil_runtime_options o = {.store_uri = path, .create_if_missing = 1};
    if (vigil_runtime_open(&o, &rt, &err) || vg_mcpserve_sessions_new(2, 8, &sessions, &err))
        abort();
    open_session();
}

/* One header of the input into q (values point into the copy, which stays alive). */
static void header(struct vg_mcpserve_http_request *q, char *line)
{
    char *colon = strchr(line, ':');
    if (!colon)
        return;
    *colon = '\0';
    char *v = colon + 1 + (colon[1] == ' ');
    if (!strcasecmp(line, "accept"))
        q->accept = v;
    else if (!strcasecmp(line, "content-type"))
        q->content_type = v;
    else if (!strcasecmp(line, "mcp-session-id"))
        q->session = strcmp(v, "open") ? v : open_id;
    else if (!strcasecmp(line, "mcp-protocol-version"))
        q->protocol_version = v;
    else if (!strcasecmp(line, "mcp-method"))
        q->mcp_method = v;
    else if (!strcasecmp(line, "mcp-name"))
        q->mcp_name = v;
}

/* The events a streamed answer wrote, one after the other. */
static void collect(void *user, const char *text, size_t len)
{
    vg_buf_append(user, text, len);
}

static int never(void *user)
{
    VG_UNUSED(user);
    return 0;
}

/* Run a streamed answer: every event one message; the last one the response, with an id. */
static void check_stream(struct vg_mcpserve_stream *st)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    struct vg_mcpserve_stream_io io = {.user = &b, .write = collect, .closed = never};
    vg_mcpserve_stream_run(st, rt, &io);
    vg_mcpserve_stream_free(st);
    vg_buf_append(&b, "", 1);
    json_t *last = NULL;
    for (char *e = b.data; *e; e = strstr(e, "\n\n") + 2) {
        if (strncmp(e, "event: message\ndata: ", 21) || !strstr(e, "\n\n"))
            abort();
        json_decref(last);
        last = json_loadb(e + 21, (size_t)(strstr(e, "\n\n") - e - 21), 0, NULL);
        if (!json_is_object(last))
            abort();
    }
    if (!last || !json_object_get(last, "id"))
        abort();
    json_decref(last);
    vg_buf_release(&b);
}

static void check(const struct vg_mcpserve_http_request *q, const struct vg_mcpserve_http_answer *a)
{
    if (a->stream) {
        if (a->status != 200 || a->body || a->session[0])
            abort();
        check_stream(a->stream);
        return;
    }
    static const int statuses[] = {200, 202, 204, 400, 404, 405, 406, 415};
    int known = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(statuses); i++)
        known |= a->status == statuses[i];
    if (!known || ((a->status == 202 || a->status == 204) != !a->body))
        abort();
    if (a->session[0] &&
        (a->status != 200 || !q->body || !memmem(q->body, q->len, "initialize", 10)))
        abort();
    if (!a->body)
        return;
    json_t *reply = json_loads(a->body, 0, NULL);
    json_t *result = json_object_get(reply, "result"), *error = json_object_get(reply, "error");
    if (!json_is_object(reply) || !!result == !!error ||
        strcmp(json_string_value(json_object_get(reply, "jsonrpc")), "2.0"))
        abort();
    json_decref(reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!sessions)
        start();
    char *copy = vg_malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    struct vg_mcpserve_http_request q = {.method = copy, .can_stream = 1};
    char *p = strchr(copy, '\n');
    while (p) { /* header lines up to an empty one; the rest is the body */
        *p++ = '\0';
        char *end = strchr(p, '\n');
        if (p[0] == '\n' || !end) {
            q.body = p + (p[0] == '\n');
            q.len = size - (size_t)(q.body - copy);
            break;
        }
        *end = '\0';
        header(&q, p);
        p = end;
    }
    struct vg_mcpserve_http_answer a;
    vg_mcpserve_http(sessions, rt, &q, &a);
    check(&q, &a);
    if (a.status == 204)
        open_session();
    vg_free(a.body);
    vg_free(copy);
    return 0;
}
