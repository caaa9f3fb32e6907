/*
 * embed.h: what other modules use of the embedding port: wrappers, the built-in adapters'
 * constructors, a compact text form for stored vectors, and exact cosine top-k.
 */
#ifndef VG_EMBED_H
#define VG_EMBED_H

#include "embed/port.h"

#include <stdint.h>

#define VG_EMBED_HASH_DIM 384

int vg_embed_dimension(struct vg_embedder *e);
/* Embed n texts (see the port); n == 0 is a no-op. */
vigil_code vg_embed(struct vg_embedder *e, const char *const *texts, size_t n, float *out,
                    vigil_error *err);
void vg_embed_close(struct vg_embedder *e);
const char *vg_embed_model(struct vg_embedder *e);

/*
 * The offline embedder: feature hashing of lowercased words, word bigrams and character
 * trigrams into `dim` signed buckets (0: 384), L2-normalized. Deterministic and free, but
 * lexical: two texts are close when they share words and word pieces, not when they mean the
 * same thing with different words. *out owned (vg_embed_close).
 */
vigil_code vg_embed_hash_new(int dim, struct vg_embedder **out, vigil_error *err);

/* Options of the HTTP adapters; zero-initialize. */
struct vg_embed_http_options {
    const char *base_url; /* "https://api.openai.com" / "http://127.0.0.1:11434" (no /v1) */
    const char *api_key;  /* OpenAI bearer key; NULL for Ollama */
    const char *model;    /* required */
    int dimension;        /* required: the configured vector size; responses must match */
    long timeout_ms;      /* 0: 30000 */
};
/* OpenAI: POST {base}/v1/embeddings {"model","input":[...],"dimensions"?}. */
vigil_code vg_embed_openai_new(const struct vg_embed_http_options *o, struct vg_embedder **out,
                               vigil_error *err);
/* Ollama: POST {base}/api/embed {"model","input":[...]} -> {"embeddings":[[...]]}. */
vigil_code vg_embed_ollama_new(const struct vg_embed_http_options *o, struct vg_embedder **out,
                               vigil_error *err);

struct vg_config;
struct vg_clock;
/*
 * The embedder the config names (docs/memory.md): embed.provider builtin (default, also for
 * cfg NULL), openai or ollama, with embed.model, embed.base_url, embed.dimensions (known models
 * have a default) and embed.timeout_ms. The OpenAI key comes from OPENAI_API_KEY. Building
 * an HTTP adapter does not contact the service. EINVAL names a bad key. *out owned.
 */
vigil_code vg_embed_from_config(const struct vg_config *cfg, struct vg_clock *clock,
                                struct vg_embedder **out, vigil_error *err);

/* Scale v to unit length (a zero vector stays zero). */
void vg_vec_normalize(float *v, int dim);

/* A vector as text: base64 of its little-endian float32 bytes. *out owned (vg_free). */
vigil_code vg_vec_encode(const float *v, int dim, char **out, vigil_error *err);
/* Decode into v (dim floats); EPARSE when the text is not dim float32s in base64. */
vigil_code vg_vec_decode(const char *text, int dim, float *v, vigil_error *err);

/* One hit of a top-k search: the row index and its score (dot product). */
struct vg_vec_hit {
    int64_t row;
    float score;
};

/*
 * Exact top-k by dot product (cosine for unit vectors) of q against n rows of `dim` floats
 * stored contiguously in m. Writes up to k hits best first into hits; returns how many.
 * One pass over m with a k-sized min-heap: the cost is the bytes scanned.
 */
size_t vg_vec_topk(const float *m, int64_t n, int dim, const float *q, size_t k,
                   struct vg_vec_hit *hits);

#endif
