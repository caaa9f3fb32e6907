/*
 * sync_api.c: multi-device sync as vigil.h offers it (docs/sync.md; src/sync does the work):
 * vigil_sync_with (two stores this process opened), vigil_sync_remote (a daemon's store over its
 * HTTP API: the HTTP peer below) and vigil_sync_serve (one message, what the daemon's routes run).
 */
#include "base/common.h"
#include "base/json.h"

#include "model/http.h"
#include "runtime/runtime_int.h"
#include "sync/sync.h"

#include <jansson.h>

/* What one offer carries at most over the network: a few hundred KiB, well under the daemon's
 * body limit (1 MiB), so a store of any size goes in requests of a bounded size, and a cut
 * connection loses one of them. */
#define REMOTE_OFFER_BYTES (256 * 1024)

static json_t *direction(const struct vg_sync_stats *s)
{
    return json_pack("{s:I, s:I, s:I, s:I}", "entries", (json_int_t)s->entries_sent, "records",
                     (json_int_t)s->records_sent, "bytes", (json_int_t)s->bytes_sent, "changed",
                     (json_int_t)s->records_changed);
}

/* vg_json_array_sort's order for a listing: strings, or objects by their name, the same on every
 * store. */
static int by_text(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    if (json_is_object(x))
        return strcmp(json_string_value(json_object_get(x, "name")),
                      json_string_value(json_object_get(y, "name")));
    return strcmp(json_string_value(x), json_string_value(y));
}

static int names_cb(void *user, const struct vg_record *r)
{
    json_t *by_name = user, *body = json_loads(r->body, 0, NULL), *ids;
    const char *name = json_string_value(json_object_get(body, "name"));
    if (name && strcmp(r->k1, "destroyed")) {
        if (!(ids = json_object_get(by_name, name)))
            json_object_set_new(by_name, name, ids = json_array());
        json_array_append_new(ids, json_string(r->id));
    }
    json_decref(body);
    return 0;
}

/* The names two or more live agents of this store share, [{name, ids}] by name (owned): two
 * agents made apart on two devices under one name both keep it after a sync (nothing could
 * decide which of them a person means), and a name that is several agents' is refused where an
 * agent is named (give an id), so the sync says which (trial K9). */
static vigil_code duplicate_names(struct vg_env *env, json_t **out, vigil_error *err)
{
    json_t *by_name = json_object(), *ids;
    const char *name;
    struct vg_query q = {.kind = "agent"};
    vigil_code rc = by_name ? vg_store_scan(env->store, &q, names_cb, by_name, err)
                            : VG_FAIL(err, VIGIL_ENOMEM, "out of memory summing up a sync");
    *out = rc ? NULL : json_array();
    json_object_foreach (by_name, name, ids)
        if (*out && json_array_size(ids) > 1) {
            (void)vg_json_array_sort(ids, by_text);
            json_array_append_new(*out, json_pack("{s:s, s:O}", "name", name, "ids", ids));
        }
    (void)vg_json_array_sort(*out, by_text);
    json_decref(by_name);
    if (!rc && !*out)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory summing up a sync");
    return rc;
}

/* The summary of an exchange (vigil.h): holes are what each side still lacks after both
 * directions; duplicate_names what this store holds after it. */
static vigil_code summarize(struct vg_env *env, const char *peer_host,
                            const struct vg_sync_stats *sent, const struct vg_sync_stats *received,
                            char **summary_json, vigil_error *err)
{
    json_t *dups = NULL;
    vigil_code rc = duplicate_names(env, &dups, err);
    if (rc)
        return rc;
    json_t *summary =
        json_pack("{s:s, s:s, s:o, s:o, s:I, s:o}", "host", vg_sync_host(env), "peer_host",
                  peer_host, "sent", direction(sent), "received", direction(received), "holes",
                  (json_int_t)(sent->holes + received->holes), "duplicate_names", dups);
    char *text = summary ? vg_json_dumps(summary, JSON_COMPACT) : NULL;
    json_decref(summary);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory summing up a sync");
    *summary_json = text;
    return VIGIL_OK;
}

vigil_code vigil_sync_with(vigil_runtime *rt, vigil_runtime *peer, char **summary_json,
                           vigil_error *err)
{
    struct vg_env *a = vg_runtime_env(rt), *b = vg_runtime_env(peer);
    struct vg_sync_stats sent = {0}, received = {0};
    vigil_code rc = vg_sync_join(a, err);
    if (!rc)
        rc = vg_sync_join(b, err);
    if (!rc)
        rc = vg_sync_between(a, b, &sent, &received, err);
    if (rc)
        return rc;
    return summarize(a, vg_sync_host(b), &sent, &received, summary_json, err);
}

vigil_code vigil_sync_serve(vigil_runtime *rt, const char *leg, const char *request,
                            size_t request_len, char **answer_json, vigil_error *err)
{
    struct vg_env *env = vg_runtime_env(rt);
    vigil_code rc = vg_sync_join(env, err);
    return rc ? rc : vg_sync_serve(env, leg, request, request_len, answer_json, err);
}

/* ---- the HTTP peer ------------------------------------------------------------------------- */

struct http_peer {
    const char *base_url;
    char auth[128]; /* "Authorization: Bearer TOKEN" */
};

/* The daemon's error answer {"code","message"} as this side's error. */
static vigil_code remote_error(const char *url, const struct vg_http_response *resp,
                               vigil_error *err)
{
    static const struct {
        const char *name;
        vigil_code code;
    } codes[] = {
#define X(name, value, text, http, exit) {#name, VIGIL_##name},
        VIGIL_CODE_LIST(X)
#undef X
    };
    json_t *body = json_loadb(resp->body.data ? resp->body.data : "", resp->body.len, 0, NULL);
    const char *name = json_string_value(json_object_get(body, "code"));
    const char *message = json_string_value(json_object_get(body, "message"));
    vigil_code code = VIGIL_ENETWORK;
    for (size_t i = 0; name && i < VG_ARRAY_LEN(codes); i++)
        if (!strcmp(codes[i].name, name) && codes[i].code != VIGIL_OK)
            code = codes[i].code;
    VG_FAIL(err, code, "the daemon at %s answered %ld: %s", url, resp->status,
            message ? message : "(no message)");
    json_decref(body);
    return code;
}

static vigil_code http_call(void *self, const char *leg, const char *request, char **answer,
                            vigil_error *err)
{
    struct http_peer *p = self;
    char url[2048];
    const char *headers[] = {p->auth, "Content-Type: application/json"};
    size_t n = strlen(p->base_url);
    while (n && p->base_url[n - 1] == '/')
        n--;
    if (snprintf(url, sizeof url, "%.*s/v1/sync/%s", (int)n, p->base_url, leg) >= (int)sizeof url)
        return VG_FAIL(err, VIGIL_EINVAL, "the daemon's URL is too long");
    struct vg_http_request hr = {.method = "POST",
                                 .url = url,
                                 .headers = headers,
                                 .n_headers = VG_ARRAY_LEN(headers),
                                 .body = request,
                                 .body_len = strlen(request),
                                 .max_response = 64u << 20};
    struct vg_http_response resp;
    vg_http_response_init(&resp);
    vigil_code rc = vg_http_perform(&hr, &resp, err);
    if (rc)
        vg_http_redact_credentials(url, headers, VG_ARRAY_LEN(headers), err);
    else if (resp.status != 200)
        rc = remote_error(url, &resp, err);
    else if (!(*answer = vg_strndup(resp.body.data ? resp.body.data : "", resp.body.len)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the daemon's answer");
    vg_http_response_release(&resp);
    return rc;
}

vigil_code vigil_sync_remote(vigil_runtime *rt, const char *base_url, const char *token,
                             char **summary_json, vigil_error *err)
{
    struct vg_env *env = vg_runtime_env(rt);
    struct vg_sync_stats sent = {0}, received = {0};
    struct http_peer hp = {.base_url = base_url};
    char peer_host[VG_SYNC_HOST_SIZE] = "";
    if (!base_url || strncmp(base_url, "http", 4) || !strstr(base_url, "://"))
        return VG_FAIL(err, VIGIL_EINVAL, "a daemon is reached at http://HOST:PORT");
    if (!token || !*token || strlen(token) > 100 || strpbrk(token, "\r\n"))
        return VG_FAIL(err, VIGIL_EINVAL, "the daemon's token is one line of at most 100 bytes");
    snprintf(hp.auth, sizeof hp.auth, "Authorization: Bearer %s", token);
    struct vg_sync_peer peer = {.call = http_call, .self = &hp, .max_bytes = REMOTE_OFFER_BYTES};
    vigil_code rc = vg_sync_join(env, err);
    if (!rc)
        rc = vg_sync_exchange(env, &peer, &sent, &received, peer_host, err);
    if (rc)
        return rc;
    return summarize(env, peer_host, &sent, &received, summary_json, err);
}
