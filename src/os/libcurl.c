/*
 * libcurl.c: libcurl's functions, loaded on first use (libcurl.h says why it is not linked), or
 * the linked static libcurl's one global init.
 */
#include "base/common.h"

#include "os/libcurl.h"

#ifndef VIGIL_CURL_LINKED

#include "os/dl.h"

struct vg_libcurl vg_libcurl;

/* The members are named without "curl_": libcurl.h's macros take libcurl's own names. */
#define SYM(member)                                                                                \
    {                                                                                              \
        "curl_" #member, (void **)&vg_libcurl.member                                               \
    }
static const struct vg_dl_symbol symbols[] = {
    SYM(global_init),
    SYM(version_info),
    SYM(getdate),
    SYM(free),
    SYM(easy_init),
    SYM(easy_setopt),
    SYM(easy_getinfo),
    SYM(easy_perform),
    SYM(easy_cleanup),
    SYM(easy_strerror),
    SYM(slist_append),
    SYM(slist_free_all),
    SYM(multi_init),
    SYM(multi_add_handle),
    SYM(multi_remove_handle),
    SYM(multi_perform),
    SYM(multi_poll),
    SYM(multi_info_read),
    SYM(multi_cleanup),
    SYM(url),
    SYM(url_set),
    SYM(url_get),
    SYM(url_cleanup),
};
#undef SYM

/* curl_global_init before any thread uses libcurl: it is not thread-safe, and every path to
 * libcurl passes through vg_dl_load's lock first. */
static int start(struct vg_dl_library *lib)
{
    CURLcode rc = vg_libcurl.global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK)
        snprintf(lib->why, sizeof lib->why, "cannot initialize libcurl: %s",
                 vg_libcurl.easy_strerror(rc));
    return rc != CURLE_OK;
}

static struct vg_dl_library libcurl = {
    .file = "libcurl.so.4", /* the soname Debian's libcurl4 installs */
    .env = "VIGIL_LIBCURL",
    .needed = "HTTP calls (model providers, MCP over HTTP, embedders, fetches) need libcurl",
    .package = "libcurl4",
    .symbols = symbols,
    .n_symbols = VG_ARRAY_LEN(symbols),
    .start = start,
    /* Its 32 libraries' tables and OpenSSL's start-up: some 5 MB resident that requests never
     * read again (docs/internals/PERF.md, "Session 34"). */
    .release_pages = 1,
};

vigil_code vg_libcurl_load(vigil_error *err)
{
    return vg_dl_load(&libcurl, err);
}

#else /* VIGIL_CURL_LINKED */

#include "os/pages.h"

#include <pthread.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode init_rc = CURLE_OK;

/* The OpenSSL libraries this libcurl is linked with, whose start-up curl_global_init runs. */
static const char *const tls_libraries[] = {"/libssl.so", "/libcrypto.so", NULL};

static void init(void)
{
    init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    /* Their relocation tables were read at the process's start and their configuration and
     * engine set-up just now; requests use a fraction of those pages (os/pages.h). */
    vg_release_library_pages(NULL, tls_libraries);
}

vigil_code vg_libcurl_load(vigil_error *err)
{
    pthread_once(&once, init);
    return init_rc == CURLE_OK ? VIGIL_OK
                               : VG_FAIL(err, VIGIL_ERROR, "cannot initialize libcurl: %s",
                                         curl_easy_strerror(init_rc));
}

#endif
