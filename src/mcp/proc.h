/*
 * proc.h: the transports of an MCP server, shared by client.c only: a child process over stdio
 * (stdio.c) and Streamable HTTP (http.c).
 */
#ifndef VG_MCP_PROC_H
#define VG_MCP_PROC_H

#include "mcp/mcp.h"

#include <sys/types.h>

struct vg_mcp_proc {
    pid_t pid; /* the child, leader of its own process group; 0 when none */
    int in;    /* its stdin (a socket: a write to a dead child is EPIPE, never SIGPIPE) */
    int out;   /* its stdout */
    int err;   /* its stderr */
};

/* Start the server of s: argv in its own process group, working directory s->cwd, environment
 * HOME LOGNAME PATH SHELL TERM USER from vigil's plus s->env interpolated (the interpolated
 * copies are wiped once the child has them). The three descriptors are non-blocking. */
vigil_code vg_mcp_proc_start(const struct vg_mcp_server_conf *s, struct vg_mcp_proc *p,
                             vigil_error *err);
/* Stop: close stdin, wait up to grace_ms for the exit, SIGTERM the group, wait again,
 * SIGKILL the group; the child is reaped and the descriptors closed. *status gets the wait
 * status (may be NULL). A stopped proc (pid 0) is left alone. */
void vg_mcp_proc_stop(struct vg_mcp_proc *p, struct vg_clock *clock, int grace_ms, int *status);

struct vg_http_headers;

/* What a client keeps between its POSTs (http.c): the proxy read from the environment once
 * (libcurl would read five variables a request), and the last POST's header list, reused while
 * the session and version are the same and no header holds a secret. */
struct vg_mcp_http_kept {
    int proxy_read; /* 1: proxy and noproxy hold the environment's; -1: they did not fit */
    char proxy[1024], noproxy[1024];
    struct vg_http_headers *headers; /* NULL: none kept */
    char session[256], version[32];  /* what headers were built for */
};
void vg_mcp_http_kept_release(struct vg_mcp_http_kept *k);

/* A Streamable HTTP server's connection state. */
struct vg_mcp_http {
    char session[256];  /* Mcp-Session-Id the server assigned, "" when none */
    char version[32];   /* MCP-Protocol-Version for every POST after initialize, "" before */
    long status;        /* the last POST's HTTP status (0: no answer) */
    const char *method; /* 2026-07-28: this POST's Mcp-Method and Mcp-Name, or NULL */
    const char *name;
    int holds_streams;             /* it kept a POST's stream open past its response (http.c) */
    struct vg_mcp_http_kept *kept; /* the client's; NULL in a copy (listen.c): nothing kept */
};

/* ---- revision 2026-07-28 (modern.c) ---------------------------------------------------------- */

/* A copy of params (borrowed, may be NULL) with the per-request _meta of 2026-07-28 added
 * (protocol version, client info, no client capabilities), keeping its own _meta keys. */
json_t *vg_mcp_modern_params(const json_t *params);
/* 1 when a server/discover result offers 2026-07-28. */
int vg_mcp_modern_offered(const json_t *discover_result);
/* A 2026-07-28 result's resultType: "complete" (or none) and "input_required" are VIGIL_OK;
 * anything else EPROVIDER. */
vigil_code vg_mcp_modern_result(const char *server, const json_t *result, vigil_error *err);
/* 1 when a result is "input_required" (a multi-round-trip request, MCP.md MCP-50). */
int vg_mcp_modern_input_required(const json_t *result);
/* The params of the follow-up to a request (params borrowed, may be NULL) answered
 * input_required (result): the same params with `inputResponses` (an elicitation declined, no
 * roots) and the result's `requestState` echoed; owned.
 * EUNSUPPORTED naming the input vigil cannot give (sampling, anything else). */
vigil_code vg_mcp_modern_follow_up(const char *server, const json_t *params, const json_t *result,
                                   json_t **next, vigil_error *err);

/* A 2026-07-28 header value mirrored from the body (Mcp-Name): as written when it is plain
 * visible ASCII, else the Base64 sentinel "=?base64?...?=" (also for a plain value that looks
 * like one). Owned, or NULL when out of memory. */
char *vg_mcp_header_value(const char *value);

/* One message from the server (text of len bytes): 1 when it was the response awaited, which
 * ends the read. */
typedef int (*vg_mcp_http_msg_fn)(void *user, const char *text, size_t len);

/* POST one JSON-RPC message (body) to s->url and hand every message of the answer (a JSON
 * body, or each event of an SSE stream) to fn until it returns 1 or the answer ends; 202 has
 * none. A session id in the answer is kept in h. HTTP 404, or 400 naming the session:
 * ENOTFOUND (an expired session); 401: EAUTH; 403: EDENIED;
 * another non-2xx without a JSON-RPC answer: EPROVIDER; transport failures as vg_http_perform
 * (ETIMEOUT, ENETWORK, ETOOBIG over s->max_message). */
vigil_code vg_mcp_http_post(struct vg_mcp_http *h, const struct vg_mcp_server_conf *s,
                            const char *body, size_t len, int timeout_ms, vg_mcp_http_msg_fn fn,
                            void *user, vigil_error *err);

/* The header lines of a request to s (at most max + 4, owned: vg_mcp_http_headers_free, which
 * wipes the interpolated secrets): Content-Type, Accept, the session, the protocol version, the
 * 2026-07-28 method and name of h, and the declared headers. */
size_t vg_mcp_http_headers(const struct vg_mcp_server_conf *s, const struct vg_mcp_http *h,
                           char **lines, size_t max);
void vg_mcp_http_headers_free(char **lines, size_t n);

/* ---- the server's own stream (listen.c) ------------------------------------------------------ */

/* A notification the server sent on its own stream (called on the listener's thread). */
typedef void (*vg_mcp_listen_fn)(void *user, const struct vg_mcp_msg *m);
struct vg_mcp_listener;
/* Keep the server's stream open on a thread of its own: the GET of 2025-11-25 (h's session), or
 * subscriptions/listen (tool-list changes) when modern; reconnect when it drops. h is copied;
 * s borrowed (must outlive the listener). */
vigil_code vg_mcp_listen_start(const struct vg_mcp_server_conf *s, const struct vg_mcp_http *h,
                               int modern, vg_mcp_listen_fn fn, void *user,
                               struct vg_mcp_listener **out, vigil_error *err);
/* Close the stream and join the thread (within about a second: curl's progress cadence). */
void vg_mcp_listen_stop(struct vg_mcp_listener *l);

#endif
