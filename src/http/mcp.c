/*
 * mcp.c: /mcp, vigil as an MCP server over Streamable HTTP on the daemon (docs/http.md "MCP
 * server mode"). The request has passed every check of server.c (Host, Origin, the bearer
 * token, the body cap) like any API route; the MCP part (sessions, versions, the Accept pair,
 * header checks) is src/mcpserve's transport, run with this request's runtime. The route runs on
 * a thread of its own with its connection suspended (server.c), so a 2026-07-28 request, which
 * its client cancels by closing the connection, looks at the socket (client_gone).
 */
#include "base/common.h"

#include "http/http_int.h"
#include "mcpserve/mcpserve.h"

#include <microhttpd.h>
#include <poll.h>

/* Whether the client closed the request's connection (its end shut: POLLRDHUP, or reset). */
static int client_gone(void *user)
{
    struct vg_req *r = user;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct pollfd p = {.fd = info ? info->connect_fd : -1, .events = POLLRDHUP};
    return p.fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
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
        .user = r,
    };
    struct vg_mcpserve_http_answer a;
    vg_mcpserve_http(r->h->mcp, r->rt, &q, &a);
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
