/*
 * fuzz_canonical_json.c: vigil's JSON writers (base/json.c) against jansson's json_dumps on
 * whatever jansson parses from arbitrary bytes: vg_json_put_canonical against JSON_COMPACT |
 * JSON_SORT_KEYS | JSON_ENCODE_ANY, vg_json_put_compact (vg_json_dump unsorted) against
 * JSON_COMPACT | JSON_ENCODE_ANY, and vg_json_dumps against jansson's other layouts. Journal
 * records and run projections were written by jansson before, request bodies and stored message
 * metadata too, so they must agree on every value: string escapes, key order, nesting, byte for
 * byte where no real is involved. A real vigil writes as the fewest digits that read back as the
 * same double where jansson writes %.17g (0.8, not 0.80000000000000004): where the value holds
 * one, vigil's text must read back as the same value (replay compares a projection stored before
 * by value where the bytes differ), and vg_json_hash_text, which operation ids are hashed over,
 * must be jansson's text byte for byte. And text vg_json_is_canonical takes for canonical must
 * be exactly what the canonical writer makes of what jansson reads from it (the journal stores
 * such text as it is).
 */
#include "base/common.h"

#include "base/buf.h"
#include "base/json.h"

#include <jansson.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_known_canonical(const uint8_t *data, size_t size)
{
    if (!vg_json_is_canonical((const char *)data, size))
        return;
    json_t *v =
        json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (!v)
        VG_BUG("taken for canonical, but jansson refuses it: %.*s", (int)size, (const char *)data);
    struct vg_buf b;
    vg_buf_init(&b, (size_t)64 << 20);
    if (vg_json_put_canonical(&b, v) != 0 || b.fail != VIGIL_OK || b.len != size ||
        memcmp(b.data, data, size) != 0)
        VG_BUG("taken for canonical, but written as %s: %.*s", b.data ? b.data : "(nothing)",
               (int)size, (const char *)data);
    vg_buf_release(&b);
    json_decref(v);
}

static void jansson_free(char *text)
{
    json_malloc_t jm;
    json_free_t jf;
    json_get_alloc_funcs(&jm, &jf);
    jf(text);
}

/* vigil's text got for v against jansson's want: the same bytes where v holds no real, else the
 * same value read back. */
static void same_as_jansson(const char *what, const json_t *v, int has_real, const char *want,
                            const char *got)
{
    if (!want)
        return;
    if (!got)
        VG_BUG("jansson wrote %s but vigil's %s writer failed", want, what);
    if (!has_real) {
        if (strcmp(want, got) != 0)
            VG_BUG("%s JSON differs:\n jansson: %s\n vigil:   %s", what, want, got);
        return;
    }
    json_t *back = json_loads(got, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!back || !json_equal(back, v))
        VG_BUG("%s JSON reads back as another value:\n jansson: %s\n vigil:   %s", what, want, got);
    json_decref(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_known_canonical(data, size);
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!v)
        return 0;
    int has_real = vg_json_has_real(v);
    char *want = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    struct vg_buf b;
    vg_buf_init(&b, (size_t)64 << 20);
    int rc = vg_json_put_canonical(&b, v);
    same_as_jansson("canonical", v, has_real, want,
                    rc == 0 && b.fail == VIGIL_OK ? (b.data ? b.data : "") : NULL);
    char *hashed = vg_json_hash_text(v);
    same_as_jansson("hashed", v, 0, want, hashed);
    jansson_free(want);
    vg_free(hashed);
    static const size_t layouts[] = {JSON_COMPACT | JSON_ENCODE_ANY,
                                     JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENCODE_ANY,
                                     JSON_ENCODE_ANY, JSON_INDENT(1) | JSON_COMPACT};
    for (size_t i = 0; i < VG_ARRAY_LEN(layouts); i++) {
        want = json_dumps(v, layouts[i]);
        char *got = i == 0 ? vg_json_dump(v, 0) : vg_json_dumps(v, layouts[i]);
        same_as_jansson(i == 0 ? "compact" : "laid out", v, has_real, want, got);
        jansson_free(want);
        vg_free(got);
    }
    vg_buf_release(&b);
    json_decref(v);
    return 0;
}
