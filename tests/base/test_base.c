/*
 * test_base.c: the error table, the capped buffer, allocation fault injection, settling a
 * thread's freed blocks, and hashing.
 */
#include "helpers/test.h"

#include <limits.h>

#include "base/buf.h"
#include "base/hash.h"
#include "base/json.h"
#include "base/jscan.h"

#include <jansson.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

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
    /* Inline appends keep the cap too, with room allocated past it. */
    vg_buf_init(&b, 10);
    vg_buf_puts(&b, "0123456789"); /* 64 bytes allocated */
    ASSERT(b.cap > 11);
    vg_buf_append(&b, "x", 1);
    ASSERT_EQ(vg_buf_finish(&b, NULL), VIGIL_ETOOBIG);
    ASSERT_STREQ(b.data, "0123456789");
    vg_buf_release(&b);
}

/* Integers written without printf match printf, at the extremes too; single bytes respect the
 * cap and the sticky failure like every other append. */
TEST(buf_integers_and_bytes)
{
    static const long long values[] = {
        0, 1, -1, 9, 10, -10, 123456789, LLONG_MAX, LLONG_MIN, LLONG_MIN + 1, 1795418054692LL};
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

/* What a chat turn leaves behind: many small blocks freed, past glibc's per-thread cache, into
 * its fastbins. vg_alloc_settle_thread folds them in at once (a server thread does it after its
 * answer: src/http/server.c), rather than at the next allocation of 1 KiB or more. */
TEST(settling_a_thread_leaves_no_small_freed_block_waiting)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    enum { N = 256 };
    void *blocks[N];
    for (int i = 0; i < N; i++)
        ASSERT((blocks[i] = malloc(48)) != NULL);
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    if (mallinfo2().smblks == 0) /* not glibc's allocator (a sanitizer's): nothing waits */
        return;
    vg_alloc_settle_thread();
    ASSERT_EQ(mallinfo2().smblks, (size_t)0);
    ASSERT_EQ(mallinfo2().fsmblks, (size_t)0);
#endif
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

static void jansson_free(void *p)
{
    json_malloc_t jm;
    json_free_t jf;
    json_get_alloc_funcs(&jm, &jf);
    jf(p);
}

/* The canonical writer gives jansson's sorted compact text, byte for byte where the value holds
 * no real, the same value where it does, and vg_json_hash_text jansson's text byte for byte
 * always (fuzz_canonical_json checks the same on arbitrary input); it fails on a string that is
 * not UTF-8. */
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
        if (vg_json_has_real(v)) {
            json_t *back = json_loads(b.data, JSON_DECODE_ANY, NULL);
            ASSERT(back && json_equal(back, v));
            json_decref(back);
        } else {
            ASSERT_STREQ(b.data, want);
        }
        char *hashed = vg_json_hash_text(v);
        ASSERT_STREQ(hashed, want);
        vg_free(hashed);
        jansson_free(want);
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

/* Every writer gives a real as the fewest digits that read back as the same double (trial J5:
 * a confidence of 0.8 came back 0.80000000000000004), in jansson's form otherwise; a text
 * stored in jansson's %.17g reads as the same double and is written short; vg_json_hash_text
 * keeps %.17g, the text operation ids were hashed over before. */
TEST(reals_are_written_with_the_fewest_digits_that_read_back)
{
    static const struct {
        const char *given, *written;
    } cases[] = {{"0.8", "0.8"},
                 {"0.80000000000000004", "0.8"}, /* as stored before session 37 */
                 {"21.5", "21.5"},
                 {"9.99", "9.99"},
                 {"-2.5e-3", "-0.0025"},
                 {"0.30000000000000004", "0.30000000000000004"}, /* 0.1 + 0.2: 17 needed */
                 {"1e-300", "1e-300"},
                 {"5e-324", "5e-324"}, /* the least subnormal */
                 {"2.2250738585072014e-308", "2.2250738585072014e-308"},
                 {"1.7976931348623157e308", "1.7976931348623157e308"},
                 {"-1.7976931348623157e308", "-1.7976931348623157e308"},
                 {"100.0", "100.0"},
                 {"1e22", "1e22"},
                 {"-0.0", "-0.0"},
                 {"123456789.125", "123456789.125"}};
    for (size_t i = 0; i < VG_ARRAY_LEN(cases); i++) {
        json_t *v = json_loads(cases[i].given, JSON_DECODE_ANY, NULL);
        ASSERT(json_is_real(v));
        char *text = vg_json_dump(v, 1), *laid = vg_json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);
        ASSERT_STREQ(text, cases[i].written);
        ASSERT_STREQ(laid, cases[i].written);
        json_t *back = json_loads(text, JSON_DECODE_ANY, NULL);
        ASSERT(json_is_real(back) && memcmp(&(double){json_real_value(back)},
                                            &(double){json_real_value(v)}, sizeof(double)) == 0);
        char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY), *hashed = vg_json_hash_text(v);
        ASSERT_STREQ(hashed, want); /* jansson's %.17g, as every hash before */
        jansson_free(want);
        vg_free(hashed);
        vg_free(laid);
        vg_free(text);
        json_decref(back);
        json_decref(v);
    }
    json_t *args = json_pack("{s:f, s:s}", "confidence", 0.8, "scope", "daily");
    char *text = vg_json_dump(args, 1), *hashed = vg_json_hash_text(args);
    ASSERT_STREQ(text, "{\"confidence\":0.8,\"scope\":\"daily\"}");
    ASSERT_STREQ(hashed, "{\"confidence\":0.80000000000000004,\"scope\":\"daily\"}");
    ASSERT(vg_json_has_real(args));
    vg_free(text);
    vg_free(hashed);
    json_decref(args);
}

/* vg_json_dumps lays JSON out as json_dumps does with the same flags (indented, spaced,
 * compact, keys sorted or in their order), byte for byte where no real is involved. */
TEST(json_dumps_layouts_match_jansson)
{
    static const size_t flags[] = {0,
                                   JSON_INDENT(2),
                                   JSON_INDENT(1) | JSON_SORT_KEYS,
                                   JSON_INDENT(3) | JSON_COMPACT,
                                   JSON_COMPACT,
                                   JSON_COMPACT | JSON_SORT_KEYS,
                                   JSON_SORT_KEYS};
    const char *doc = "{\"b\":[1,{\"y\":[],\"x\":{}},[\"s\",null,[true,false]]],\"a\":\"\\u00e9\","
                      "\"c\":{\"q\":{\"r\":-3}},\"e\":[]}";
    json_t *v = json_loads(doc, 0, NULL);
    ASSERT(v);
    for (size_t i = 0; i < VG_ARRAY_LEN(flags); i++) {
        char *want = json_dumps(v, flags[i]), *got = vg_json_dumps(v, flags[i]);
        ASSERT_STREQ(got, want);
        jansson_free(want);
        vg_free(got);
    }
    json_t *scalar = json_string("x");
    ASSERT(!vg_json_dumps(scalar, JSON_INDENT(2))); /* as json_dumps: no scalar without ANY */
    char *any = vg_json_dumps(scalar, JSON_INDENT(2) | JSON_ENCODE_ANY);
    ASSERT_STREQ(any, "\"x\"");
    vg_free(any);
    json_decref(scalar);
    json_decref(v);
}

/* Text that is canonical already is known as such (so it is stored without a parse), and what
 * is known as such is exactly what the canonical writer makes of it (fuzz_canonical_json holds
 * the same on arbitrary input); everything that is not, or might not be, is not. */
TEST(canonical_text_is_known_as_such)
{
    static const char *const yes[] = {
        "{\"text\":\"step 1\"}",
        "{\"echo\":\"a\\nb\\t\\\"q\\\"\\\\ \\u001F \\u0001\"}",
        "{\"\":0,\"a\":[1,-2,true,false,null,{},[]],\"ab\":{\"x\":\"\xc3\xa9\xe6\x97\xa5\"}}",
        "[]",
        "\"s\"",
        "0",
        "-123456789012345678",
        "null",
        "{\"A\":1,\"B\":2,\"a\":3,\"b\":{\"c\":[[[\"deep\"]]]}}"};
    static const char *const no[] = {"{\"b\":1,\"a\":2}", /* unsorted */
                                     "{\"a\":1,\"a\":2}", /* a repeated key */
                                     "{\"a\": 1}",
                                     " 1",
                                     "1 ",              /* white space */
                                     "{\"\\u0061\":1}", /* an escape in a key */
                                     "\"\\u00e9\"",
                                     "\"\\u001f\"",
                                     "\"\\u0009\"",
                                     "\"\\/\"",
                                     "\"\\u0000\"", /* other escapes */
                                     "1.5",
                                     "1e3",
                                     "-0",
                                     "01",
                                     "1234567890123456789", /* numbers jansson writes otherwise */
                                     "\"\xff\"",
                                     "\"\xc3\"",
                                     "\"a\tb\"", /* not UTF-8, a raw control */
                                     "",
                                     "{",
                                     "[1,]",
                                     "{\"a\"}",
                                     "tru",
                                     "nul",
                                     "\"open",
                                     "{\"a\":1}x",
                                     "[1]]"};
    for (size_t i = 0; i < VG_ARRAY_LEN(yes); i++) {
        if (!vg_json_is_canonical(yes[i], strlen(yes[i])))
            TEST_FAIL_("not known as canonical: %s", yes[i]);
        json_t *v = json_loads(yes[i], JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
        ASSERT(v);
        struct vg_buf b;
        vg_buf_init(&b, 1 << 20);
        ASSERT_EQ(vg_json_put_canonical(&b, v), 0);
        ASSERT_STREQ(b.data, yes[i]);
        vg_buf_release(&b);
        json_decref(v);
    }
    for (size_t i = 0; i < VG_ARRAY_LEN(no); i++)
        if (vg_json_is_canonical(no[i], strlen(no[i])))
            TEST_FAIL_("taken for canonical: %s", no[i]);
    /* Nesting past 32 is left to jansson. */
    char deep[80];
    memset(deep, '[', 33);
    memset(deep + 33, ']', 33);
    ASSERT(!vg_json_is_canonical(deep, 66));
    ASSERT(vg_json_is_canonical(deep + 1, 64));
}

/* Every byte that must be escaped (and a multi-byte character), at every offset of strings of
 * 0 to 40 bytes: the writers scan sixteen bytes at a time (SSE2) or eight, so a special byte at
 * each place of a block, at its edges and past the last whole block must be found. Both
 * writers' output must parse back to the input, with nothing raw below 0x20 in it. */
TEST(json_string_writers_escape_at_every_offset)
{
    static const char *const specials[] = {
        "\"",   "\\",   "\n",       "\t",           "\x01",
        "\x1f", "\x7f", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80"};
    char in[64];
    for (size_t k = 0; k < VG_ARRAY_LEN(specials); k++) {
        size_t sl = strlen(specials[k]);
        for (size_t len = 0; len <= 40; len++) {
            for (size_t at = 0; at <= len; at++) {
                /* len plain bytes with the special one inserted at offset at */
                memset(in, 'a' + (int)(len % 26), at);
                memcpy(in + at, specials[k], sl);
                memset(in + at + sl, 'a' + (int)(len % 26), len - at);
                size_t n = len + sl;
                in[n] = 0;
                for (int w = 0; w < 2; w++) {
                    struct vg_buf b;
                    vg_buf_init(&b, 1 << 16);
                    json_t *sv = json_string(in);
                    ASSERT(sv);
                    if (w == 0)
                        vg_json_put_string(&b, in);
                    else
                        ASSERT_EQ(vg_json_put_canonical(&b, sv), 0);
                    json_decref(sv);
                    ASSERT(!vg_buf_finish(&b, NULL));
                    for (size_t i = 0; i < b.len; i++)
                        ASSERT((unsigned char)b.data[i] >= 0x20);
                    json_t *back = json_loads(b.data, JSON_DECODE_ANY, NULL);
                    if (!back || strcmp(json_string_value(back), in) != 0)
                        TEST_FAIL_("writer %d: %s does not read back as the input (special %zu "
                                   "at %zu of %zu)",
                                   w, b.data, k, at, len);
                    json_decref(back);
                    vg_buf_release(&b);
                }
            }
        }
    }
    /* Invalid UTF-8 anywhere in a block: the plain writer replaces it, the canonical refuses. */
    for (size_t at = 0; at < 33; at++) {
        memset(in, 'x', 33);
        in[at] = (char)0xff;
        in[33] = 0;
        struct vg_buf b;
        vg_buf_init(&b, 256);
        vg_json_put_string(&b, in);
        ASSERT(!vg_buf_finish(&b, NULL));
        ASSERT(strstr(b.data, "\\ufffd") != NULL);
        vg_buf_release(&b);
        json_t *bad = json_stringn_nocheck(in, 33);
        vg_buf_init(&b, 256);
        ASSERT_EQ(vg_json_put_canonical(&b, bad), -1);
        vg_buf_release(&b);
        json_decref(bad);
    }
}

/* An object written from a list of fields is what the canonical writer writes for the same
 * object, keys sorted whatever their order in the list; a string that is not UTF-8 is refused. */
TEST(json_fields_match_the_canonical_writer)
{
    struct vg_jfield f[] = {{"tool_call_id", VG_JF_STR, "c\"1\\\n", 0},
                            {"toolName", VG_JF_STR, "\xc3\xa9t\xc3\xa9", 0},
                            {"arguments", VG_JF_RAW, "{\"a\":[1,true,null]}", 0},
                            {"is_error", VG_JF_BOOL, NULL, 1},
                            {"actionRefId", VG_JF_STR, NULL, 0},
                            {"count", VG_JF_INT, NULL, -9007199254740993LL},
                            {"ok", VG_JF_BOOL, NULL, 0},
                            {"", VG_JF_STR, "empty key", 0},
                            {"Z", VG_JF_INT, NULL, 0}};
    json_t *v = json_pack("{s:s, s:s, s:{s:[i,b,n]}, s:b, s:n, s:I, s:b, s:s, s:i}", "tool_call_id",
                          "c\"1\\\n", "toolName", "\xc3\xa9t\xc3\xa9", "arguments", "a", 1, 1,
                          "is_error", 1, "actionRefId", "count", (json_int_t)-9007199254740993LL,
                          "ok", 0, "", "empty key", "Z", 0);
    ASSERT(v);
    char *want = vg_json_dump(v, 1);
    json_decref(v);
    for (size_t rot = 0; rot < VG_ARRAY_LEN(f); rot++) {
        struct vg_jfield g[VG_ARRAY_LEN(f)];
        for (size_t i = 0; i < VG_ARRAY_LEN(f); i++)
            g[i] = f[(i + rot) % VG_ARRAY_LEN(f)];
        struct vg_buf b;
        vg_buf_init(&b, 0);
        ASSERT_EQ(vg_json_put_fields(&b, g, VG_ARRAY_LEN(g)), 0);
        ASSERT_STREQ(b.data, want);
        vg_buf_release(&b);
    }
    vg_free(want);
    struct vg_jfield bad[] = {{"k", VG_JF_STR, "\xff", 0}};
    struct vg_buf b;
    vg_buf_init(&b, 0);
    ASSERT_EQ(vg_json_put_fields(&b, bad, 1), -1);
#ifndef NDEBUG
    /* Keys are written without their escape scan: debug builds refuse one that needs it. */
    struct vg_jfield quoted[] = {{"k\"", VG_JF_INT, NULL, 1}};
    vg_buf_reset(&b);
    ASSERT_EQ(vg_json_put_fields(&b, quoted, 1), -1);
#endif
    vg_buf_release(&b);
}

/* Step over a whole document: 0 when the reader takes it, -1 when it declines. */
static int jscan_whole(const char *text, size_t len)
{
    struct vg_jscan s;
    vg_jscan_init(&s, text, len);
    return vg_jscan_skip(&s) == 0 && vg_jscan_end(&s) == 0 ? 0 : -1;
}

/* A span reader (vg_jscan_skip_span) steps over numbers of every form JSON has, and over
 * nothing else: the journal keeps tool arguments with real numbers in them (trial J1). */
TEST(jscan_span_steps_over_real_numbers)
{
    static const struct {
        const char *text;
        int taken;
    } cases[] = {
        {"{\"a\":[0.8,-2.5e-3,1E+9,0,-0,12,1234567890123456789,0.80000000000000004]}", 1},
        {"[1.]", 0},
        {"[.5]", 0},
        {"[1e]", 0},
        {"[1e+]", 0},
        {"[01.5]", 0},
        {"[-.5]", 0},
        {"[1.5.5]", 0},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(cases); i++) {
        struct vg_jscan s;
        vg_jscan_init(&s, cases[i].text, strlen(cases[i].text));
        int taken = vg_jscan_skip_span(&s) == 0 && vg_jscan_end(&s) == 0;
        if (taken != cases[i].taken)
            TEST_FAIL_("case %zu (%s): taken %d", i, cases[i].text, taken);
        json_t *j = json_loads(cases[i].text, 0, NULL);
        if (taken != (j != NULL))
            TEST_FAIL_("case %zu: jansson %s it", i, j ? "takes" : "refuses");
        json_decref(j);
    }
    ASSERT_EQ(jscan_whole("[0.8]", 5), -1); /* vg_jscan_skip still declines it */
}

/* The reader without a tree takes only what jansson's decoder takes, and declines what it
 * would not match exactly; what it reads is what jansson reads. */
TEST(jscan_takes_only_what_jansson_takes)
{
    static const struct {
        const char *text;
        int taken;
    } cases[] = {
        {"{\"a\":[1,-2,0,-0,\"x\\u00e9\\ud83d\\ude00\\/\\n\",true,false,null,{},[]]}", 1},
        {" \t\r\n{ \"a\" : { \"b\" : [ ] } } \n", 1},
        {"[\"caf\xc3\xa9 \xf0\x9f\x98\x80\"]", 1},
        {"{\"a\":1.5}", 0},                 /* jansson takes it: declined, not refused */
        {"{\"a\":1e3}", 0},                 /* likewise */
        {"{\"a\":1234567890123456789}", 0}, /* 19 digits: likewise */
        {"{\"a\":\"\\u0000\"}", 0},         /* jansson refuses NUL */
        {"{\"a\":\"\\ud800\"}", 0},         /* a lone surrogate */
        {"{\"a\":\"\\udc00\\ud800\"}", 0},
        {"{\"a\":\"\xc0\x80\"}", 0},         /* overlong */
        {"{\"a\":\"\xed\xa0\x80\"}", 0},     /* a surrogate in UTF-8 */
        {"{\"a\":\"\xf4\x90\x80\x80\"}", 0}, /* past U+10FFFF */
        {"{\"a\":\"\x01\"}", 0},             /* a control byte */
        {"{\"a\":\"\\x\"}", 0},              /* no such escape */
        {"[1,]", 0},
        {"{\"a\":1,}", 0},
        {"{\"a\" 1}", 0},
        {"{\"a\":1} x", 0},
        {"[01]", 0},
        {"[-]", 0},
        {"[+1]", 0},
        {"[tru]", 0},
        {"[nulll]", 0},
        {"{1:2}", 0},
        {"[1 2]", 0},
        {"{\"a\":1", 0},
        {"", 0},
        {"[\"a]", 0},
        {"[1]\x00", 0},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(cases); i++) {
        const char *t = cases[i].text;
        size_t len = strlen(t) + (strcmp(t, "[1]") == 0 ? 1 : 0);
        int taken = jscan_whole(t, len) == 0;
        if (taken != cases[i].taken)
            TEST_FAIL_("case %zu (%s): taken %d", i, t, taken);
        json_t *j = json_loadb(t, len, 0, NULL);
        if (taken && !j)
            TEST_FAIL_("case %zu: taken, but jansson refuses it", i);
        json_decref(j);
    }
    /* Nesting: within the reader's depth taken, past it declined. */
    char deep[2 * VG_JSCAN_DEPTH + 3];
    for (int n = VG_JSCAN_DEPTH; n <= VG_JSCAN_DEPTH + 1; n++) {
        memset(deep, '[', (size_t)n);
        memset(deep + n, ']', (size_t)n);
        ASSERT_EQ(jscan_whole(deep, 2 * (size_t)n), n <= VG_JSCAN_DEPTH ? 0 : -1);
    }
    /* Values read as jansson reads them. */
    const char *doc = "{\"k\":\"a\\\"b\\\\c\\u00e9\\ud83d\\ude00\",\"n\":-42,\"z\":null}";
    struct vg_jscan s;
    struct vg_buf b;
    const char *key;
    size_t klen, at, z;
    int64_t n;
    vg_buf_init(&b, 0);
    vg_jscan_init(&s, doc, strlen(doc));
    ASSERT_EQ(vg_jscan_enter(&s, '{'), 0);
    ASSERT_EQ(vg_jscan_next(&s, &key, &klen), 1);
    ASSERT(vg_jscan_key_is(key, klen, "k"));
    ASSERT_EQ(vg_jscan_string(&s, &b, &at), 0);
    json_t *j = json_loads(doc, 0, NULL);
    ASSERT_STREQ(b.data + at, json_string_value(json_object_get(j, "k")));
    ASSERT_EQ(vg_jscan_next(&s, &key, &klen), 1);
    ASSERT_EQ(vg_jscan_int(&s, &n), 0);
    ASSERT_EQ(n, -42);
    ASSERT_EQ(vg_jscan_next(&s, &key, &klen), 1);
    ASSERT_EQ(vg_jscan_string(&s, &b, &z), 0);
    ASSERT_EQ(z, (size_t)-1);
    ASSERT_EQ(vg_jscan_next(&s, &key, &klen), 0);
    ASSERT_EQ(vg_jscan_end(&s), 0);
    /* A key with an escape, where the caller looks at keys, declines. */
    vg_jscan_init(&s, "{\"\\u0061\":1}", 12);
    ASSERT_EQ(vg_jscan_enter(&s, '{'), 0);
    ASSERT_EQ(vg_jscan_next(&s, &key, &klen), -1);
    json_decref(j);
    vg_buf_release(&b);
}

/* A cut within a bound never ends inside a character: at every bound over texts of one- to
 * four-byte characters, the kept bytes are the most that are whole characters, so jansson takes
 * them. */
TEST(a_utf8_cut_keeps_whole_characters_only)
{
    const char *text = "a\xc3\xa9z\xe2\x82\xac\xf0\x9f\x98\x80!"; /* a é z € 😀 ! */
    static const size_t ends[] = {0, 1, 3, 4, 7, 11, 12};         /* where characters end */
    size_t len = strlen(text);
    ASSERT_EQ(len, 12);
    for (size_t max = 0; max <= len + 2; max++) {
        size_t want = 0;
        for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
            if (ends[i] <= max)
                want = ends[i];
        size_t n = vg_utf8_cut(text, len, max);
        ASSERT_EQ(n, want);
        json_t *s = json_stringn(text, n);
        ASSERT(s != NULL);
        json_decref(s);
    }
    ASSERT_EQ(vg_utf8_cut("abc", 3, 2), 2);
    ASSERT_EQ(vg_utf8_cut("abc", 3, 10), 3);
}

int main(void)
{
    RUN(codes_have_text_and_statuses);
    RUN(jscan_takes_only_what_jansson_takes);
    RUN(jscan_span_steps_over_real_numbers);
    RUN(fail_fills_error_and_returns_code);
    RUN(buf_grows_and_caps);
    RUN(buf_integers_and_bytes);
    RUN(buf_reports_out_of_memory);
    RUN(settling_a_thread_leaves_no_small_freed_block_waiting);
    RUN(sha256_known_vector_and_parts);
    RUN(canonical_json_matches_jansson);
    RUN(reals_are_written_with_the_fewest_digits_that_read_back);
    RUN(json_dumps_layouts_match_jansson);
    RUN(canonical_text_is_known_as_such);
    RUN(json_string_writers_escape_at_every_offset);
    RUN(json_fields_match_the_canonical_writer);
    RUN(a_utf8_cut_keeps_whole_characters_only);
    return 0;
}
