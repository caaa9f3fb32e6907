/*
 * http_int.h: what the files of src/http share: the server, one request as a handler sees it,
 * the route table, the runtime pool and the event hub.
 */
#ifndef VG_HTTP_INT_H
#define VG_HTTP_INT_H

#include "base/buf.h"
#include "http/http.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

struct MHD_Daemon;
struct MHD_Connection;
struct MHD_Response;
struct vg_events;
struct vg_mcpserve_sessions;

/* Runtimes for request threads: taken for one request, given back after. At most
 * VG_RT_POOL_MAX are open; a request waits for one when all are in use (more handlers at once
 * than that would only take turns on the store and the cores). */
#define VG_RT_POOL_MAX 64
struct vg_rt_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    vigil_runtime *free[VG_RT_POOL_MAX];
    /* Runtimes kept by libmicrohttpd's threads between their requests (server.c,
     * thread_runtime): counted in n_open, closed when the server stops. */
    vigil_runtime *kept[VG_RT_POOL_MAX];
    int n_free, n_open, n_kept;
    char *store_path;
};
/* A runtime on store_path as every one of the server's is opened: then handed to the daemon's
 * on_runtime (vigil_daemon_on_runtime), so the program's tools (`vigil todo`'s) are on it as on
 * the daemon's workers. Closed and NULL on failure. */
vigil_code vg_http_runtime_open(const char *store_path, vigil_runtime **out, vigil_error *err);
/* A runtime of the pool, opened when none is free; when VG_RT_POOL_MAX are in use, waits for
 * one (wait) or returns NULL with err left VIGIL_OK. */
vigil_runtime *vg_rt_pool_take(struct vg_rt_pool *p, int wait, vigil_error *err);
void vg_rt_pool_give(struct vg_rt_pool *p, vigil_runtime *rt);

/* Kept threads for work that may wait for a whole turn (workers.c). */
struct vg_http_workers {
    pthread_mutex_t mu;
    pthread_cond_t cv, gone;
    struct vg_http_job *head, *tail;
    int threads, idle, queued, stopping;
    int returning; /* threads in a job's then(), about to take the next job without waiting */
};
void vg_http_workers_init(struct vg_http_workers *w);
/* Run fn(arg) on a kept thread, then then(arg) (when given) with the thread already counted
 * idle: what then() sets off (an answer sent, so the client's next request) finds this thread
 * instead of starting another. 0 when handed to a thread, -1 when no thread could take it. */
int vg_http_work(struct vg_http_workers *w, void (*fn)(void *arg), void (*then)(void *arg),
                 void *arg);
/* Run what is queued, then end the threads and wait for them; vg_http_work refuses from
 * then on. The lock goes with vg_http_workers_free, once no request can come (libmicrohttpd
 * stopped). */
void vg_http_workers_stop(struct vg_http_workers *w);
void vg_http_workers_free(struct vg_http_workers *w);

/* The most threads of libmicrohttpd's pool (one a core, server.c). */
#define VG_HTTP_POOL_MAX 16

struct vg_http {
    struct vg_http_options o;
    char *token, *allow_origin, *store_path;
    char host[256];        /* the address as a Host header names it: "127.0.0.1:7420" */
    char self_origin[300]; /* "http://" + host */
    int port;
    struct MHD_Daemon *mhd;
    struct vg_rt_pool pool;
    struct vg_events *events;
    struct vg_mcpserve_sessions *mcp; /* /mcp's sessions (revision 2025-11-25) */
    atomic_long requests_total, refused_total;
    atomic_int stopping;  /* set by vg_http_stop: streamed chats end their streams */
    atomic_int listening; /* libmicrohttpd started: its messages are shown from then on */
    /* Threads still running outside libmicrohttpd's pool, each holding a suspended connection
     * it will resume: streamed chat turns and offloaded handlers (under pool.mu, pool.cv). */
    int chat_threads;
    struct vg_http_workers workers; /* the threads they run on */
    /* Long routes run on the thread that read them instead (server.c, run_here): the open
     * connections each thread of libmicrohttpd's pool holds (watch.c counts them: a slot per
     * thread, taken at its first connection), and how many threads run such a route now. */
    unsigned pool_threads;
    atomic_int pool_conns[VG_HTTP_POOL_MAX];
    atomic_int n_pool_slots;
    atomic_int routes_here;
    /* The header deadline (watch.c): open connections, and the thread that cuts slow ones. */
    pthread_mutex_t watch_mu;
    pthread_cond_t watch_cv;
    struct vg_conn_watch *watched;
    int n_watched; /* connections open, against o.max_connections */
    pthread_t watch_thread;
    int watch_started, watch_stop;
    atomic_long header_deadline_cuts;
};

/* One request as a handler sees it. */
struct vg_req {
    struct vg_http *h;
    struct MHD_Connection *conn;
    const char *method, *path;
    const char *params[3]; /* the {name} segments of the route, in order */
    char param_buf[3][256];
    json_t *body;    /* the parsed body of a POST, or NULL */
    const char *raw; /* the body as received (routes without a parsed body: /mcp) */
    size_t raw_len;
    vigil_runtime *rt; /* from the pool, for this request */
    int no_runtime;    /* served without one (an MCP notification: server.c) */
    const struct vg_route *route;
    /* The answer: status and JSON text (owned), or a response already built (SSE). */
    int status;
    char *json;
    struct MHD_Response *response;
    int64_t retry_after_s; /* > 0: sent as Retry-After (a spent budget's reset) */
};

typedef void (*vg_route_fn)(struct vg_req *r);

struct vg_route {
    const char *method;  /* "GET", "POST", "DELETE" */
    const char *pattern; /* "/v1/agents/{agent}/chat": {name} is one path segment */
    vg_route_fn fn;
    int ok_status;       /* what success answers: 200, 201, 204 */
    int body;            /* 1: a JSON object body is read (may be empty for optional); 2: the
                          * same, or YAML text left in r->raw when Content-Type says YAML */
    const char *summary; /* for /openapi.json */
    const char *query;   /* query parameters, comma separated, for /openapi.json */
    /* For fn = vg_http_by_id: the API function that reads one thing by the path's id. */
    vigil_code (*by_id)(vigil_runtime *rt, const char *id, char **out_json, vigil_error *err);
    /* The members a JSON body may hold, comma separated: any other is refused 400 naming it, so
     * a typo is never taken silently (NULL: the body is not a fixed set, e.g. a manifest). */
    const char *members;
};

/* Whether a route may wait a long time (a turn, a tool, a program): then it runs on a worker
 * thread, not on one of libmicrohttpd's few, which every other request needs (unless no other
 * client needs the one that read it: server.c, run_here). */
int vg_http_route_waits(const struct vg_route *route);

/* Under /v1/agents/{agent}, an agent's name in place of its id becomes that agent's id, as the
 * CLI takes names; 0, or 1 when refused (two agents of the name: the answer in r). */
int vg_http_agent_by_name(struct vg_req *r);
/* The agent arg names (its id, or the name of one agent as above) into out: 0, or 1 when
 * refused (the answer in r). A name of no agent is copied as it is, for the caller's
 * not-found answer. */
int vg_http_agent_id(struct vg_req *r, const char *arg, char *out, size_t out_len);

/* The handler of every route that answers one vigil.h read by the path's id. */
void vg_http_by_id(struct vg_req *r);

/* The task domain's person routes (todo.c, /v1/todo/: docs/todo.md). */
void vg_http_todo_list(struct vg_req *r);
void vg_http_todo_add(struct vg_req *r);
void vg_http_todo_show(struct vg_req *r);
void vg_http_todo_edit(struct vg_req *r);
void vg_http_todo_delete_restore(struct vg_req *r);
void vg_http_todo_items_add(struct vg_req *r);
void vg_http_todo_item_edit(struct vg_req *r);
void vg_http_todo_conclude(struct vg_req *r);

extern const struct vg_route vg_http_routes[];
extern const size_t vg_http_n_routes;

/* The route for method and path: 0 and *out, or 404 (no such path) or 405 (other methods). */
int vg_http_route_find(const char *method, const char *path, const struct vg_route **out,
                       char params[3][256]);

/* Answer with a response built by the handler (a stream, text): ENOMEM when resp is NULL. */
void vg_req_respond(struct vg_req *r, struct MHD_Response *resp, const char *content_type);
/* Answer helpers for handlers. */
void vg_req_error(struct vg_req *r, vigil_code code, const char *message);
void vg_req_fail(struct vg_req *r, vigil_code code, const vigil_error *err);
void vg_req_json(struct vg_req *r, int status, char *owned_json);
/* Answer with a JSON value (taken: decref'd). */
void vg_req_value(struct vg_req *r, int status, json_t *v);
/* Answer with code's result: owned JSON text on success (NULL: {"ok":true}), else err. */
void vg_req_answer(struct vg_req *r, vigil_code code, char *owned_json, const vigil_error *err);
const char *vg_req_query(struct vg_req *r, const char *key);
const char *vg_req_header(struct vg_req *r, const char *key);
/* A string member of the body, or NULL; *bad set when present and not a string. */
const char *vg_req_str(struct vg_req *r, const char *key, int *bad);
/* ?limit=: 0 when absent; -1 when not a number from 1 to 1000. */
int vg_req_limit(struct vg_req *r);

/* Condition variables whose timed waits run on CLOCK_MONOTONIC (a wall-clock step never
 * stretches or cuts a wait), and the deadline ms from now on that clock for them. */
void vg_http_cond_init(pthread_cond_t *cv);
void vg_http_deadline(struct timespec *until, int64_t ms);

/* A response a thread of its own writes (stream.c): fn(s, arg) runs on it, and r is answered
 * with the stream (content_type); free_arg(arg) when both are done with it. */
struct vg_http_stream;
typedef void (*vg_http_stream_fn)(struct vg_http_stream *s, void *arg);
void vg_http_stream_start(struct vg_req *r, const char *content_type, vg_http_stream_fn fn,
                          void *arg, void (*free_arg)(void *arg));
void vg_http_stream_write(struct vg_http_stream *s, const char *text, size_t len);
/* The stream's last bytes are written: it ends once they are sent, while fn goes on with work
 * of its own after its answer (a turn's upkeep); nothing more is written to it. */
void vg_http_stream_end(struct vg_http_stream *s);
/* Non-zero once the client went away or the server stops: the work should cancel itself. */
int vg_http_stream_gone(struct vg_http_stream *s);
/* Whether the client closed conn (its end shut: POLLRDHUP, or reset); conn must be suspended
 * or in a callback of libmicrohttpd's for it. */
int vg_http_conn_closed(struct MHD_Connection *conn);
/* Non-zero once the client closed the connection (the server stopping aside). */
int vg_http_stream_closed(struct vg_http_stream *s);
struct vg_http *vg_http_stream_server(struct vg_http_stream *s);

/* Handlers that live outside routes.c. */
void vg_http_events_route(struct vg_req *r);
void vg_http_metrics_route(struct vg_req *r);
void vg_http_openapi_route(struct vg_req *r);
void vg_http_chat_route(struct vg_req *r);
void vg_http_mcp_route(struct vg_req *r);
/* An agent's run journals (journal.c): export (JSON lines) and import. */
void vg_http_journal_export(struct vg_req *r);
void vg_http_journal_import(struct vg_req *r);
/* The code sandbox (sandbox.c): what this machine offers; one program run. */
void vg_http_sandbox_check(struct vg_req *r);
void vg_http_sandbox_run(struct vg_req *r);
/* The task graph (graph.c), read: the list (?status=) and the graph... */
void vg_http_tasks_list(struct vg_req *r);
void vg_http_tasks_graph(struct vg_req *r);
/* ... and written: add, an edge, cancel, dispatch. */
void vg_http_task_add(struct vg_req *r);
void vg_http_task_block(struct vg_req *r);
void vg_http_task_cancel(struct vg_req *r);
void vg_http_task_dispatch(struct vg_req *r);
/* Multi-device sync (sync.c): one message of the exchange, the route's last segment. */
void vg_http_sync_route(struct vg_req *r);
/* The run controls (runctl.c): cancel; rerun and resume. */
void vg_http_run_cancel(struct vg_req *r);
void vg_http_run_again(struct vg_req *r);

/* The header deadline (watch.c): notify is libmicrohttpd's connection callback (cls: the
 * server); request marks a connection's request begun (headers in) or ended. */
enum MHD_ConnectionNotificationCode;
void vg_http_watch_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe);
void vg_http_watch_request(struct vg_http *h, struct MHD_Connection *conn, int in_request);
/* The open connections of the calling thread of libmicrohttpd's pool (its slot in
 * h->pool_conns), or NULL past VG_HTTP_POOL_MAX threads. */
atomic_int *vg_http_thread_conns(struct vg_http *h);
vigil_code vg_http_watch_start(struct vg_http *h, vigil_error *err);
void vg_http_watch_stop(struct vg_http *h);

/* The event hub: a poller thread reads new runs, messages, tool calls, approvals, pending
 * memory changes and kill switches from the store into a ring; streams read the ring. */
vigil_code vg_events_start(struct vg_http *h, struct vg_events **out, vigil_error *err);
/* stop: streams end and the poller stops; free: after the server has stopped. */
void vg_events_stop(struct vg_events *ev);
void vg_events_free(struct vg_events *ev);
/* Counters for /metrics, appended as Prometheus text. */
void vg_events_metrics(struct vg_events *ev, struct vg_buf *b);

#endif
