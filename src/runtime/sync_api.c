/*
 * sync_api.c: vigil_sync_with, the two-store exchange behind `vigil sync --with` (docs/sync.md;
 * src/sync does the work).
 */
#include "base/common.h"
#include "base/json.h"

#include "runtime/runtime_int.h"
#include "sync/sync.h"

#include <jansson.h>

static json_t *direction(const struct vg_sync_stats *s)
{
    return json_pack("{s:I, s:I, s:I, s:I}", "entries", (json_int_t)s->entries_sent, "records",
                     (json_int_t)s->records_sent, "bytes", (json_int_t)s->bytes_sent, "changed",
                     (json_int_t)s->records_changed);
}

vigil_code vigil_sync_with(vigil_runtime *rt, vigil_runtime *peer, char **summary_json,
                           vigil_error *err)
{
    struct vg_env *a = vg_runtime_env(rt), *b = vg_runtime_env(peer);
    struct vg_sync_stats sent = {0}, received = {0};
    vigil_code rc = vg_sync_join(a, err);
    if (!rc)
        rc = vg_sync_join(b, err);
    if (!rc && !strcmp(vg_sync_host(a), vg_sync_host(b)))
        rc = VG_FAIL(err, VIGIL_ECONFLICT,
                     "both stores have host id %s: one is a copy of the other, and a copy "
                     "cannot sync with its original",
                     vg_sync_host(a));
    if (!rc)
        rc = vg_sync_between(a, b, &sent, &received, err);
    if (rc)
        return rc;
    /* After both directions, what each still lacks is what neither holds. */
    json_t *summary =
        json_pack("{s:s, s:s, s:o, s:o, s:I}", "host", vg_sync_host(a), "peer_host",
                  vg_sync_host(b), "sent", direction(&sent), "received", direction(&received),
                  "holes", (json_int_t)(sent.holes + received.holes));
    char *text = summary ? vg_json_dumps(summary, JSON_COMPACT) : NULL;
    json_decref(summary);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory summing up a sync");
    *summary_json = text;
    return VIGIL_OK;
}
