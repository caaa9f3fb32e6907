/*
 * http.c: the OpenAI and Ollama embedding adapters. Both POST a batch of texts as JSON through
 * the model layer's libcurl wrapper (src/model/http.c) and check that every returned vector has
 * the configured dimension, which sizes vector storage: a model answering with another size is
 * an EPROVIDER error, never silently stored.
 *   OpenAI: POST {base}/v1/embeddings {"model","input":[...],"dimensions"}
 *           -> {"data":[{"index":i,"embedding":[...]}]}
 *   Ollama: POST {base}/api/embed {"model","input":[...]} -> {"embeddings":[[...]]}
 */
#include "base/common.h"
#include "base/json.h"

#include "embed/embed.h"
#include "model/http.h"

#include <jansson.h>

enum flavor { OPENAI, OLLAMA };

struct http_embedder {
    struct vg_embedder base; /* must stay first */
    enum flavor flavor;
    char url[1024];
    char auth[512]; /* "Authorization: Bearer ..." or "" */
    int dim;
    long timeout_ms;
};

static int http_dimension(struct vg_embedder *e)
{
    return ((struct http_embedder *)e)->dim;
}

static vigil_code status_code(long status)
{
    if (status == 401 || status == 403)
        return VIGIL_EAUTH;
    if (status == 429)
        return VIGIL_ERATELIMIT;
    if (status == 503 || status == 529)
        return VIGIL_EOVERLOAD;
    return VIGIL_EPROVIDER;
}

/* Copy one JSON array of numbers into out (dim floats). */
static int take_vector(json_t *arr, int dim, float *out)
{
    if (!json_is_array(arr) || json_array_size(arr) != (size_t)dim)
        return -1;
    for (int i = 0; i < dim; i++) {
        json_t *x = json_array_get(arr, (size_t)i);
        if (!json_is_number(x))
            return -1;
        out[i] = (float)json_number_value(x);
    }
    return 0;
}

static vigil_code http_embed(struct vg_embedder *e, const char *const *texts, size_t n, float *out,
                             vigil_error *err)
{
    struct http_embedder *h = (struct http_embedder *)e;
    json_t *input = json_array(), *req = NULL, *resp = NULL;
    char *body = NULL;
    vigil_code rc = VIGIL_OK;
    struct vg_http_response r;
    const char *headers[2] = {"Content-Type: application/json", h->auth};
    vg_http_response_init(&r);
    for (size_t i = 0; input && i < n; i++)
        if (json_array_append_new(input, json_string(texts[i] ? texts[i] : ""))) {
            json_decref(input);
            input = NULL;
        }
    if (input)
        req = h->flavor == OPENAI ? json_pack("{s:s, s:o, s:i}", "model", e->model, "input", input,
                                              "dimensions", h->dim)
                                  : json_pack("{s:s, s:o}", "model", e->model, "input", input);
    if (!req || !(body = vg_json_dumps(req, JSON_COMPACT))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building an embedding request");
        goto out;
    }
    struct vg_http_request hr = {.method = "POST",
                                 .url = h->url,
                                 .headers = headers,
                                 .n_headers = h->auth[0] ? 2 : 1,
                                 .body = body,
                                 .body_len = strlen(body),
                                 .timeout_ms = h->timeout_ms,
                                 .max_response = 64u << 20};
    if ((rc = vg_http_perform(&hr, &r, err)))
        goto out;
    if (r.status < 200 || r.status > 299) {
        rc = VG_FAIL(err, status_code(r.status), "embedding service \"%s\" answered %ld: %.160s",
                     h->url, r.status, r.body.data);
        if (err)
            err->subcode = (int)r.status;
        goto out;
    }
    json_error_t je;
    if (!(resp = json_loadb(r.body.data, r.body.len, 0, &je))) {
        rc = VG_FAIL(err, VIGIL_EPROVIDER, "embedding service \"%s\" sent invalid JSON: %s", h->url,
                     je.text);
        goto out;
    }
    if (h->flavor == OPENAI) {
        json_t *data = json_object_get(resp, "data");
        if (json_array_size(data) != n) {
            rc = VG_FAIL(err, VIGIL_EPROVIDER, "embedding service sent %zu vectors for %zu texts",
                         json_array_size(data), n);
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            json_t *d = json_array_get(data, i);
            json_t *idx = json_object_get(d, "index");
            size_t at = json_is_integer(idx) ? (size_t)json_integer_value(idx) : i;
            if (at >= n ||
                take_vector(json_object_get(d, "embedding"), h->dim, out + at * (size_t)h->dim)) {
                rc = VG_FAIL(err, VIGIL_EPROVIDER,
                             "embedding service sent a vector that is not %d numbers", h->dim);
                goto out;
            }
        }
    } else {
        json_t *vs = json_object_get(resp, "embeddings");
        if (json_array_size(vs) != n) {
            rc = VG_FAIL(err, VIGIL_EPROVIDER, "embedding service sent %zu vectors for %zu texts",
                         json_array_size(vs), n);
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            if (take_vector(json_array_get(vs, i), h->dim, out + i * (size_t)h->dim)) {
                rc = VG_FAIL(err, VIGIL_EPROVIDER,
                             "embedding service sent a vector that is not %d numbers", h->dim);
                goto out;
            }
    }
    /* Cosine needs unit vectors; providers mostly send them, but not all models do. */
    for (size_t i = 0; i < n; i++)
        vg_vec_normalize(out + i * (size_t)h->dim, h->dim);
out:
    /* The key it sent, quoted back by a gateway's error body, and a base URL's password, quoted
     * by a connection error, read [redacted], as for model providers (trial H5). */
    if (rc)
        vg_http_redact_credentials(h->url, headers, h->auth[0] ? 2 : 1, err);
    vg_http_response_release(&r);
    json_decref(req);
    json_decref(resp);
    vg_free(body); /* json_dumps allocates through the jansson hooks */
    return rc;
}

static void http_close(struct vg_embedder *e)
{
    vg_free(e);
}

static const struct vg_embed_methods openai_methods = {.version = 1,
                                                       .name = "openai",
                                                       .caps = VG_EMBED_CAP_SEMANTIC,
                                                       .dimension = http_dimension,
                                                       .embed = http_embed,
                                                       .close = http_close};
static const struct vg_embed_methods ollama_methods = {.version = 1,
                                                       .name = "ollama",
                                                       .caps = VG_EMBED_CAP_SEMANTIC,
                                                       .dimension = http_dimension,
                                                       .embed = http_embed,
                                                       .close = http_close};

static vigil_code make(enum flavor f, const struct vg_embed_http_options *o,
                       struct vg_embedder **out, vigil_error *err)
{
    if (!o || !o->model || !*o->model)
        return VG_FAIL(err, VIGIL_EINVAL, "an embedding adapter needs a model name");
    if (o->dimension < 1 || o->dimension > 65536)
        return VG_FAIL(err, VIGIL_EINVAL, "an embedding adapter needs its dimension (1..65536)");
    const char *base = o->base_url && *o->base_url
                           ? o->base_url
                           : (f == OPENAI ? "https://api.openai.com" : "http://127.0.0.1:11434");
    struct http_embedder *h = vg_calloc(1, sizeof *h);
    if (!h)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating an embedder");
    h->base.methods = f == OPENAI ? &openai_methods : &ollama_methods;
    h->flavor = f;
    h->dim = o->dimension;
    h->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/')
        bl--;
    int n1 = snprintf(h->url, sizeof h->url, "%.*s%s", (int)bl, base,
                      f == OPENAI ? "/v1/embeddings" : "/api/embed");
    int n2 = snprintf(h->base.model, sizeof h->base.model, "%s", o->model);
    int n3 = o->api_key && *o->api_key
                 ? snprintf(h->auth, sizeof h->auth, "Authorization: Bearer %s", o->api_key)
                 : 0;
    if (n1 >= (int)sizeof h->url || n2 >= (int)sizeof h->base.model || n3 >= (int)sizeof h->auth) {
        vg_free(h);
        return VG_FAIL(err, VIGIL_EINVAL, "embedding url, model or key is too long");
    }
    *out = &h->base;
    return VIGIL_OK;
}

vigil_code vg_embed_openai_new(const struct vg_embed_http_options *o, struct vg_embedder **out,
                               vigil_error *err)
{
    return make(OPENAI, o, out, err);
}

vigil_code vg_embed_ollama_new(const struct vg_embed_http_options *o, struct vg_embedder **out,
                               vigil_error *err)
{
    return make(OLLAMA, o, out, err);
}
