/*
 * port.h: the embedding port. An embedder turns texts into fixed-dimension float vectors; the
 * memory manager stores them next to blocks and ranks blocks by cosine similarity. Adapters:
 * the built-in offline feature-hashing embedder (src/embed/hash/), OpenAI (POST /v1/embeddings)
 * and Ollama (POST /api/embed) in src/embed/http/.
 *
 * Append-only: new methods go at the end and version goes up.
 */
#ifndef VG_EMBED_PORT_H
#define VG_EMBED_PORT_H

#include <stddef.h>

struct vg_embedder;

#define VG_EMBED_CAP_OFFLINE (1u << 0)  /* needs no service: never fails for lack of one */
#define VG_EMBED_CAP_SEMANTIC (1u << 1) /* a learned model (meaning), not lexical hashing */

struct vg_embed_methods {
    int version;      /* 1 */
    const char *name; /* "hash", "openai", "ollama" */
    unsigned caps;    /* VG_EMBED_CAP_* */
    /* Vector size; constant for the instance's lifetime. */
    int (*dimension)(struct vg_embedder *e);
    /* Embed n texts into out (n * dimension floats, row per text). All or nothing: on failure
     * out is unspecified and err says why (ENETWORK, ETIMEOUT, EPROVIDER, ERATELIMIT...). */
    vigil_code (*embed)(struct vg_embedder *e, const char *const *texts, size_t n, float *out,
                        vigil_error *err);
    /* Release the instance (the struct itself too). */
    void (*close)(struct vg_embedder *e);
    /* end of version 1 */
};

struct vg_embedder {
    const struct vg_embed_methods *methods; /* must stay first */
    char model[128];                        /* the model name stored with each vector */
};

#endif
