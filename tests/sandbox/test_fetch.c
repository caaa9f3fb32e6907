/*
 * test_fetch.c: vigil.fetch through the host: only allowlisted hosts, never a loopback,
 * private, link-local (metadata) or reserved address in any spelling, every redirect checked
 * again, the connection made to the address checked; a program fetches an allowed URL.
 */
#include "base/common.h"

#include "helpers/http_server.h"
#include "os/fiber.h"
#include "sandbox/fetch.h"
#include "sandbox/sandbox_helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

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

/* proves: S4-027 */
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

/* A request for code in wd with the fetch policy pol and the default limits. */
static void fetch_request(struct vg_code_request *q, const char *code, const char *wd,
                          const json_t *pol)
{
    *q = (struct vg_code_request){.code = code,
                                  .code_len = strlen(code),
                                  .workdir = wd,
                                  .required = VG_SBX_REQUIRED_DEFAULT,
                                  .sandbox_uid = 65534,
                                  .fetch_policy = pol};
    vg_code_limits_default(&q->lim);
}

/* proves: S4-020 */
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
    struct vg_code_request q;
    fetch_request(&q, code, wd, pol);
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

/* A fetch runs on a thread of its own, so the host's loop and the fibers beside the execution
 * go on meanwhile: here the server the program fetches from is another fiber on the same
 * thread. Were the fetch to block the thread, that fiber could never answer, and the fetch
 * would end in its timeout. */
struct fiber_server {
    int listen_fd;
    int answered;
};

static void serve_once(void *arg)
{
    struct fiber_server *fs = arg;
    struct pollfd p = {.fd = fs->listen_fd, .events = POLLIN};
    if (vg_fiber_poll(&p, 1, 20000) != 1)
        return;
    int c = accept4(fs->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    char req[4096];
    struct pollfd pc = {.fd = c, .events = POLLIN};
    if (c < 0 || vg_fiber_poll(&pc, 1, 20000) != 1 || read(c, req, sizeof req) <= 0) {
        close(c);
        return;
    }
    static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n"
                                 "\r\nfiber";
    fs->answered = write(c, answer, sizeof answer - 1) == (ssize_t)sizeof answer - 1;
    close(c);
}

struct fiber_exec {
    char url[128];
    struct vg_code_result r;
    vigil_code rc;
};

static void run_fetching(void *arg)
{
    struct fiber_exec *fe = arg;
    char wd[4096], code[512];
    sbx_workdir("sandbox-fetch-fiber", wd, sizeof wd);
    snprintf(code, sizeof code, "return vigil.fetch('%s').body", fe->url);
    json_t *pol = json_pack("{s:[s], s:[s], s:i}", "allow_hosts", "127.0.0.1", "allow_addresses",
                            "127.0.0.1", "timeout_ms", 5000);
    struct vg_code_request q;
    fetch_request(&q, code, wd, pol);
    q.lim.wall_ms = 20000;
    vigil_error err = {0};
    fe->rc = vg_code_run(vg_code_runtime_lua(), &q, &fe->r, &err);
    json_decref(pol);
}

TEST(a_fetch_does_not_block_other_work)
{
    struct fiber_server fs = {.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    ASSERT_EQ(bind(fs.listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    ASSERT_EQ(listen(fs.listen_fd, 4), 0);
    ASSERT_EQ(getsockname(fs.listen_fd, (struct sockaddr *)&a, &alen), 0);
    struct fiber_exec fe = {.rc = VIGIL_OK};
    snprintf(fe.url, sizeof fe.url, "http://127.0.0.1:%d/", ntohs(a.sin_port));
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    ASSERT_OK(vg_fiber_spawn(s, run_fetching, &fe, E));
    ASSERT_OK(vg_fiber_spawn(s, serve_once, &fs, E));
    vg_fiber_sched_run(s);
    vg_fiber_sched_free(s);
    close(fs.listen_fd);
    ASSERT_OK(fe.rc);
    if (!fe.r.ok)
        TEST_FAIL_("%s: %s", fe.r.error_code, fe.r.error_message);
    ASSERT_STREQ(json_string_value(fe.r.result), "fiber");
    ASSERT(fs.answered);
    vg_code_result_release(&fe.r);
    sbx_assert_no_children();
}

int main(void)
{
    RUN(internal_addresses_refused_in_every_spelling);
    RUN(allowlist_and_redirects);
    RUN(program_fetches_through_the_host);
    RUN(a_fetch_does_not_block_other_work);
    return 0;
}
