/*
 * sync.c: multi-device sync over HTTP (docs/sync.md, "Between machines"): POST /v1/sync/hello,
 * /offer, /apply and /confirm each run one message of the exchange on the daemon's store
 * (vigil_sync_serve), for `vigil sync --with http://HOST:PORT` on another machine. The body is
 * the other side's message as it sent it; the answer this side's. The first hello joins the
 * daemon's store. An apply writes in one transaction, so it runs on a worker thread
 * (vg_http_route_waits) as other long routes do.
 */
#include "base/common.h"

#include "http/http_int.h"

void vg_http_sync_route(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    const char *leg = strrchr(r->path, '/') + 1; /* the route's last segment */
    vigil_code rc = vigil_sync_serve(r->rt, leg, r->raw_len ? r->raw : "{}",
                                     r->raw_len ? r->raw_len : 2, &out, &err);
    vg_req_answer(r, rc, out, &err);
}
