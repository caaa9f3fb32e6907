/*
 * http_server.h: a loopback HTTP/1.1 server for tests. It listens on 127.0.0.1 on an ephemeral
 * port in its own thread and answers the Nth request with the Nth scripted response (the last
 * one repeats), recording each request's method, path, headers and body. A response can be cut
 * mid-body, delivered in tiny chunks, or stalled until the client gives up.
 */
#ifndef VG_TEST_HTTP_SERVER_H
#define VG_TEST_HTTP_SERVER_H

#include <stddef.h>

struct vg_ts_response {
    int status;          /* 200 when 0 */
    const char *headers; /* extra header lines, each ending in \r\n; may be NULL */
    const char *body;    /* may be NULL */
    size_t body_len;     /* 0: strlen(body) */
    size_t chunk;        /* > 0: chunked transfer encoding with pieces of this many bytes */
    size_t cut_after;    /* > 0: close the connection after this many body bytes */
    int stall;           /* non-zero: send nothing and wait for the client to hang up */
};

struct vg_ts_request {
    char method[16];
    char path[1024];
    char *headers; /* raw header block, lines ending in \r\n */
    char *body;    /* NUL-terminated */
    size_t body_len;
};

struct vg_test_server;

/* Start serving; responses are borrowed and must outlive the server. */
struct vg_test_server *vg_test_server_start(const struct vg_ts_response *responses, size_t n);
/* "http://127.0.0.1:PORT" (no trailing slash). */
const char *vg_test_server_url(struct vg_test_server *s);
/* Requests received so far. */
size_t vg_test_server_count(struct vg_test_server *s);
const struct vg_ts_request *vg_test_server_request(struct vg_test_server *s, size_t i);
/* A request header's value (case-insensitive name), copied into a static buffer; NULL if absent. */
const char *vg_ts_header(const struct vg_ts_request *r, const char *name);
void vg_test_server_stop(struct vg_test_server *s);

/* Read a test fixture under tests/fixtures/ (owned, vg_free); exits the test on failure. */
char *vg_test_fixture(const char *relpath, size_t *len);

#endif
