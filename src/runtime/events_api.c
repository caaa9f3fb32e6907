/*
 * events_api.c: the event log of include/vigil.h, what GET /v1/events serves. Events are
 * records of kind "event_log" whose seq is their position: the next one is the newest plus
 * one, read and written in one write transaction, so positions are store-wide, increasing and
 * durable; trimming never removes the newest, so a position is never given twice.
 */
#include "base/common.h"

#include "base/buf.h"
#include "runtime/runtime_int.h"

#define EVENT_KIND "event_log"

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

static vigil_code put_event(struct vg_env *env, int64_t pos, json_t *ev, vigil_error *err)
{
    const char *kind = json_string_value(json_object_get(ev, "kind"));
    const char *agent = json_string_value(json_object_get(ev, "agent_id"));
    json_t *data = json_object_get(ev, "data");
    char id[24];
    if (!kind || !*kind || strlen(kind) > 100 || (agent && strlen(agent) > 100) || !data)
        return VG_FAIL(err, VIGIL_EINVAL, "an event needs a kind (1..100 bytes) and data");
    snprintf(id, sizeof id, "%020lld", (long long)pos);
    char *body = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!body)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory appending an event");
    vigil_code rc =
        vg_env_put_text(env, EVENT_KIND, id, agent ? agent : "", kind, "", pos, body, 0, err);
    vg_free(body);
    return rc;
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
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc) {
        json_decref(events);
        return rc;
    }
    rc = edge(env, 1, &newest, err);
    json_array_foreach (events, i, ev)
        if (!rc)
            rc = put_event(env, newest + 1 + (int64_t)i, ev, err);
    rc = vg_store_end(env->store, rc, err);
    if (!rc && first_position)
        *first_position = newest + 1;
    json_decref(events);
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
    return vg_store_end(env->store, rc, err);
}
