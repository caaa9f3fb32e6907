/*
 * fuzz_sqlite_key.c: the stored form of the SQLite key columns (src/store/sqlite/key.h). For any
 * text, what reading gives back is the text written: a packed value unpacks to it, and a value
 * left as text is one that does not begin with a canonical UUID. Unpacking any BLOB (a damaged
 * store) must not crash or write past its buffer either.
 */
#include "base/common.h"

#include "store/sqlite/key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = vg_malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    unsigned char packed[VG_SQLITE_KEY_MAX];
    char back[VG_SQLITE_KEY_MAX];
    size_t n = vg_sqlite_key_pack(text, packed);
    if (n) {
        if (!vg_sqlite_key_unpack(packed, n, back) || strcmp(back, text) != 0)
            VG_BUG("key packed in %zu bytes read back as %s: %s", n, back, text);
    }
    if (vg_sqlite_key_unpack(data, size, back) && strlen(back) >= VG_SQLITE_KEY_MAX)
        VG_BUG("unpacked key too long");
    vg_free(text);
    return 0;
}
