/*
 * web.c: serves the web admin page (docs/web.md) from the files embedded in the binary.
 *
 * Only the page shell is served without the token: every piece of data the page shows comes
 * from /v1 calls carrying Authorization: Bearer. A path is looked up by exact match in the
 * embedded table, so no file system path is ever built from a request (and server.c has
 * already refused dot segments, backslashes and escapes before this runs).
 */
#include "base/common.h"

#include "http/mhd.h"
#include "http/web.h"

const struct vg_web_asset *vg_web_find(const char *method, const char *path)
{
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return NULL;
    if (!strcmp(path, "/"))
        path = "/web/index.html";
    for (size_t i = 0; i < vg_web_n_assets; i++)
        if (!strcmp(vg_web_assets[i].path, path))
            return &vg_web_assets[i];
    return NULL;
}

static const char *content_type(const char *path)
{
    static const struct {
        const char *ext, *type;
    } types[] = {{".html", "text/html; charset=utf-8"},
                 {".js", "text/javascript; charset=utf-8"},
                 {".css", "text/css; charset=utf-8"},
                 {".svg", "image/svg+xml"}};
    size_t n = strlen(path);
    for (size_t i = 0; i < VG_ARRAY_LEN(types); i++) {
        size_t e = strlen(types[i].ext);
        if (n > e && !strcmp(path + n - e, types[i].ext))
            return types[i].type;
    }
    return "application/octet-stream";
}

int vg_web_send(struct MHD_Connection *conn, const struct vg_web_asset *asset)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(asset->len, (void *)asset->data, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", content_type(asset->path));
    /* The page runs only its own script and talks only to this server: an injected string
     * can neither load a script nor send data elsewhere. */
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'none'; script-src 'self'; style-src 'self'; "
                            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                            "form-action 'none'; frame-ancestors 'none'");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    enum MHD_Result ok = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ok;
}
