/*
 * web.h: the web admin page's files, embedded in the binary at build time
 * (cmake/embed_web.cmake writes the table from share/web), and the answer that serves them.
 */
#ifndef VG_HTTP_WEB_H
#define VG_HTTP_WEB_H

#include <stddef.h>

struct MHD_Connection;

struct vg_web_asset {
    const char *path; /* "/web/app.js" */
    const unsigned char *data;
    size_t len;
};
extern const struct vg_web_asset vg_web_assets[];
extern const size_t vg_web_n_assets;

/* The embedded file a GET or HEAD of path asks for ("/" is /web/index.html), or NULL. */
const struct vg_web_asset *vg_web_find(const char *method, const char *path);
/* Queue asset as the answer, with its type and the page's security headers; MHD_YES/MHD_NO. */
int vg_web_send(struct MHD_Connection *conn, const struct vg_web_asset *asset);

#endif
