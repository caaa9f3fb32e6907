/*
 * transport.c: the exchange's four messages between this store and a peer (docs/internals/SYNC.md,
 * "The transport"): the legs a peer serves on its store (vg_sync_serve: what a daemon's POST
 * /v1/sync/LEG runs), and the two directions driven from this side over any peer, in offers of
 * bounded size until nothing is missing.
 *
 * Sections: messages as text; serving a leg; the local peer; both ways.
 */
#include "base/common.h"

#include "base/json.h"
#include "sync/sync_int.h"

#include <jansson.h>

/* ---- messages as text ---------------------------------------------------------------------- */

static vigil_code parse(const char *text, size_t len, const char *what, json_t **out,
                        vigil_error *err)
{
    json_error_t je;
    *out = text ? json_loadb(text, len, 0, &je) : NULL;
    if (*out && json_is_object(*out))
        return VIGIL_OK;
    json_decref(*out);
    *out = NULL;
    return VG_FAIL(err, VIGIL_EINVAL, "a sync %s is not a JSON object%s%s", what, text ? ": " : "",
                   text ? je.text : "");
}

/* v as text (v taken), its length added to *bytes when bytes is not NULL. */
static vigil_code dump(json_t *v, char **out, int64_t *bytes, vigil_error *err)
{
    *out = v ? vg_json_dump(v, 0) : NULL;
    json_decref(v);
    if (!*out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a sync message");
    if (bytes)
        *bytes += (int64_t)strlen(*out);
    return VIGIL_OK;
}

static int64_t jint(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

/* ---- serving a leg ------------------------------------------------------------------------- */

static vigil_code serve_apply(struct vg_env *env, const json_t *offer, json_t **out,
                              vigil_error *err)
{
    struct vg_sync_stats st = {0};
    vigil_code rc = vg_sync_apply(env, offer, &st, err);
    if (!rc &&
        !(*out = json_pack("{s:I, s:I, s:I}", "entries", (json_int_t)st.entries_new, "changed",
                           (json_int_t)st.records_changed, "holes", (json_int_t)st.holes)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory answering a sync apply");
    return rc;
}

vigil_code vg_sync_serve(struct vg_env *env, const char *leg, const char *request,
                         size_t request_len, char **answer, vigil_error *err)
{
    json_t *req = NULL, *out = NULL;
    int hello = !strcmp(leg, "hello");
    vigil_code rc = hello ? VIGIL_OK : parse(request, request_len, leg, &req, err);
    if (rc)
        return rc;
    if (hello)
        rc = vg_sync_hello(env, &out, err);
    else if (!strcmp(leg, "offer"))
        rc = vg_sync_offer(env, req, &out, err);
    else if (!strcmp(leg, "apply"))
        rc = serve_apply(env, req, &out, err);
    else if (!strcmp(leg, "confirm") && !(rc = vg_sync_confirm(env, req, err)))
        out = json_pack("{s:b}", "ok", 1);
    else if (strcmp(leg, "confirm"))
        rc = VG_FAIL(err, VIGIL_EINVAL, "no sync message \"%s\": hello, offer, apply or confirm",
                     leg);
    json_decref(req);
    return rc ? rc : dump(out, answer, NULL, err);
}

/* ---- the local peer ------------------------------------------------------------------------ */

static vigil_code local_call(void *self, const char *leg, const char *request, char **answer,
                             vigil_error *err)
{
    return vg_sync_serve(self, leg, request, strlen(request), answer, err);
}

struct vg_sync_peer vg_sync_local_peer(struct vg_env *env)
{
    return (struct vg_sync_peer){.call = local_call, .self = env};
}

/* ---- both ways ----------------------------------------------------------------------------- */

/* One leg on the peer: req (taken) as text, the answer parsed. bytes: the request's length is
 * added (sent) when out_bytes, else the answer's (received), when not NULL. */
static vigil_code ask(const struct vg_sync_peer *peer, const char *leg, json_t *req,
                      json_t **answer, int64_t *bytes, int out_bytes, vigil_error *err)
{
    char *text = NULL, *got = NULL;
    vigil_code rc = dump(req, &text, out_bytes ? bytes : NULL, err);
    if (!rc)
        rc = peer->call(peer->self, leg, text, &got, err);
    if (!rc && bytes && !out_bytes)
        *bytes += (int64_t)strlen(got);
    if (!rc)
        rc = parse(got, got ? strlen(got) : 0, "answer", answer, err);
    vg_free(text);
    vg_free(got);
    return rc;
}

/* The peer's host id from its hello: not this store's (a copy), into peer_host. */
static vigil_code peer_host_of(struct vg_env *env, const json_t *hello,
                               char peer_host[VG_SYNC_HOST_SIZE], vigil_error *err)
{
    const char *h = json_string_value(json_object_get(hello, "host"));
    if (!h || !*h || strlen(h) >= VG_SYNC_HOST_SIZE)
        return VG_FAIL(err, VIGIL_EINVAL, "the peer's sync hello names no host id");
    if (!strcmp(h, vg_sync_host(env)))
        return VG_FAIL(err, VIGIL_ECONFLICT,
                       "both stores have host id %s: one is a copy of the other, and a copy "
                       "cannot sync with its original",
                       h);
    if (peer_host)
        memcpy(peer_host, h, strlen(h) + 1);
    return VIGIL_OK;
}

static vigil_code bound(json_t *hello, int64_t max_bytes, vigil_error *err)
{
    if (max_bytes > 0 && json_object_set_new(hello, "max_bytes", json_integer(max_bytes)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory saying hello");
    return VIGIL_OK;
}

static void count_offer(struct vg_sync_stats *st, const json_t *offer)
{
    st->entries_sent += (int64_t)json_array_size(json_object_get(offer, "entries"));
    st->records_sent += (int64_t)json_array_size(json_object_get(offer, "records"));
}

/* This store to the peer: offers for the peer's hello, applied there, until one is empty or
 * an apply stores nothing new; then the peer's last hello is confirmed here. */
static vigil_code push_to(struct vg_env *env, const struct vg_sync_peer *peer,
                          struct vg_sync_stats *st, char peer_host[VG_SYNC_HOST_SIZE],
                          vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    for (int round = 0, done = 0; !rc && !done; round++) {
        json_t *hello = NULL, *offer = NULL, *ans = NULL;
        rc = ask(peer, "hello", json_object(), &hello, NULL, 0, err);
        if (!rc && round == 0)
            rc = peer_host_of(env, hello, peer_host, err);
        if (!rc)
            rc = bound(hello, peer->max_bytes, err);
        if (!rc)
            rc = vg_sync_offer(env, hello, &offer, err);
        done = !rc && !json_array_size(json_object_get(offer, "entries"));
        if (!rc && !done) {
            count_offer(st, offer);
            rc = ask(peer, "apply", json_incref(offer), &ans, &st->bytes_sent, 1, err);
            st->entries_new += jint(ans, "entries");
            st->records_changed += jint(ans, "changed");
            st->holes = jint(ans, "holes");
            done = !jint(ans, "entries") && !jint(ans, "changed");
        }
        if (!rc && done) /* the marks the peer holds now: what a pruning goes by */
            rc = vg_sync_confirm(env, hello, err);
        json_decref(ans);
        json_decref(offer);
        json_decref(hello);
    }
    return rc;
}

/* The peer to this store: the peer's offers for this store's hello, applied here, until one is
 * empty or an apply stores nothing new; then this store's last hello is confirmed there. */
static vigil_code pull_from(struct vg_env *env, const struct vg_sync_peer *peer,
                            struct vg_sync_stats *st, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    for (int done = 0; !rc && !done;) {
        json_t *hello = NULL, *offer = NULL, *ok = NULL;
        struct vg_sync_stats one = {0};
        rc = vg_sync_hello(env, &hello, err);
        if (!rc)
            rc = bound(hello, peer->max_bytes, err);
        if (!rc)
            rc = ask(peer, "offer", json_incref(hello), &offer, &st->bytes_sent, 0, err);
        done = !rc && !json_array_size(json_object_get(offer, "entries"));
        if (!rc && !done) {
            count_offer(st, offer);
            rc = vg_sync_apply(env, offer, &one, err);
            st->entries_new += one.entries_new;
            st->records_changed += one.records_changed;
            st->holes = one.holes;
            done = !one.entries_new && !one.records_changed;
        }
        if (!rc && done)
            rc = ask(peer, "confirm", json_incref(hello), &ok, NULL, 0, err);
        json_decref(ok);
        json_decref(offer);
        json_decref(hello);
    }
    return rc;
}

vigil_code vg_sync_exchange(struct vg_env *env, const struct vg_sync_peer *peer,
                            struct vg_sync_stats *sent, struct vg_sync_stats *received,
                            char peer_host[VG_SYNC_HOST_SIZE], vigil_error *err)
{
    struct vg_sync_stats s = {0}, r = {0};
    if (!vg_sync_host(env))
        return VG_FAIL(err, VIGIL_ESTATE, "this store has not joined sync: run `vigil sync` on it");
    vigil_code rc = push_to(env, peer, sent ? sent : &s, peer_host, err);
    return rc ? rc : pull_from(env, peer, received ? received : &r, err);
}

vigil_code vg_sync_push(struct vg_env *from, struct vg_env *to, struct vg_sync_stats *stats,
                        vigil_error *err)
{
    struct vg_sync_stats scratch = {0};
    struct vg_sync_peer peer = vg_sync_local_peer(to);
    if (!vg_sync_host(from))
        return VG_FAIL(err, VIGIL_ESTATE, "this store has not joined sync: run `vigil sync` on it");
    return push_to(from, &peer, stats ? stats : &scratch, NULL, err);
}

vigil_code vg_sync_between(struct vg_env *a, struct vg_env *b, struct vg_sync_stats *a_to_b,
                           struct vg_sync_stats *b_to_a, vigil_error *err)
{
    struct vg_sync_peer peer = vg_sync_local_peer(b);
    return vg_sync_exchange(a, &peer, a_to_b, b_to_a, NULL, err);
}
