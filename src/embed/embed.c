/*
 * embed.c: the embedding port's wrappers, the stored text form of vectors and exact cosine
 * top-k. Vectors are stored as base64 of little-endian float32 bytes: 4 bytes per dimension
 * before encoding, exact, and decoded with one pass (no float parsing).
 */
#include "base/common.h"

#include "embed/embed.h"

#include <math.h>
#include <sodium.h>

int vg_embed_dimension(struct vg_embedder *e)
{
    return e->methods->dimension(e);
}

vigil_code vg_embed(struct vg_embedder *e, const char *const *texts, size_t n, float *out,
                    vigil_error *err)
{
    if (n == 0)
        return VIGIL_OK;
    return e->methods->embed(e, texts, n, out, err);
}

void vg_embed_close(struct vg_embedder *e)
{
    if (e)
        e->methods->close(e);
}

const char *vg_embed_model(struct vg_embedder *e)
{
    return e->model;
}

void vg_vec_normalize(float *v, int dim)
{
    double s = 0;
    for (int i = 0; i < dim; i++)
        s += (double)v[i] * v[i];
    if (s <= 0)
        return;
    float inv = (float)(1.0 / sqrt(s));
    for (int i = 0; i < dim; i++)
        v[i] *= inv;
}

static int little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static void swap4(unsigned char *p, size_t n)
{
    for (size_t i = 0; i + 3 < n; i += 4) {
        unsigned char a = p[i], b = p[i + 1];
        p[i] = p[i + 3];
        p[i + 1] = p[i + 2];
        p[i + 2] = b;
        p[i + 3] = a;
    }
}

/* Standard base64 with its padding, NUL-terminated: the text sodium_bin2base64's ORIGINAL variant
 * writes. Libsodium's encoder is constant-time (made for secrets), some 70 instructions a byte;
 * a vector is no secret, and every new agent's first run writes three of 1,536 bytes (its core
 * blocks'), about 0.3 M instructions an agent that way. */
static void base64_put(char *out, const unsigned char *in, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i = 0;
    for (; n - i >= 3; i += 3) {
        uint32_t w = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *out++ = abc[w >> 18];
        *out++ = abc[(w >> 12) & 63];
        *out++ = abc[(w >> 6) & 63];
        *out++ = abc[w & 63];
    }
    if (n - i) {
        uint32_t w = (uint32_t)in[i] << 16 | (n - i == 2 ? (uint32_t)in[i + 1] << 8 : 0);
        *out++ = abc[w >> 18];
        *out++ = abc[(w >> 12) & 63];
        *out++ = n - i == 2 ? abc[(w >> 6) & 63] : '=';
        *out++ = '=';
    }
    *out = '\0';
}

vigil_code vg_vec_encode(const float *v, int dim, char **out, vigil_error *err)
{
    if (dim <= 0 || dim > 65536)
        return VG_FAIL(err, VIGIL_EINVAL, "vector dimension %d is out of range", dim);
    size_t n = (size_t)dim * 4;
    unsigned char *bytes = vg_malloc(n);
    size_t tlen = sodium_base64_encoded_len(n, sodium_base64_VARIANT_ORIGINAL);
    char *text = vg_malloc(tlen);
    if (!bytes || !text) {
        vg_free(bytes);
        vg_free(text);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a vector");
    }
    memcpy(bytes, v, n);
    if (!little_endian())
        swap4(bytes, n);
    base64_put(text, bytes, n);
    vg_free(bytes);
    *out = text;
    return VIGIL_OK;
}

vigil_code vg_vec_decode(const char *text, int dim, float *v, vigil_error *err)
{
    size_t n = (size_t)dim * 4, got = 0;
    if (!text || dim <= 0)
        return VG_FAIL(err, VIGIL_EPARSE, "no vector text");
    if (sodium_base642bin((unsigned char *)v, n, text, strlen(text), NULL, &got, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        got != n)
        return VG_FAIL(err, VIGIL_EPARSE, "stored vector is not %d float32 values in base64", dim);
    if (!little_endian())
        swap4((unsigned char *)v, n);
    return VIGIL_OK;
}

/* Min-heap on score: hits[0] is the worst of the current best k. */
static void sift_down(struct vg_vec_hit *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l].score < h[m].score)
            m = l;
        if (r < n && h[r].score < h[m].score)
            m = r;
        if (m == i)
            return;
        struct vg_vec_hit t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void sift_up(struct vg_vec_hit *h, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p].score <= h[i].score)
            return;
        struct vg_vec_hit t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

size_t vg_vec_topk(const float *m, int64_t n, int dim, const float *q, size_t k,
                   struct vg_vec_hit *hits)
{
    size_t have = 0;
    if (k == 0)
        return 0;
    for (int64_t r = 0; r < n; r++) {
        const float *row = m + (size_t)r * (size_t)dim;
        /* Eight independent accumulators: the adds do not wait on each other, so the loop
         * runs at the rate memory delivers the rows (and compilers can pack the lanes into
         * SIMD registers without reassociating anything). */
        float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int i = 0;
        for (; i + 8 <= dim; i += 8)
            for (int l = 0; l < 8; l++)
                a[l] += row[i + l] * q[i + l];
        for (; i < dim; i++)
            a[0] += row[i] * q[i];
        float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
        if (have < k) {
            hits[have].row = r;
            hits[have].score = s;
            sift_up(hits, have++);
        } else if (s > hits[0].score) {
            hits[0].row = r;
            hits[0].score = s;
            sift_down(hits, have, 0);
        }
    }
    /* Heap to best-first order: repeatedly move the worst to the end. */
    for (size_t end = have; end > 1; end--) {
        struct vg_vec_hit t = hits[0];
        hits[0] = hits[end - 1];
        hits[end - 1] = t;
        sift_down(hits, end - 1, 0);
    }
    return have;
}
