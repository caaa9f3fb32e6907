/*
 * test_http_web.c: what the daemon gives without the token for the web admin page
 * (docs/web.md): the page's own embedded files, at exact paths, by GET or HEAD, with the
 * page's Content-Security-Policy; nothing else. Dot segments and escapes that would walk out of
 * the page's files are refused before the lookup; a path that is not an embedded file, a
 * method other than GET or HEAD, and the token in the query string still get the API's answers.
 * Runs without a browser (tests/web/test_page.mjs drives the page itself).
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

static struct live L;

static void expect_page(const char *path, const char *type, const char *needle)
{
    struct live_resp r;
    ASSERT_EQ(live_req(&L, "GET", path, NULL, NULL, 0, &r), 200);
    ASSERT_CONTAINS(r.headers, type);
    ASSERT_CONTAINS(r.headers, "script-src 'self'");
    ASSERT_CONTAINS(r.headers, "frame-ancestors 'none'");
    ASSERT_CONTAINS(r.body, needle);
    live_resp_free(&r);
}

TEST(the_page_needs_no_token)
{
    expect_page("/", "text/html", "/web/app.js");
    expect_page("/web/index.html", "text/html", "token-input");
    expect_page("/web/app.js", "text/javascript", "Authorization");
    expect_page("/web/app.css", "text/css", "focus-visible");
    char req[200];
    int n = snprintf(req, sizeof req,
                     "HEAD / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                     "Connection: close\r\n\r\n",
                     L.port);
    ASSERT_EQ(live_raw(&L, req, (size_t)n, 10000, NULL, 0), 200);
}

TEST(nothing_else_needs_no_token)
{
    char req[512];
    const char *const walks[] = {"/web/../v1/agents", "/web/%2e%2e/v1/agents",
                                 "/web/./app.js",     "/web//app.js",
                                 "/web\\app.js",      "/web/app.js%00.png"};
    for (size_t i = 0; i < VG_ARRAY_LEN(walks); i++) {
        int n = snprintf(req, sizeof req,
                         "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                         "Connection: close\r\n\r\n",
                         walks[i], L.port);
        ASSERT_EQ(live_raw(&L, req, (size_t)n, 10000, NULL, 0), 400);
    }
    ASSERT_EQ(live_req(&L, "GET", "/web/", NULL, NULL, 0, NULL), 401);
    ASSERT_EQ(live_req(&L, "GET", "/web/nothing.js", NULL, NULL, 0, NULL), 401);
    ASSERT_EQ(live_req(&L, "GET", "/index.html", NULL, NULL, 0, NULL), 401);
    ASSERT_EQ(live_req(&L, "GET", "/web/APP.JS", NULL, NULL, 0, NULL), 401);
    ASSERT_EQ(live_req(&L, "POST", "/", "{}", NULL, 0, NULL), 401);
    ASSERT_EQ(live_req(&L, "GET", "/v1/agents", NULL, NULL, 0, NULL), 401);
    ASSERT_EQ(live_req(&L, "GET", "/v1/events", NULL, NULL, 0, NULL), 401);
    ASSERT_EQ(live_req(&L, "GET", "/?token=x", NULL, NULL, 0, NULL), 401);
    const char *const evil[] = {"Host: evil.example", NULL};
    ASSERT_EQ(live_req(&L, "GET", "/", NULL, evil, 0, NULL), 403); /* DNS rebinding */
    const char *const other[] = {"Origin: http://evil.example", NULL};
    ASSERT_EQ(live_req(&L, "GET", "/", NULL, other, 0, NULL), 403);
}

int main(void)
{
    live_start(&L, "http-web", NULL);
    RUN(the_page_needs_no_token);
    RUN(nothing_else_needs_no_token);
    live_stop(&L);
    return 0;
}
