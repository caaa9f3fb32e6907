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
 * loses nothing (the frames are written); a power loss may lose the newest events.
 *
 * Their positions are never given again all the same: positions are handed out only below a
 * reservation (a record of kind "event_mark") written by a durable commit, the append's own,
 * whenever an append would go past it (the next RESERVE_AHEAD positions), and a runtime's first
 * append starts past the reservation. After a power loss, the restarted daemon's first append
 * thus gives positions above every one given before, whatever was lost: a client whose
 * Last-Event-ID was lost gets a gap, never other events under ids it saw. The cost: one durable
 * append in RESERVE_AHEAD, plus each runtime's first, and a hole of positions at each start.
 * Not on a server store (PostgreSQL), which several daemons share: there the events are lost with
 * the server's asynchronous commits while the daemons go on, which a start does not follow, and
 * each daemon's start would leave a hole in the others' streams; a client ahead of the log gets
 * a gap there (src/http/events.c) and may see a position again.
 */
#include "base/common.h"
#include "base/json.h"

#include "base/buf.h"
#include "base/jscan.h"
#include "runtime/runtime_int.h"

#define EVENT_KIND "event_log"
/* Keys of keyed events (vigil_events_append): id the key, seq the position it was given. */
#define EVENT_KEY_KIND "event_key"
#define EVENT_KEY_MAX 200
/* The reservation: seq the highest position that may have been handed out. */
#define EVENT_MARK_KIND "event_mark"
#define EVENT_MARK_ID "reserved"
#define RESERVE_AHEAD 4096

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

/* Whether text is one JSON value: the scanner's fast path, jansson where it declines. */
static int one_value(const char *text)
{
    struct vg_jscan sc;
    vg_jscan_init(&sc, text, strlen(text));
    if (vg_jscan_skip(&sc) == 0 && vg_jscan_end(&sc) == 0)
        return 1;
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    json_decref(v);
    return v != NULL;
}

static vigil_code put_event(struct vg_env *env, int64_t pos, const vigil_event *ev, int *fresh,
                            vigil_error *err)
{
    char id[24];
    if (!ev->kind || !*ev->kind || strlen(ev->kind) > 100 ||
        (ev->agent_id && strlen(ev->agent_id) > 100) || !ev->data_json || !one_value(ev->data_json))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "an event needs a kind (1..100 bytes) and data (one JSON value), and a key "
                       "is a string");
    vigil_code rc = claim_key(env, pos, ev->key, fresh, err);
    if (rc || !*fresh)
        return rc;
    snprintf(id, sizeof id, "%020lld", (long long)pos);
    return vg_env_put_text(env, EVENT_KIND, id, ev->agent_id ? ev->agent_id : "", ev->kind, "", pos,
                           ev->data_json, 0, err);
}

struct mark {
    int64_t seq, rev; /* rev 0: none yet */
};

static int take_mark(void *user, const struct vg_record *r)
{
    struct mark *m = user;
    m->seq = r->seq;
    m->rev = r->rev;
    return 1;
}

static vigil_code read_mark(struct vg_env *env, struct mark *m, vigil_error *err)
{
    struct vg_query q = {.kind = EVENT_MARK_KIND, .limit = 1};
    m->seq = m->rev = 0;
    return vg_store_scan(env->store, &q, take_mark, m, err);
}

static vigil_code write_mark(struct vg_env *env, const struct mark *m, int64_t upto,
                             vigil_error *err)
{
    struct vg_record r = {.kind = EVENT_MARK_KIND,
                          .id = EVENT_MARK_ID,
                          .owner = "",
                          .k1 = "",
                          .k2 = "",
                          .seq = upto,
                          .at = vg_env_now(env),
                          .body = "{}"};
    if (m->rev)
        return vg_store_update(env->store, &r, m->rev, err);
    return vg_store_put(env->store, &r, 0, NULL, err);
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

vigil_code vigil_events_append_list(vigil_runtime *rt, vigil_event *events, size_t n,
                                    vigil_error *err)
{
    struct vg_env *env = vg_runtime_env(rt);
    int64_t newest = 0;
    for (size_t i = 0; i < n; i++)
        events[i].position = 0;
    if (!n)
        return VIGIL_OK;
    /* Group commit for this transaction only; where the store cannot (an adapter refusing),
     * the append stays durable. */
    int nested = vg_store_in_tx(env->store); /* the outer transaction commits it */
    int lazy = vg_store_durable(env->store) && !vg_store_durable_commits(env->store, 0, NULL);
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc) {
        if (lazy)
            (void)vg_store_durable_commits(env->store, 1, NULL);
        return rc;
    }
    /* A server store (PostgreSQL): no reservation (see the top). */
    int reserving = !(env->store->methods->caps & VG_STORE_CAP_RECONNECTS);
    struct mark m = {0};
    rc = lock_edge(env, &newest, err);
    if (!rc && reserving)
        rc = read_mark(env, &m, err);
    /* A runtime's first append starts past what may have been handed out before (and lost). */
    if (!rc && !rt->events_started && m.seq > newest)
        newest = m.seq;
    int64_t given = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        int fresh = 0;
        rc = put_event(env, newest + 1 + given, &events[i], &fresh, err);
        if (!rc && fresh)
            events[i].position = newest + 1 + given++;
    }
    /* Past the reservation: a new one, committed durably with these events, before any reader
     * can see them. */
    int reserve = !rc && reserving && newest + given > m.seq;
    if (reserve)
        rc = write_mark(env, &m, newest + given + RESERVE_AHEAD, err);
    if (reserve && !rc && !nested)
        rc = vg_store_commit_durable(env->store, err);
    else
        rc = vg_store_end(env->store, rc, err);
    if (lazy)
        (void)vg_store_durable_commits(env->store, 1, NULL);
    if (!rc && given)
        rt->events_started = 1;
    for (size_t i = 0; rc && i < n; i++)
        events[i].position = 0;
    return rc;
}

/* The array's events apart, each one's data as compact text (owned, into texts). */
static vigil_code split_events(json_t *events, vigil_event *list, char **texts, vigil_error *err)
{
    size_t i;
    json_t *ev;
    json_array_foreach (events, i, ev) {
        json_t *data = json_object_get(ev, "data"), *key = json_object_get(ev, "key");
        if (!data || (key && !json_is_string(key) && !json_is_null(key)))
            return VG_FAIL(err, VIGIL_EINVAL,
                           "an event needs a kind (1..100 bytes) and data, and a key is a string");
        if (!(texts[i] = vg_json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY)))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory appending an event");
        list[i] = (vigil_event){.kind = json_string_value(json_object_get(ev, "kind")),
                                .agent_id = json_string_value(json_object_get(ev, "agent_id")),
                                .key = json_string_value(key),
                                .data_json = texts[i]};
    }
    return VIGIL_OK;
}

vigil_code vigil_events_append(vigil_runtime *rt, const char *events_json, int64_t *first_position,
                               vigil_error *err)
{
    json_t *events = json_loads(events_json ? events_json : "", 0, NULL);
    if (first_position)
        *first_position = 0;
    if (!json_is_array(events)) {
        json_decref(events);
        return VG_FAIL(err, VIGIL_EINVAL, "events must be a JSON array");
    }
    size_t n = json_array_size(events);
    vigil_event *list = n ? vg_calloc(n, sizeof *list) : NULL;
    char **texts = n ? vg_calloc(n, sizeof *texts) : NULL;
    vigil_code rc = n && (!list || !texts)
                        ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory appending events")
                        : VIGIL_OK;
    if (!rc && n)
        rc = split_events(events, list, texts, err);
    if (!rc && n)
        rc = vigil_events_append_list(rt, list, n, err);
    for (size_t i = 0; !rc && first_position && i < n && !*first_position; i++)
        *first_position = list[i].position;
    for (size_t i = 0; texts && i < n; i++)
        vg_free(texts[i]);
    vg_free(texts);
    vg_free(list);
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
    if (!rc && !(*out_json = vg_json_dumps(rd.out, JSON_COMPACT)))
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
