/*
 * events_api.c: the event log of include/vigil.h, what GET /v1/events serves. Events are
 * records of kind "event_log" whose seq is their position: the next one is the newest plus
 * one, read and written in one write transaction, so positions are store-wide and increasing;
 * trimming never removes the newest, so a position is never given twice while the log is kept.
 *
 * An append commits without waiting for a sync of the store's log (group commit): the events
 * are facts derived from records that their own writers made durable, and the daemon appends
 * right after a turn's commits, so a sync of its own held the store's writer lock through an
 * fdatasync that the turn's next commit waited for and then repeated (docs/internals/PERF.md,
 * Session 23). The append becomes durable with the next durable commit on the store (the log
 * is sequential: syncing it syncs every frame before) or vigil_events_sync. A process crash
 * loses nothing (the frames are written); a power loss may lose the newest events, and a
 * client ahead of the log then gets a gap (src/http/events.c).
 */
#include "base/common.h"

#include "base/buf.h"
#include "runtime/runtime_int.h"

#define EVENT_KIND "event_log"
/* Keys of keyed events (vigil_events_append): id the key, seq the position it was given. */
#define EVENT_KEY_KIND "event_key"
#define EVENT_KEY_MAX 200

static int take_seq(void *user, const struct vg_record *r)
{
    *(int64_t *)user = r->seq;
    return 1;
}

/* The oldest (descending = 0) or newest position, 0 when the log is empty. */
static vigil_code edge(struct vg_env *env, int descending, int64_t *out, vigil_error *err)
{
    struct vg_query q = {.kind = EVENT_KIND, .descending = descending, .limit = 1};
    *out = 0;
    return vg_store_scan(env->store, &q, take_seq, out, err);
}

/* A keyed event whose key is in the log already was appended by another writer (a daemon
 * of the same fleet deriving the same event): *fresh = 0, and it is left out. The key's insert
 * waits for another transaction inserting the same key, so of two racing writers one wins. */
static vigil_code claim_key(struct vg_env *env, int64_t pos, const char *key, int *fresh,
                            vigil_error *err)
{
    *fresh = 1;
    if (!key)
        return VIGIL_OK;
    if (!*key || strlen(key) > EVENT_KEY_MAX)
        return VG_FAIL(err, VIGIL_EINVAL, "an event's key must be 1..%d bytes", EVENT_KEY_MAX);
    struct vg_record r = {.kind = EVENT_KEY_KIND, .id = key, .seq = pos, .body = "{}"};
    return vg_store_put(env->store, &r, VG_PUT_IF_ABSENT, fresh, err);
}

static vigil_code put_event(struct vg_env *env, int64_t pos, json_t *ev, int *fresh,
                            vigil_error *err)
{
    const char *kind = json_string_value(json_object_get(ev, "kind"));
    const char *agent = json_string_value(json_object_get(ev, "agent_id"));
    json_t *data = json_object_get(ev, "data"), *key = json_object_get(ev, "key");
    char id[24];
    if (!kind || !*kind || strlen(kind) > 100 || (agent && strlen(agent) > 100) || !data ||
        (key && !json_is_string(key) && !json_is_null(key)))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "an event needs a kind (1..100 bytes) and data, and a key is a string");
    vigil_code rc = claim_key(env, pos, json_string_value(key), fresh, err);
    if (rc || !*fresh)
        return rc;
    snprintf(id, sizeof id, "%020lld", (long long)pos);
    char *body = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!body)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory appending an event");
    rc = vg_env_put_text(env, EVENT_KIND, id, agent ? agent : "", kind, "", pos, body, 0, err);
    vg_free(body);
    return rc;
}

/* The newest position, with the newest event locked against other appenders until the
 * transaction ends (PostgreSQL: several daemons append to one log; they take turns instead of
 * giving one position twice and failing). */
static vigil_code lock_edge(struct vg_env *env, int64_t *newest, vigil_error *err)
{
    char id[24];
    vigil_code rc = edge(env, 1, newest, err);
    if (rc || *newest == 0 || !(env->store->methods->caps & VG_STORE_CAP_MULTI_PROCESS))
        return rc;
    snprintf(id, sizeof id, "%020lld", (long long)*newest);
    if ((rc = vg_store_lock_for_write(env->store, EVENT_KIND, id, err)))
        return rc;
    return edge(env, 1, newest, err);
}

vigil_code vigil_events_append(vigil_runtime *rt, const char *events_json, int64_t *first_position,
                               vigil_error *err)
{
    struct vg_env *env = vg_runtime_env(rt);
    json_t *events = json_loads(events_json ? events_json : "", 0, NULL), *ev;
    int64_t newest = 0;
    size_t i;
    if (first_position)
        *first_position = 0;
    if (!json_is_array(events)) {
        json_decref(events);
        return VG_FAIL(err, VIGIL_EINVAL, "events must be a JSON array");
    }
    if (!json_array_size(events)) {
        json_decref(events);
        return VIGIL_OK;
    }
    /* Group commit for this transaction only; where the store cannot (an adapter refusing),
     * the append stays durable. */
    int lazy = vg_store_durable(env->store) && !vg_store_durable_commits(env->store, 0, NULL);
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc) {
        if (lazy)
            (void)vg_store_durable_commits(env->store, 1, NULL);
        json_decref(events);
        return rc;
    }
    rc = lock_edge(env, &newest, err);
    int64_t given = 0;
    json_array_foreach (events, i, ev) {
        int fresh = 0;
        if (!rc)
            rc = put_event(env, newest + 1 + given, ev, &fresh, err);
        given += fresh;
    }
    rc = vg_store_end(env->store, rc, err);
    if (lazy)
        (void)vg_store_durable_commits(env->store, 1, NULL);
    if (!rc && first_position && given)
        *first_position = newest + 1;
    json_decref(events);
    return rc;
}

vigil_code vigil_events_sync(vigil_runtime *rt, vigil_error *err)
{
    vigil_error own = {0};
    vigil_code rc = vg_store_sync(vg_runtime_env(rt)->store, &own);
    /* PostgreSQL: durability is the server's, whose WAL writer flushes asynchronous commits
     * within a few wal_writer_delay. */
    if (rc == VIGIL_EUNSUPPORTED)
        return VIGIL_OK;
    if (rc && err)
        *err = own;
    return rc;
}

struct reading {
    json_t *out;
    vigil_code rc;
};

static int add_event(void *user, const struct vg_record *r)
{
    struct reading *rd = user;
    json_t *data = json_loads(r->body, JSON_DECODE_ANY, NULL);
    json_t *it = json_pack("{s:I, s:s, s:s?, s:o?}", "position", (json_int_t)r->seq, "kind", r->k1,
                           "agent_id", r->owner[0] ? r->owner : NULL, "data", data);
    if (!it || json_array_append_new(rd->out, it)) {
        rd->rc = VIGIL_ENOMEM;
        return 1;
    }
    return 0;
}

vigil_code vigil_events_read(vigil_runtime *rt, int64_t after, const char *agent_id, int limit,
                             char **out_json, vigil_error *err)
{
    struct vg_env *env = vg_runtime_env(rt);
    if (!out_json || limit < 1 || limit > 1000)
        return VG_FAIL(err, VIGIL_EINVAL, "read events with a limit of 1 to 1000");
    *out_json = NULL;
    struct vg_query q = {.kind = EVENT_KIND,
                         .owner = agent_id,
                         .has_seq_min = 1,
                         .seq_min = after < INT64_MAX ? after + 1 : after,
                         .limit = limit};
    struct reading rd = {.out = json_array()};
    vigil_code rc = rd.out ? vg_store_scan(env->store, &q, add_event, &rd, err) : VIGIL_ENOMEM;
    if (!rc && rd.rc)
        rc = VG_FAIL(err, rd.rc, "out of memory reading events");
    if (!rc && !(*out_json = json_dumps(rd.out, JSON_COMPACT)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading events");
    json_decref(rd.out);
    return rc;
}

vigil_code vigil_events_bounds(vigil_runtime *rt, int64_t *oldest, int64_t *newest,
                               vigil_error *err)
{
    struct vg_env *env = vg_runtime_env(rt);
    vigil_code rc = edge(env, 0, oldest, err);
    return rc ? rc : edge(env, 1, newest, err);
}

vigil_code vigil_events_trim(vigil_runtime *rt, int64_t upto, vigil_error *err)
{
    struct vg_env *env = vg_runtime_env(rt);
    int64_t newest = 0;
    struct vg_id_list ids = {0};
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    if (!(rc = edge(env, 1, &newest, err))) {
        /* The newest stays, so that the next append does not give its position again. */
        struct vg_query q = {
            .kind = EVENT_KIND, .has_seq_max = 1, .seq_max = VG_MIN(upto, newest - 1)};
        rc = vg_store_scan_ids(env->store, &q, &ids, err);
    }
    for (size_t i = 0; !rc && i < ids.n; i++)
        rc = vg_store_remove(env->store, EVENT_KIND, ids.ids[i], err);
    vg_id_list_release(&ids);
    if (!rc) { /* the keys of the events dropped: their duplicates come within seconds */
        struct vg_query q = {
            .kind = EVENT_KEY_KIND, .has_seq_max = 1, .seq_max = VG_MIN(upto, newest - 1)};
        rc = vg_store_scan_ids(env->store, &q, &ids, err);
    }
    for (size_t i = 0; !rc && i < ids.n; i++)
        rc = vg_store_remove(env->store, EVENT_KEY_KIND, ids.ids[i], err);
    vg_id_list_release(&ids);
    return vg_store_end(env->store, rc, err);
}
