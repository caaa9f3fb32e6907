/*
 * mcp.h: the MCP client (docs/mcp.md, docs/internals/MCP.md). A declared server (config
 * `mcp_servers`) is a child process spoken to in JSON-RPC 2.0 over its stdin and stdout
 * (revision 2025-11-25: initialize, notifications/initialized, ping, tools/list, tools/call,
 * progress, cancellation, list_changed). Nothing starts until first use. Each server's tools are
 * served to the tool executor as `server__tool` vigil tools by a provider named "mcp", so they
 * pass the one gate like every tool.
 *
 * Layers: message.c reads one JSON-RPC message (the fuzzed reader); conf.c reads the config
 * section; stdio.c runs the child process; client.c is the lifecycle and the request loop;
 * contract.c turns MCP tool definitions and results into vigil's; provider.c is the port.
 */
#ifndef VG_MCP_H
#define VG_MCP_H

#include "base/common.h"

#include <jansson.h>

struct vg_clock;
struct vg_config;
struct vg_env;
struct vg_tool_executor;

/* ---- one JSON-RPC message (message.c) ------------------------------------------------------ */

enum vg_mcp_msg_kind { VG_MCP_INVALID, VG_MCP_REQUEST, VG_MCP_NOTIFICATION, VG_MCP_RESPONSE };

struct vg_mcp_msg {
    enum vg_mcp_msg_kind kind;
    json_t *root;       /* owned: the whole message (NULL when not JSON) */
    const char *method; /* requests and notifications */
    json_t *id;         /* borrowed: requests and responses (a response's may be JSON null) */
    json_t *params;     /* borrowed or NULL */
    json_t *result;     /* borrowed: a response's result, or NULL */
    json_t *error;      /* borrowed: a response's error object, or NULL */
    char why[160];      /* VG_MCP_INVALID: what is wrong */
};

/* Read one message (len bytes, no newline). Never fails harder than VG_MCP_INVALID: member
 * order does not matter, ids keep their JSON type (0 and "0" differ), a response holds exactly
 * one of result and error, an error has an integer code and a string message. */
enum vg_mcp_msg_kind vg_mcp_msg_parse(const char *text, size_t len, struct vg_mcp_msg *m);
void vg_mcp_msg_release(struct vg_mcp_msg *m);

/* A JSON-RPC error object as a vigil error: -32601 EUNSUPPORTED, -32602 EINVAL, -32001
 * ETIMEOUT, anything else EPROVIDER; the message names the server, code and text. */
vigil_code vg_mcp_rpc_error(const char *server, const json_t *error, vigil_error *err);

/* ---- configuration (conf.c) ----------------------------------------------------------------- */

struct vg_mcp_server_conf {
    char *name;      /* [a-z][a-z0-9_]*, no "__" (it separates server and tool) */
    char **argv;     /* stdio: NULL-terminated; NULL for url servers */
    char **env;      /* "NAME=template" (templates keep their ${VAR}s: secrets stay out) */
    char *cwd;       /* or NULL */
    int timeout_ms;  /* per request; default 60000 */
    char *url;       /* Streamable HTTP (not served yet: refused at first use) */
    json_t *headers; /* owned: url servers' headers (templates) */
    json_t *tools;   /* owned: per-tool overrides {MCP tool name: {risk, mutating, idempotent}} */
    size_t max_message; /* bytes of one message from the server; default 8 MiB */
};

struct vg_mcp_conf {
    struct vg_mcp_server_conf *servers;
    size_t n;
};

/* Read a config's `mcp_servers` mapping (borrowed; NULL: no servers). EINVAL names the server
 * and the key. *out owned: vg_mcp_conf_free. */
vigil_code vg_mcp_conf_parse(const json_t *mcp_servers, struct vg_mcp_conf **out, vigil_error *err);
void vg_mcp_conf_free(struct vg_mcp_conf *c);
/* Move server i of c into a conf of its own (*out owned); c keeps only its name there. */
vigil_code vg_mcp_conf_take(struct vg_mcp_conf *c, size_t i, struct vg_mcp_conf **out,
                            vigil_error *err);
const struct vg_mcp_server_conf *vg_mcp_conf_find(const struct vg_mcp_conf *c, const char *name);
/* SHA-256 hex of a server's declaration as written (env templates, not their values): the key
 * under which its tool list is cached. */
void vg_mcp_conf_hash(const struct vg_mcp_server_conf *s, char out[65]);
/* Replace each ${NAME} in template with the value of NAME in vigil's environment; "$${" is a
 * literal "${". An unset NAME: NULL with its name in missing (when missing is NULL: empty).
 * Owned result (vg_free), or NULL when out of memory (missing then ""). */
char *vg_mcp_interpolate(const char *template_text, char missing[130]);

/* ---- the client (client.c) ------------------------------------------------------------------ */

/* Receives a server's stderr lines and the client's own notes (never a secret). */
typedef void (*vg_mcp_log_fn)(void *user, const char *server, const char *line);

/* A log that prints "vigil: mcp SERVER: LINE" on stderr (the daemon's log). */
void vg_mcp_log_to_stderr(void *user, const char *server, const char *line);

struct vg_mcp_options {
    struct vg_clock *clock; /* measures timeouts and backoff; NULL: the real clock */
    vg_mcp_log_fn log;      /* the server's stderr lines and the client's notes. NULL: the
                             * notes go to stderr (vg_mcp_log_to_stderr) and the server's
                             * stderr only into the message of a failure (its last lines), so a
                             * command that succeeds prints none of the server's banners */
    void *log_user;
    int stop_grace_ms; /* after stdin closes, before SIGTERM (and again before SIGKILL);
                          0: 500 */
    int no_own_stream; /* url servers: open no stream of the server's own (listen.c), for a
                          one-shot command that cannot use what arrives on it */
};

struct vg_mcp_client;

/* A client for one server (conf borrowed: must outlive it). Starts nothing. */
vigil_code vg_mcp_client_new(const struct vg_mcp_server_conf *conf, const struct vg_mcp_options *o,
                             struct vg_mcp_client **out, vigil_error *err);
/* Stops the server (stdin closed, SIGTERM, SIGKILL, reaped) and frees the client. */
void vg_mcp_client_free(struct vg_mcp_client *c);
void vg_mcp_client_stop(struct vg_mcp_client *c);
/* Stop the server for good (its declaration was replaced): a request still waiting for the
 * client then fails with ENETWORK instead of starting the old declaration again. Waits for
 * the request in flight, if any. */
void vg_mcp_client_retire(struct vg_mcp_client *c);
/* "not started", "running", "down" (died or failed to start; restarted on next use after its
 * backoff). */
const char *vg_mcp_client_state(const struct vg_mcp_client *c);
/* The server process id while running, else 0 (the benchmark reads its CPU time). */
int vg_mcp_client_pid(const struct vg_mcp_client *c);
/* The server's initialize result (serverInfo, capabilities, instructions), borrowed, or NULL. */
json_t *vg_mcp_client_server_info(const struct vg_mcp_client *c);

/* The server's tools (borrowed array of MCP tool objects), starting it if needed and listing
 * again after notifications/tools/list_changed. */
vigil_code vg_mcp_client_tools(struct vg_mcp_client *c, json_t **tools, vigil_error *err);
/* 1 when the running server announced a change of its tools (or was started again) since
 * they were last listed; never starts it. */
int vg_mcp_client_tools_changed(struct vg_mcp_client *c);
/* tools/call: *result owned CallToolResult (isError included). A JSON-RPC error answer is a
 * vg_mcp_rpc_error; a dead server ENETWORK; no answer in time ETIMEOUT (after
 * notifications/cancelled); an answer over max_message ETOOBIG. args borrowed (NULL: {}). */
vigil_code vg_mcp_client_call(struct vg_mcp_client *c, const char *tool, json_t *args,
                              json_t **result, vigil_error *err);
/* vg_mcp_client_call, and *unanswered = 1 when it failed after its request reached a stdio
 * server whole and the server died (or closed its output) before answering: the tool may have
 * acted (trial L2). A timeout is told by its code (ETIMEOUT), not here. */
vigil_code vg_mcp_client_call_unanswered(struct vg_mcp_client *c, const char *tool, json_t *args,
                                         json_t **result, int *unanswered, vigil_error *err);
/* Any request (params stolen, may be NULL); timeout_ms <= 0: the server's. */
vigil_code vg_mcp_client_request(struct vg_mcp_client *c, const char *method, json_t *params,
                                 int timeout_ms, json_t **result, vigil_error *err);

/* ---- MCP tools as vigil tools (contract.c) -------------------------------------------------- */

/* "server__tool" for an MCP tool name: '-' and other characters outside [a-z0-9_.] become '_',
 * capitals lower case. 0, or -1 when the result is not a valid vigil tool name (too long). */
int vg_mcp_tool_name(const char *server, const char *tool, char *out, size_t n);
/* The vigil contract of one MCP tool (overrides: the server's `tools` entry for it, borrowed,
 * may be NULL). EUNSUPPORTED for a tool vigil cannot serve (a schema in a dialect the
 * validator cannot honour, taskSupport "required"), naming why. */
vigil_code vg_mcp_tool_contract(const char *server, const json_t *tool, const json_t *overrides,
                                json_t **contract, vigil_error *err);
/* Whether a schema uses JSON Schema 2020-12 features the draft-7 validator cannot honour:
 * 0 when it can be validated as draft 7, else -1 with the keyword in why. */
int vg_mcp_schema_dialect_ok(const json_t *schema, char *why, size_t n);
/* What the model reads of a CallToolResult: {"text": joined text (images, audio, links and
 * blobs described), "structured": structuredContent?}, text capped at max_text bytes. */
json_t *vg_mcp_result_for_model(const json_t *result, size_t max_text);

/* ---- the tool provider (provider.c) --------------------------------------------------------- */

/* The servers a runtime serves, kept in step with their declarations (mcp_servers borrowed):
 * vg_mcp_set_sync adds one "mcp" provider to x for each new server, gives a server whose
 * declaration changed (any key, by vg_mcp_conf_hash) a new client (the old one's process is stopped
 * now, the new one starts on first use) and makes a server no longer declared serve no tools. An
 * unchanged server is left alone, running or not. A server that cannot start or list is logged and
 * serves no tools; it does not fail the others. With env (may be NULL), each server's tool list is
 * cached in the store (kind "mcp_tools", id the server's name, keyed by vg_mcp_conf_hash): while
 * the declaration is unchanged, listing its tools starts nothing, and the server starts on the
 * first call of one of them. The providers belong to x; the set only points at them, so it is
 * freed before or after x. */
struct vg_mcp_set;
vigil_code vg_mcp_set_new(const struct vg_mcp_options *o, struct vg_env *env,
                          struct vg_mcp_set **out, vigil_error *err);
vigil_code vg_mcp_set_sync(struct vg_mcp_set *s, struct vg_tool_executor *x,
                           const json_t *mcp_servers, vigil_error *err);
void vg_mcp_set_free(struct vg_mcp_set *s);
/* Store tools (borrowed: the array tools/list gave) as the list of server as declared now, so
 * that the next listing of its tools offers them without starting it (`vigil mcp tools`). */
vigil_code vg_mcp_cache_tools(struct vg_env *env, const struct vg_mcp_server_conf *server,
                              json_t *tools, vigil_error *err);

#endif
