/*
 * exchange.c: what one store sends another and how the other takes it in (docs/internals/SYNC.md,
 * "The exchange"): the receiver's hello (its marks, tops and holes per host), the sender's offer
 * (the log entries the receiver lacks and each record they name, once, its body read from the
 * store now), the apply (checked as outside input, merged, idempotent) and the confirmation.
 *
 * Sections: reading JSON; hello; offer; checking an offer; merging records; apply. The legs over
 * a transport, both ways, are transport.c's.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/json.h"
#include "sync/state.h"
#include "sync/sync_int.h"

#include <jansson.h>

/* At most this many holes of a host are asked for in one hello; the rest in a later one. */
#define HOLES_ASKED_MAX 1000

/* ---- reading JSON -------------------------------------------------------------------------- */

static int64_t jint(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static struct vg_sync_ctx *joined(struct vg_env *env, vigil_error *err)
{
    if (!vg_sync_host(env)) {
        VG_FAIL(err, VIGIL_ESTATE, "this store has not joined sync: run `vigil sync` on it first");
        return NULL;
    }
    return env->sync;
}

/* ---- hello --------------------------------------------------------------------------------- */

struct holes_ctx {
    json_t *holes;
    int64_t next; /* the next SEQ expected */
};

static int holes_cb(void *user, const struct vg_record *r)
{
    struct holes_ctx *c = user;
    for (; c->next < r->seq && json_array_size(c->holes) < HOLES_ASKED_MAX; c->next++)
        json_array_append_new(c->holes, json_integer(c->next));
    c->next = r->seq + 1;
    return json_array_size(c->holes) >= HOLES_ASKED_MAX;
}

/* The SEQs of host missing between mark and top, into a new array. */
static vigil_code missing(struct vg_store *s, const char *host, int64_t mark, int64_t top,
                          json_t **out, vigil_error *err)
{
    struct holes_ctx c = {json_array(), mark + 1};
    struct vg_query q = {.kind = "sync_log",
                         .k1 = host,
                         .has_seq_min = 1,
                         .seq_min = mark + 1,
                         .has_seq_max = 1,
                         .seq_max = top};
    if (!c.holes)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing sync holes");
    vigil_code rc = vg_store_scan(s, &q, holes_cb, &c, err);
    holes_cb(&c, &(struct vg_record){.seq = top + 1});
    *out = c.holes;
    if (rc) {
        json_decref(c.holes);
        *out = NULL;
    }
    return rc;
}

static int entry_id_cb(void *user, const struct vg_record *r)
{
    snprintf(user, VG_RECORD_ID_MAX, "%s", r->id);
    return 1;
}

/* The id of host's log entry SEQ in s, into out ("" when s holds none). */
static vigil_code entry_at(struct vg_store *s, const char *host, int64_t seq,
                           char out[VG_RECORD_ID_MAX], vigil_error *err)
{
    struct vg_query q = {.kind = "sync_log",
                         .k1 = host,
                         .has_seq_min = 1,
                         .seq_min = seq,
                         .has_seq_max = 1,
                         .seq_max = seq,
                         .limit = 1};
    out[0] = '\0';
    return vg_store_scan(s, &q, entry_id_cb, out, err);
}

struct marks_ctx {
    json_t *marks; /* host -> {"mark", "top"} */
};

static int marks_cb(void *user, const struct vg_record *r)
{
    json_t *body = json_loads(r->body, 0, NULL);
    if (body)
        json_object_set_new(((struct marks_ctx *)user)->marks, r->id, body);
    return 0;
}

/* Every host this store holds entries of but its own: {"HOST": {"mark", "top"}} (owned). */
static vigil_code read_marks(struct vg_store *s, json_t **out, vigil_error *err)
{
    struct marks_ctx c = {json_object()};
    struct vg_query q = {.kind = "sync_mark"};
    if (!c.marks)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading sync marks");
    vigil_code rc = vg_store_scan(s, &q, marks_cb, &c, err);
    if (rc)
        json_decref(c.marks);
    *out = rc ? NULL : c.marks;
    return rc;
}

vigil_code vg_sync_hello(struct vg_env *env, json_t **out, vigil_error *err)
{
    struct vg_sync_ctx *sy = joined(env, err);
    json_t *stored = NULL, *m, *holes = NULL;
    const char *host;
    int64_t own = 0;
    if (!sy)
        return VIGIL_ESTATE;
    vigil_code rc = vg_sync_top_seq(env->store, sy->host, &own, err);
    if (!rc)
        rc = read_marks(env->store, &stored, err);
    if (rc)
        return rc;
    json_t *hello =
        json_pack("{s:i, s:s, s:{s:I}, s:{s:I}, s:{}, s:{}}", "v", 1, "host", sy->host, "marks",
                  sy->host, (json_int_t)own, "tops", sy->host, (json_int_t)own, "holes", "lasts");
    if (!hello)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory saying hello");
    json_object_foreach (stored, host, m) {
        int64_t mark = jint(m, "mark"), top = jint(m, "top");
        char last[VG_RECORD_ID_MAX] = "";
        if (rc || (mark > 0 && (rc = entry_at(env->store, host, mark, last, err))))
            break;
        json_object_set_new(json_object_get(hello, "marks"), host, json_integer(mark));
        json_object_set_new(json_object_get(hello, "tops"), host, json_integer(top));
        if (last[0])
            json_object_set_new(json_object_get(hello, "lasts"), host, json_string(last));
        if (top > mark && !(rc = missing(env->store, host, mark, top, &holes, err)))
            json_object_set_new(json_object_get(hello, "holes"), host, holes);
    }
    json_decref(stored);
    if (rc)
        json_decref(hello);
    else
        *out = hello;
    return rc;
}

/* ---- offer --------------------------------------------------------------------------------- */

struct offer_ctx {
    struct vg_store *store;
    json_t *entries, *records, *seen; /* seen: "kind/id" of the records taken */
    const json_t *holes;              /* the receiver's holes of this host */
    int64_t top;                      /* the receiver's top of this host */
    const char *host;
    json_t *wanted;    /* [kind, id] of the entries' records, read after the scan */
    int64_t max_bytes; /* the hello's bound on the records' bytes (0: none) */
    int64_t bytes;     /* the records' bytes taken so far */
    int more;          /* stopped at the bound: entries are left for the next offer */
};

static int asked(const json_t *holes, int64_t seq)
{
    size_t i;
    json_t *h;
    json_array_foreach (holes, i, h)
        if (json_integer_value(h) == seq)
            return 1;
    return 0;
}

static int entry_cb(void *user, const struct vg_record *r)
{
    struct offer_ctx *c = user;
    if (r->seq <= c->top && !asked(c->holes, r->seq))
        return 0; /* the receiver holds it */
    /* The record's id leads the entry's, up to its last '@' (vg_sync_entry_id); one too long
     * for that is in the body. The kind is the row's k2. */
    json_t *body = r->id[0] == '@' ? json_loads(r->body, 0, NULL) : NULL;
    const char *at = strrchr(r->id, '@');
    char id[VG_RECORD_ID_MAX];
    snprintf(id, sizeof id, "%.*s", at ? (int)(at - r->id) : 0, r->id);
    if (jstr(body, "id"))
        snprintf(id, sizeof id, "%s", jstr(body, "id"));
    if (*id) {
        json_array_append_new(c->entries,
                              json_pack("[s, I, s, s]", c->host, (json_int_t)r->seq, r->k2, id));
        json_array_append_new(c->wanted, json_pack("[s, s]", r->k2, id));
    }
    json_decref(body);
    return 0;
}

/* A record changed in place that was deleted here: its clock says so (capture.c), and the offer
 * carries the deletion as its version, {kind, id, "deleted": true, sync} with an empty body. One
 * removed without a deletion (retention) has none: its entry goes alone. */
static vigil_code offer_deletion(struct offer_ctx *c, const char *kind, const char *id,
                                 const char *key, vigil_error *err)
{
    json_t *side = NULL;
    int64_t rev = 0;
    if (vg_sync_class_of(kind, id) != VG_SYNC_LAST)
        return VIGIL_OK;
    vigil_code rc = vg_sync_sidecar_get(c->store, kind, id, &side, &rev, err);
    if (!rc && json_is_true(json_object_get(side, "deleted"))) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:b, s:O}", "kind", kind,
                              "id", id, "owner", "", "k1", "", "k2", "", "seq", 0, "at", 0, "body",
                              "{}", "deleted", 1, "sync", side);
        c->bytes += 200;
        if (!o || json_array_append_new(c->records, o) ||
            json_object_set_new(c->seen, key, json_true()))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory making a sync offer");
    }
    json_decref(side);
    return rc;
}

/* The record (kind, id) as an offer carries it, into c->records unless already there. */
static vigil_code offer_record(struct offer_ctx *c, const char *kind, const char *id,
                               vigil_error *err)
{
    char key[2 * VG_RECORD_ID_MAX];
    struct vg_record *r = NULL;
    json_t *side = NULL;
    int64_t rev = 0;
    vigil_error miss = {0};
    snprintf(key, sizeof key, "%s/%s", kind, id);
    if (json_object_get(c->seen, key))
        return VIGIL_OK;
    vigil_code rc =
        vg_error_unless_missing(err, &miss, vg_store_get_copy(c->store, kind, id, &r, &miss));
    if (rc == VIGIL_ENOTFOUND) /* deleted here (its last version), or removed by retention */
        return offer_deletion(c, kind, id, key, err);
    if (!rc && vg_sync_class_of(kind, id) != VG_SYNC_IMMUTABLE)
        rc = vg_sync_sidecar_get(c->store, kind, id, &side, &rev, err);
    if (!rc) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "kind", kind, "id", id,
                              "owner", r->owner, "k1", r->k1, "k2", r->k2, "seq",
                              (json_int_t)r->seq, "at", (json_int_t)r->at, "body", r->body);
        c->bytes += (int64_t)strlen(r->body) + 200; /* the body and about what frames it */
        if (!o || (side && json_object_set(o, "sync", side)) ||
            json_array_append_new(c->records, o) || json_object_set_new(c->seen, key, json_true()))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory making a sync offer");
    }
    json_decref(side);
    vg_free(r);
    return rc;
}

/* The entries of host the receiver lacks, and their records. */
static vigil_code offer_host(struct offer_ctx *c, const char *host, const json_t *hello,
                             vigil_error *err)
{
    struct vg_query q = {.kind = "sync_log", .k1 = host, .has_seq_min = 1};
    q.seq_min = jint(json_object_get(hello, "marks"), host) + 1;
    c->host = host;
    c->top = jint(json_object_get(hello, "tops"), host);
    c->holes = json_object_get(json_object_get(hello, "holes"), host);
    json_array_clear(c->wanted);
    size_t base = json_array_size(c->entries); /* wanted[i] is the record of entries[base + i] */
    vigil_code rc = vg_store_scan(c->store, &q, entry_cb, c, err);
    size_t i;
    json_t *w;
    json_array_foreach (c->wanted, i, w) {
        if (rc)
            break;
        if (c->max_bytes > 0 && c->bytes >= c->max_bytes) {
            /* The bound: the entries from here on (a SEQ-ordered tail) wait for the next offer,
             * so the receiver holds a prefix and its mark moves over it without a hole. */
            while (json_array_size(c->entries) > base + i)
                json_array_remove(c->entries, json_array_size(c->entries) - 1);
            c->more = 1;
            break;
        }
        rc = offer_record(c, json_string_value(json_array_get(w, 0)),
                          json_string_value(json_array_get(w, 1)), err);
    }
    return rc;
}

/* A store restored from a backup (or an older copy of itself) has the host id of the store it
 * was: the entries it writes from then on take SEQs its peers already hold from the lost store,
 * under other records, and would never reach them (trial K1). The peer's hello says how far it
 * holds this host's log (its mark) and which entry is there (lasts); this store must hold the
 * same entry at that SEQ. */
static vigil_code check_not_behind(struct vg_store *s, const char *host, const json_t *hello,
                                   vigil_error *err)
{
    int64_t mark = jint(json_object_get(hello, "marks"), host), top = 0;
    const char *last = jstr(json_object_get(hello, "lasts"), host);
    char mine[VG_RECORD_ID_MAX] = "";
    const char *peer = jstr(hello, "host");
    if (peer && !strcmp(peer, host))
        return VIGIL_OK; /* a copy and its original: vg_sync_apply refuses them */
    vigil_code rc = mark > 0 ? vg_sync_top_seq(s, host, &top, err) : VIGIL_OK;
    if (!rc && mark > 0 && mark <= top && last)
        rc = entry_at(s, host, mark, mine, err);
    if (rc || mark <= 0 || (mark <= top && (!last || !strcmp(last, mine))))
        return rc;
    return VG_FAIL(err, VIGIL_ECONFLICT,
                   "the other store holds this store's log (host %s) up to entry %lld, which "
                   "this store %s: this store is an older copy of itself (restored from a "
                   "backup?), and what it writes would never reach the other; make a new store "
                   "with `vigil init` and sync it with the other (docs/sync.md)",
                   host, (long long)mark, mark > top ? "does not hold" : "holds otherwise");
}

vigil_code vg_sync_offer(struct vg_env *env, const json_t *hello, json_t **out, vigil_error *err)
{
    struct vg_sync_ctx *sy = joined(env, err);
    json_t *stored = NULL, *m;
    const char *host;
    if (!sy)
        return VIGIL_ESTATE;
    if (!json_is_object(json_object_get(hello, "marks")) ||
        !json_is_object(json_object_get(hello, "tops")))
        return VG_FAIL(err, VIGIL_EINVAL, "a sync hello needs marks and tops");
    struct offer_ctx c = {.store = env->store,
                          .entries = json_array(),
                          .records = json_array(),
                          .seen = json_object(),
                          .wanted = json_array(),
                          .max_bytes = jint(hello, "max_bytes")};
    vigil_code rc = c.entries && c.records && c.seen && c.wanted
                        ? VIGIL_OK
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory making a sync offer");
    if (!rc)
        rc = vg_store_begin(env->store, err); /* one snapshot for the whole offer */
    if (!rc) {
        rc = check_not_behind(env->store, sy->host, hello, err);
        if (!rc)
            rc = offer_host(&c, sy->host, hello, err);
        if (!rc)
            rc = read_marks(env->store, &stored, err);
        json_object_foreach (stored, host, m)
            if (!rc && !c.more)
                rc = offer_host(&c, host, hello, err);
        rc = vg_store_end(env->store, rc, err);
    }
    json_decref(stored);
    json_decref(c.seen);
    json_decref(c.wanted);
    if (!rc && !(*out = json_pack("{s:i, s:s, s:o, s:o, s:b}", "v", 1, "from", sy->host, "entries",
                                  c.entries, "records", c.records, "more", c.more)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory making a sync offer");
    else if (rc) {
        json_decref(c.entries);
        json_decref(c.records);
    }
    return rc;
}

/* ---- checking an offer --------------------------------------------------------------------- */

static int host_ok(const char *h)
{
    size_t n = h ? strlen(h) : 0;
    for (size_t i = 0; i < n; i++)
        if (h[i] < 0x21 || h[i] > 0x7e)
            return 0;
    return n >= 1 && n < 65;
}

static int id_ok(const char *s)
{
    return s && *s && strlen(s) < VG_RECORD_ID_MAX;
}

static vigil_code check_entry(const json_t *e, vigil_error *err)
{
    const json_t *n = json_array_get(e, 1);
    if (json_array_size(e) != 4 || !host_ok(json_string_value(json_array_get(e, 0))) ||
        !json_is_integer(n) || json_integer_value(n) < 1 ||
        !id_ok(json_string_value(json_array_get(e, 2))) ||
        !id_ok(json_string_value(json_array_get(e, 3))))
        return VG_FAIL(err, VIGIL_EINVAL, "a sync entry is [host, seq >= 1, kind, id]");
    return VIGIL_OK;
}

/* A clock (host -> counter from 1), or marks (from 0: min). */
static int counters_ok(const json_t *clock, int64_t min)
{
    const char *h;
    const json_t *n;
    if (!json_is_object(clock))
        return 0;
    json_object_foreach ((json_t *)clock, h, n)
        if (!host_ok(h) || !json_is_integer(n) || json_integer_value(n) < min)
            return 0;
    return 1;
}

static int clock_ok(const json_t *clock)
{
    return counters_ok(clock, 1);
}

static vigil_code check_sync(int cls, const json_t *sync, const char *id, vigil_error *err)
{
    const json_t *dot = json_object_get(sync, "dot");
    if (cls == VG_SYNC_IMMUTABLE)
        return VIGIL_OK;
    if (cls != VG_SYNC_STATE &&
        (!clock_ok(json_object_get(sync, "clock")) ||
         !json_is_integer(json_object_get(sync, "rank")) || json_array_size(dot) != 2 ||
         !host_ok(json_string_value(json_array_get(dot, 0))) ||
         !json_is_integer(json_array_get(dot, 1))))
        return VG_FAIL(err, VIGIL_EINVAL, "the sync clock of \"%s\" is not {clock, rank, dot}", id);
    if (cls != VG_SYNC_LAST)
        return vg_sync_state_check(json_object_get(sync, "shared"), err);
    return VIGIL_OK;
}

static vigil_code check_record(const json_t *r, vigil_error *err)
{
    const char *kind = jstr(r, "kind"), *id = jstr(r, "id"), *body = jstr(r, "body");
    json_t *parsed;
    if (!id_ok(kind) || !id_ok(id) || !jstr(r, "owner") || !jstr(r, "k1") || !jstr(r, "k2") ||
        !json_is_integer(json_object_get(r, "seq")) || !json_is_integer(json_object_get(r, "at")) ||
        !body)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "a sync record needs kind, id, owner, k1, k2, seq, at and body");
    int cls = vg_sync_class_of(kind, id);
    if (cls == VG_SYNC_LOCAL)
        return VG_FAIL(err, VIGIL_EINVAL, "records of kind \"%s\" (\"%s\") do not sync", kind, id);
    if (!(parsed = json_loads(body, 0, NULL)) || !json_is_object(parsed)) {
        json_decref(parsed);
        return VG_FAIL(err, VIGIL_EINVAL, "the body of %s \"%s\" is not a JSON object", kind, id);
    }
    json_decref(parsed);
    if (cls != VG_SYNC_IMMUTABLE && !json_is_object(json_object_get(r, "sync")))
        return VG_FAIL(err, VIGIL_EINVAL, "%s \"%s\" comes without its sync clock", kind, id);
    if (json_object_get(r, "deleted") &&
        (cls != VG_SYNC_LAST || !json_is_true(json_object_get(r, "deleted"))))
        return VG_FAIL(err, VIGIL_EINVAL, "%s \"%s\" cannot come as a deletion", kind, id);
    return check_sync(cls, json_object_get(r, "sync"), id, err);
}

static vigil_code check_offer(const json_t *o, vigil_error *err)
{
    const json_t *entries = json_object_get(o, "entries"), *records = json_object_get(o, "records");
    size_t i;
    json_t *x;
    vigil_code rc = VIGIL_OK;
    if (jint(o, "v") != 1 || !host_ok(jstr(o, "from")) || !json_is_array(entries) ||
        !json_is_array(records))
        return VG_FAIL(err, VIGIL_EINVAL, "a sync offer is {v: 1, from, entries, records}");
    json_array_foreach (entries, i, x)
        if (!rc)
            rc = check_entry(x, err);
    json_array_foreach (records, i, x)
        if (!rc)
            rc = check_record(x, err);
    return rc;
}

/* ---- merging records ----------------------------------------------------------------------- */

/* The record an offer carries, as the store takes it (strings borrowed from o). */
static struct vg_record record_of(const json_t *o)
{
    return (struct vg_record){.kind = jstr(o, "kind"),
                              .id = jstr(o, "id"),
                              .owner = jstr(o, "owner"),
                              .k1 = jstr(o, "k1"),
                              .k2 = jstr(o, "k2"),
                              .seq = jint(o, "seq"),
                              .at = jint(o, "at"),
                              .body = jstr(o, "body")};
}

/* Whether the incoming version (its sidecar `in`) wins over the local one (`mine`, NULL: a
 * record this store holds without a clock): a dominating clock wins; between concurrent ones
 * the higher (rank, host, seq) of their last writes, the same on every device. */
static int incoming_wins(const json_t *in, const json_t *mine)
{
    if (!mine)
        return 1;
    switch (vg_sync_clock_compare(json_object_get(in, "clock"), json_object_get(mine, "clock"))) {
    case VG_CLOCK_AFTER:
        return 1;
    case VG_CLOCK_BEFORE:
    case VG_CLOCK_EQUAL:
        return 0;
    default:
        break;
    }
    int64_t a = jint(in, "rank"), b = jint(mine, "rank");
    if (a != b)
        return a > b;
    const json_t *da = json_object_get(in, "dot"), *db = json_object_get(mine, "dot");
    int h =
        strcmp(json_string_value(json_array_get(da, 0)), json_string_value(json_array_get(db, 0)));
    if (h)
        return h > 0;
    return json_integer_value(json_array_get(da, 1)) > json_integer_value(json_array_get(db, 1));
}

/* The sidecar after the merge: the clocks joined, the winner's rank and dot, the shared forms
 * merged (new reference). */
static vigil_code merged_sidecar(const json_t *in, const json_t *mine, int take, json_t **out,
                                 vigil_error *err)
{
    json_t *side = json_deep_copy(take || !mine ? in : mine),
           *clock = json_object_get(side, "clock");
    const json_t *other = take || !mine ? mine : in;
    const char *h;
    json_t *n;
    vigil_code rc = side ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging clocks");
    json_object_foreach (json_object_get(other, "clock"), h, n)
        if (!rc && clock && jint(clock, h) < json_integer_value(n))
            json_object_set_new(clock, h, json_integer(json_integer_value(n)));
    json_t *shared = json_object_get(side, "shared");
    if (!rc && shared && json_object_get(other, "shared"))
        rc = vg_sync_state_merge(shared, json_object_get(other, "shared"), err);
    if (rc)
        json_decref(side);
    else
        *out = side;
    return rc;
}

/* The local state body with the merged shared fields written into it (the rest stays this
 * device's own). */
static vigil_code state_body(json_t *body, const json_t *shared, vigil_error *err)
{
    const json_t *v;
    const char *field;
    json_t *w, *slots = json_object_get(body, "slots");
    int bad = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(vg_sync_state_scalars); i++)
        if ((v = vg_sync_state_value(shared, vg_sync_state_scalars[i])))
            bad |= json_object_set(body, vg_sync_state_scalars[i], (json_t *)v);
    if (!json_is_object(slots))
        bad |= json_object_set_new(body, "slots", slots = json_object());
    json_object_foreach (json_object_get(shared, "fields"), field, w)
        if (!strncmp(field, "slot:", 5) && (v = vg_sync_state_value(shared, field)))
            bad |= json_object_set(slots, field + 5, (json_t *)v);
    bad |= json_object_set(body, "processed_counter_by_host",
                           json_object_get(shared, "processed_counter_by_host"));
    return bad ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging a state") : VIGIL_OK;
}

/* The body this store keeps for an in-place record: the winner's, with the merged lifecycle (an
 * agent) or the merged shared fields (a state). *out owned. */
static vigil_code merged_body(int cls, const char *winner, const char *local, const json_t *side,
                              json_t **out, vigil_error *err)
{
    json_t *body = json_loads(cls == VG_SYNC_STATE ? local : winner, 0, NULL);
    vigil_code rc = VIGIL_OK;
    const json_t *shared = json_object_get(side, "shared");
    if (!body)
        return VG_FAIL(err, VIGIL_ECORRUPT, "a record's body is not JSON");
    const json_t *lc = vg_sync_state_value(shared, "lifecycle");
    if (cls == VG_SYNC_AGENT && lc && json_object_set(body, "lifecycle", (json_t *)lc))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging an agent");
    if (cls == VG_SYNC_STATE)
        rc = state_body(body, shared, err);
    if (rc)
        json_decref(body);
    else
        *out = body;
    return rc;
}

/* A timer's k1 on this device: "away" when another device is its home (only its home fires it,
 * src/wake/timer.c), else what its body says: set aside, done or on. */
static const char *timer_k1(const json_t *body, const char *host)
{
    const char *home = jstr(body, "home");
    if (home && strcmp(home, host))
        return "away";
    if (jstr(body, "error"))
        return "error";
    return json_is_true(json_object_get(body, "done")) ? "done" : "on";
}

/* The k1 this store keeps for a record of kind whose body is body: an agent's is its lifecycle,
 * a timer's says whether it fires here; the others' are the winner's. */
static const char *local_k1(const char *kind, const json_t *body, const char *winner_k1,
                            const char *host)
{
    const char *lc = jstr(body, "lifecycle");
    if (!strcmp(kind, "agent") && lc)
        return lc;
    return !strcmp(kind, "timer") ? timer_k1(body, host) : winner_k1;
}

/* Write the merged version over the local one when it differs. */
static vigil_code write_merged(struct vg_env *env, const struct vg_record *local,
                               const struct vg_record *winner, json_t *body, int *changed,
                               vigil_error *err)
{
    json_t *old = json_loads(local->body, 0, NULL);
    const char *k1 = local_k1(local->kind, body, winner->k1, vg_sync_host(env));
    int same = old && json_equal(old, body);
    json_decref(old);
    if (same && !strcmp(local->k1, k1) && !strcmp(local->k2, winner->k2) &&
        local->seq == winner->seq)
        return VIGIL_OK;
    if (!strcmp(local->kind, "agent_state") &&
        json_object_set_new(body, "revision", json_integer(local->rev + 1)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging a state");
    char *text = vg_json_dump(body, 0);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory merging a record");
    struct vg_record r = *winner;
    r.owner = local->owner;
    r.body = text;
    r.k1 = k1;
    vigil_code rc = vg_store_update(env->store, &r, local->rev, err);
    if (!rc)
        rc = vg_spine_adopt_change(env, &r, err);
    vg_free(text);
    *changed = 1;
    return rc;
}

/* A record new here (or made again after its deletion here) taken as it comes, but for the k1
 * this store keeps (local_k1). */
static vigil_code put_new(struct vg_env *env, const struct vg_record *in, vigil_error *err)
{
    json_t *body = json_loads(in->body, 0, NULL);
    struct vg_record r = *in;
    int added = 0;
    if (!body)
        return VG_FAIL(err, VIGIL_ECORRUPT, "a record's body is not JSON");
    r.k1 = local_k1(in->kind, body, in->k1, vg_sync_host(env));
    vigil_code rc = vg_store_put(env->store, &r, VG_PUT_IF_ABSENT, &added, err);
    if (!rc && added)
        rc = vg_spine_adopt(env, &r, err);
    json_decref(body);
    return rc;
}

/* The version this store keeps of an in-place record it holds (local) or held (NULL: deleted
 * here, or never here while mine, its clock, is NULL too), given the winner (take: the incoming
 * one). An incoming deletion that wins removes the record. */
static vigil_code keep_version(struct vg_env *env, const json_t *o, int cls, int take,
                               const struct vg_record *local, const json_t *side, int *changed,
                               vigil_error *err)
{
    struct vg_record in = record_of(o);
    json_t *body = NULL;
    vigil_code rc = VIGIL_OK;
    if (take && json_is_true(json_object_get(o, "deleted"))) {
        if (local && !(rc = vg_store_remove(env->store, in.kind, in.id, err)))
            rc = vg_spine_adopt_removal(env, in.kind, in.id, err);
        *changed |= local != NULL;
        return rc;
    }
    if (!local) {
        if (take)
            *changed = 1;
        return take ? put_new(env, &in, err) : VIGIL_OK; /* else: stays deleted here */
    }
    if (vg_sync_derived(in.kind, in.id))
        return VIGIL_OK; /* its value is this store's derivation: only its clock is merged */
    rc = merged_body(cls, take ? in.body : local->body, local->body, side, &body, err);
    if (!rc)
        rc = write_merged(env, local, take ? &in : local, body, changed, err);
    json_decref(body);
    return rc;
}

/* An in-place record: merged by its clock with the local version. */
static vigil_code merge_in_place(struct vg_env *env, const json_t *o, int cls, int *changed,
                                 vigil_error *err)
{
    struct vg_record in = record_of(o), *local = NULL;
    json_t *mine = NULL, *side = NULL;
    const json_t *theirs = json_object_get(o, "sync");
    int64_t side_rev = 0;
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_store_get_copy(env->store, in.kind, in.id, &local, &miss));
    if (rc == VIGIL_ENOTFOUND)
        rc = VIGIL_OK;
    if (!rc)
        rc = vg_sync_sidecar_get(env->store, in.kind, in.id, &mine, &side_rev, err);
    int take = (cls != VG_SYNC_STATE || !local) && incoming_wins(theirs, mine);
    if (!rc)
        rc = merged_sidecar(theirs, mine, take, &side, err);
    if (!rc)
        rc = keep_version(env, o, cls, take, local, side, changed, err);
    if (!rc && (!mine || !json_equal(mine, side))) {
        rc = vg_sync_sidecar_put(env->store, in.kind, in.id, local ? local->owner : in.owner, side,
                                 side_rev, err);
        *changed = 1;
    }
    json_decref(side);
    json_decref(mine);
    vg_free(local);
    return rc;
}

static vigil_code merge_record(struct vg_env *env, const json_t *o, int *changed, vigil_error *err)
{
    struct vg_record in = record_of(o);
    int cls = vg_sync_class_of(in.kind, in.id);
    if (cls != VG_SYNC_IMMUTABLE)
        return merge_in_place(env, o, cls, changed, err);
    int added = 0;
    vigil_code rc = vg_store_put(env->store, &in, VG_PUT_IF_ABSENT, &added, err);
    if (!rc && added) {
        *changed = 1;
        rc = vg_spine_adopt(env, &in, err);
    }
    return rc;
}

/* ---- apply --------------------------------------------------------------------------------- */

/* The kinds in the order an apply takes them: an agent before its state, a message's payload
 * before the message, records before the links between them. */
static const char *const apply_order[] = {
    "agent", "agent_state", "message_payload", "message", "report",    "tombstone",
    "link",  "operation",   "subscription",    "timer",   "source_ref"};

static int kind_rank(const char *kind)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(apply_order); i++)
        if (!strcmp(kind, apply_order[i]))
            return (int)i;
    return (int)VG_ARRAY_LEN(apply_order);
}

struct mark_ctx {
    int64_t present;
};

static int count_cb(void *user, const struct vg_record *r)
{
    (void)r;
    ((struct mark_ctx *)user)->present++;
    return 0;
}

/* Move host's mark over the entries now held without a hole after it, its top to the highest
 * entry seen; the holes left are added to *holes. */
static vigil_code advance_mark(struct vg_store *s, const char *host, int64_t seen, int64_t *holes,
                               vigil_error *err)
{
    struct vg_record *r = NULL;
    json_t *m = NULL;
    vigil_error miss = {0};
    vigil_code rc =
        vg_error_unless_missing(err, &miss, vg_store_get_copy(s, "sync_mark", host, &r, &miss));
    if (rc && rc != VIGIL_ENOTFOUND)
        return rc;
    m = r ? json_loads(r->body, 0, NULL) : NULL;
    int64_t mark = jint(m, "mark"), top = VG_MAX(jint(m, "top"), seen), rev = r ? r->rev : 0;
    json_decref(m);
    vg_free(r);
    struct mark_ctx c = {0};
    struct vg_query q = {.kind = "sync_log", .k1 = host, .has_seq_min = 1, .has_seq_max = 1};
    while (mark < top) { /* one entry a step, each an indexed read */
        q.seq_min = q.seq_max = mark + 1;
        c.present = 0;
        if ((rc = vg_store_scan(s, &q, count_cb, &c, err)) || !c.present)
            break;
        mark++;
    }
    q.seq_min = mark + 1;
    q.seq_max = top;
    c.present = 0;
    if (!rc && top > mark)
        rc = vg_store_scan(s, &q, count_cb, &c, err);
    *holes += top - mark - c.present;
    char text[96];
    snprintf(text, sizeof text, "{\"mark\":%lld,\"top\":%lld}", (long long)mark, (long long)top);
    struct vg_record w = {.kind = "sync_mark", .id = host, .body = text};
    if (!rc)
        rc = rev ? vg_store_update(s, &w, rev, err) : vg_store_put(s, &w, 0, NULL, err);
    return rc;
}

static vigil_code apply_entries(struct vg_sync_ctx *sy, const json_t *entries,
                                struct vg_sync_stats *st, vigil_error *err)
{
    json_t *seen = json_object(), *e, *n;
    size_t i;
    const char *host;
    vigil_code rc = seen ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying entries");
    json_array_foreach (entries, i, e) {
        const char *h = json_string_value(json_array_get(e, 0));
        int64_t seq = json_integer_value(json_array_get(e, 1));
        int added = 0;
        if (rc || !strcmp(h, sy->host))
            continue; /* this store's own entries come back from a peer that relays them */
        rc = vg_sync_entry_put(sy->env->store, h, seq, json_string_value(json_array_get(e, 2)),
                               json_string_value(json_array_get(e, 3)), &added, err);
        st->entries_new += added;
        if (jint(seen, h) < seq)
            json_object_set_new(seen, h, json_integer(seq));
    }
    json_object_foreach (seen, host, n)
        if (!rc)
            rc = advance_mark(sy->env->store, host, json_integer_value(n), &st->holes, err);
    json_decref(seen);
    return rc;
}

static vigil_code apply_tx(struct vg_sync_ctx *sy, const json_t *offer, struct vg_sync_stats *st,
                           vigil_error *err)
{
    const json_t *records = json_object_get(offer, "records");
    vigil_code rc = VIGIL_OK;
    size_t i;
    json_t *o;
    for (int k = 0; k <= (int)VG_ARRAY_LEN(apply_order) && !rc; k++) {
        json_array_foreach (records, i, o) {
            int changed = 0;
            if (rc || kind_rank(jstr(o, "kind")) != k)
                continue;
            rc = merge_record(sy->env, o, &changed, err);
            st->records_changed += changed;
        }
    }
    if (!rc)
        rc = apply_entries(sy, json_object_get(offer, "entries"), st, err);
    return rc;
}

vigil_code vg_sync_apply(struct vg_env *env, const json_t *offer, struct vg_sync_stats *stats,
                         vigil_error *err)
{
    struct vg_sync_ctx *sy = joined(env, err);
    struct vg_sync_stats scratch = {0}, st = {0};
    if (!sy)
        return VIGIL_ESTATE;
    vigil_code rc = check_offer(offer, err);
    if (rc)
        return rc;
    if (!strcmp(jstr(offer, "from"), sy->host))
        return VG_FAIL(err, VIGIL_ECONFLICT,
                       "the offer comes from this store's own host id %s: a copy of a store "
                       "cannot sync with its original",
                       sy->host);
    if ((rc = vg_store_begin(env->store, err)))
        return rc;
    sy->applying = 1;
    rc = vg_store_end(env->store, apply_tx(sy, offer, &st, err), err);
    sy->applying = 0;
    if (!rc) {
        struct vg_sync_stats *s = stats ? stats : &scratch;
        s->entries_new += st.entries_new;
        s->records_changed += st.records_changed;
        s->holes += st.holes;
    }
    return rc;
}

vigil_code vg_sync_confirm(struct vg_env *env, const json_t *hello, vigil_error *err)
{
    struct vg_sync_ctx *sy = joined(env, err);
    if (!sy)
        return VIGIL_ESTATE;
    const char *peer = jstr(hello, "host");
    if (!host_ok(peer) || !counters_ok(json_object_get(hello, "marks"), 0))
        return VG_FAIL(err, VIGIL_EINVAL, "a sync hello needs a host and its marks");
    char *text = vg_json_dump(json_object_get(hello, "marks"), 1);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory confirming a sync");
    struct vg_record r = {.kind = "sync_peer", .id = peer, .body = text};
    int added = 0;
    vigil_code rc = vg_store_put(env->store, &r, VG_PUT_IF_ABSENT, &added, err);
    if (!rc && !added) {
        struct vg_record *old = NULL;
        if (!(rc = vg_store_get_copy(env->store, "sync_peer", peer, &old, err)))
            rc = vg_store_update(env->store, &r, old->rev, err);
        vg_free(old);
    }
    vg_free(text);
    return rc;
}
