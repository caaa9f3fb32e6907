/*
 * tombstone.c: what deleting a synced record leaves (S0-179), and the subscription's token index,
 * which both the wake layer (it writes subscriptions) and multi-device sync (it stores the ones
 * another device wrote, agent/adopt.c) keep in step with the subscription record.
 */
#include "base/common.h"

#include "agent/agent_int.h"
#include "base/hash.h"
#include "base/json.h"

vigil_code vg_tombstone_put(struct vg_env *env, const char *agent_id, const char *kind,
                            const char *id, vigil_error *err)
{
    char tomb[VG_RECORD_ID_MAX + 48], at[32];
    /* The tombstone names the record; an id near the length limit is named by its hash. */
    if (snprintf(tomb, sizeof tomb, "%s:%s", kind, id) >= VG_RECORD_ID_MAX) {
        char h[VG_SHA256_HEX_LEN + 1];
        vg_sha256_hex(h, id, strlen(id));
        snprintf(tomb, sizeof tomb, "%s:%s", kind, h);
    }
    vg_time_format_ms(at, vg_env_now(env));
    json_t *tb = json_pack("{s:s, s:s, s:s}", "kind", kind, "id", id, "deleted_at", at);
    if (!tb)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a tombstone");
    int added = 0;
    char *text = vg_json_dump(tb, 0);
    struct vg_record r = {.kind = "tombstone",
                          .id = tomb,
                          .owner = agent_id,
                          .k1 = kind,
                          .k2 = id,
                          .seq = vg_env_now(env),
                          .body = text};
    vigil_code rc = text ? vg_store_put(env->store, &r, VG_PUT_IF_ABSENT, &added, err)
                         : VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a tombstone");
    /* A record deleted again after it was made anew: the tombstone is written again, so that the
     * second deletion reaches the other devices as the first did (sync's write hook sees it). */
    if (!rc && !added) {
        struct vg_record *old = NULL;
        if (!(rc = vg_store_get_copy(env->store, "tombstone", tomb, &old, err)))
            rc = vg_store_update(env->store, &r, old->rev, err);
        vg_free(old);
    }
    vg_free(text);
    json_decref(tb);
    return rc;
}

/* ---- the subscription's token index ------------------------------------------------------- */

static void sub_token_id(char out[65], const char *sub, const char *k1)
{
    const char *parts[] = {sub, k1};
    vg_sha256_hex_parts(out, parts, 2);
}

vigil_code vg_sub_index_drop(struct vg_env *env, const char *sub_id, vigil_error *err)
{
    struct vg_query q = {.kind = "sub_token", .k2 = sub_id};
    struct vg_id_list c = {0};
    vigil_code rc = vg_store_scan_ids(env->store, &q, &c, err);
    for (size_t i = 0; !rc && i < c.n; i++)
        rc = vg_store_remove(env->store, "sub_token", c.ids[i], err);
    vg_id_list_release(&c);
    return rc;
}

vigil_code vg_sub_index_put(struct vg_env *env, const char *sub_id, const char *agent_id,
                            const json_t *tokens, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    size_t i;
    json_t *t;
    json_array_foreach (tokens, i, t) {
        const char *cls = json_string_value(json_object_get(t, "class")),
                   *tok = json_string_value(json_object_get(t, "token"));
        char k1[256], tid[65];
        if (!cls || !tok || snprintf(k1, sizeof k1, "%s:%s", cls, tok) >= (int)sizeof k1)
            return VG_FAIL(err, VIGIL_EINVAL, "subscription \"%s\" has a malformed token", sub_id);
        sub_token_id(tid, sub_id, k1);
        json_t *ib = json_pack("{s:s}", "sub", sub_id);
        if (!ib)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory indexing a subscription");
        rc = vg_env_put_json(env, "sub_token", tid, agent_id, k1, sub_id, 0, ib, VG_PUT_IF_ABSENT,
                             err);
        json_decref(ib);
        if (rc)
            break;
    }
    return rc;
}
