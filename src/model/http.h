/*
 * http.h: the one libcurl wrapper the model adapters share. One request per call: blocking on a
 * thread's own stack, parked on a fiber (os/fiber.h) while other fibers run; with connect and
 * total timeouts, a capped response buffer, an optional streaming body
 * callback and a cancel check polled from curl's progress callback.
 */
#ifndef VG_MODEL_HTTP_H
#define VG_MODEL_HTTP_H

#include <stddef.h>

#include "base/buf.h"

/* Body callback for 2xx responses: return VIGIL_OK to go on; any other code (with err filled)
 * aborts the transfer and becomes vg_http_perform's result. */
typedef vigil_code (*vg_http_body_cb)(void *user, const char *data, size_t len, vigil_error *err);

struct vg_http_request {
    const char *method; /* "POST", "GET" */
    const char *url;
    const char *const *headers; /* "Name: value" lines */
    size_t n_headers;
    const char *body; /* may be NULL */
    size_t body_len;
    long connect_timeout_ms;          /* 0: 10000 */
    long timeout_ms;                  /* 0: 300000 */
    size_t max_response;              /* cap on the buffered body; 0: 16 MiB */
    vg_http_body_cb on_body;          /* NULL: buffer the body into response->body */
    void *user;                       /* for on_body */
    int (*cancel)(void *cancel_user); /* non-zero aborts with VIGIL_ECANCELED */
    void *cancel_user;
    /* The proxy ("" none) and the hosts that bypass it ("" none), as vg_http_proxy_from_env
     * found them once; NULL: libcurl reads the environment again for this request (five
     * getenv calls and copies). */
    const char *proxy;
    const char *noproxy;
    /* Header lines prepared once (vg_http_headers_new) and used instead of headers. */
    const struct vg_http_headers *prepared;
};

/* Header lines kept for many requests: libcurl's list, built once instead of per request. */
struct vg_http_headers;
/* The list of n "Name: value" lines (copied), NULL when out of memory or when libcurl cannot be
 * loaded (vg_http_perform then says so). */
struct vg_http_headers *vg_http_headers_new(const char *const *lines, size_t n);
void vg_http_headers_free(struct vg_http_headers *h);

/* The proxy libcurl would take from the environment for url (its scheme's `<scheme>_proxy`,
 * `HTTPS_PROXY` for https, then `all_proxy`/`ALL_PROXY`) into proxy, and `no_proxy`/`NO_PROXY`
 * into noproxy, "" for none: 1, or 0 when a value does not fit (then leave the request's proxy
 * NULL, and libcurl reads the environment itself). */
int vg_http_proxy_from_env(const char *url, char *proxy, size_t n, char *noproxy, size_t m);

struct vg_http_response {
    long status;          /* 0 when no response arrived */
    struct vg_buf body;   /* the body when on_body is NULL, and always for non-2xx */
    char retry_after[64]; /* selected headers, "" when absent */
    char retry_after_ms[32];
    char request_id[128]; /* request-id or x-request-id */
    char content_type[128];
    struct vg_buf headers; /* every header line of the final response, CRLFs included */
};

void vg_http_response_init(struct vg_http_response *r);
void vg_http_response_release(struct vg_http_response *r);
/* The value of header name (any case) of the final response, trimmed, into out (cut at n - 1
 * bytes): 1, or 0 when it has none. */
int vg_http_response_header(const struct vg_http_response *r, const char *name, char *out,
                            size_t n);

/*
 * Perform the request. Returns VIGIL_OK whenever an HTTP response arrived completely, whatever
 * its status (check resp->status). Transport failures: ETIMEOUT, ENETWORK (connect, reset,
 * cut body), ECANCELED, ETOOBIG (body over the cap), or the on_body callback's code.
 * EUNSUPPORTED when libcurl is not installed: the first request loads it (os/libcurl.h).
 */
vigil_code vg_http_perform(const struct vg_http_request *req, struct vg_http_response *resp,
                           vigil_error *err);

/*
 * Take the credentials a request carried out of its error's message and detail before anyone
 * prints or stores them (a run's error, the daemon's log, the HTTP API): the value of each
 * secret header (Authorization, x-api-key, api-key, Proxy-Authorization; a "Bearer KEY"'s key
 * alone too) and the user:password of url, each occurrence read "[redacted]". A server, a proxy
 * or a gateway may quote the key it was sent in its error body, and a connection error quotes
 * the URL (trial H5). Values under 6 bytes are left. err NULL: nothing.
 */
void vg_http_redact_credentials(const char *url, const char *const *headers, size_t n_headers,
                                vigil_error *err);

#endif
