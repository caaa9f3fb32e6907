/*
 * fuzz_store_body.c: the stored form of step records' bodies (src/store/body.h). For any text
 * and any of the kinds it packs, what reading gives back is the text written: unpack(pack(x))
 * is x, and a text that is not packed never reads as packed. Unpacking any stored text (a
 * damaged store) must not crash either. The first byte picks the kind and whether the text's
 * columns are the ones the seeds' bodies hold.
 */
#include "base/common.h"

#include "store/body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const kinds[] = {"message", "journal", "run_tool_call", "run"};
    if (size < 1)
        return 0;
    char *text = vg_malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    struct vg_record r = {.kind = kinds[data[0] % 4],
                          .id = "id-1",
                          .owner = data[0] & 4 ? "" : "agent-1",
                          .k1 = "k-1",
                          .k2 = data[0] & 8 ? "" : "user",
                          .seq = 7,
                          .at = 1795798305569,
                          .body = text};
    struct vg_buf packed, back;
    vg_buf_init(&packed, (size_t)1 << 24);
    vg_buf_init(&back, (size_t)1 << 24);
    if (vg_body_pack(&r, &packed) && !packed.fail) {
        struct vg_record stored = r;
        stored.body = packed.data;
        if (!vg_body_unpack(&stored, &back) || back.fail || strcmp(back.data, text) != 0)
            VG_BUG("packed as %s, read back as %s: %s", packed.data, back.data, text);
    } else if (!packed.fail) {
        if (vg_body_unpack(&r, &back))
            VG_BUG("stored as it is, but read as packed: %s", text);
    }
    vg_buf_reset(&back);
    (void)vg_body_unpack(&r, &back); /* any stored text */
    vg_buf_release(&packed);
    vg_buf_release(&back);
    vg_free(text);
    return 0;
}
