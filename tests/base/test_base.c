/*
 * test_base.c: the error table, the capped buffer, allocation fault injection and hashing.
 */
#include "helpers/test.h"

#include "base/buf.h"
#include "base/hash.h"

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

int main(void)
{
    RUN(codes_have_text_and_statuses);
    RUN(fail_fills_error_and_returns_code);
    RUN(buf_grows_and_caps);
    RUN(buf_reports_out_of_memory);
    RUN(sha256_known_vector_and_parts);
    return 0;
}
