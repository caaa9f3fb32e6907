/*
 * http.h: the daemon's HTTP face (docs/http.md): the JSON API under /v1/, live events
 * (GET /v1/events, server-sent events), GET /metrics (Prometheus text) and GET /openapi.json,
 * served with libmicrohttpd beside `vigil serve`. It uses only include/vigil.h on runtimes of
 * its own (a pool: each request's thread holds one for the request), so it sits above every
 * other module and the daemon starts it through its service port (wake/wake.h), never
 * including it.
 *
 * Access: a bearer token (token.c) on every route, compared in constant time; never from the
 * query string or a cookie. The Host header must name the listening address or localhost (DNS
 * rebinding); a request with an Origin other than the server's own is refused unless that
 * origin is configured. Bodies and headers are capped, idle clients time out, connections are
 * limited.
 */
#ifndef VG_HTTP_H
#define VG_HTTP_H

#include "base/common.h"

#include <stddef.h>

#define VG_HTTP_DEFAULT_PORT 7420
#define VG_HTTP_TOKEN_FILE "api-token"

struct vg_http_options {
    const char *store_path;   /* the store the runtimes open; required */
    const char *listen;       /* "HOST:PORT", "HOST" (port 7420) or "[::1]:PORT" */
    int allow_remote;         /* non-zero: a non-loopback address is allowed (with a warning) */
    const char *allow_origin; /* a cross-origin site allowed to call ("https://x.example") */
    const char *token;        /* the bearer token every request must carry; required */
    int max_connections;      /* 0: 256 */
    int timeout_s;            /* idle client timeout; 0: 30 */
    size_t max_body;          /* 0: 1 MiB */
    int events_poll_ms;       /* how often the event source reads the store; 0: 250 */
    int events_ring;          /* newest events kept in memory for the streams; 0: 4096 (max) */
    int heartbeat_ms;         /* event-stream heartbeat; 0: 10000, at most half of timeout */
    /* The task domain's database (borrowed; NULL: the domain is off): /v1/todo/'s routes
     * apply a person's edits to it (docs/todo.md). */
    struct vg_todo *todo;
    /* Optional: tell the daemon to look at its queue now (after a wake). */
    void (*poke)(void *poke_user);
    void *poke_user;
};

struct vg_http;
struct vg_todo;

/* Start serving; prints "vigil serve: HTTP API on http://HOST:PORT" on stderr. EINVAL (bad
 * address, a remote one without allow_remote), EBUSY (address in use), ENOMEM. */
vigil_code vg_http_start(const struct vg_http_options *o, struct vg_http **out, vigil_error *err);
/* Whether vg_http_start could listen at listen (NULL: 127.0.0.1:7420): the address parsed, a
 * remote one only with allow_remote, and a trial bind, so an address this machine does not have
 * is refused before the daemon takes its store. EINVAL saying why. */
vigil_code vg_http_check_listen(const char *listen, int allow_remote, vigil_error *err);
/* Stop accepting, end the event streams, wait for requests in flight, free. NULL is a no-op. */
void vg_http_stop(struct vg_http *h);

/*
 * The API token of a data folder: read from folder/api-token, or (create set) generated with
 * libsodium's randombytes (32 bytes, 64 hex characters) and written there with mode 0600.
 * ENOTFOUND (none and no create), EDENIED (the file is readable by others), EIO.
 */
vigil_code vg_http_token(const char *folder, int create, char out[65], vigil_error *err);

/*
 * The request-body reader every JSON route uses: at most max bytes of UTF-8 text holding one
 * JSON object nested at most 32 deep. *out (owned, json_decref) on success. ETOOBIG, EPARSE
 * (not JSON, invalid UTF-8), EINVAL (not an object, too deep).
 */
struct json_t;
vigil_code vg_http_body_parse(const char *data, size_t len, size_t max, struct json_t **out,
                              vigil_error *err);

#endif
