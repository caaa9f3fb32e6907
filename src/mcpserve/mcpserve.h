/*
 * mcpserve.h: vigil as an MCP server (`vigil mcp serve`, docs/mcp.md "vigil as an MCP server").
 * The store's public agents become tools (talk to one, wake one, read its report) and their
 * reports and memory blocks read-only resources, under the lifecycle of MCP revision 2025-11-25.
 * Not part of libvigil: a static library only the command links; it uses include/vigil.h and
 * src/base, nothing else of vigil. The JSON-RPC reader here is the server's own (the MCP client
 * in src/mcp has its own for the other direction).
 */
#ifndef VG_MCPSERVE_H
#define VG_MCPSERVE_H

#include "base/common.h"

#include <jansson.h>
#include <stdio.h>

/* The largest message the server reads; a longer line is answered -32600 and skipped. */
#define VG_MCPSERVE_MAX_MESSAGE (4u << 20)

/* JSON-RPC and MCP error codes the server answers with. */
#define VG_RPC_PARSE_ERROR (-32700)
#define VG_RPC_INVALID_REQUEST (-32600)
#define VG_RPC_METHOD_NOT_FOUND (-32601)
#define VG_RPC_INVALID_PARAMS (-32602)
#define VG_RPC_INTERNAL_ERROR (-32603)
#define VG_MCP_RESOURCE_NOT_FOUND (-32002)

/* One message read from the client. */
struct vg_rpc_message {
    json_t *root;       /* the whole message (owned) */
    const char *method; /* NULL for a response from the client */
    json_t *id;         /* borrowed from root; NULL for a notification */
    json_t *params;     /* borrowed from root; NULL when absent */
};

/*
 * Read one message from its text (one stdio line without the newline). On success *m holds it
 * and the return is NULL. On failure the return is the error reply to send (owned; its id is
 * the request's when it could be read, else null) and *m is empty.
 */
json_t *vg_rpc_read(const char *text, size_t len, struct vg_rpc_message *m);
void vg_rpc_message_clear(struct vg_rpc_message *m);

/* Replies (owned). id may be NULL (sent as null). */
json_t *vg_rpc_result(json_t *id, json_t *result /* stolen */);
json_t *vg_rpc_error(json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * What a transport lends the server for long tool calls (talking to an agent): a way to send
 * the client a notification now (progress), and the client's cancellation of a request. Every
 * member may be NULL: no progress is sent, nothing is ever cancelled.
 */
struct vg_mcpserve_hooks {
    void *user;
    /* Send msg (a JSON-RPC notification, owned) to the client before the request's answer. */
    void (*notify)(void *user, json_t *msg);
    /* Non-zero once the client sent notifications/cancelled for the request id. Polled during
     * the call; a cancelled request gets no answer (MCP: the receiver should not respond). */
    int (*cancelled)(void *user, const json_t *id);
};

/* One tools/call as the catalogue sees it: the hooks, the request's id and the client's
 * progress token (params._meta.progressToken, NULL when it asked for no progress). */
struct vg_mcpserve_call_ctx {
    const struct vg_mcpserve_hooks *hooks;
    const json_t *id, *progress_token;
    double progress; /* increases with each progress notification sent */
};

/* A notifications/progress for ctx's token (nothing without a token or a notify hook). */
void vg_mcpserve_progress(struct vg_mcpserve_call_ctx *ctx, const char *message);
/* Whether ctx's request was cancelled by the client. */
int vg_mcpserve_cancelled(const struct vg_mcpserve_call_ctx *ctx);

struct vg_mcpserve_options {
    vigil_runtime *rt;                     /* borrowed; the store whose agents are served */
    const struct vg_mcpserve_hooks *hooks; /* may be NULL */
    int page_size;                         /* items per tools/list and resources/list page; 0: 50 */
    /* Non-NULL: a session initialize already opened at this protocol version (Streamable
     * HTTP: one server per request, the session's state kept by the transport). */
    const char *session_version;
};

struct vg_mcpserve;

vigil_code vg_mcpserve_new(const struct vg_mcpserve_options *o, struct vg_mcpserve **out,
                           vigil_error *err);
void vg_mcpserve_free(struct vg_mcpserve *s);
/* Whether the server speaks protocol version v (a 2025-11-25-era one, or 2026-07-28). */
int vg_mcpserve_version_supported(const char *v);

/* Answer one message text: the reply (owned) or NULL when nothing is to be sent. */
json_t *vg_mcpserve_handle(struct vg_mcpserve *s, const char *text, size_t len);

/*
 * Serve newline-delimited messages from in to out until in ends (stdio transport): only
 * protocol messages are written to out; diagnostics go to log (stderr). Returns 0 at EOF.
 * A reader thread reads in meanwhile, so a notifications/cancelled reaches a call in progress;
 * a tools/call with a progress token gets notifications/progress on out. s's hooks are set
 * here (any given to vg_mcpserve_new are replaced for the call).
 */
int vg_mcpserve_stdio(struct vg_mcpserve *s, FILE *in, FILE *out, FILE *log);

/* How many agents the server exposes now (visibility external, not destroyed). */
vigil_code vg_mcpserve_exposed_count(vigil_runtime *rt, size_t *n, vigil_error *err);

/*
 * The Streamable HTTP transport (streamable.c; MCP revision 2025-11-25 with sessions, and
 * 2026-07-28 without): one HTTP request to the MCP endpoint in, its answer out. The caller (the
 * daemon's /mcp route) has already checked the token, Host and Origin; this is the MCP part:
 * the Accept pair (406), sessions (Mcp-Session-Id assigned at initialize; 400 without one, 404
 * for an unknown or ended one), MCP-Protocol-Version (400 when unsupported), the 2026-07-28
 * headers that must match the body (Mcp-Method, Mcp-Name: -32020), 202 for notifications and
 * responses, DELETE to end a session, 405 for GET (no server-initiated stream).
 * A tools/call carrying params._meta.progressToken, from a client that takes text/event-stream
 * (every client must), is answered as an SSE stream scoped to it: its notifications/progress,
 * then its response, which ends the stream (MCP 2025-11-25 and 2026-07-28 "Sending Messages").
 * The answer then holds the call (a->stream) for the caller to run on a thread of its own with
 * vg_mcpserve_stream_run; every check has been made before, so a refusal is never a stream.
 */
struct vg_mcpserve_http_request {
    const char *method; /* "POST", "GET", "DELETE" */
    const char *accept, *content_type, *session, *protocol_version, *mcp_method, *mcp_name;
    const char *body;
    size_t len;
    /* The HTTP layer's hook (user is its own; may be NULL): non-zero once the client closed
     * its connection, which cancels a 2026-07-28 request (closing the response stream is its
     * cancellation; in 2025-11-25 it is not). */
    int (*client_gone)(void *user);
    /* Non-zero once the server stops: a call running then is cancelled, so a stop never waits
     * out a long agent turn (may be NULL). */
    int (*stopping)(void *user);
    void *user;
    /* Non-zero: the caller can answer with a stream (a->stream); zero: always one JSON body. */
    int can_stream;
};
struct vg_mcpserve_stream;
struct vg_mcpserve_http_answer {
    int status;        /* 200, 202, 204, 400, 404, 405, 406, 415 */
    char *body;        /* JSON text (owned, vg_free) or NULL for none */
    char session[72];  /* an Mcp-Session-Id to send, or "" */
    const char *allow; /* the Allow header of a 405 */
    /* Non-NULL (status 200, no body): answer with an SSE stream (text/event-stream) whose
     * events vg_mcpserve_stream_run writes; owned, freed by vg_mcpserve_stream_free. */
    struct vg_mcpserve_stream *stream;
};
struct vg_mcpserve_sessions;
/* max: sessions kept at once (0: 1024); past it the least recently used one ends. */
vigil_code vg_mcpserve_sessions_new(int page_size, int max, struct vg_mcpserve_sessions **out,
                                    vigil_error *err);
void vg_mcpserve_sessions_free(struct vg_mcpserve_sessions *t);
/* Sessions open now (for /metrics). */
int vg_mcpserve_sessions_count(struct vg_mcpserve_sessions *t);
/* Answer one HTTP request with rt (borrowed for this call; requests may run at once). rt may
 * be NULL for a message that is no request (a notification, a response): those never use it. */
void vg_mcpserve_http(struct vg_mcpserve_sessions *t, vigil_runtime *rt,
                      const struct vg_mcpserve_http_request *q, struct vg_mcpserve_http_answer *a);

/* What a streamed call writes to and asks while it runs (on the caller's thread). */
struct vg_mcpserve_stream_io {
    void *user;
    /* Append text (whole SSE events) to the stream, sent as it comes. */
    void (*write)(void *user, const char *text, size_t len);
    /* Non-zero once the client closed the stream: in 2026-07-28 that cancels the call (in
     * 2025-11-25 it does not: only notifications/cancelled does). */
    int (*closed)(void *user);
    /* Non-zero once the server stops: the call is cancelled (may be NULL). */
    int (*stopping)(void *user);
};
/* Run the call of a streamed answer on rt: each notifications/progress, then the response, is
 * written as an SSE event "event: message" whose data is the JSON-RPC message. A cancelled call
 * writes nothing more (no response). rt NULL: the response is an internal error. */
void vg_mcpserve_stream_run(struct vg_mcpserve_stream *st, vigil_runtime *rt,
                            const struct vg_mcpserve_stream_io *io);
void vg_mcpserve_stream_free(struct vg_mcpserve_stream *st);

/* Catalogue (agents.c): tools and resources of the public agents. */
json_t *vg_mcpserve_tools(vigil_runtime *rt, vigil_error *err);
json_t *vg_mcpserve_resources(vigil_runtime *rt, vigil_error *err);
/* A tools/call: the CallToolResult (owned), or NULL with *code and err for a protocol error. */
json_t *vg_mcpserve_call(vigil_runtime *rt, const char *name, json_t *args,
                         struct vg_mcpserve_call_ctx *ctx, int *code, vigil_error *err);
/* A resources/read: the ReadResourceResult (owned), or NULL with *code and err. */
json_t *vg_mcpserve_read_resource(vigil_runtime *rt, const char *uri, int *code, vigil_error *err);

#endif
