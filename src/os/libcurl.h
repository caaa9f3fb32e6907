/*
 * libcurl.h: libcurl for the code that makes HTTP calls, loaded on first use. Include it instead
 * of <curl/curl.h>, and call vg_libcurl_load before the first curl_* call of a path.
 *
 * vigil does not link Debian's libcurl. It brings 32 libraries with it (GnuTLS, nettle,
 * Kerberos, LDAP, SSH, RTMP, IDN, PSL, brotli, ...) and about 10 000 relocations, which the
 * dynamic loader would resolve at the start of every command, and most commands (`vigil
 * --version`, `agent list`, a run on the scripted model) never make an HTTP call. So the calls go
 * through a table filled by dlopen/dlsym (src/os/dl.h) when the first model request, MCP HTTP
 * session, embedding or sandbox fetch needs it. The code still names libcurl's functions: each
 * name below is a macro for the table's entry, so the calls read as in libcurl's documentation,
 * and the variadic ones (curl_easy_setopt, curl_easy_getinfo) pass their arguments through
 * unchanged. The macros replace curl's GCC type checks of those two; the static build keeps them.
 *
 * With the static HTTP(S)-only libcurl of scripts/curl.sh (VIGIL_CURL_DIR, which defines
 * VIGIL_CURL_LINKED) libcurl is linked and loads no other library, so the names are the
 * functions themselves and vg_libcurl_load only runs curl_global_init once.
 */
#ifndef VG_OS_LIBCURL_H
#define VG_OS_LIBCURL_H

#include "base/error.h"

#include <curl/curl.h>

/*
 * Makes libcurl callable: loads it once per process (thread-safe) and runs curl_global_init
 * before any thread can use it. VIGIL_EUNSUPPORTED, saying to install libcurl4, when it is not
 * installed or lacks a function; later calls give the same result. Once loaded, a call costs one
 * atomic read. The library is `libcurl.so.4`, or the file named by the environment variable
 * VIGIL_LIBCURL.
 */
vigil_code vg_libcurl_load(vigil_error *err);

#ifndef VIGIL_CURL_LINKED

/* The functions vigil calls, each typed as the installed header declares it. */
struct vg_libcurl {
    __typeof__(curl_global_init) *global_init;
    __typeof__(curl_version_info) *version_info;
    __typeof__(curl_getdate) *getdate;
    __typeof__(curl_free) *free;
    __typeof__(curl_easy_init) *easy_init;
    __typeof__(curl_easy_setopt) *easy_setopt;
    __typeof__(curl_easy_getinfo) *easy_getinfo;
    __typeof__(curl_easy_perform) *easy_perform;
    __typeof__(curl_easy_cleanup) *easy_cleanup;
    __typeof__(curl_easy_strerror) *easy_strerror;
    __typeof__(curl_slist_append) *slist_append;
    __typeof__(curl_slist_free_all) *slist_free_all;
    /* a fiber's requests on the scheduler's multi handle (src/model/http.c) */
    __typeof__(curl_multi_init) *multi_init;
    __typeof__(curl_multi_add_handle) *multi_add_handle;
    __typeof__(curl_multi_remove_handle) *multi_remove_handle;
    __typeof__(curl_multi_perform) *multi_perform;
    __typeof__(curl_multi_poll) *multi_poll;
    __typeof__(curl_multi_info_read) *multi_info_read;
    __typeof__(curl_multi_cleanup) *multi_cleanup;
    /* the sandbox's URL checks (src/sandbox/fetch.c) */
    __typeof__(curl_url) *url;
    __typeof__(curl_url_set) *url_set;
    __typeof__(curl_url_get) *url_get;
    __typeof__(curl_url_cleanup) *url_cleanup;
};

/* The table, filled by the first successful vg_libcurl_load; not to be called before one. */
extern struct vg_libcurl vg_libcurl;

/* curl.h's type checks define these two as macros (typecheck-gcc.h). */
#undef curl_easy_setopt
#undef curl_easy_getinfo

#define curl_global_init vg_libcurl.global_init
#define curl_version_info vg_libcurl.version_info
#define curl_getdate vg_libcurl.getdate
#define curl_free vg_libcurl.free
#define curl_easy_init vg_libcurl.easy_init
#define curl_easy_setopt vg_libcurl.easy_setopt
#define curl_easy_getinfo vg_libcurl.easy_getinfo
#define curl_easy_perform vg_libcurl.easy_perform
#define curl_easy_cleanup vg_libcurl.easy_cleanup
#define curl_easy_strerror vg_libcurl.easy_strerror
#define curl_slist_append vg_libcurl.slist_append
#define curl_slist_free_all vg_libcurl.slist_free_all
#define curl_multi_init vg_libcurl.multi_init
#define curl_multi_add_handle vg_libcurl.multi_add_handle
#define curl_multi_remove_handle vg_libcurl.multi_remove_handle
#define curl_multi_perform vg_libcurl.multi_perform
#define curl_multi_poll vg_libcurl.multi_poll
#define curl_multi_info_read vg_libcurl.multi_info_read
#define curl_multi_cleanup vg_libcurl.multi_cleanup
#define curl_url vg_libcurl.url
#define curl_url_set vg_libcurl.url_set
#define curl_url_get vg_libcurl.url_get
#define curl_url_cleanup vg_libcurl.url_cleanup

#endif /* VIGIL_CURL_LINKED */

#endif
