/*
 * test_base.c: the error table, the capped buffer, allocation fault injection and hashing.
 */
#include "helpers/test.h"

#include <limits.h>

#include "base/buf.h"
#include "base/hash.h"
#include "base/json.h"

#include <jansson.h>

TEST(codes_have_text_and_statuses)
{
    ASSERT_STREQ(vigil_strerror(VIGIL_OK), "ok");
    ASSERT_STREQ(vigil_code_name(VIGIL_ENOTFOUND), "ENOTFOUND");
    ASSERT_EQ(vigil_code_http_status(VIGIL_ENOTFOUND), 404);
    ASSERT_EQ(vigil_code_exit_status(VIGIL_OK), 0);
    ASSERT_NE(vigil_code_exit_status(VIGIL_ESTATE), 0);
    ASSERT_STREQ(vigil_strerror((vigil_code)250), "unknown error code");
}

TEST(fail_fills_error_and_returns_code)
{
    vigil_error err = {0};
    vigil_code rc = VG_FAIL(&err, VIGIL_EINVAL, "bad name \"%s\"", "x");
    ASSERT_EQ(rc, VIGIL_EINVAL);
    ASSERT_EQ(err.code, VIGIL_EINVAL);
    ASSERT_STREQ(err.message, "bad name \"x\"");
    ASSERT_EQ(VG_FAIL(NULL, VIGIL_EIO, "no report"), VIGIL_EIO);
}

TEST(buf_grows_and_caps)
{
    struct vg_buf b;
    vg_buf_init(&b, 10);
    ASSERT_STREQ(b.data, "");
    vg_buf_puts(&b, "hello");
    vg_buf_printf(&b, "%d", 1234);
    ASSERT_STREQ(b.data, "hello1234");
    vg_buf_puts(&b, "xx"); /* 11 > cap: sticky failure, content unchanged */
    ASSERT_STREQ(b.data, "hello1234");
    vg_buf_puts(&b, "");
    vigil_error err = {0};
    ASSERT_EQ(vg_buf_finish(&b, &err), VIGIL_ETOOBIG);
    ASSERT_CONTAINS(err.message, "limit of 10 bytes");
    ASSERT(vg_buf_detach(&b, NULL) == NULL);
    vg_buf_release(&b);
}

/* Integers written without printf match printf, at the extremes too; single bytes respect the
 * cap and the sticky failure like every other append. */
TEST(buf_integers_and_bytes)
{
    static const long long values[] = {0, 1, -1, 9, 10, -10, 123456789, LLONG_MAX, LLONG_MIN,
                                       LLONG_MIN + 1, 1795418054692LL};
    struct vg_buf b;
    char want[32];
    vg_buf_init(&b, 0);
    for (size_t i = 0; i < VG_ARRAY_LEN(values); i++) {
        vg_buf_reset(&b);
        vg_buf_put_i64(&b, values[i]);
        snprintf(want, sizeof want, "%lld", values[i]);
        ASSERT_STREQ(b.data, want);
    }
    vg_buf_release(&b);
    vg_buf_init(&b, 3);
    vg_buf_putc(&b, 'a');
    vg_buf_putc(&b, 'b');
    vg_buf_putc(&b, 'c');
    ASSERT_STREQ(b.data, "abc");
    vg_buf_putc(&b, 'd'); /* over the cap: sticky, content unchanged */
    ASSERT_STREQ(b.data, "abc");
    ASSERT_EQ(b.fail, VIGIL_ETOOBIG);
    vg_buf_reset(&b);
    vg_buf_putc(&b, 'z');
    ASSERT_STREQ(b.data, "z");
    vg_buf_release(&b);
}

TEST(buf_reports_out_of_memory)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    vg_alloc_fail_at(1, 0);
    vg_buf_puts(&b, "abc");
    vg_alloc_fail_at(0, 0);
    vigil_error err = {0};
    ASSERT_EQ(vg_buf_finish(&b, &err), VIGIL_ENOMEM);
    vg_buf_release(&b);
}

TEST(sha256_known_vector_and_parts)
{
    char hex[65];
    vg_sha256_hex(hex, "abc", 3);
    ASSERT_STREQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *a[] = {"ab", "c"}, *b[] = {"a", "bc"};
    char ha[65], hb[65];
    vg_sha256_hex_parts(ha, a, 2);
    vg_sha256_hex_parts(hb, b, 2);
    ASSERT(strcmp(ha, hb) != 0);
}

/* The canonical writer gives jansson's sorted compact text, byte for byte (fuzz_canonical_json
 * checks the same on arbitrary input), and fails on a string that is not UTF-8. */
TEST(canonical_json_matches_jansson)
{
    static const char *const docs[] = {
        "{\"b\":1,\"a\":[1.5,2e300,-0.0,1e-7,1e22,3.14159265358979],"
        "\"c\":{\"z\":null,\"y\":true,\"x\":false},\"A\":{}}",
        "\"tab\\t nl\\n q\\\" bs\\\\ / \\u0001 \\u007f \\u00e9\\u65e5\\ud83d\\ude00 "
        "\\f\\b\\r\"",
        "[0,-1,9223372036854775807,-9223372036854775808,0.1,5e-324,1.7976931348623157e308,[]]",
        "{\"k10\":1,\"k09\":2,\"k1\":3,\"k\":4,\"\":5,\"\\u00e9\":6,\"Z\":7,\"a\":8,\"b\":9,"
        "\"c\":10,\"d\":11,\"e\":12,\"f\":13,\"g\":14,\"h\":15,\"i\":16,\"j\":17,\"l\":18}"};
    for (size_t i = 0; i < VG_ARRAY_LEN(docs); i++) {
        json_t *v = json_loads(docs[i], JSON_DECODE_ANY, NULL);
        ASSERT(v);
        char *want = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        struct vg_buf b;
        vg_buf_init(&b, 1 << 20);
        ASSERT_EQ(vg_json_put_canonical(&b, v), 0);
        ASSERT_STREQ(b.data, want);
        json_malloc_t jm;
        json_free_t jf;
        json_get_alloc_funcs(&jm, &jf);
        jf(want);
        vg_buf_release(&b);
        json_decref(v);
    }
    json_t *bad = json_stringn_nocheck("\xff", 1);
    struct vg_buf b;
    vg_buf_init(&b, 64);
    ASSERT_EQ(vg_json_put_canonical(&b, bad), -1);
    vg_buf_release(&b);
    json_decref(bad);
}

int main(void)
{
    RUN(codes_have_text_and_statuses);
    RUN(fail_fills_error_and_returns_code);
    RUN(buf_grows_and_caps);
    RUN(buf_integers_and_bytes);
    RUN(buf_reports_out_of_memory);
    RUN(sha256_known_vector_and_parts);
    RUN(canonical_json_matches_jansson);
    return 0;
}
