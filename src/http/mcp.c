/*
 * mcp.c: /mcp, vigil as an MCP server over Streamable HTTP on the daemon (docs/http.md "MCP
 * server mode"). The request has passed every check of server.c (Host, Origin, the bearer
 * token, the body cap) like any API route; the MCP part (sessions, versions, the Accept pair,
 * header checks) is src/mcpserve's transport, run with this request's runtime. The route runs on
 * a thread of its own with its connection suspended (server.c), so a 2026-07-28 request, which
 * its client cancels by closing the connection, looks at the socket (client_gone).
 * A tools/call that asks for progress is answered as a server-sent event stream (stream.c): the
 * call runs on a kept thread of its own with a runtime of the pool, its progress notifications
 * and then its response written to the stream as they come.
 */
#include "base/common.h"

#include "http/http_int.h"
#include "http/mhd.h"
#include "mcpserve/mcpserve.h"

static int client_gone(void *user)
{
    struct vg_req *r = user;
    return vg_http_conn_closed(r->conn);
}

static int server_stopping(void *user)
{
    struct vg_http *h = user;
    return atomic_load(&h->stopping);
}

static int request_server_stopping(void *user)
{
    struct vg_req *r = user;
    return server_stopping(r->h);
}

static void stream_write(void *user, const char *text, size_t len)
{
    vg_http_stream_write(user, text, len);
}

static int stream_closed(void *user)
{
    return vg_http_stream_closed(user);
}

static int stream_stopping(void *user)
{
    return server_stopping(vg_http_stream_server(user));
}

/* A streamed call's thread: a runtime of the pool for the call (the request's went back to it
 * when the route answered). */
static void call_thread(struct vg_http_stream *s, void *arg)
{
    struct vg_http *h = vg_http_stream_server(s);
    vigil_error err = {0};
    vigil_runtime *rt = vg_rt_pool_take(&h->pool, 1, &err);
    struct vg_mcpserve_stream_io io = {
        .user = s, .write = stream_write, .closed = stream_closed, .stopping = stream_stopping};
    vg_mcpserve_stream_run(arg, rt, &io);
    vg_rt_pool_give(&h->pool, rt);
}

static void call_free(void *arg)
{
    vg_mcpserve_stream_free(arg);
}

void vg_http_mcp_route(struct vg_req *r)
{
    struct vg_mcpserve_http_request q = {
        .method = r->method,
        .accept = vg_req_header(r, "Accept"),
        .content_type = vg_req_header(r, "Content-Type"),
        .session = vg_req_header(r, "Mcp-Session-Id"),
        .protocol_version = vg_req_header(r, "MCP-Protocol-Version"),
        .mcp_method = vg_req_header(r, "Mcp-Method"),
        .mcp_name = vg_req_header(r, "Mcp-Name"),
        .body = r->raw,
        .len = r->raw_len,
        .client_gone = client_gone,
        .stopping = request_server_stopping,
        .user = r,
        .can_stream = 1,
    };
    struct vg_mcpserve_http_answer a;
    vg_mcpserve_http(r->h->mcp, r->rt, &q, &a);
    if (a.stream) {
        vg_http_stream_start(r, "text/event-stream", call_thread, a.stream, call_free);
        return;
    }
    struct MHD_Response *resp =
        a.body ? MHD_create_response_from_buffer_with_free_callback(strlen(a.body), a.body, vg_free)
               : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp)
        vg_free(a.body);
    if (resp && a.session[0])
        MHD_add_response_header(resp, "Mcp-Session-Id", a.session);
    if (resp && a.allow)
        MHD_add_response_header(resp, "Allow", a.allow);
    vg_req_respond(r, resp, "application/json");
    if (resp)
        r->status = a.status;
}
