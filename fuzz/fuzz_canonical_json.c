/*
 * fuzz_canonical_json.c: vigil's JSON writers (base/json.c) against jansson's json_dumps on
 * whatever jansson parses from arbitrary bytes: vg_json_put_canonical against JSON_COMPACT |
 * JSON_SORT_KEYS | JSON_ENCODE_ANY, and vg_json_put_compact (vg_json_dump unsorted) against
 * JSON_COMPACT | JSON_ENCODE_ANY. Journal records and run projections were written by jansson
 * before, and replay compares stored text byte for byte; request bodies and stored message
 * metadata were too. So they must agree on every value: string escapes, reals, key order,
 * nesting. And text vg_json_is_canonical takes for canonical must be exactly what the canonical
 * writer makes of what jansson reads from it (the journal stores such text as it is).
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_known_canonical(data, size);
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!v)
        return 0;
    char *want = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    struct vg_buf b;
    vg_buf_init(&b, (size_t)64 << 20);
    int rc = vg_json_put_canonical(&b, v);
    if (want && (rc != 0 || b.fail != VIGIL_OK))
        VG_BUG("jansson wrote %s but vigil's writer failed", want);
    if (want && strcmp(want, b.data ? b.data : "") != 0)
        VG_BUG("canonical JSON differs:\n jansson: %s\n vigil:   %s", want, b.data);
    json_malloc_t jm;
    json_free_t jf;
    json_get_alloc_funcs(&jm, &jf);
    jf(want);
    want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    char *got = vg_json_dump(v, 0);
    if (want && !got)
        VG_BUG("jansson wrote %s but vigil's compact writer failed", want);
    if (want && strcmp(want, got) != 0)
        VG_BUG("compact JSON differs:\n jansson: %s\n vigil:   %s", want, got);
    jf(want);
    vg_free(got);
    vg_buf_release(&b);
    json_decref(v);
    return 0;
}
