/*
 * hash.c: the built-in offline embedder. Feature hashing (the "hashing trick"): every
 * lowercased word, word bigram and character trigram (of the word padded with spaces) is hashed
 * (FNV-1a, 64 bit) to a bucket and a sign, weighted (words 1.0, bigrams 0.7, trigrams 0.35) and
 * summed; the vector is L2-normalized. Deterministic, needs no service, costs microseconds.
 * Its nature, stated plainly: it measures lexical overlap (shared words and word pieces, which
 * tolerates inflections and typos somewhat), not meaning; synonyms do not meet.
 */
#include "base/common.h"

#include "embed/embed.h"

#include <ctype.h>

struct hash_embedder {
    struct vg_embedder base; /* must stay first */
    int dim;
};

static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void add(float *v, int dim, uint64_t seed, const char *p, size_t n, float w)
{
    uint64_t h = fnv(seed, p, n);
    h ^= h >> 29; /* mix high bits into the low ones used for the bucket */
    v[h % (uint64_t)dim] += (h >> 63) ? -w : w;
}

static int is_word(unsigned char c)
{
    return isalnum(c) || c >= 0x80; /* bytes of UTF-8 sequences count as letters */
}

static void embed_one(const char *text, int dim, float *v)
{
    char prev[64] = "", word[64];
    memset(v, 0, sizeof *v * (size_t)dim);
    const char *p = text ? text : "";
    while (*p) {
        while (*p && !is_word((unsigned char)*p))
            p++;
        size_t n = 0;
        while (*p && is_word((unsigned char)*p)) {
            if (n < sizeof word - 3)
                word[n++] = (char)tolower((unsigned char)*p);
            p++;
        }
        if (!n)
            break;
        word[n] = '\0';
        add(v, dim, 0xcbf29ce484222325ULL, word, n, 1.0f);
        if (prev[0]) {
            char pair[130];
            int m = snprintf(pair, sizeof pair, "%s %s", prev, word);
            add(v, dim, 0x84222325cbf29ce4ULL, pair, (size_t)m, 0.7f);
        }
        char padded[66];
        int m = snprintf(padded, sizeof padded, " %s ", word);
        for (int i = 0; i + 3 <= m; i++)
            add(v, dim, 0x9e3779b97f4a7c15ULL, padded + i, 3, 0.35f);
        snprintf(prev, sizeof prev, "%s", word);
    }
    vg_vec_normalize(v, dim);
}

static int hash_dimension(struct vg_embedder *e)
{
    return ((struct hash_embedder *)e)->dim;
}

static vigil_code hash_embed(struct vg_embedder *e, const char *const *texts, size_t n, float *out,
                             vigil_error *err)
{
    int dim = ((struct hash_embedder *)e)->dim;
    for (size_t i = 0; i < n; i++)
        embed_one(texts[i], dim, out + i * (size_t)dim);
    return VIGIL_OK;
}

static void hash_close(struct vg_embedder *e)
{
    vg_free(e);
}

static const struct vg_embed_methods hash_methods = {
    .version = 1,
    .name = "hash",
    .caps = VG_EMBED_CAP_OFFLINE,
    .dimension = hash_dimension,
    .embed = hash_embed,
    .close = hash_close,
};

vigil_code vg_embed_hash_new(int dim, struct vg_embedder **out, vigil_error *err)
{
    if (dim == 0)
        dim = VG_EMBED_HASH_DIM;
    if (dim < 8 || dim > 8192)
        return VG_FAIL(err, VIGIL_EINVAL, "hash embedder dimension %d is out of range 8..8192",
                       dim);
    struct hash_embedder *h = vg_calloc(1, sizeof *h);
    if (!h)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating an embedder");
    h->base.methods = &hash_methods;
    h->dim = dim;
    snprintf(h->base.model, sizeof h->base.model, "vigil-hash-%d", dim);
    *out = &h->base;
    return VIGIL_OK;
}
