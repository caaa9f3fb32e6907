/*
 * fuzz_schema.c: libFuzzer target for the JSON Schema validator. The input's first line is a
 * schema, the rest an instance. Compiling must accept or reject cleanly; validating and
 * applying defaults must terminate without crashing, leaking or overflowing the stack.
 * Seed corpus: scripts can split the official test suite into schema\ninstance files;
 * fuzz/fuzz_schema.dict lists the keywords.
 */
#include "base/common.h"

#include "base/buf.h"
#include "tool/schema.h"

#include <jansson.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    size_t schema_len = nl ? (size_t)(nl - text) : size;
    json_t *schema = json_loadb(text, schema_len, JSON_DECODE_ANY, NULL);
    if (!schema)
        return 0;
    json_t *inst = nl ? json_loadb(nl + 1, size - schema_len - 1, JSON_DECODE_ANY, NULL) : NULL;
    if (!inst)
        inst = json_null();

    struct vg_schema *s = NULL;
    vigil_error err = {0};
    if (vg_schema_compile(schema, &s, &err) == VIGIL_OK) {
        struct vg_buf out;
        vg_buf_init(&out, 1 << 16);
        vigil_code rc = vg_schema_validate(s, inst, &out, &err);
        if (rc != VIGIL_OK && rc != VIGIL_EINVAL)
            __builtin_trap();
        /* The quick path (no list) must agree with the full one. */
        vigil_code quick = vg_schema_validate(s, inst, NULL, &err);
        if (quick != rc)
            __builtin_trap();
        json_t *copy = json_deep_copy(inst);
        if (copy && vg_schema_apply_defaults(s, copy, &err) == VIGIL_OK)
            (void)vg_schema_validate(s, copy, NULL, &err);
        json_decref(copy);
        vg_buf_release(&out);
        vg_schema_free(s);
    } else if (err.code == VIGIL_OK || err.message[0] == '\0') {
        __builtin_trap(); /* a rejection always says why */
    }
    json_decref(schema);
    json_decref(inst);
    return 0;
}
