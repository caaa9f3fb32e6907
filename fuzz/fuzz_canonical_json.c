/*
 * fuzz_canonical_json.c: vigil's canonical JSON writer (base/json.c vg_json_put_canonical)
 * against jansson's json_dumps(JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) on whatever
 * jansson parses from arbitrary bytes. Journal records and run projections were written by
 * jansson before, and replay compares stored text byte for byte, so the two must agree on
 * every value: string escapes, reals, key order, nesting.
 */
#include "base/common.h"

#include "base/buf.h"
#include "base/json.h"

#include <jansson.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
    vg_buf_release(&b);
    json_decref(v);
    return 0;
}
