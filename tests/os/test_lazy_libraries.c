/*
 * test_lazy_libraries.c: libpq, libical and libcurl are loaded when a feature first needs them
 * (src/os/dl.h): a process working on a SQLite store maps none of them, and a runtime whose
 * model makes no HTTP call does not map libcurl; when one cannot be loaded, the feature fails,
 * every time, with an error that says what to install, and nothing crashes. Loading the real
 * libraries is what every PostgreSQL test, timer test and HTTP model or MCP test does.
 * The cases share the process's one load of each library, so they run in this order.
 */
#include "helpers/test.h"

#include "model/http.h"
#include "sandbox/fetch.h"
#include "store/store.h"
#include "wake/wake.h"

#include <stdlib.h>

/* Whether a library whose file name contains name is mapped into this process. */
static int mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ASSERT(f != NULL);
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

TEST(a_sqlite_store_maps_neither)
{
    ASSERT(!mapped("/libpq.so"));
    ASSERT(!mapped("/libical.so"));
    ASSERT(!mapped("/libcurl.so"));
    char path[4200];
    snprintf(path, sizeof path, "%s/s.db", vg_test_tmpdir("lazy_libraries"));
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    struct vg_record r = {.kind = "message",
                          .id = "m1",
                          .owner = "a",
                          .k1 = "t",
                          .seq = 1,
                          .at = 5,
                          .body = "{\"x\":1}"};
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    vg_store_close(s);
    ASSERT(!mapped("/libpq.so"));
    ASSERT(!mapped("/libical.so"));
}

TEST(a_runtime_without_http_maps_no_libcurl)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    /* Not the tests' runtime helper (tests/helpers/rt.c): it links libpq for its PostgreSQL
     * variant, and this process must stay without it for the cases below. */
    char path[4200];
    snprintf(path, sizeof path, "%s/rt.db", vg_test_tmpdir("lazy_libcurl"));
    vigil_runtime_options o;
    vigil_runtime_options_default(&o);
    o.store_uri = path;
    o.create_if_missing = 1;
    vigil_runtime *rt = NULL;
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    vigil_agent_spec spec = {.name = "quiet"};
    char agent[37];
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    char *out = NULL;
    ASSERT_OK(vigil_chat(rt, agent, NULL, "hello", NULL, &out, E));
    ASSERT_CONTAINS(out, "you said: hello");
    vigil_free(out);
    vigil_runtime_close(rt);
    ASSERT(!mapped("/libcurl.so"));
}

/* Not with the static libcurl of scripts/curl.sh, which is linked (src/os/libcurl.h). */
#ifndef VIGIL_CURL_LINKED
TEST(a_missing_libcurl_is_a_clear_error)
{
    ASSERT_EQ(setenv("VIGIL_LIBCURL", "/nonexistent/libcurl.so.4", 1), 0);
    for (int attempt = 0; attempt < 2; attempt++) {
        struct vg_http_request req = {.method = "GET", .url = "http://127.0.0.1:1/"};
        struct vg_http_response resp;
        vg_http_response_init(&resp);
        vigil_error err = {0};
        ASSERT_CODE(VIGIL_EUNSUPPORTED, vg_http_perform(&req, &resp, &err));
        vg_http_response_release(&resp);
        ASSERT_CONTAINS(err.message, "need libcurl");
        ASSERT_CONTAINS(err.message, "/nonexistent/libcurl.so.4");
        ASSERT_CONTAINS(err.message, "apt-get install libcurl4");
        ASSERT_CONTAINS(err.message, "VIGIL_LIBCURL");
        const char *line = "Accept: text/plain";
        ASSERT(vg_http_headers_new(&line, 1) == NULL);
        /* The sandbox's fetch says so too, before it looks at the URL. */
        json_t *policy = json_pack("{s:[s]}", "allow_hosts", "*");
        char code[32] = "", msg[256] = "";
        ASSERT(vg_sandbox_fetch(policy, "http://example.com/", code, msg) == NULL);
        json_decref(policy);
        ASSERT_STREQ(code, "failed");
        ASSERT_CONTAINS(msg, "need libcurl");
    }
    ASSERT(!mapped("/libcurl.so"));
}
#endif

TEST(a_missing_libpq_is_a_clear_error)
{
    ASSERT_EQ(setenv("VIGIL_LIBPQ", "/nonexistent/libpq.so.5", 1), 0);
    for (int attempt = 0; attempt < 2; attempt++) {
        struct vg_store_options o = {0};
        struct vg_store *s = NULL;
        vigil_error err = {0};
        ASSERT_CODE(VIGIL_EUNSUPPORTED,
                    vg_store_open("postgresql://vigil@/vigil?host=/nonexistent", &o, &s, &err));
        ASSERT(s == NULL);
        ASSERT_CONTAINS(err.message, "the PostgreSQL store needs libpq");
        ASSERT_CONTAINS(err.message, "/nonexistent/libpq.so.5");
        ASSERT_CONTAINS(err.message, "apt-get install libpq5");
        ASSERT_CONTAINS(err.message, "VIGIL_LIBPQ");
    }
    ASSERT(!mapped("/libpq.so"));
}

TEST(a_missing_libical_is_a_clear_error)
{
    ASSERT_EQ(setenv("VIGIL_LIBICAL", "/nonexistent/libical.so.3", 1), 0);
    for (int attempt = 0; attempt < 2; attempt++) {
        struct vg_timer_spec spec;
        vigil_error err = {0};
        ASSERT_CODE(VIGIL_EUNSUPPORTED, vg_timer_spec_parse(&spec, VG_TIMER_CRON, "0 7 * * *",
                                                            "Europe/Berlin", 0, &err));
        ASSERT_CONTAINS(err.message, "timers need libical");
        ASSERT_CONTAINS(err.message, "apt-get install libical3, or libical3t64 on Debian 13");
        ASSERT_CONTAINS(err.message, "VIGIL_LIBICAL");
    }
    /* Without libical no zone can be checked, so none is taken as valid. */
    ASSERT(!vg_timer_zone_valid("UTC"));
    ASSERT(!mapped("/libical.so"));
}

int main(void)
{
    RUN(a_sqlite_store_maps_neither);
    RUN(a_runtime_without_http_maps_no_libcurl);
#ifndef VIGIL_CURL_LINKED
    RUN(a_missing_libcurl_is_a_clear_error);
#endif
    RUN(a_missing_libpq_is_a_clear_error);
    RUN(a_missing_libical_is_a_clear_error);
    return 0;
}
