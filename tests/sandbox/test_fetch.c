/*
 * test_fetch.c: vigil.fetch through the host: only allowlisted hosts, never a loopback,
 * private, link-local (metadata) or reserved address in any spelling, every redirect checked
 * again, the connection made to the address checked; a program fetches an allowed URL.
 */
#include "base/common.h"

#include "helpers/http_server.h"
#include "sandbox/fetch.h"
#include "sandbox/sandbox_helpers.h"

static json_t *policy_any(void)
{
    return json_pack("{s:[s], s:[], s:i}", "allow_hosts", "*", "allow_addresses", "timeout_ms",
                     3000);
}

/* Each URL's host resolves (or is written) to an address the policy refuses. */
static const char *const ssrf[] = {
    "http://127.0.0.1/",
    "http://localhost/",
    "http://127.1/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://017700000001/",
    "http://0177.0.0.1/",
    "http://127.0.0.1.nip.io.invalid./",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[2002:7f00:1::]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://[fe80::1]/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "http://198.18.0.1/",
    "file:///etc/passwd",
    "gopher://127.0.0.1/",
    "ftp://127.0.0.1/",
    "http://user@127.0.0.1:80@x/",
};

TEST(internal_addresses_refused_in_every_spelling)
{
    json_t *pol = policy_any();
    for (size_t i = 0; i < VG_ARRAY_LEN(ssrf); i++) {
        char code[32] = "", msg[256] = "";
        json_t *v = vg_sandbox_fetch(pol, ssrf[i], code, msg);
        if (v)
            TEST_FAIL_("fetched %s", ssrf[i]);
        if (strcmp(code, "denied") && strcmp(code, "failed"))
            TEST_FAIL_("%s: code %s (%s)", ssrf[i], code, msg);
    }
    json_decref(pol);
}

TEST(allowlist_and_redirects)
{
    char loc1[256], loc2[256];
    struct vg_ts_response rs[] = {
        {.status = 200, .body = "hello"},
    };
    struct vg_test_server *ok = vg_test_server_start(rs, 1);
    const char *base = vg_test_server_url(ok);
    snprintf(loc1, sizeof loc1, "Location: http://169.254.169.254/latest/meta-data/\r\n");
    snprintf(loc2, sizeof loc2, "Location: %s/final\r\n", base);
    struct vg_ts_response to_meta[] = {{.status = 302, .headers = loc1}};
    struct vg_ts_response to_ok[] = {{.status = 301, .headers = loc2}};
    struct vg_test_server *meta = vg_test_server_start(to_meta, 1);
    struct vg_test_server *hop = vg_test_server_start(to_ok, 1);
    /* 127.0.0.1 is refused unless the operator lists the address */
    json_t *pol = json_pack("{s:[s], s:[], s:i}", "allow_hosts", "127.0.0.1", "allow_addresses",
                            "timeout_ms", 3000);
    char code[32] = "", msg[256] = "", url[300];
    ASSERT(!vg_sandbox_fetch(pol, base, code, msg));
    ASSERT_STREQ(code, "denied");
    json_array_append_new(json_object_get(pol, "allow_addresses"), json_string("127.0.0.1"));
    json_t *v = vg_sandbox_fetch(pol, base, code, msg);
    ASSERT(v);
    ASSERT_EQ(json_integer_value(json_object_get(v, "status")), 200);
    ASSERT_STREQ(json_string_value(json_object_get(v, "body")), "hello");
    json_decref(v);
    /* a redirect is checked again: to the metadata address, refused before any connection */
    ASSERT(!vg_sandbox_fetch(pol, vg_test_server_url(meta), code, msg));
    ASSERT_STREQ(code, "denied");
    ASSERT_EQ(vg_test_server_count(meta), 1);
    /* a redirect to an allowed place is followed */
    v = vg_sandbox_fetch(pol, vg_test_server_url(hop), code, msg);
    ASSERT(v);
    snprintf(url, sizeof url, "%s/final", base);
    ASSERT_STREQ(json_string_value(json_object_get(v, "url")), url);
    json_decref(v);
    /* a host not on the list: refused, even though its address is allowed */
    json_object_set_new(pol, "allow_hosts", json_pack("[s]", "example.org"));
    ASSERT(!vg_sandbox_fetch(pol, base, code, msg));
    ASSERT_CONTAINS(msg, "allow_hosts");
    json_decref(pol);
    vg_test_server_stop(ok);
    vg_test_server_stop(meta);
    vg_test_server_stop(hop);
}

TEST(program_fetches_through_the_host)
{
    struct vg_ts_response rs[] = {{.status = 200, .body = "{\"n\": 5}"}};
    struct vg_test_server *s = vg_test_server_start(rs, 1);
    char wd[4096], code[512];
    sbx_workdir("sandbox-fetch", wd, sizeof wd);
    snprintf(code, sizeof code,
             "local r = vigil.fetch('%s/data') "
             "local ok, e = pcall(vigil.fetch, 'http://169.254.169.254/') "
             "return {n = vigil.json_decode(r.body).n, meta = e.code}",
             vg_test_server_url(s));
    json_t *pol =
        json_pack("{s:[s], s:[s]}", "allow_hosts", "127.0.0.1", "allow_addresses", "127.0.0.1");
    struct vg_code_request q = {.code = code,
                                .code_len = strlen(code),
                                .workdir = wd,
                                .required = VG_SBX_REQUIRED_DEFAULT,
                                .sandbox_uid = 65534,
                                .fetch_policy = pol};
    vg_code_limits_default(&q.lim);
    struct vg_code_result r;
    ASSERT_OK(vg_code_run(vg_code_runtime_lua(), &q, &r, E));
    if (!r.ok)
        TEST_FAIL_("%s: %s", r.error_code, r.error_message);
    ASSERT_EQ(json_integer_value(json_object_get(r.result, "n")), 5);
    ASSERT_STREQ(json_string_value(json_object_get(r.result, "meta")), "denied");
    ASSERT_EQ(r.tool_calls, 2);
    vg_code_result_release(&r);
    json_decref(pol);
    vg_test_server_stop(s);
    sbx_assert_no_children();
}

int main(void)
{
    RUN(internal_addresses_refused_in_every_spelling);
    RUN(allowlist_and_redirects);
    RUN(program_fetches_through_the_host);
    return 0;
}
