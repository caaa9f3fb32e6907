/*
 * port.h: the model-provider port, seen from an adapter. An adapter fills a struct
 * vg_model_methods, embeds struct vg_model as its first member and makes exactly one attempt per
 * call; retries, backoff, latency and the "already delivered" rule live in model.c. The
 * helpers below build a struct vg_model_response and map HTTP failures to vigil codes the same
 * way for every adapter.
 */
#ifndef VG_MODEL_PORT_H
#define VG_MODEL_PORT_H

#include "model/model.h"

struct vg_http_response;

/* What one attempt learned besides its result, for the retry loop. */
struct vg_model_attempt {
    int64_t retry_after_ms; /* the server's retry-after, -1 when none */
    long http_status;       /* 0 when no HTTP response arrived */
    int final;              /* non-zero: retrying cannot help (the account's quota is used up) */
};

struct vg_model_methods {
    int version;      /* 1 */
    const char *name; /* "openai", "anthropic", "scripted", "record" */
    unsigned caps;    /* enum vg_model_caps */
    /* One attempt without streaming. On success *out is a new owned response. */
    vigil_code (*complete)(struct vg_model *m, const struct vg_model_request *req,
                           struct vg_model_response **out, struct vg_model_attempt *att,
                           vigil_error *err);
    /* One attempt with streaming through cb (never NULL here). */
    vigil_code (*stream)(struct vg_model *m, const struct vg_model_request *req,
                         const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                         struct vg_model_attempt *att, vigil_error *err);
    /* Free the adapter's own state and the struct itself (not the base fields). */
    void (*destroy)(struct vg_model *m);
};

/* The instance every adapter embeds first. Base fields are set by vg_model_new. */
struct vg_model {
    const struct vg_model_methods *methods; /* must stay first */
    struct vg_clock *clock;                 /* borrowed */
    struct vg_ids *ids;                     /* borrowed or owned_ids */
    struct vg_ids *owned_ids;
    char *default_model;
    int max_retries;
    int64_t backoff_base_ms;
    int64_t backoff_max_ms;
    int64_t retry_after_max_ms;
    int max_tokens; /* for a request that sets none; 0: the adapter's default */
};

/* An adapter constructor in the registry. *out is allocated by the adapter. */
typedef vigil_code (*vg_model_create_fn)(const struct vg_model_options *opts, struct vg_model **out,
                                         vigil_error *err);

vigil_code vg_model_openai_create(const struct vg_model_options *opts, struct vg_model **out,
                                  vigil_error *err);
vigil_code vg_model_anthropic_create(const struct vg_model_options *opts, struct vg_model **out,
                                     vigil_error *err);
vigil_code vg_model_scripted_create(const struct vg_model_options *opts, struct vg_model **out,
                                    vigil_error *err);
/* Wrap inner (ownership passes to the wrapper) so every exchange is appended to a cassette. */
vigil_code vg_model_record_wrap(struct vg_model *inner, const char *cassette, struct vg_model **out,
                                vigil_error *err);

/* One attempt through the adapter, no retry (the record wrapper calls its inner adapter so). */
vigil_code vg_model_attempt(struct vg_model *m, const struct vg_model_request *req,
                            const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                            struct vg_model_attempt *att, vigil_error *err);

/* ---- response building (adapters) ---- */

struct vg_model_response *vg_model_response_new(const char *provider);
/* Append a text block (copied). Empty text adds nothing. */
vigil_code vg_model_response_add_text(struct vg_model_response *r, const char *text, size_t len);
/* Append a tool call (strings copied; NULL or empty arguments become "{}"). */
vigil_code vg_model_response_add_tool(struct vg_model_response *r, const char *id, const char *name,
                                      const char *arguments);
/* Replace *dst by a copy of s (NULL allowed). */
vigil_code vg_model_set_str(char **dst, const char *s);
/* Build r->text from the text blocks. Call once at the end. */
vigil_code vg_model_response_finish(struct vg_model_response *r, vigil_error *err);
/*
 * The last step of every adapter: copy what the provider said it stopped on, its model and its
 * response id (each may be NULL), build r->text, mark tool calls cut by max_tokens (from
 * r->stop_reason, set before), and hand r to *out. r is taken either way: on failure it is
 * freed and *out is untouched.
 */
vigil_code vg_model_response_done(struct vg_model_response *r, const char *stop_raw,
                                  const char *model, const char *response_id,
                                  struct vg_model_response **out, vigil_error *err);

/* ---- errors shared by the HTTP adapters ---- */

/* Whether a failed jansson load failed for lack of memory (ENOMEM, not EPARSE). */
#define VG_JSON_OOM(je) (json_error_code(je) == json_error_out_of_memory)

/*
 * Turn a non-2xx HTTP response into a structured error: 401/403 EAUTH, 400/404/413/422 EINVAL,
 * 429 ERATELIMIT, 529/503 EOVERLOAD, 408/504 ETIMEOUT, other 5xx EPROVIDER. The message quotes
 * the provider's error.message when the body has one. Fills att->retry_after_ms from
 * retry-after-ms / retry-after (seconds or an HTTP date, against the clock).
 */
vigil_code vg_model_http_error(const char *provider, const struct vg_http_response *resp,
                               struct vg_clock *clock, struct vg_model_attempt *att,
                               vigil_error *err);
/*
 * One HTTP turn of a JSON-over-HTTP adapter: POST body to url with the headers, feed a 2xx
 * stream to `feed` (when stream is not NULL) or parse the whole body, turn a non-2xx status
 * into a structured error (vg_model_http_error), and keep the request id. The adapter keeps its
 * wire format: building the body, and the stream/parse functions below.
 */
struct vg_model_wire {
    const char *provider; /* "openai", "anthropic": names errors */
    vigil_code (*feed)(void *stream, const char *data, size_t len, vigil_error *err);
    vigil_code (*finish)(void *stream, struct vg_model_response **out, vigil_error *err);
    vigil_code (*parse)(const char *data, size_t len, struct vg_model_response **out,
                        vigil_error *err);
};

struct vg_model_http_call {
    const char *url;
    const char *const *headers;
    size_t n_headers;
    const char *body;
    long timeout_ms, connect_timeout_ms;
    size_t max_response;
    int (*cancel)(void *user); /* with no stream callbacks: the request's cancel check */
    void *cancel_user;
};

vigil_code vg_model_http_turn(struct vg_model *base, const struct vg_model_wire *w,
                              const struct vg_model_http_call *call, void *stream,
                              const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                              struct vg_model_attempt *att, vigil_error *err);

/* Map a provider error type ("overloaded_error", "rate_limit_exceeded") to a code. */
vigil_code vg_model_error_type_code(const char *type);
/* Parse a retry-after value (delta seconds or HTTP date) into ms from now; -1 if unusable. */
int64_t vg_model_parse_retry_after(const char *value, int64_t now_ms);

#endif
