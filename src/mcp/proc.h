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

/* A Streamable HTTP server's connection state. */
struct vg_mcp_http {
    char session[256]; /* Mcp-Session-Id the server assigned, "" when none */
    char version[32];  /* MCP-Protocol-Version for every POST after initialize, "" before */
    long status;       /* the last POST's HTTP status (0: no answer) */
};

/* One message from the server (text of len bytes): 1 when it was the response awaited, which
 * ends the read. */
typedef int (*vg_mcp_http_msg_fn)(void *user, const char *text, size_t len);

/* POST one JSON-RPC message (body) to s->url and hand every message of the answer (a JSON
 * body, or each event of an SSE stream) to fn until it returns 1 or the answer ends; 202 has
 * none. A session id in the answer is kept in h. HTTP 404, or 400 naming the session:
 * ENOTFOUND (an expired session);
 * another non-2xx without a JSON-RPC answer: EPROVIDER; transport failures as vg_http_perform
 * (ETIMEOUT, ENETWORK, ETOOBIG over s->max_message). */
vigil_code vg_mcp_http_post(struct vg_mcp_http *h, const struct vg_mcp_server_conf *s,
                            const char *body, size_t len, int timeout_ms, vg_mcp_http_msg_fn fn,
                            void *user, vigil_error *err);

#endif
