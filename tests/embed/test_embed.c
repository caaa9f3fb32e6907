/*
 * test_embed.c: the offline hash embedder (deterministic, unit length, lexical closeness), the
 * stored vector form, and exact top-k against a brute-force sort.
 */
#include "helpers/test.h"

#include "embed/embed.h"

#include <math.h>
#include <sodium.h>

static float dot(const float *a, const float *b, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

TEST(hash_embedder_is_deterministic_normalized_and_lexical)
{
    struct vg_embedder *e = NULL;
    ASSERT_OK(vg_embed_hash_new(0, &e, E));
    ASSERT_EQ(vg_embed_dimension(e), 384);
    ASSERT_STREQ(vg_embed_model(e), "vigil-hash-384");
    const char *texts[] = {"The cat sleeps on the radiator", "the CAT sleeps on a radiator!",
                           "quarterly bridge project deadline", ""};
    float v[4][384], w[384];
    ASSERT_OK(vg_embed(e, texts, 4, &v[0][0], E));
    ASSERT_OK(vg_embed(e, texts, 1, w, E));
    ASSERT(memcmp(v[0], w, sizeof w) == 0);
    ASSERT(fabsf(dot(v[0], v[0], 384) - 1.0f) < 1e-4f);
    ASSERT(dot(v[0], v[1], 384) > 0.7f);
    ASSERT(dot(v[0], v[2], 384) < 0.3f);
    ASSERT_EQ(dot(v[3], v[3], 384), 0); /* empty text: zero vector, not NaN */
    vg_embed_close(e);
    ASSERT_CODE(VIGIL_EINVAL, vg_embed_hash_new(3, &e, NULL));
}

TEST(vectors_round_trip_through_text)
{
    float v[7] = {0.5f, -1.25f, 3e-8f, 0, 1e30f, -0.0f, 42};
    char *text = NULL;
    ASSERT_OK(vg_vec_encode(v, 7, &text, E));
    float back[7];
    ASSERT_OK(vg_vec_decode(text, 7, back, E));
    ASSERT(memcmp(v, back, sizeof v) == 0);
    ASSERT_CODE(VIGIL_EPARSE, vg_vec_decode(text, 8, back, NULL));
    ASSERT_CODE(VIGIL_EPARSE, vg_vec_decode("!!!", 7, back, NULL));
    vg_free(text);
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* The vector text is standard padded base64 of the little-endian floats, byte for byte what
 * libsodium's encoder wrote before vigil's own took its place (stored vectors and new ones read
 * alike): every length's remainder, every byte value. */
TEST(a_vectors_text_is_the_base64_libsodium_writes)
{
    uint64_t s = 11;
    for (int dim = 1; dim <= 40; dim++) {
        float v[40];
        unsigned char bytes[160];
        char want[256], *text = NULL;
        for (int i = 0; i < dim * 4; i++)
            bytes[i] = (unsigned char)(dim == 1 ? 0xff : lcg(&s));
        memcpy(v, bytes, (size_t)dim * 4); /* a little-endian machine's floats: their bytes */
        sodium_bin2base64(want, sizeof want, bytes, (size_t)dim * 4,
                          sodium_base64_VARIANT_ORIGINAL);
        ASSERT_OK(vg_vec_encode(v, dim, &text, E));
        ASSERT_STREQ(text, want);
        vg_free(text);
    }
}

TEST(topk_matches_a_full_sort)
{
    enum { N = 2000, D = 37, K = 10 };
    float *m = vg_malloc(sizeof *m * N * D), q[D];
    uint64_t s = 7;
    for (int i = 0; i < N * D; i++)
        m[i] = (float)((int)(lcg(&s) % 2001) - 1000) / 1000.0f;
    for (int i = 0; i < D; i++)
        q[i] = (float)((int)(lcg(&s) % 2001) - 1000) / 1000.0f;
    struct vg_vec_hit hits[K];
    ASSERT_EQ(vg_vec_topk(m, N, D, q, K, hits), K);
    /* brute force: for each hit, count the rows strictly better than it */
    for (int h = 0; h < K; h++) {
        float sc = dot(m + hits[h].row * D, q, D);
        ASSERT(fabsf(sc - hits[h].score) < 1e-3f);
        int better = 0;
        for (int r = 0; r < N; r++)
            better += dot(m + r * D, q, D) > sc + 1e-4f;
        ASSERT(better <= h);
        if (h)
            ASSERT(hits[h - 1].score >= hits[h].score);
    }
    ASSERT_EQ(vg_vec_topk(m, 3, D, q, K, hits), 3);
    ASSERT_EQ(vg_vec_topk(m, N, D, q, 0, hits), 0);
    vg_free(m);
}

int main(void)
{
    RUN(hash_embedder_is_deterministic_normalized_and_lexical);
    RUN(vectors_round_trip_through_text);
    RUN(topk_matches_a_full_sort);
    RUN(a_vectors_text_is_the_base64_libsodium_writes);
    return 0;
}
