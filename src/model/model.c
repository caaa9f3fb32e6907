/*
 * model.c: the model port's wrappers and registry. vg_model_new picks an adapter by name;
 * vg_model_complete / vg_model_stream run the retry loop around one-attempt adapter methods:
 * exponential backoff with full jitter (randomness from the ids port), retry-after honoured,
 * waits through the clock port so tests with the test clock never sleep, and no retry once a
 * stream has delivered output to the caller. Also the response builders and HTTP error mapping
 * the adapters share, and the price table lookup for run traces.
 */
#include "base/common.h"

#include "base/json.h"

#include <jansson.h>
#include <strings.h>

#include "config/config.h"
#include "model/http.h"
#include "model/port.h"
#include "os/clock.h"
#include "os/ids.h"
#include "os/libcurl.h"

struct registry_entry {
    const char *name;
    vg_model_create_fn create;
};

static const struct registry_entry registry[] = {
    {"openai", vg_model_openai_create},
    {"anthropic", vg_model_anthropic_create},
    {"scripted", vg_model_scripted_create},
};

static const char *stop_names[] = {"end_turn",      "tool_use", "max_tokens",
                                   "stop_sequence", "refusal",  "other"};

const char *vg_model_stop_name(enum vg_model_stop s)
{
    if ((unsigned)s >= VG_ARRAY_LEN(stop_names))
        return "other";
    return stop_names[s];
}

int vg_model_stop_parse(const char *name)
{
    for (size_t i = 0; name && i < VG_ARRAY_LEN(stop_names); i++)
        if (strcmp(name, stop_names[i]) == 0)
            return (int)i;
    return -1;
}

int vg_model_code_retryable(vigil_code code)
{
    switch (code) {
    case VIGIL_ERATELIMIT:
    case VIGIL_EOVERLOAD:
    case VIGIL_EPROVIDER:
    case VIGIL_ETIMEOUT:
    case VIGIL_ENETWORK:
        return 1;
    default:
        return 0;
    }
}

/* ---- construction ---- */

vigil_code vg_model_new(const struct vg_model_options *opts, struct vg_model **out,
                        vigil_error *err)
{
    struct vg_model_options defaults = {0};
    const struct registry_entry *entry = NULL;
    struct vg_model *m = NULL;
    vigil_code rc;

    if (!opts)
        opts = &defaults;
    const char *name = opts->provider && opts->provider[0] ? opts->provider : "scripted";
    for (size_t i = 0; i < VG_ARRAY_LEN(registry); i++)
        if (strcmp(registry[i].name, name) == 0)
            entry = &registry[i];
    if (!entry)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "unknown model provider \"%s\" (expected openai, anthropic or scripted)",
                       name);
    if (opts->record && strcmp(name, "scripted") == 0)
        return VG_FAIL(err, VIGIL_EINVAL, "record mode needs a real provider, not \"scripted\"");

    rc = entry->create(opts, &m, err);
    if (rc != VIGIL_OK)
        return rc;
    /* A provider that speaks HTTP loads libcurl now, while the process is small. The load
     * reads some thirty libraries' tables (about 5.5 MB resident for a moment, handed back once
     * loaded: os/dl.h); at the first request instead, that moment came on top of every run in
     * flight, and set the peak of a hundred agents at once (docs/internals/PERF.md, "Session
     * 35"). A library that cannot be loaded is told by the first request, as before. */
    if (!(m->methods->caps & VG_MODEL_CAP_SCRIPTED)) {
        vigil_error later = {0};
        (void)vg_libcurl_load(&later);
    }
    m->clock = opts->clock ? opts->clock : vg_clock_real();
    /* On the adapter itself: a record wrapper passes each call on to it. */
    m->max_tokens = opts->max_tokens > 0 ? opts->max_tokens : 0;
    if (opts->model && vg_model_set_str(&m->default_model, opts->model) != VIGIL_OK) {
        vg_model_free(m);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the model provider");
    }
    if (opts->record) {
        struct vg_model *w = NULL;
        rc = vg_model_record_wrap(m, opts->record, &w, err); /* takes m, even on failure */
        if (rc != VIGIL_OK)
            return rc;
        w->clock = m->clock;
        m = w;
    }
    if (opts->ids) {
        m->ids = opts->ids;
    } else {
        m->owned_ids = vg_ids_real(m->clock);
        if (!m->owned_ids) {
            vg_model_free(m);
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the model provider");
        }
        m->ids = m->owned_ids;
    }
    m->max_retries = opts->max_retries < 0 ? 0 : opts->max_retries ? opts->max_retries : 2;
    m->backoff_base_ms = opts->backoff_base_ms > 0 ? opts->backoff_base_ms : 500;
    m->backoff_max_ms = opts->backoff_max_ms > 0 ? opts->backoff_max_ms : 30000;
    m->retry_after_max_ms = opts->retry_after_max_ms > 0 ? opts->retry_after_max_ms : 60000;
    if (opts->model && !m->default_model &&
        vg_model_set_str(&m->default_model, opts->model) != VIGIL_OK) {
        vg_model_free(m);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the model provider");
    }
    *out = m;
    return VIGIL_OK;
}

void vg_model_free(struct vg_model *m)
{
    if (!m)
        return;
    if (m->owned_ids)
        vg_ids_free(m->owned_ids);
    vg_free(m->default_model);
    m->methods->destroy(m);
}

const char *vg_model_name(const struct vg_model *m)
{
    return m->methods->name;
}

unsigned vg_model_caps(const struct vg_model *m)
{
    return m->methods->caps;
}

const char *vg_model_default_model(const struct vg_model *m)
{
    return m->default_model;
}

/* ---- the retry loop ---- */

/* Forwards callbacks to the caller's and remembers whether anything reached the caller. */
struct guard {
    const struct vg_model_stream_cb *user_cb;
    int delivered;
};

static void g_text(void *u, const char *d, size_t n)
{
    struct guard *g = u;
    g->delivered = 1;
    if (g->user_cb->on_text)
        g->user_cb->on_text(g->user_cb->user, d, n);
}

static void g_tool_start(void *u, size_t i, const char *id, const char *name)
{
    struct guard *g = u;
    g->delivered = 1;
    if (g->user_cb->on_tool_start)
        g->user_cb->on_tool_start(g->user_cb->user, i, id, name);
}

static void g_tool_args(void *u, size_t i, const char *d, size_t n)
{
    struct guard *g = u;
    g->delivered = 1;
    if (g->user_cb->on_tool_args)
        g->user_cb->on_tool_args(g->user_cb->user, i, d, n);
}

static int g_cancel(void *u)
{
    struct guard *g = u;
    return g->user_cb->cancel ? g->user_cb->cancel(g->user_cb->user) : 0;
}

/* Replay a finished response through the callbacks (adapters without streaming). */
static void replay_through(const struct vg_model_response *r, const struct vg_model_stream_cb *cb)
{
    for (size_t i = 0; i < r->n_text_blocks; i++)
        if (cb->on_text)
            cb->on_text(cb->user, r->text_blocks[i], strlen(r->text_blocks[i]));
    for (size_t i = 0; i < r->n_tool_calls; i++) {
        if (cb->on_tool_start)
            cb->on_tool_start(cb->user, i, r->tool_calls[i].id, r->tool_calls[i].name);
        if (cb->on_tool_args)
            cb->on_tool_args(cb->user, i, r->tool_calls[i].arguments,
                             strlen(r->tool_calls[i].arguments));
    }
}

vigil_code vg_model_attempt(struct vg_model *m, const struct vg_model_request *req,
                            const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                            struct vg_model_attempt *att, vigil_error *err)
{
    vigil_code rc;
    if (!cb)
        return m->methods->complete(m, req, out, att, err);
    if (m->methods->stream)
        return m->methods->stream(m, req, cb, out, att, err);
    rc = m->methods->complete(m, req, out, att, err);
    if (rc == VIGIL_OK)
        replay_through(*out, cb);
    return rc;
}

static int64_t backoff_ms(struct vg_model *m, int attempt)
{
    int64_t ceiling = m->backoff_base_ms;
    for (int i = 1; i < attempt && ceiling < m->backoff_max_ms; i++)
        ceiling *= 2;
    if (ceiling > m->backoff_max_ms)
        ceiling = m->backoff_max_ms;
    /* Full jitter: uniform in [0, ceiling]. */
    return (int64_t)(vg_ids_random_u64(m->ids) % (uint64_t)(ceiling + 1));
}

/* The call's cancel check: the stream callbacks' when streaming, else the request's own. */
static int call_canceled(const struct vg_model_stream_cb *cb, const struct vg_model_request *req)
{
    if (cb)
        return cb->cancel && cb->cancel(cb->user);
    return req->cancel && req->cancel(req->cancel_user);
}

/* Wait ms before the next attempt, asking the cancel check every RETRY_WAIT_SLICE_MS: a
 * retry-after can be a minute, and a person who cancels the turn (or a stopping daemon) must
 * not wait it out. Non-zero when the call was canceled, before or during the wait. */
#define RETRY_WAIT_SLICE_MS 100
static int wait_unless_canceled(struct vg_model *m, int64_t ms, const struct vg_model_stream_cb *cb,
                                const struct vg_model_request *req)
{
    for (;;) {
        if (call_canceled(cb, req))
            return 1;
        if (ms <= 0)
            return 0;
        int64_t slice = ms < RETRY_WAIT_SLICE_MS ? ms : RETRY_WAIT_SLICE_MS;
        vg_clock_sleep_ms(m->clock, slice);
        ms -= slice;
    }
}

static vigil_code run(struct vg_model *m, const struct vg_model_request *req,
                      const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                      vigil_error *err)
{
    struct guard g = {.user_cb = cb};
    struct vg_model_stream_cb wrapped = {.user = &g,
                                         .on_text = g_text,
                                         .on_tool_start = g_tool_start,
                                         .on_tool_args = g_tool_args,
                                         .cancel = g_cancel};
    int64_t t0 = vg_clock_mono_ns(m->clock);
    int max_attempts = m->max_retries + 1;
    vigil_error aerr;
    vigil_code rc;
    int attempts = 0;
    const char *why_stop = NULL;
    int64_t too_long_ms = -1; /* a retry-after over retry_after_max_ms: said in the message */

    if (!req || !out)
        return VG_FAIL(err, VIGIL_EINVAL, "model call needs a request and an output pointer");

    for (;;) {
        struct vg_model_attempt att = {.retry_after_ms = -1};
        struct vg_model_response *r = NULL;
        vigil_error_clear(&aerr);
        attempts++;
        rc = vg_model_attempt(m, req, cb ? &wrapped : NULL, &r, &att, &aerr);
        if (rc == VIGIL_OK) {
            r->attempts = attempts;
            r->latency_ms = (vg_clock_mono_ns(m->clock) - t0) / 1000000;
            *out = r;
            return VIGIL_OK;
        }
        if (!vg_model_code_retryable(rc) || att.final)
            break;
        if (g.delivered) {
            why_stop = "not retried: the stream had already delivered output";
            break;
        }
        if (attempts >= max_attempts) {
            why_stop = attempts > 1 ? "gave up after the last attempt" : NULL;
            break;
        }
        int64_t wait = backoff_ms(m, attempts);
        if (att.retry_after_ms >= 0) {
            if (att.retry_after_ms > m->retry_after_max_ms) {
                why_stop = "not retried: retry-after is longer than model.retry_after_max_ms";
                too_long_ms = att.retry_after_ms;
                break;
            }
            wait = att.retry_after_ms;
        }
        if (wait_unless_canceled(m, wait, cb, req)) {
            rc = VG_FAIL(&aerr, VIGIL_ECANCELED, "model call canceled");
            break;
        }
    }

    vg_error_copy(err, &aerr);
    if (err) {
        err->code = rc;
        size_t n = strlen(err->message);
        if (too_long_ms >= 0) /* why it was not retried, where the user reads it (trial F7) */
            snprintf(err->message + n, sizeof(err->message) - n,
                     " (not retried: the server asked to wait %llds, over "
                     "model.retry_after_max_ms %lld)",
                     (long long)((too_long_ms + 999) / 1000), (long long)m->retry_after_max_ms);
        else if (attempts > 1)
            snprintf(err->message + n, sizeof(err->message) - n, " (after %d attempts)", attempts);
        if (why_stop)
            snprintf(err->detail, sizeof(err->detail), "%s", why_stop);
    }
    return rc;
}

vigil_code vg_model_complete(struct vg_model *m, const struct vg_model_request *req,
                             struct vg_model_response **out, vigil_error *err)
{
    return run(m, req, NULL, out, err);
}

vigil_code vg_model_stream(struct vg_model *m, const struct vg_model_request *req,
                           const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                           vigil_error *err)
{
    static const struct vg_model_stream_cb none = {0};
    return run(m, req, cb ? cb : &none, out, err);
}

/* ---- responses ---- */

struct vg_model_response *vg_model_response_new(const char *provider)
{
    struct vg_model_response *r = vg_calloc(1, sizeof(*r));
    if (r)
        r->provider = provider;
    return r;
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

int vg_model_response_same(const struct vg_model_response *a, const struct vg_model_response *b)
{
    if (a->n_text_blocks != b->n_text_blocks || a->n_tool_calls != b->n_tool_calls ||
        a->stop_reason != b->stop_reason || !same_str(a->stop_raw, b->stop_raw) ||
        !same_str(a->text, b->text) || !same_str(a->model, b->model) ||
        !same_str(a->response_id, b->response_id) ||
        memcmp(&a->usage, &b->usage, sizeof a->usage) != 0)
        return 0;
    for (size_t i = 0; i < a->n_text_blocks; i++)
        if (!same_str(a->text_blocks[i], b->text_blocks[i]))
            return 0;
    for (size_t i = 0; i < a->n_tool_calls; i++)
        if (!same_str(a->tool_calls[i].id, b->tool_calls[i].id) ||
            !same_str(a->tool_calls[i].name, b->tool_calls[i].name) ||
            !same_str(a->tool_calls[i].arguments, b->tool_calls[i].arguments))
            return 0;
    return 1;
}

void vg_model_response_free(struct vg_model_response *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_text_blocks; i++)
        vg_free(r->text_blocks[i]);
    vg_free(r->text_blocks);
    for (size_t i = 0; i < r->n_tool_calls; i++) {
        vg_free((char *)r->tool_calls[i].id);
        vg_free((char *)r->tool_calls[i].name);
        vg_free((char *)r->tool_calls[i].arguments);
    }
    vg_free(r->tool_calls);
    vg_free(r->text);
    vg_free(r->stop_raw);
    vg_free(r->model);
    vg_free(r->response_id);
    vg_free(r->request_id);
    vg_free(r);
}

vigil_code vg_model_set_str(char **dst, const char *s)
{
    char *copy = NULL;
    if (s) {
        copy = vg_strdup(s);
        if (!copy)
            return VIGIL_ENOMEM;
    }
    vg_free(*dst);
    *dst = copy;
    return VIGIL_OK;
}

vigil_code vg_model_response_add_text(struct vg_model_response *r, const char *text, size_t len)
{
    if (!len)
        return VIGIL_OK;
    char **blocks = vg_realloc(r->text_blocks, (r->n_text_blocks + 1) * sizeof(*blocks));
    if (!blocks)
        return VIGIL_ENOMEM;
    r->text_blocks = blocks;
    blocks[r->n_text_blocks] = vg_strndup(text, len);
    if (!blocks[r->n_text_blocks])
        return VIGIL_ENOMEM;
    r->n_text_blocks++;
    return VIGIL_OK;
}

vigil_code vg_model_response_add_tool(struct vg_model_response *r, const char *id, const char *name,
                                      const char *arguments)
{
    struct vg_model_tool_call *calls =
        vg_realloc(r->tool_calls, (r->n_tool_calls + 1) * sizeof(*calls));
    if (!calls)
        return VIGIL_ENOMEM;
    r->tool_calls = calls;
    struct vg_model_tool_call *c = &calls[r->n_tool_calls];
    /* Some OpenAI-compatible servers name no call. Each result must still be paired with its
     * call, so such a call is named by its place in the turn; the same name in a later turn is
     * told apart by the loop (a result answers the latest call of its id). */
    char made[32];
    if (!id || !id[0]) {
        snprintf(made, sizeof made, "call_%zu", r->n_tool_calls);
        id = made;
    }
    c->id = vg_strdup(id);
    c->name = vg_strdup(name ? name : "");
    c->arguments = vg_strdup(arguments && arguments[0] ? arguments : "{}");
    r->n_tool_calls++; /* counted now so a partial entry is still freed */
    if (!c->id || !c->name || !c->arguments)
        return VIGIL_ENOMEM;
    return VIGIL_OK;
}

vigil_code vg_model_response_finish(struct vg_model_response *r, vigil_error *err)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    for (size_t i = 0; i < r->n_text_blocks; i++)
        vg_buf_puts(&b, r->text_blocks[i]);
    vigil_code rc = vg_buf_finish(&b, err);
    if (rc == VIGIL_OK) {
        vg_free(r->text);
        r->text = b.len ? vg_buf_detach(&b, NULL) : vg_strdup("");
        if (!r->text)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building the model response");
    }
    vg_buf_release(&b);
    return rc;
}

vigil_code vg_model_response_done(struct vg_model_response *r, const char *stop_raw,
                                  const char *model, const char *response_id,
                                  struct vg_model_response **out, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    if (vg_model_set_str(&r->stop_raw, stop_raw) || vg_model_set_str(&r->model, model) ||
        vg_model_set_str(&r->response_id, response_id))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building the model response");
    if (rc == VIGIL_OK)
        rc = vg_model_response_finish(r, err);
    if (rc != VIGIL_OK) {
        vg_model_response_free(r);
        return rc;
    }
    r->tool_calls_cut = r->stop_reason == VG_MODEL_STOP_MAX_TOKENS && r->n_tool_calls > 0;
    *out = r;
    return VIGIL_OK;
}

/* ---- HTTP errors ---- */

int64_t vg_model_parse_retry_after(const char *value, int64_t now_ms)
{
    char *end = NULL;
    if (!value || !value[0])
        return -1;
    double secs = strtod(value, &end);
    if (end != value && *end == '\0') {
        if (!(secs >= 0) || secs > 86400.0 * 365)
            return -1;
        return (int64_t)(secs * 1000.0);
    }
    vigil_error err = {0};
    if (vg_libcurl_load(&err)) /* loaded already when the value came over HTTP */
        return -1;
    time_t when = curl_getdate(value, NULL); /* HTTP date: "Wed, 21 Oct 2015 07:28:00 GMT" */
    if (when < 0)
        return -1;
    int64_t delta = (int64_t)when * 1000 - now_ms;
    return delta < 0 ? 0 : delta;
}

vigil_code vg_model_error_type_code(const char *type)
{
    if (!type)
        return VIGIL_EPROVIDER;
    if (strstr(type, "overloaded"))
        return VIGIL_EOVERLOAD;
    if (strstr(type, "rate_limit") || strcmp(type, "tokens") == 0 || strcmp(type, "requests") == 0)
        return VIGIL_ERATELIMIT;
    if (strstr(type, "authentication") || strstr(type, "permission") ||
        strstr(type, "invalid_api_key"))
        return VIGIL_EAUTH;
    if (strstr(type, "invalid_request") || strstr(type, "not_found") || strstr(type, "too_large"))
        return VIGIL_EINVAL;
    if (strstr(type, "timeout"))
        return VIGIL_ETIMEOUT;
    return VIGIL_EPROVIDER;
}

static vigil_code code_for_status(long status)
{
    if (status == 401 || status == 403)
        return VIGIL_EAUTH;
    if (status == 429)
        return VIGIL_ERATELIMIT;
    if (status == 529 || status == 503)
        return VIGIL_EOVERLOAD;
    if (status == 408 || status == 504)
        return VIGIL_ETIMEOUT;
    if (status >= 500)
        return VIGIL_EPROVIDER;
    if (status >= 400)
        return VIGIL_EINVAL;
    return VIGIL_EPROVIDER;
}

/* Whether a response's Content-Type names JSON ("application/json", "...+json"), parameters
 * and case aside. */
static int content_is_json(const char *content_type)
{
    const char *end = strchr(content_type, ';');
    size_t n = end ? (size_t)(end - content_type) : strlen(content_type);
    while (n && (content_type[n - 1] == ' ' || content_type[n - 1] == '\t'))
        n--;
    return (n == 16 && !strncasecmp(content_type, "application/json", 16)) ||
           (n >= 5 && !strncasecmp(content_type + n - 5, "+json", 5));
}

/*
 * The body of a streaming request, read by what its Content-Type says it is: some
 * OpenAI-compatible servers ignore `stream: true` and answer with one JSON document. Such a
 * body is kept whole (under the response cap) and read by the adapter's JSON reader; anything
 * else goes to its stream reader as it arrives.
 */
struct wire_feed {
    const struct vg_model_wire *w;
    void *stream;
    const struct vg_http_response *resp; /* its headers are in before the first body byte */
    int json;                            /* -1: not known yet; 1: a JSON document; 0: a stream */
    struct vg_buf whole;                 /* the JSON document */
};

static vigil_code wire_feed(void *user, const char *data, size_t len, vigil_error *err)
{
    struct wire_feed *f = user;
    if (f->json < 0)
        f->json = content_is_json(f->resp->content_type);
    if (!f->json)
        return f->w->feed(f->stream, data, len, err);
    vg_buf_append(&f->whole, data, len);
    return f->whole.fail ? vg_buf_finish(&f->whole, err) : VIGIL_OK;
}

/* The response of a 2xx answer: a stream's end, or a JSON document read whole (and, on a
 * streaming request, passed on through the callbacks as a stream would have been). */
static vigil_code wire_answer(struct wire_feed *f, const struct vg_http_response *resp,
                              const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                              vigil_error *err)
{
    if (!f->stream)
        return f->w->parse(resp->body.data, resp->body.len, out, err);
    if (f->json < 0) /* an empty body */
        f->json = content_is_json(resp->content_type);
    if (!f->json)
        return f->w->finish(f->stream, out, err);
    vigil_code rc = f->w->parse(f->whole.data, f->whole.len, out, err);
    if (rc == VIGIL_OK && cb)
        replay_through(*out, cb);
    return rc;
}

vigil_code vg_model_http_turn(struct vg_model *base, const struct vg_model_wire *w,
                              const struct vg_model_http_call *call, void *stream,
                              const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                              struct vg_model_attempt *att, vigil_error *err)
{
    struct vg_http_response resp;
    vg_http_response_init(&resp);
    struct wire_feed f = {w, stream, &resp, -1, {0}};
    vg_buf_init(&f.whole, call->max_response ? call->max_response : (size_t)16 << 20);
    struct vg_http_request hr = {.method = "POST",
                                 .url = call->url,
                                 .headers = call->headers,
                                 .n_headers = call->n_headers,
                                 .body = call->body,
                                 .body_len = strlen(call->body),
                                 .timeout_ms = call->timeout_ms,
                                 .connect_timeout_ms = call->connect_timeout_ms,
                                 .max_response = call->max_response,
                                 .on_body = stream ? wire_feed : NULL,
                                 .user = &f,
                                 .cancel = cb ? cb->cancel : call->cancel,
                                 .cancel_user = cb ? cb->user : call->cancel_user};
    vigil_code rc = vg_http_perform(&hr, &resp, err);
    if (rc != VIGIL_OK)
        goto out;
    att->http_status = resp.status;
    if (resp.status < 200 || resp.status >= 300) {
        rc = vg_model_http_error(w->provider, &resp, base->clock, att, err);
        goto out;
    }
    rc = wire_answer(&f, &resp, cb, out, err);
    if (rc == VIGIL_OK && resp.request_id[0] &&
        vg_model_set_str(&(*out)->request_id, resp.request_id) != VIGIL_OK) {
        vg_model_response_free(*out);
        *out = NULL;
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the %s response", w->provider);
    }
out:
    if (rc != VIGIL_OK)
        vg_http_redact_credentials(call->url, call->headers, call->n_headers, err);
    vg_buf_release(&f.whole);
    vg_http_response_release(&resp);
    return rc;
}

/* Whether an error body says the account has no quota or credit left: OpenAI's
 * "insufficient_quota" (sent with HTTP 429, like a rate limit) or Anthropic's "billing_error"
 * (HTTP 402). Waiting does not bring it back; the user must see to billing. */
static int quota_exhausted(long status, json_t *e)
{
    const char *type = json_string_value(json_object_get(e, "type"));
    const char *code = json_string_value(json_object_get(e, "code"));
    return status == 402 || (type && !strcmp(type, "insufficient_quota")) ||
           (code && !strcmp(code, "insufficient_quota")) ||
           (type && !strcmp(type, "billing_error"));
}

/* The server's retry-after (retry-after-ms first), or -1. */
static int64_t retry_after_of(const struct vg_http_response *resp, struct vg_clock *clock)
{
    if (resp->retry_after_ms[0]) {
        char *end;
        double ms = strtod(resp->retry_after_ms, &end);
        if (end != resp->retry_after_ms && *end == '\0' && ms >= 0 && ms < 86400e3)
            return (int64_t)ms;
    }
    return vg_model_parse_retry_after(resp->retry_after, clock ? vg_clock_now_ms(clock) : 0);
}

/* The provider's message, whole when it fits in n bytes (150 characters at most, so that the
 * error's one line keeps its closing quote and what follows it: trial F7), else cut at a word
 * boundary with "..." after it. */
static void quote_cut(char *out, size_t n, const char *m)
{
    size_t cap = VG_MIN(n - 1, (size_t)150), len = strlen(m);
    if (len <= cap) {
        snprintf(out, n, "%s", m);
        return;
    }
    size_t cut = cap - 3;
    while (cut > cap / 2 && m[cut] != ' ')
        cut--;
    while (cut > 0 && m[cut - 1] == ' ')
        cut--;
    snprintf(out, n, "%.*s...", (int)cut, m);
}

vigil_code vg_model_http_error(const char *provider, const struct vg_http_response *resp,
                               struct vg_clock *clock, struct vg_model_attempt *att,
                               vigil_error *err)
{
    vigil_code code = code_for_status(resp->status);
    char msg[200] = "";
    json_t *root = json_loadb(resp->body.data, resp->body.len, 0, NULL);
    json_t *e = root ? json_object_get(root, "error") : NULL; /* borrowed */
    int no_quota = quota_exhausted(resp->status, e);

    if (json_is_object(e)) {
        const char *m = json_string_value(json_object_get(e, "message"));
        if (m)
            quote_cut(msg, sizeof msg, m);
    } else if (json_is_string(e)) { /* Ollama, llama.cpp: {"error":"..."} */
        quote_cut(msg, sizeof msg, json_string_value(e));
    }
    if (!msg[0] && resp->body.len) {
        snprintf(msg, sizeof(msg), "%.*s", (int)VG_MIN(resp->body.len, 150), resp->body.data);
        for (char *p = msg; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
    }
    json_decref(root);

    if (att) {
        att->http_status = resp->status;
        att->retry_after_ms = retry_after_of(resp, clock);
        att->final = no_quota;
    }
    if (no_quota) {
        code = VIGIL_EPROVIDER;
        vg_error_set(err, code, __FILE__, __LINE__,
                     "%s: the account's quota or credit is used up (http %ld): check the plan "
                     "and billing with the provider%s%s%s",
                     provider, resp->status, msg[0] ? ": \"" : "", msg, msg[0] ? "\"" : "");
    } else {
        vg_error_set(err, code, __FILE__, __LINE__, "%s: http %ld (%s)%s%s%s", provider,
                     resp->status, vigil_strerror(code), msg[0] ? ": \"" : "", msg,
                     msg[0] ? "\"" : "");
    }
    if (err) {
        err->subcode = (int)resp->status;
        if (resp->request_id[0])
            vg_error_detail(err, "request id %s", resp->request_id);
    }
    return code;
}

/* ---- request as JSON (cassettes, traces) ---- */

static int put(json_t *obj, const char *key, json_t *v)
{
    return v ? json_object_set_new(obj, key, v) : -1;
}

vigil_code vg_model_request_to_json(const struct vg_model_request *req, char **out,
                                    vigil_error *err)
{
    json_t *root = json_object();
    int bad = !root;
    static const char *choices[] = {NULL, "auto", "none", "any", "tool"};

    if (!bad && req->model)
        bad |= put(root, "model", json_string(req->model));
    if (!bad && req->system)
        bad |= put(root, "system", json_string(req->system));
    if (!bad && req->max_tokens)
        bad |= put(root, "max_tokens", json_integer(req->max_tokens));
    if (!bad && req->has_temperature)
        bad |= put(root, "temperature", json_real(req->temperature));
    if (!bad && req->n_stop) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < req->n_stop; i++)
            json_array_append_new(a, json_string(req->stop[i]));
        bad |= put(root, "stop", a);
    }
    if (!bad && req->cache_prompt)
        bad |= put(root, "cache_prompt", json_true());
    if (!bad && req->tool_choice > 0 && (size_t)req->tool_choice < VG_ARRAY_LEN(choices))
        bad |= put(root, "tool_choice", json_string(choices[req->tool_choice]));
    if (!bad && req->tool_choice_name)
        bad |= put(root, "tool_choice_name", json_string(req->tool_choice_name));
    if (!bad && req->parallel_tool_calls)
        bad |= put(root, "parallel_tool_calls", json_boolean(req->parallel_tool_calls > 0));
    if (!bad && req->n_tools) {
        json_t *a = json_array();
        for (size_t i = 0; a && !bad && i < req->n_tools; i++) {
            const struct vg_model_tool *t = &req->tools[i];
            json_t *o = json_object();
            json_t *schema = t->input_schema ? json_loads(t->input_schema, 0, NULL) : NULL;
            bad |= !o;
            if (!bad)
                bad |= put(o, "name", json_string(t->name ? t->name : ""));
            if (!bad && t->description)
                bad |= put(o, "description", json_string(t->description));
            if (!bad && t->input_schema)
                bad |= put(o, "input_schema", schema ? schema : json_string(t->input_schema));
            else
                json_decref(schema);
            bad |= json_array_append_new(a, o);
        }
        bad |= put(root, "tools", a);
    }
    if (!bad) {
        json_t *a = json_array();
        static const char *roles[] = {"user", "assistant", "tool"};
        for (size_t i = 0; a && !bad && i < req->n_messages; i++) {
            const struct vg_model_message *msg = &req->messages[i];
            json_t *o = json_object();
            bad |= !o || (unsigned)msg->role > 2;
            if (!bad)
                bad |= put(o, "role", json_string(roles[msg->role]));
            if (!bad && msg->text)
                bad |= put(o, "text", json_string(msg->text));
            if (!bad && msg->tool_call_id)
                bad |= put(o, "tool_call_id", json_string(msg->tool_call_id));
            if (!bad && msg->is_error)
                bad |= put(o, "is_error", json_true());
            if (!bad && msg->n_tool_calls) {
                json_t *calls = json_array();
                for (size_t j = 0; calls && !bad && j < msg->n_tool_calls; j++) {
                    const struct vg_model_tool_call *c = &msg->tool_calls[j];
                    json_t *co = json_pack("{s:s, s:s, s:s}", "id", c->id ? c->id : "", "name",
                                           c->name ? c->name : "", "arguments",
                                           c->arguments ? c->arguments : "{}");
                    bad |= json_array_append_new(calls, co);
                }
                bad |= put(o, "tool_calls", calls);
            }
            bad |= json_array_append_new(a, o);
        }
        bad |= put(root, "messages", a);
    }
    char *text = bad ? NULL : vg_json_dump(root, 1);
    json_decref(root);
    if (!text)
        return VG_FAIL(err, bad && root ? VIGIL_EINVAL : VIGIL_ENOMEM,
                       "cannot encode the model request (invalid UTF-8 text or out of memory)");
    *out = text;
    return VIGIL_OK;
}

/* ---- prices ---- */

static double price_of(json_t *entry, const char *key, double fallback)
{
    json_t *v = json_object_get(entry, key);
    return json_is_number(v) ? json_number_value(v) : fallback;
}

int vg_model_cost_usd(const struct vg_config *cfg, const char *model,
                      const struct vg_model_usage *usage, double *usd)
{
    json_t *prices = cfg ? vg_config_get(cfg, "model.prices") : NULL; /* borrowed */
    json_t *entry = NULL, *v;
    const char *key;
    size_t best = 0;

    if (!json_is_object(prices) || !model || !usage)
        return 0;
    entry = json_object_get(prices, model);
    if (!entry) { /* the longest price key that prefixes the model ("gpt-4o" for a snapshot) */
        json_object_foreach (prices, key, v) {
            size_t n = strlen(key);
            if (n > best && strncmp(model, key, n) == 0) {
                best = n;
                entry = v;
            }
        }
    }
    if (!json_is_object(entry))
        return 0;
    double in = price_of(entry, "input", 0), outp = price_of(entry, "output", 0);
    double cr = price_of(entry, "cache_read", in), cw = price_of(entry, "cache_write", in);
    *usd = ((double)usage->input_tokens * in + (double)usage->output_tokens * outp +
            (double)usage->cache_read_tokens * cr + (double)usage->cache_write_tokens * cw) /
           1e6;
    return 1;
}

/* ---- from config ---- */

vigil_code vg_model_from_config(const struct vg_config *cfg, struct vg_clock *clock,
                                struct vg_ids *ids, struct vg_model **out, vigil_error *err)
{
    struct vg_model_options o = {.clock = clock, .ids = ids};
    int64_t retries = 2, timeout = 0, connect = 0, base = 0, maxb = 0, ra = 0, max_tokens = 0;
    vigil_code rc = VIGIL_OK;

    rc = vg_config_string(cfg, "model.provider", "scripted", &o.provider, err);
    if (!rc)
        rc = vg_config_string(cfg, "model.name", NULL, &o.model, err);
    if (!rc)
        rc = vg_config_string(cfg, "model.base_url", NULL, &o.base_url, err);
    if (!rc)
        rc = vg_config_string(cfg, "model.cassette", NULL, &o.cassette, err);
    if (!rc)
        rc = vg_config_string(cfg, "model.record", NULL, &o.record, err);
    if (!rc)
        rc = vg_config_string(cfg, "model.anthropic_version", NULL, &o.anthropic_version, err);
    if (!rc)
        rc = vg_config_int(cfg, "model.max_retries", 2, &retries, err);
    if (!rc)
        rc = vg_config_int(cfg, "model.timeout_ms", 0, &timeout, err);
    if (!rc)
        rc = vg_config_int(cfg, "model.connect_timeout_ms", 0, &connect, err);
    if (!rc)
        rc = vg_config_int(cfg, "model.backoff_base_ms", 0, &base, err);
    if (!rc)
        rc = vg_config_int(cfg, "model.backoff_max_ms", 0, &maxb, err);
    if (!rc)
        rc = vg_config_int(cfg, "model.retry_after_max_ms", 0, &ra, err);
    if (!rc)
        rc = vg_config_int(cfg, "model.max_tokens", 0, &max_tokens, err);
    if (rc != VIGIL_OK)
        return rc;
    if (retries < 0 || retries > 20 || timeout < 0 || timeout > INT32_MAX || connect < 0 ||
        connect > INT32_MAX)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "model.max_retries must be 0..20 and timeouts non-negative milliseconds");
    if (max_tokens < 0 || max_tokens > INT32_MAX)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "model.max_tokens must be a positive number of tokens "
                       "(0 or unset: the provider's default)");
    o.max_tokens = (int)max_tokens;
    o.max_retries = retries == 0 ? -1 : (int)retries;
    o.timeout_ms = (int)timeout;
    o.connect_timeout_ms = (int)connect;
    o.backoff_base_ms = base;
    o.backoff_max_ms = maxb;
    o.retry_after_max_ms = ra;
    o.check_requests = vg_config_get_bool(cfg, "model.check_requests", 1);
    o.stream_usage = vg_config_get_bool(cfg, "model.stream_usage", 1) ? 0 : -1;
    return vg_model_new(&o, out, err);
}
