/*
 * fuzz_anthropic_stream.c: arbitrary bytes as an Anthropic Messages response body, through both
 * the streaming parser (in input-chosen chunks) and the non-streaming parser. Neither may
 * crash, leak or return a half-built response.
 */
#include "base/common.h"

#include "model/anthropic/anthropic.h"

static void on_text(void *u, const char *d, size_t n)
{
    (void)u;
    (void)d;
    (void)n;
}

/* A response that stopped on max_tokens with tool calls says they were cut, and no other does:
 * the loop runs no call of a cut answer, whichever reader made it (a JSON answer to a streaming
 * request is read by the JSON reader). */
static void check_cut(const struct vg_model_response *r)
{
    if (r->tool_calls_cut != (r->stop_reason == VG_MODEL_STOP_MAX_TOKENS && r->n_tool_calls > 0))
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct vg_anthropic_stream *s = NULL;
    struct vg_model_response *r = NULL;
    struct vg_model_stream_cb cb = {.on_text = on_text};
    vigil_error err = {0};
    size_t step;

    vg_alloc_install_json();
    if (size == 0)
        return 0;
    step = (size_t)(data[0] % 31) + 1;
    if (vg_anthropic_stream_new(&cb, &s, &err) != VIGIL_OK)
        return 0;
    vigil_code rc = VIGIL_OK;
    for (size_t off = 1; rc == VIGIL_OK && off < size; off += step)
        rc = vg_anthropic_stream_feed(s, (const char *)data + off, VG_MIN(step, size - off), &err);
    if (rc == VIGIL_OK && vg_anthropic_stream_finish(s, &r, &err) == VIGIL_OK) {
        if (!r || !r->text)
            __builtin_trap();
        check_cut(r);
        vg_model_response_free(r);
    }
    vg_anthropic_stream_free(s);

    r = NULL;
    if (vg_anthropic_parse_response((const char *)data + 1, size - 1, &r, &err) == VIGIL_OK) {
        if (!r || !r->text)
            __builtin_trap();
        check_cut(r);
        vg_model_response_free(r);
    }
    return 0;
}
