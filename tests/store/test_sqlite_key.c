/*
 * test_sqlite_key.c: the key columns' stored form (src/store/sqlite/key.h): a value that begins
 * with a canonical UUID is its 16 bytes and the rest, read back as the same text; anything else
 * stays text.
 */
#include "helpers/test.h"

#include "store/sqlite/key.h"

#define UUID "01a21e9d-75df-70be-99bb-c23c2307e196"

static void round_trip(const char *text, size_t want_len)
{
    unsigned char packed[VG_SQLITE_KEY_MAX];
    char back[VG_SQLITE_KEY_MAX];
    size_t n = vg_sqlite_key_pack(text, packed);
    ASSERT_EQ(n, want_len);
    ASSERT(vg_sqlite_key_unpack(packed, n, back));
    ASSERT_STREQ(back, text);
}

TEST(uuid_led_values_pack_to_their_bytes)
{
    unsigned char packed[VG_SQLITE_KEY_MAX];
    round_trip(UUID, 16);
    round_trip(UUID ":session:c0", 27);
    ASSERT_EQ(vg_sqlite_key_pack(UUID, packed), 16);
    static const unsigned char bytes[16] = {0x01, 0xa2, 0x1e, 0x9d, 0x75, 0xdf, 0x70, 0xbe,
                                            0x99, 0xbb, 0xc2, 0x3c, 0x23, 0x07, 0xe1, 0x96};
    ASSERT(memcmp(packed, bytes, 16) == 0);
    /* The order of two UUIDs is their text's. */
    unsigned char a[VG_SQLITE_KEY_MAX], b[VG_SQLITE_KEY_MAX];
    ASSERT_EQ(vg_sqlite_key_pack("01a21e9d-7685-7123-92c7-3184f44a1250", a), 16);
    ASSERT_EQ(vg_sqlite_key_pack("01a21e9d-7685-7123-92c7-3184f44a125f", b), 16);
    ASSERT(memcmp(a, b, 16) < 0);
}

TEST(other_values_stay_text)
{
    static const char *const texts[] = {"",
                                        "agent-1",
                                        "01a21e9d",
                                        "01a21e9d-75df-70be-99bb-c23c2307e19",
                                        "01A21E9D-75DF-70BE-99BB-C23C2307E196",
                                        "01a21e9d_75df-70be-99bb-c23c2307e196",
                                        "01a21e9d-75df-70be-99bbc-23c2307e196",
                                        ("x" UUID),
                                        "01a21e9d-75df-70be-99bb-c23c2307e19g"};
    unsigned char packed[VG_SQLITE_KEY_MAX];
    for (size_t i = 0; i < VG_ARRAY_LEN(texts); i++)
        ASSERT_EQ(vg_sqlite_key_pack(texts[i], packed), 0);
    ASSERT_EQ(vg_sqlite_key_pack(NULL, packed), 0);
    /* A value too long to unpack into VG_SQLITE_KEY_MAX stays text. */
    char longer[VG_SQLITE_KEY_MAX + 8];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    memcpy(longer, UUID, 36);
    ASSERT_EQ(vg_sqlite_key_pack(longer, packed), 0);
    longer[VG_SQLITE_KEY_MAX - 37] = '\0';
    round_trip(longer, VG_SQLITE_KEY_MAX - 37 - 20);
}

TEST(damaged_blobs_are_refused)
{
    char back[VG_SQLITE_KEY_MAX];
    unsigned char blob[VG_SQLITE_KEY_MAX] = {0};
    ASSERT(!vg_sqlite_key_unpack(blob, 15, back));
    ASSERT(!vg_sqlite_key_unpack(NULL, 16, back));
    ASSERT(!vg_sqlite_key_unpack(blob, VG_SQLITE_KEY_MAX, back));
    ASSERT(vg_sqlite_key_unpack(blob, 16, back));
    ASSERT_STREQ(back, "00000000-0000-0000-0000-000000000000");
}

int main(void)
{
    RUN(uuid_led_values_pack_to_their_bytes);
    RUN(other_values_stay_text);
    RUN(damaged_blobs_are_refused);
    return 0;
}
