/*
 * capture.c: a store's part in multi-device sync before any exchange: its host id, joining, and
 * the write hook that gives every synced record written here an entry in the host's sequence
 * log and, for a record changed in place, a vector clock (docs/internals/SYNC.md, "The
 * exchange"). The entry and the clock are written in the record's own transaction, so a record
 * is never committed without them and a rollback leaves no hole in the log.
 *
 * Sections: classes; the log; sidecars; the hook; join and attach.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "base/json.h"
#include "sync/state.h"
#include "sync/sync_int.h"

#include <jansson.h>
#include <stdio.h>

/* ---- classes ------------------------------------------------------------------------------- */

/* The pointer links' types: projections rebuilt on apply (agent/adopt.c), never logged; but
 * for a report head (seed 000's agentReportHead), which is logged and sent like any record and
 * whose value each device still derives (vg_sync_derived). */
static int pointer_link(const char *id)
{
    static const char *const types[] = {"agent_state:", "agent_head_message:"};
    for (size_t i = 0; i < VG_ARRAY_LEN(types); i++)
        if (!strncmp(id, types[i], strlen(types[i])))
            return 1;
    return 0;
}

int vg_sync_derived(const char *kind, const char *id)
{
    return !strcmp(kind, "link") && !strncmp(id, "agent_report_head:", 18);
}

enum vg_sync_class vg_sync_class_of(const char *kind, const char *id)
{
    static const char *const immutable[] = {"message", "message_payload", "report", "tombstone"};
    for (size_t i = 0; i < VG_ARRAY_LEN(immutable); i++)
        if (!strcmp(kind, immutable[i]))
            return VG_SYNC_IMMUTABLE;
    if (!strcmp(kind, "agent"))
        return VG_SYNC_AGENT;
    if (!strcmp(kind, "agent_state"))
        return VG_SYNC_STATE;
    static const char *const in_place[] = {"operation", "subscription", "timer", "source_ref"};
    for (size_t i = 0; i < VG_ARRAY_LEN(in_place); i++)
        if (!strcmp(kind, in_place[i]))
            return VG_SYNC_LAST;
    if (!strcmp(kind, "link") && !pointer_link(id))
        return VG_SYNC_LAST;
    return VG_SYNC_LOCAL;
}

const char *const vg_sync_state_scalars[4] = {
    "next_wake_at", "sleep_until", "recent_head_message_id", "latest_summary_message_id"};

/* ---- the log ------------------------------------------------------------------------------- */

void vg_sync_entry_id(char *out, size_t size, const char *host, int64_t seq, const char *id)
{
    /* The record's id first: the entry's row in the store's id index then lands beside the
     * record's own, in a page the commit writes anyway (ids begin with their time). */
    int n = snprintf(out, size, "%s@%s:%016llx", id, host, (unsigned long long)seq);
    if (n < 0 || (size_t)n >= size)
        snprintf(out, size, "@%s:%016llx", host, (unsigned long long)seq);
}

vigil_code vg_sync_entry_put(struct vg_store *s, const char *host, int64_t seq, const char *kind,
                             const char *id, int *added, vigil_error *err)
{
    char entry[VG_RECORD_ID_MAX];
    struct vg_buf body;
    vg_sync_entry_id(entry, sizeof entry, host, seq, id);
    vg_buf_init(&body, 0);
    /* The kind is the row's k2 and the id leads the entry's own id: the body names the record
     * only when its id did not fit there. */
    if (entry[0] == '@') {
        vg_buf_puts(&body, "{\"id\":");
        vg_json_put_string(&body, id);
        vg_buf_putc(&body, '}');
    } else {
        vg_buf_puts(&body, "{}");
    }
    vigil_code rc = vg_buf_finish(&body, err);
    struct vg_record r = {.kind = "sync_log",
                          .id = entry,
                          .owner = "", /* an agent's hard delete leaves the log whole */
                          .k1 = host,
                          .k2 = kind,
                          .seq = seq,
                          .body = body.data};
    if (!rc)
        rc = vg_store_put(s, &r, VG_PUT_IF_ABSENT, added, err);
    vg_buf_release(&body);
    return rc;
}

static int top_cb(void *user, const struct vg_record *r)
{
    *(int64_t *)user = r->seq;
    return 1;
}

vigil_code vg_sync_top_seq(struct vg_store *s, const char *host, int64_t *out, vigil_error *err)
{
    struct vg_query q = {.kind = "sync_log", .k1 = host, .descending = 1, .limit = 1};
    *out = 0;
    return vg_store_scan(s, &q, top_cb, out, err);
}

/* ---- sidecars ------------------------------------------------------------------------------ */

void vg_sync_clock_id(char *out, const char *kind, const char *id)
{
    /* The record's id first, for the same reason as an entry's (vg_sync_entry_id). */
    if (snprintf(out, VG_RECORD_ID_MAX, "%s/%s", id, kind) >= VG_RECORD_ID_MAX) {
        const char *parts[] = {kind, id};
        char hex[VG_SHA256_HEX_LEN + 1];
        vg_sha256_hex_parts(hex, parts, 2);
        snprintf(out, VG_RECORD_ID_MAX, "#%s/%s", hex, kind);
    }
}

vigil_code vg_sync_sidecar_get(struct vg_store *s, const char *kind, const char *id, json_t **out,
                               int64_t *rev, vigil_error *err)
{
    char cid[VG_RECORD_ID_MAX];
    struct vg_record *r = NULL;
    vigil_error miss = {0};
    vg_sync_clock_id(cid, kind, id);
    *out = NULL;
    *rev = 0;
    vigil_code rc =
        vg_error_unless_missing(err, &miss, vg_store_get_copy(s, "sync_clock", cid, &r, &miss));
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    if (rc)
        return rc;
    *out = json_loads(r->body, 0, NULL);
    *rev = r->rev;
    vg_free(r);
    if (!*out || !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return VG_FAIL(err, VIGIL_ECORRUPT, "the sync clock of %s \"%s\" is not a JSON object",
                       kind, id);
    }
    return VIGIL_OK;
}

vigil_code vg_sync_sidecar_put(struct vg_store *s, const char *kind, const char *id,
                               const char *owner, const json_t *body, int64_t rev, vigil_error *err)
{
    char cid[VG_RECORD_ID_MAX];
    vg_sync_clock_id(cid, kind, id);
    char *text = vg_json_dump(body, 1);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a sync clock");
    struct vg_record r = {
        .kind = "sync_clock", .id = cid, .owner = owner ? owner : "", .k1 = kind, .body = text};
    vigil_code rc = rev ? vg_store_update(s, &r, rev, err) : vg_store_put(s, &r, 0, NULL, err);
    vg_free(text);
    return rc;
}

/* ---- the hook ------------------------------------------------------------------------------ */

/* The shared form in a sidecar, made when it has none (borrowed from side). */
static json_t *shared_of(json_t *side)
{
    json_t *shared = json_object_get(side, "shared");
    if (!shared && (shared = vg_sync_state_new()) && json_object_set_new(side, "shared", shared))
        return NULL;
    return shared;
}

/* A local write of a shared field: a new write of its register unless it holds that value. */
static vigil_code set_shared(json_t *shared, const char *host, const char *field, json_t *value,
                             vigil_error *err)
{
    const json_t *now = vg_sync_state_value(shared, field);
    vigil_error refused = {0};
    if ((!now && json_is_null(value)) || (now && json_equal(now, value)))
        return VIGIL_OK;
    vigil_code rc = vg_sync_state_set(shared, host, field, value, 0, &refused);
    /* A value the register cannot hold (a pointer to an id longer than a register name) stays
     * this device's own: syncing must never refuse a local write. */
    if (rc == VIGIL_EINVAL)
        return VIGIL_OK;
    if (rc && err)
        *err = refused;
    return rc;
}

/* A local write of an agent's state: each shared field that changed becomes a write of its
 * register; the processed counters rise to the body's. */
static vigil_code stamp_state(json_t *shared, const char *host, json_t *body, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    json_t *v;
    const char *name;
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(vg_sync_state_scalars); i++) {
        v = json_object_get(body, vg_sync_state_scalars[i]);
        rc = set_shared(shared, host, vg_sync_state_scalars[i], v ? v : json_null(), err);
    }
    json_object_foreach (json_object_get(body, "slots"), name, v) {
        char field[80];
        if (rc || snprintf(field, sizeof field, "slot:%s", name) >= (int)sizeof field)
            continue; /* a slot whose name is no register name stays this device's own */
        rc = set_shared(shared, host, field, v, err);
    }
    json_object_foreach (json_object_get(body, "processed_counter_by_host"), name, v)
        if (!rc && json_is_integer(v))
            rc = vg_sync_state_count(shared, name, json_integer_value(v), err);
    return rc;
}

/* The clock of an in-place record after a local write numbered seq: the host's entry moves to
 * seq, the rank is the clock's sum, the dot (host, seq). */
static vigil_code stamp_clock(json_t *side, const char *host, int64_t seq, vigil_error *err)
{
    json_t *clock = json_object_get(side, "clock");
    if (!clock && (!(clock = json_object()) || json_object_set_new(side, "clock", clock)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory stamping a sync clock");
    if (json_object_set_new(clock, host, json_integer(seq)) ||
        json_object_set_new(side, "rank", json_integer(vg_sync_clock_sum(clock))) ||
        json_object_set_new(side, "dot", json_pack("[s, I]", host, (json_int_t)seq)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory stamping a sync clock");
    return VIGIL_OK;
}

/* The clock of (r's kind, id) after the local write numbered seq; deleted: the write was the
 * record's deletion (r is then its tombstone's kind and id stand-in: no body is read). */
static vigil_code stamp(struct vg_sync_ctx *sy, const struct vg_record *r, int cls, int64_t seq,
                        int deleted, vigil_error *err)
{
    json_t *side = NULL, *body = NULL, *shared = NULL;
    int64_t rev = 0;
    vigil_code rc = vg_sync_sidecar_get(sy->env->store, r->kind, r->id, &side, &rev, err);
    if (rc)
        return rc;
    if (!side && !(side = json_object()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory stamping a sync clock");
    if (cls != VG_SYNC_STATE)
        rc = stamp_clock(side, sy->host, seq, err);
    /* A deletion is a version of the record like any write, ordered by the same clock: a later
     * write (made again) wins over it, a concurrent one is decided by (rank, host, seq). */
    if (!rc && (deleted ? json_object_set_new(side, "deleted", json_true())
                        : (json_object_del(side, "deleted"), 0)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory stamping a sync clock");
    if (!rc && cls != VG_SYNC_LAST) {
        if (!(body = json_loads(r->body, 0, NULL)) || !(shared = shared_of(side)))
            rc = VG_FAIL(err, body ? VIGIL_ENOMEM : VIGIL_ECORRUPT,
                         "could not read %s \"%s\" to stamp its shared state", r->kind, r->id);
        else if (cls == VG_SYNC_AGENT)
            rc = set_shared(shared, sy->host, "lifecycle", json_object_get(body, "lifecycle"), err);
        else
            rc = stamp_state(shared, sy->host, body, err);
    }
    if (!rc)
        rc = vg_sync_sidecar_put(sy->env->store, r->kind, r->id, r->owner, side, rev, err);
    json_decref(body);
    json_decref(side);
    return rc;
}

static int found_cb(void *user, const struct vg_record *r)
{
    (void)r;
    *(int *)user = 1;
    return 1;
}

vigil_code vg_sync_record_present(struct vg_store *s, const char *kind, const char *id,
                                  int *present, vigil_error *err)
{
    vigil_error miss = {0};
    *present = 0;
    vigil_code rc =
        vg_error_unless_missing(err, &miss, vg_store_get(s, kind, id, found_cb, present, &miss));
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

/* A tombstone written here names a record changed in place (a subscription, a timer, a source
 * reference) that is gone: its deletion gets a log entry of its own (seq) and a clock marked
 * deleted, so the offer sends the deletion as the record's version (exchange.c). A link's
 * tombstone names a link still there (soft deleted: its own write carried that). */
static vigil_code capture_deletion(struct vg_sync_ctx *sy, const struct vg_record *tomb,
                                   int64_t seq, vigil_error *err)
{
    const char *kind = tomb->k1, *id = tomb->k2;
    if (vg_sync_class_of(kind, id) != VG_SYNC_LAST || strlen(id) >= VG_RECORD_ID_MAX)
        return VIGIL_OK;
    int present = 0;
    vigil_code rc = vg_sync_record_present(sy->env->store, kind, id, &present, err);
    if (rc || present)
        return rc;
    struct vg_record gone = {.kind = kind, .id = id, .owner = tomb->owner};
    rc = vg_sync_entry_put(sy->env->store, sy->host, seq, kind, id, NULL, err);
    return rc ? rc : stamp(sy, &gone, VG_SYNC_LAST, seq, 1, err);
}

/* The store's write hook: a synced record written here gets its log entry and its clock. */
static vigil_code capture(void *user, const struct vg_record *r, int updated, vigil_error *err)
{
    struct vg_sync_ctx *sy = user;
    (void)updated;
    int cls = vg_sync_class_of(r->kind, r->id);
    if (cls == VG_SYNC_LOCAL || sy->applying)
        return VIGIL_OK;
    int64_t seq = 0;
    /* Two connections (PostgreSQL workers) must not take one number: the host's record is
     * locked until the transaction ends (SQLite's write transaction already holds the store). */
    vigil_code rc = vg_store_lock_for_write(sy->env->store, "sync_host", "self", err);
    if (!rc)
        rc = vg_sync_top_seq(sy->env->store, sy->host, &seq, err);
    if (!rc)
        rc = vg_sync_entry_put(sy->env->store, sy->host, seq + 1, r->kind, r->id, NULL, err);
    if (!rc && cls != VG_SYNC_IMMUTABLE)
        rc = stamp(sy, r, cls, seq + 1, 0, err);
    if (!rc && !strcmp(r->kind, "tombstone"))
        rc = capture_deletion(sy, r, seq + 2, err);
    return rc;
}

/* ---- join and attach ----------------------------------------------------------------------- */

struct host_ctx {
    char *host;
    int found;
};

static int host_cb(void *user, const struct vg_record *r)
{
    struct host_ctx *c = user;
    json_t *body = json_loads(r->body, 0, NULL);
    const char *h = json_string_value(json_object_get(body, "host"));
    if (h && strlen(h) < VG_SYNC_HOST_SIZE) {
        memcpy(c->host, h, strlen(h) + 1);
        c->found = 1;
    }
    json_decref(body);
    return 1;
}

static vigil_code read_host(struct vg_store *s, char host[VG_SYNC_HOST_SIZE], int *found,
                            vigil_error *err)
{
    struct host_ctx c = {host, 0};
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_store_get(s, "sync_host", "self", host_cb, &c, &miss));
    *found = c.found;
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

static void ctx_free(void *p)
{
    vg_free(p);
}

/* The write hook of a runtime whose store had not joined when it opened: once a transaction
 * that writes a synced record, whether the store has joined since (`vigil sync` in another
 * process, a sync route on another of a daemon's runtimes); from then on it captures as if it
 * had joined here. A store that never syncs pays one indexed read a transaction that writes an
 * agent-domain record. SQLite's write transactions take turns, so a join committed before this
 * one began is seen and one after it logs this one's writes in its snapshot. */
static vigil_code watch(void *user, const struct vg_record *r, int updated, vigil_error *err)
{
    struct vg_sync_ctx *sy = user;
    struct vg_store *s = sy->env->store;
    char host[VG_SYNC_HOST_SIZE];
    int found = 0;
    if (sy->checked_tx == vg_store_tx_serial(s) ||
        vg_sync_class_of(r->kind, r->id) == VG_SYNC_LOCAL)
        return VIGIL_OK;
    sy->checked_tx = vg_store_tx_serial(s);
    vigil_code rc = read_host(s, host, &found, err);
    if (rc || !found)
        return rc;
    memcpy(sy->host, host, strlen(host) + 1);
    vg_store_set_write_hook(s, capture, sy);
    return capture(sy, r, updated, err);
}

/* env->sync_host_of: the host id, looked for in the store while watching (a join made by
 * another process since), so that what a caller records under it is right in this transaction. */
static const char *host_of(void *user)
{
    struct vg_sync_ctx *sy = user;
    char host[VG_SYNC_HOST_SIZE];
    int found = 0;
    vigil_error ignored = {0};
    if (!sy->host[0] && !read_host(sy->env->store, host, &found, &ignored) && found) {
        memcpy(sy->host, host, strlen(host) + 1);
        vg_store_set_write_hook(sy->env->store, capture, sy);
    }
    return sy->host[0] ? sy->host : NULL;
}

/* env->sync, made when the runtime has none: watching. */
static struct vg_sync_ctx *ctx_of(struct vg_env *env, vigil_error *err)
{
    if (env->sync)
        return env->sync;
    struct vg_sync_ctx *sy = vg_calloc(1, sizeof *sy);
    if (!sy) {
        VG_FAIL(err, VIGIL_ENOMEM, "out of memory joining sync");
        return NULL;
    }
    sy->env = env;
    env->sync = sy;
    env->sync_free = ctx_free;
    env->sync_host_of = host_of;
    vg_store_set_write_hook(env->store, watch, sy);
    return sy;
}

static vigil_code install(struct vg_env *env, const char *host, vigil_error *err)
{
    struct vg_sync_ctx *sy = ctx_of(env, err);
    if (!sy)
        return VIGIL_ENOMEM;
    if (!sy->host[0]) {
        memcpy(sy->host, host, strlen(host) + 1);
        vg_store_set_write_hook(env->store, capture, sy);
    }
    return VIGIL_OK;
}

vigil_code vg_sync_attach(struct vg_env *env, vigil_error *err)
{
    char host[VG_SYNC_HOST_SIZE];
    int found = 0;
    vigil_code rc = read_host(env->store, host, &found, err);
    if (!rc)
        rc = found ? install(env, host, err) : (ctx_of(env, err) ? VIGIL_OK : VIGIL_ENOMEM);
    return rc;
}

const char *vg_sync_host(const struct vg_env *env)
{
    const struct vg_sync_ctx *sy = env->sync;
    return sy && sy->host[0] ? sy->host : NULL;
}

/* A timer made before the store joined is this device's: its record names it as its home
 * (src/wake/timer.c fires only the timers of its own device), written before it is logged. */
static vigil_code home_timer(struct vg_env *env, struct vg_record **r, vigil_error *err)
{
    struct vg_sync_ctx *sy = env->sync;
    json_t *body = json_loads((*r)->body, 0, NULL);
    vigil_code rc = VIGIL_OK;
    if (!body || json_object_get(body, "home")) {
        json_decref(body);
        return VIGIL_OK;
    }
    char *text =
        json_object_set_new(body, "home", json_string(sy->host)) ? NULL : vg_json_dump(body, 0);
    json_decref(body);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory joining sync");
    struct vg_record w = **r;
    w.body = text;
    sy->applying = 1; /* not logged here: the join logs it next */
    rc = vg_store_update(env->store, &w, (*r)->rev, err);
    sy->applying = 0;
    vg_free(text);
    vg_free(*r);
    *r = NULL;
    return rc ? rc : vg_store_get_copy(env->store, w.kind, w.id, r, err);
}

/* Log every record of kind the store holds, as written now (the join's snapshot). */
static vigil_code log_kind(struct vg_env *env, const char *kind, vigil_error *err)
{
    struct vg_id_list ids = {0};
    struct vg_query q = {.kind = kind};
    vigil_code rc = vg_store_scan_ids(env->store, &q, &ids, err);
    for (size_t i = 0; !rc && i < ids.n; i++) {
        struct vg_record *r = NULL;
        if ((rc = vg_store_get_copy(env->store, kind, ids.ids[i], &r, err)))
            break;
        if (!strcmp(kind, "timer"))
            rc = home_timer(env, &r, err);
        if (!rc)
            rc = capture(env->sync, r, 0, err);
        vg_free(r);
    }
    vg_id_list_release(&ids);
    return rc;
}

static vigil_code join_tx(struct vg_env *env, vigil_error *err)
{
    static const char *const kinds[] = {
        "agent",     "agent_state", "message_payload", "message", "report",    "link",
        "tombstone", "operation",   "subscription",    "timer",   "source_ref"};
    char host[VG_SYNC_HOST_SIZE], uuid[37];
    int found = 0;
    vigil_code rc = read_host(env->store, host, &found, err);
    if (rc || found)
        return rc ? rc : install(env, host, err);
    /* A UUID's random hex, 16 digits (64 bits: the version and variant nibbles are left out):
     * plenty to tell one person's devices apart, and written in every log entry twice. */
    size_t n = 0;
    vg_ids_new(env->ids, uuid);
    for (size_t i = 15; uuid[i] && n < VG_SYNC_HOST_DIGITS; i++)
        if (uuid[i] != '-' && i != 19)
            host[n++] = uuid[i];
    host[n] = '\0';
    struct vg_buf body;
    vg_buf_init(&body, 0);
    vg_buf_puts(&body, "{\"host\":");
    vg_json_put_string(&body, host);
    vg_buf_putc(&body, '}');
    if (!(rc = vg_buf_finish(&body, err))) {
        struct vg_record r = {.kind = "sync_host", .id = "self", .body = body.data};
        rc = vg_store_put(env->store, &r, 0, NULL, err);
    }
    vg_buf_release(&body);
    if (!rc)
        rc = install(env, host, err);
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(kinds); i++)
        rc = log_kind(env, kinds[i], err);
    return rc;
}

vigil_code vg_sync_join(struct vg_env *env, vigil_error *err)
{
    int had = vg_sync_host(env) != NULL;
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    rc = vg_store_end(env->store, join_tx(env, err), err);
    if (rc && !had && env->sync) { /* the join rolled back: the store does not sync */
        struct vg_sync_ctx *sy = env->sync;
        sy->host[0] = '\0';
        sy->checked_tx = 0;
        vg_store_set_write_hook(env->store, watch, sy);
    }
    return rc;
}
