/*
 * live_http.h: a live `vigil serve --listen 127.0.0.1:0` for the HTTP API tests (tests/http):
 * the built binary ($VIGIL_CLI) started as a child on a fresh store, its port read from the
 * line it prints once it listens, and requests to it with libcurl or a raw socket.
 */
#ifndef VG_LIVE_HTTP_H
#define VG_LIVE_HTTP_H

#include <sys/types.h>

struct live {
    pid_t pid;
    int port;
    int err_fd; /* the daemon's stderr */
    char token[65];
    char dir[4096], store[4200];
};

/* Start a daemon in a fresh folder named name; extra: more `serve` arguments (NULL-ended, may
 * be NULL). Its wake runner is "echo", or $VIGIL_LIVE_RUNNER when set (one of
 * tests/helpers/wake_runners.c). Fails the test when it does not come up within 30 s. */
void live_start(struct live *L, const char *name, const char *const *extra);
/* live_start on the store at uri (a postgres:// store several daemons share), in a fresh
 * folder named name (the daemon's data folder: XDG_DATA_HOME). init: run `vigil init` first. */
void live_start_on(struct live *L, const char *name, const char *uri, int init,
                   const char *const *extra);
/* live_stop, then start it again on the same store (a new port and process). */
void live_restart(struct live *L, const char *const *extra);
/* SIGTERM and wait; fails the test when it does not exit 0 within 30 s. */
void live_stop(struct live *L);
/* 1 while the daemon process runs. */
int live_running(struct live *L);

struct live_resp {
    long status;
    char *body;    /* owned (free) */
    char *headers; /* owned (free) */
};

/* One request with libcurl. headers: NULL-ended extra header lines (may be NULL); auth: send
 * the right token. Returns the status (0 when the connection failed). */
long live_req(struct live *L, const char *method, const char *path, const char *body,
              const char *const *headers, int auth, struct live_resp *out);
void live_resp_free(struct live_resp *r);
/* Send raw bytes on a new connection and read the answer until the server closes or
 * wait_ms passes; returns the status of the first response line, 0 when none came, -1 when
 * the server closed without answering. out (may be NULL) receives up to n-1 bytes. */
int live_raw(struct live *L, const char *request, size_t len, int wait_ms, char *out, size_t n);
/* A new connection to the daemon (the test fails when it cannot connect); its socket. */
int live_connect(struct live *L);
/* GET path as an event stream on a raw connection (Last-Event-ID: last_id when not NULL);
 * returns the socket. */
int live_stream_open(struct live *L, const char *path, const char *last_id);
/* Read what came on the stream into buf (len bytes in it so far): the answer's head as it came,
 * then its body unframed from HTTP/1.1 chunks, so buf holds the events as the client's parser
 * sees them. Waits up to wait_ms; returns 1 when bytes came, 0 when none did, -1 when the
 * stream ended or buf is full. */
int live_stream_read(int fd, char *buf, size_t cap, size_t *len, int wait_ms);
/* Read the stream into buf (len bytes in it so far) until it holds needle; 1 when found, 0
 * when the stream ended, buf filled or 30 s passed (a safety bound, not a wait). */
int live_stream_until(int fd, char *buf, size_t cap, size_t *len, const char *needle);
/* Read the stream into buf until it holds `runs` run.ended events; fails the test when it
 * ends first or a read waits 30 s (a safety bound, not a wait). */
void live_stream_runs(int fd, char *buf, size_t cap, size_t *len, int runs);
/* Read the stream until it holds `runs` run.ended events or secs passed (heartbeats keep it
 * talking), then check that it holds exactly that many. */
void live_stream_ends_within(int fd, char *buf, size_t cap, size_t *len, int runs, int secs);
/* The ids of a stream's events in order, at most max; returns how many. */
int live_event_ids(const char *text, long long *ids, int max);
/* How many times needle stands in text. */
int live_count(const char *text, const char *needle);
/* POST /v1/agents {name, prompt "You help."}; its id into out. */
void live_agent_create(struct live *L, const char *name, char *out, size_t n);
/* POST /v1/agents/AGENT/chat {text}; fails the test unless it answers 200. */
void live_chat(struct live *L, const char *agent, const char *text);
/* A string member of a JSON object text, copied into out; "" when absent. */
const char *live_json_str(const char *json, const char *key, char *out, size_t n);

#endif
