/*
 * store.c: the wrappers every module calls instead of the adapter methods. They validate
 * records, turn nested transactions into savepoints, run the end-of-transaction hook (which the
 * runtime uses to release notifications only after their data is durable) and hold the adapter
 * registry.
 *
 * Sections: registry and open; transactions; record operations; record copies.
 */
#include "base/common.h"

#include "store/body.h"
#include "store/store.h"
#include "store/store_int.h"

/* ---- registry and open --------------------------------------------------------------------- */

struct adapter_entry {
    const char *name;
    const struct vg_store_methods *methods;
    const size_t *size; /* bytes of the adapter's instance struct */
};

static const struct adapter_entry adapters[] = {
    {"sqlite", &vg_store_sqlite_methods, &vg_store_sqlite_instance_size},
    {"postgres", &vg_store_pg_methods, &vg_store_pg_instance_size},
};

const struct vg_store_methods *vg_store_adapter(const char *name)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(adapters); i++)
        if (strcmp(adapters[i].name, name) == 0)
            return adapters[i].methods;
    return NULL;
}

size_t vg_store_adapter_size(const char *name)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(adapters); i++)
        if (strcmp(adapters[i].name, name) == 0)
            return *adapters[i].size;
    return 0;
}

vigil_code vg_store_open(const char *uri, const struct vg_store_options *o, struct vg_store **out,
                         vigil_error *err)
{
    static const struct vg_store_options defaults;
    const char *name = "sqlite", *rest = uri;
    if (!uri || !*uri)
        return VG_FAIL(err, VIGIL_EINVAL, "no store path or uri given");
    if (strncmp(uri, "sqlite:", 7) == 0) {
        rest = uri + 7;
    } else if (strncmp(uri, "postgres://", 11) == 0 || strncmp(uri, "postgresql://", 13) == 0) {
        name = "postgres";
    }
    const struct vg_store_methods *m = vg_store_adapter(name);
    if (!m)
        return VG_FAIL(err, VIGIL_EUNSUPPORTED, "store adapter \"%s\" is not built in", name);
    struct vg_store *s = vg_calloc(1, vg_store_adapter_size(name));
    if (!s)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening store");
    s->methods = m;
    vigil_code rc = m->open(s, rest, o ? o : &defaults, err);
    if (rc != VIGIL_OK) {
        m->close(s);
        vg_free(s);
        return rc;
    }
    *out = s;
    return VIGIL_OK;
}

void vg_store_close(struct vg_store *s)
{
    if (!s)
        return;
    while (s->depth > 0)
        vg_store_rollback(s, NULL);
    if (s->round) /* commits that joined it are theirs: keep them */
        (void)vg_store_sync(s, NULL);
    vg_rows_forget(s);
    s->methods->close(s);
    vg_free(s);
}

void vg_store_set_write_hook(struct vg_store *s, vg_store_write_fn fn, void *user)
{
    s->write_hook = fn;
    s->write_hook_user = user;
}

void vg_store_set_tx_hook(struct vg_store *s, vg_store_tx_cb cb, void *user)
{
    s->on_tx_end = cb;
    s->on_tx_end_user = user;
}

int vg_store_tx_wrote(const struct vg_store *s)
{
    return s->wrote;
}

/* ---- transactions -------------------------------------------------------------------------- */

/*
 * s->failed: 0, or FAILED_WRITE after a failed write inside the open transaction (the caller
 * decides), or TX_DOOMED when a savepoint could not be rolled back, or a nested level of a flat
 * transaction (vg_store_begin_flat, which has no savepoints) rolled back: its writes would
 * otherwise stay in the outer transaction and commit with it, so the whole transaction is
 * rolled back at once, and every later write, savepoint and commit of it is refused until the
 * caller has ended every level.
 */
#define FAILED_WRITE 1
#define TX_DOOMED 2

static vigil_code check_doomed(struct vg_store *s, vigil_error *err)
{
    if (s->depth > 0 && s->failed == TX_DOOMED)
        return VG_FAIL(err, VIGIL_ESTATE,
                       "the transaction was rolled back after a savepoint could not be undone");
    return VIGIL_OK;
}

/* The adapter's level for the wrapper's depth d: one deeper while a round is open, whose
 * adapter transaction is the outermost level and each fiber's transaction a savepoint in it. */
static int level(const struct vg_store *s, int d)
{
    return d + s->round;
}

/* A transaction released into the open round, waiting for its end; lives on its waiting
 * fiber's stack. */
struct vg_round_waiter {
    int ended, committed;
    struct vg_round_waiter *next;
};

/* The open round ended: tell each of its waiters how. */
static void round_tell(struct vg_store *s, int committed)
{
    for (struct vg_round_waiter *w = s->round_waiters; w; w = w->next) {
        w->ended = 1;
        w->committed = committed;
    }
    s->round_waiters = NULL;
}

/* A waiter that stops waiting before its round ended (the wait failed) leaves the list. */
static void round_unwait(struct vg_store *s, struct vg_round_waiter *me)
{
    for (struct vg_round_waiter **p = &s->round_waiters; *p; p = &(*p)->next)
        if (*p == me) {
            *p = me->next;
            return;
        }
}

/* A round rolled back as a whole (a savepoint of it could not be undone): it ends now, and
 * every commit that joined it learns at the batch's run that it did not commit. */
static void lose_round(struct vg_store *s)
{
    s->methods->rollback(s, 0, NULL);
    round_tell(s, 0);
    s->round = s->round_members = s->round_durable = 0;
}

/* A round nobody waits on ends at once (rolled back: it holds nothing), releasing the write
 * lock; it is open only while a fiber's transaction is or a commit waits for its end. */
static void round_drop_if_empty(struct vg_store *s)
{
    if (s->round && s->depth == 0 && s->round_members == 0)
        lose_round(s);
}

static void doom(struct vg_store *s)
{
    /* In a round only this transaction's savepoint goes; it is gone then, and the levels left
     * end without telling the adapter (rollback below). */
    if (s->round && s->methods->rollback(s, 1, NULL) != VIGIL_OK)
        lose_round(s);
    else if (!s->round)
        s->methods->rollback(s, 0, NULL);
    s->failed = TX_DOOMED;
}

/* Switch the adapter's durability to what vg_store_durable_commits asked last, when an earlier
 * switch failed (or this is the switch). */
static vigil_code durability_settle(struct vg_store *s, vigil_error *err)
{
    if (!s->durability_unset || s->sync_wait)
        return VIGIL_OK;
    int durable = !s->group_commit;
    vigil_code rc = s->methods->control(s, VG_STORE_CTRL_DURABLE_COMMITS, &durable, err);
    if (rc == VIGIL_OK)
        s->durability_unset = 0;
    return rc;
}

static vigil_code begin(struct vg_store *s, int flat, vigil_error *err)
{
    /* From here vg_store_committed answers for this transaction, even when it cannot start:
     * a write outside a transaction under folded commits that failed to start its own would
     * otherwise read the previous transaction's "committed" and believe itself kept. */
    if (s->depth == 0)
        s->committed = 0;
    vigil_code rc = check_doomed(s, err);
    if (rc != VIGIL_OK)
        return rc;
    if (s->depth == 0 && (rc = durability_settle(s, err)) != VIGIL_OK)
        return rc;
    if (s->depth > 0 && s->flat) { /* a level of a flat transaction: nothing to tell SQL */
        s->depth++;
        return VIGIL_OK;
    }
    if (s->depth == 0 && s->fold && !s->round) {
        if ((rc = s->methods->begin(s, 0, err)) != VIGIL_OK)
            return rc;
        s->round = 1;
    }
    rc = s->methods->begin(s, level(s, s->depth), err);
    if (rc != VIGIL_OK) {
        round_drop_if_empty(s);
        return rc;
    }
    if (s->depth == 0) {
        s->failed = s->wrote = s->committed = s->lone_write = 0;
        s->flat = flat;
        s->tx_serial++;
    }
    s->depth++;
    return VIGIL_OK;
}

vigil_code vg_store_begin(struct vg_store *s, vigil_error *err)
{
    return begin(s, 0, err);
}

vigil_code vg_store_begin_flat(struct vg_store *s, vigil_error *err)
{
    return begin(s, 1, err);
}

vigil_code vg_store_flatten(struct vg_store *s, vigil_error *err)
{
    if (s->depth != 1)
        return VG_FAIL(err, VIGIL_ESTATE, "only a transaction at its outermost level turns flat");
    s->flat = 1;
    return VIGIL_OK;
}

/* Tell every owner with writes kept back what happened at a savepoint. */
static void pending_tell(struct vg_store *s, enum vg_store_pending phase)
{
    for (int i = 0; i < VG_STORE_PENDING_SLOTS; i++)
        if (s->pending[i])
            s->pending[i](s->pending_user[i], phase, NULL);
}

/* The owners of the ended transaction's kept-back writes, taken off the store first: what
 * they do when told (deliver notifications to a listener that begins a transaction of its own)
 * may register owners of the next transaction. */
struct owners {
    vg_store_pending_fn fn[VG_STORE_PENDING_SLOTS];
    void *user[VG_STORE_PENDING_SLOTS];
};

static void owners_take(struct vg_store *s, struct owners *o)
{
    for (int i = 0; i < VG_STORE_PENDING_SLOTS; i++) {
        o->fn[i] = s->pending[i];
        o->user[i] = s->pending_user[i];
        s->pending[i] = NULL;
    }
}

static void owners_tell(const struct owners *o, int committed)
{
    for (int i = 0; i < VG_STORE_PENDING_SLOTS; i++)
        if (o->fn[i])
            o->fn[i](o->user[i], committed ? VG_PENDING_DONE : VG_PENDING_ABORT, NULL);
}

static void tx_end_hook(struct vg_store *s, int committed)
{
    if (s->depth != 0)
        return;
    struct owners o;
    owners_take(s, &o);
    owners_tell(&o, committed);
    if (s->on_tx_end && !s->lone_write)
        s->on_tx_end(s->on_tx_end_user, committed);
}

/*
 * A fiber's transaction released into the open round: it commits when the round does, in the
 * shared sync's batch (vg_store_round_end), and only then do the owners of its kept-back
 * writes and the end-of-transaction hook hear how it ended. Other fibers' transactions use the
 * connection meanwhile, so what they need of this one is taken off the store first.
 */
static vigil_code join_round(struct vg_store *s, vigil_error *err)
{
    if (!s->wrote) { /* nothing to commit */
        s->committed = 1;
        tx_end_hook(s, 1);
        round_drop_if_empty(s);
        return VIGIL_OK;
    }
    struct owners o;
    owners_take(s, &o);
    int hook = !s->lone_write;
    struct vg_round_waiter me = {.next = s->round_waiters};
    s->round_waiters = &me;
    int durable = !s->group_commit;
    s->round_members++;
    s->round_durable |= durable;
    vigil_code rc = s->sync_wait(s->sync_wait_user, err);
    if (!me.ended)
        round_unwait(s, &me);
    /* The round has ended (the batch ran vg_store_round_end): did it commit? A sync that failed
     * after it concerns only the durable commits in it. */
    int committed = me.ended && me.committed;
    if (rc == VIGIL_OK && !committed)
        rc = VG_FAIL(err, VIGIL_ESTATE,
                     "the transaction was rolled back with the other transactions of its round, "
                     "one of which could not be undone");
    else if (committed && !durable)
        rc = VIGIL_OK;
    owners_tell(&o, committed);
    s->committed = committed;
    if (s->on_tx_end && hook)
        s->on_tx_end(s->on_tx_end_user, committed);
    return rc;
}

vigil_code vg_store_commit(struct vg_store *s, vigil_error *err)
{
    if (s->depth <= 0)
        return VG_FAIL(err, VIGIL_ESTATE, "commit without an open transaction");
    vigil_code rc = check_doomed(s, err);
    /* The kept-back writes go in last, inside the transaction; if they fail, none of it
     * commits. */
    for (int i = 0; rc == VIGIL_OK && s->depth == 1 && i < VG_STORE_PENDING_SLOTS; i++) {
        if (s->pending[i] &&
            (rc = s->pending[i](s->pending_user[i], VG_PENDING_FLUSH, err)) != VIGIL_OK) {
            vg_store_rollback(s, NULL);
            return rc;
        }
    }
    s->depth--;
    if (rc != VIGIL_OK) { /* doomed: already rolled back */
        round_drop_if_empty(s);
        tx_end_hook(s, 0); /* at the outermost level: nothing was committed */
        return rc;
    }
    /* A level of a flat transaction has no savepoint to release. */
    if (s->depth == 0 || !s->flat)
        rc = s->methods->commit(s, level(s, s->depth), err);
    if (rc != VIGIL_OK && s->depth == 0) {
        /* The adapter rolled back a failed outermost commit; nothing of it became durable. In
         * a round the savepoint that could not be released is rolled back instead. */
        if (s->round && s->methods->rollback(s, 1, NULL) != VIGIL_OK)
            lose_round(s);
        round_drop_if_empty(s);
        tx_end_hook(s, 0);
        return rc;
    }
    if (rc != VIGIL_OK) {
        /* A savepoint that cannot be released is rolled back to keep the outer level sane. */
        if (s->methods->rollback(s, level(s, s->depth), NULL) != VIGIL_OK)
            doom(s);
        else
            s->failed = VG_MAX(s->failed, FAILED_WRITE);
        return rc;
    }
    if (s->depth > 0) {
        pending_tell(s, VG_PENDING_RELEASE);
        return VIGIL_OK;
    }
    if (s->round)
        return join_round(s, err);
    s->committed = 1;
    tx_end_hook(s, 1);
    if (s->wrote && s->sync_wait && !s->group_commit)
        return s->sync_wait(s->sync_wait_user, err);
    return VIGIL_OK;
}

vigil_code vg_store_rollback(struct vg_store *s, vigil_error *err)
{
    if (s->depth <= 0)
        return VG_FAIL(err, VIGIL_ESTATE, "rollback without an open transaction");
    s->depth--;
    vigil_code rc = VIGIL_OK;
    if (s->depth > 0 && s->failed == TX_DOOMED)
        return VIGIL_OK;           /* already rolled back as a whole */
    if (s->depth > 0 && s->flat) { /* no savepoint to go back to: the whole of it goes */
        doom(s);
        return VIGIL_OK;
    }
    /* In a round a doomed transaction's savepoint is gone already (doom). */
    if (!(s->round && s->failed == TX_DOOMED))
        rc = s->methods->rollback(s, level(s, s->depth), err);
    if (rc != VIGIL_OK && s->depth > 0)
        doom(s);
    else if (rc != VIGIL_OK && s->round)
        lose_round(s);
    else if (s->depth > 0) /* writes made at the levels left stay */
        pending_tell(s, VG_PENDING_PARTIAL);
    round_drop_if_empty(s);
    tx_end_hook(s, 0);
    return rc;
}

vigil_code vg_store_end(struct vg_store *s, vigil_code rc, vigil_error *err)
{
    if (rc == VIGIL_OK)
        return vg_store_commit(s, err);
    vg_store_rollback(s, NULL); /* keep the first error report */
    return rc;
}

int vg_store_in_tx(const struct vg_store *s)
{
    return s->depth > 0;
}

const char *vg_store_kind(const struct vg_store *s)
{
    return s->methods->name;
}

int vg_store_committed(const struct vg_store *s)
{
    return s->committed;
}

/* ---- record operations --------------------------------------------------------------------- */

static int kind_valid(const char *k)
{
    size_t n = k ? strlen(k) : 0;
    if (n == 0 || n > 40)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = k[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

static vigil_code check_key(const char *kind, const char *id, vigil_error *err)
{
    if (!kind_valid(kind))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid record kind \"%s\"", kind ? kind : "");
    if (!id || !*id || strlen(id) > 200)
        return VG_FAIL(err, VIGIL_EINVAL, "invalid %s id: empty or longer than 200 bytes", kind);
    return VIGIL_OK;
}

static vigil_code check_record(const struct vg_record *r, vigil_error *err)
{
    vigil_code rc = check_key(r->kind, r->id, err);
    if (rc)
        return rc;
    if (!r->body || !*r->body)
        return VG_FAIL(err, VIGIL_EINVAL, "%s \"%s\" has no body", r->kind, r->id);
    return VIGIL_OK;
}

/* A write outside a transaction commits on its own: with the durability asked for. */
#define SETTLE_DURABILITY(s)                                                                       \
    do {                                                                                           \
        vigil_code settle_rc_;                                                                     \
        if ((s)->depth == 0 && (settle_rc_ = durability_settle((s), err)) != VIGIL_OK)             \
            return settle_rc_;                                                                     \
    } while (0)

static vigil_code note_write(struct vg_store *s, vigil_code rc)
{
    s->wrote = 1; /* a failed write may have written some of its rows too */
    if (rc != VIGIL_OK && s->depth > 0)
        s->failed = VG_MAX(s->failed, FAILED_WRITE);
    return rc;
}

/* With folded commits a write outside a transaction still needs one: the round it lands in
 * commits only for the transactions that wait on it. So does one in a read batch: the batch's
 * read transaction would otherwise take it in, uncommitted until the batch ends, and fail it
 * when the batch's snapshot is older than another connection's commit. */
#define IN_OWN_TX(s, call)                                                                         \
    do {                                                                                           \
        if (((s)->fold || (s)->read_batches > 0) && (s)->depth == 0) {                             \
            vigil_code tx_rc_ = vg_store_begin((s), err);                                          \
            if (tx_rc_ != VIGIL_OK)                                                                \
                return tx_rc_;                                                                     \
            (s)->lone_write = 1;                                                                   \
            return vg_store_end((s), (call), err);                                                 \
        }                                                                                          \
    } while (0)

/* A write the write hook sees (vg_store_set_write_hook) must share its transaction with what the
 * hook writes for it, so a lone write gets a transaction of its own. */
#define HOOKED_TX(s, call)                                                                         \
    do {                                                                                           \
        if ((s)->write_hook && (s)->depth == 0) {                                                  \
            vigil_code tx_rc_ = vg_store_begin((s), err);                                          \
            if (tx_rc_ != VIGIL_OK)                                                                \
                return tx_rc_;                                                                     \
            return vg_store_end((s), (call), err);                                                 \
        }                                                                                          \
    } while (0)

/* The record as the adapter stores it: its body without the values its columns hold (body.h),
 * in packed when that differs. Debug builds check that reading gives the body back: every
 * test of the sanitizer build so checks each record it writes. Release builds do not, since
 * the check is a second decode of every packed write (the journal's hot path) for a property
 * of the code, not of the data (unpack(pack(x)) == x for any text), which tests/store/test_body.c
 * and fuzz/fuzz_store_body.c check. */
static vigil_code pack(const struct vg_record *r, struct vg_record *stored, struct vg_buf *packed,
                       vigil_error *err)
{
    *stored = *r;
    vg_buf_init(packed, VG_BUF_DEFAULT_MAX);
    if (!vg_body_pack(r, packed))
        return VIGIL_OK;
    if (packed->fail)
        return vg_buf_finish(packed, err);
    stored->body = packed->data;
#ifndef NDEBUG
    struct vg_buf back;
    vg_buf_init(&back, VG_BUF_DEFAULT_MAX);
    int differs = vg_body_unpack(stored, &back);
    if (!back.fail && (!differs || strcmp(back.data, r->body) != 0)) /* no memory: no check */
        VG_BUG("%s \"%s\": its packed body does not read back", r->kind, r->id);
    vg_buf_release(&back);
#endif
    return VIGIL_OK;
}

/* pack, and a message's stored text that would read as a row of several messages escaped
 * (store/rows.c). */
static vigil_code pack_row(struct vg_store *s, const struct vg_record *r, struct vg_record *stored,
                           struct vg_buf *packed, vigil_error *err)
{
    vigil_code rc = pack(r, stored, packed, err);
    if (rc || !vg_rows_on(s, r->kind) || !vg_rows_needs_escape(stored->body))
        return rc;
    struct vg_buf esc;
    vg_buf_init(&esc, VG_BUF_DEFAULT_MAX);
    vg_rows_escape(stored->body, &esc);
    vg_buf_release(packed);
    *packed = esc;
    stored->body = packed->data;
    return packed->fail ? vg_buf_finish(packed, err) : VIGIL_OK;
}

vigil_code vg_store_put(struct vg_store *s, const struct vg_record *r, unsigned flags,
                        int *inserted, vigil_error *err)
{
    IN_OWN_TX(s, vg_store_put(s, r, flags, inserted, err));
    HOOKED_TX(s, vg_store_put(s, r, flags, inserted, err));
    SETTLE_DURABILITY(s);
    struct vg_record stored;
    struct vg_buf packed;
    int added = 1;
    vigil_code rc = check_record(r, err);
    if (rc || (rc = check_doomed(s, err)))
        return rc;
    int handled = 0, last = 0;
    if (vg_rows_on(s, r->kind) &&
        ((rc = note_write(s, vg_rows_put(s, r, flags, &added, &handled, &last, err))) || handled)) {
        if (inserted)
            *inserted = added;
        if (rc == VIGIL_OK && added && s->write_hook)
            rc = note_write(s, s->write_hook(s->write_hook_user, r, 0, err));
        return rc;
    }
    if ((rc = pack_row(s, r, &stored, &packed, err)) == VIGIL_OK)
        rc = note_write(s, s->methods->put(s, &stored, flags, &added, err));
    if (rc == VIGIL_OK && added && last)
        vg_rows_wrote_last(s, &stored);
    vg_buf_release(&packed);
    if (inserted)
        *inserted = added;
    if (rc == VIGIL_OK && added && s->write_hook)
        rc = note_write(s, s->write_hook(s->write_hook_user, r, 0, err));
    return rc;
}

vigil_code vg_store_update(struct vg_store *s, const struct vg_record *r, int64_t expected_rev,
                           vigil_error *err)
{
    IN_OWN_TX(s, vg_store_update(s, r, expected_rev, err));
    HOOKED_TX(s, vg_store_update(s, r, expected_rev, err));
    SETTLE_DURABILITY(s);
    struct vg_record stored;
    struct vg_buf packed;
    vigil_code rc = check_record(r, err);
    if (rc || (rc = check_doomed(s, err)))
        return rc;
    if (vg_rows_on(s, r->kind) &&
        (rc = note_write(s, vg_rows_before_change(s, r->id, &expected_rev, err))))
        return rc;
    if ((rc = pack_row(s, r, &stored, &packed, err)) == VIGIL_OK)
        rc = note_write(s, s->methods->update(s, &stored, expected_rev, err));
    vg_buf_release(&packed);
    if (rc == VIGIL_OK && s->write_hook)
        rc = note_write(s, s->write_hook(s->write_hook_user, r, 1, err));
    return rc;
}

/* A read's callback, given each record with its body as written (body.h). */
struct unpacking {
    vg_record_cb cb;
    void *user;
    struct vg_buf body;
    int oom;
};

static int unpack_cb(void *user, const struct vg_record *r)
{
    struct unpacking *u = user;
    vg_buf_reset(&u->body);
    if (!vg_body_unpack(r, &u->body))
        return u->cb(u->user, r);
    if (u->body.fail)
        return u->oom = 1; /* stops the read, which then fails */
    struct vg_record written = *r;
    written.body = u->body.data;
    return u->cb(u->user, &written);
}

/* A scan (q) or a get (kind, id) through unpack_cb. */
static vigil_code unpacked(struct vg_store *s, const struct vg_query *q, const char *kind,
                           const char *id, vg_record_cb cb, void *user, vigil_error *err)
{
    struct unpacking u = {cb, user, {0}, 0};
    vg_buf_init(&u.body, VG_BUF_DEFAULT_MAX);
    vigil_code rc = q ? s->methods->scan(s, q, unpack_cb, &u, err)
                      : s->methods->get(s, kind, id, unpack_cb, &u, err);
    if (rc == VIGIL_OK && u.oom)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %s records", q ? q->kind : kind);
    vg_buf_release(&u.body);
    return rc;
}

vigil_code vg_store_get(struct vg_store *s, const char *kind, const char *id, vg_record_cb cb,
                        void *user, vigil_error *err)
{
    vigil_code rc = check_key(kind, id, err);
    if (rc)
        return rc;
    if (vg_rows_on(s, kind))
        return vg_rows_get(s, kind, id, cb, user, err);
    return unpacked(s, NULL, kind, id, cb, user, err);
}

static vigil_code scan_check(const struct vg_query *q, vigil_error *err)
{
    if (!kind_valid(q->kind))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid record kind \"%s\"", q->kind ? q->kind : "");
    if (q->has_after && !q->after_id)
        return VG_FAIL(err, VIGIL_EINVAL, "cursor without an id");
    if (q->limit < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "negative scan limit");
    return VIGIL_OK;
}

vigil_code vg_store_scan(struct vg_store *s, const struct vg_query *q, vg_record_cb cb, void *user,
                         vigil_error *err)
{
    vigil_code rc = scan_check(q, err);
    if (rc)
        return rc;
    if (vg_rows_on(s, q->kind))
        return vg_rows_scan(s, q, cb, user, err);
    return unpacked(s, q, NULL, NULL, cb, user, err);
}

vigil_code vg_store_scan_stored(struct vg_store *s, const struct vg_query *q, vg_record_cb cb,
                                void *user, vigil_error *err)
{
    vigil_code rc = scan_check(q, err);
    return rc ? rc : s->methods->scan(s, q, cb, user, err);
}

const char *vg_store_written_body(const struct vg_record *r, struct vg_buf *out)
{
    vg_buf_reset(out);
    if (!vg_body_unpack(r, out))
        return r->body;
    return out->fail ? NULL : out->data;
}

vigil_code vg_store_count(struct vg_store *s, const struct vg_query *q, int64_t *out,
                          vigil_error *err)
{
    if (!kind_valid(q->kind))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid record kind \"%s\"", q->kind ? q->kind : "");
    if (vg_rows_on(s, q->kind))
        return vg_rows_count(s, q, out, err);
    return s->methods->count(s, q, out, err);
}

vigil_code vg_store_remove(struct vg_store *s, const char *kind, const char *id, vigil_error *err)
{
    IN_OWN_TX(s, vg_store_remove(s, kind, id, err));
    SETTLE_DURABILITY(s);
    vigil_code rc = check_key(kind, id, err);
    if (rc || (rc = check_doomed(s, err)))
        return rc;
    if (vg_rows_on(s, kind) && (rc = note_write(s, vg_rows_before_change(s, id, NULL, err))))
        return rc;
    return note_write(s, s->methods->remove(s, kind, id, err));
}

vigil_code vg_store_remove_owner(struct vg_store *s, const char *owner, int64_t *removed,
                                 vigil_error *err)
{
    IN_OWN_TX(s, vg_store_remove_owner(s, owner, removed, err));
    SETTLE_DURABILITY(s);
    if (!owner || !*owner)
        return VG_FAIL(err, VIGIL_EINVAL, "refusing to remove records of the empty owner");
    vigil_code rc = check_doomed(s, err);
    int64_t members = 0;
    if (!rc && vg_rows_on(s, "message"))
        rc = vg_rows_members_of_owner(s, owner, &members, err);
    if (rc)
        return rc;
    rc = note_write(s, s->methods->remove_owner(s, owner, removed, err));
    if (rc == VIGIL_OK && removed)
        *removed += members; /* a step's messages in one row: counted a record each */
    return rc;
}

vigil_code vg_store_control(struct vg_store *s, int op, void *arg, vigil_error *err)
{
    return s->methods->control(s, op, arg, err);
}

vigil_code vg_store_settle(struct vg_store *s, const char *kind, const char *id, vigil_error *err)
{
    struct vg_store_key k = {kind, id};
    vigil_error e = {0};
    vigil_code rc = s->methods->control(s, VG_STORE_CTRL_SETTLE, &k, &e);
    if (rc == VIGIL_ENOTFOUND) /* an adapter without it: the row stays where it is */
        return VIGIL_OK;
    if (rc && err)
        *err = e;
    return rc;
}

void vg_store_read_batch(struct vg_store *s, int on)
{
    if (!on && s->read_batches == 0)
        return; /* left by a parked fiber (vg_store_read_batch_leave) */
    s->read_batches += on ? 1 : -1;
    (void)s->methods->control(s, VG_STORE_CTRL_READ_BATCH, &on, NULL);
}

int vg_store_read_batch_leave(struct vg_store *s)
{
    int batches = s->read_batches;
    while (s->read_batches > 0)
        vg_store_read_batch(s, 0);
    return batches;
}

void vg_store_read_batch_rejoin(struct vg_store *s, int batches)
{
    while (batches-- > 0)
        vg_store_read_batch(s, 1);
}

void vg_store_read_anchor(struct vg_store *s, int on)
{
    (void)s->methods->control(s, VG_STORE_CTRL_READ_ANCHOR, &on, NULL);
}

vigil_code vg_store_lock(struct vg_store *s, const char *kind, const char *id, int skip_locked,
                         int *busy, vigil_error *err)
{
    struct vg_store_lock l = {.kind = kind, .id = id, .skip_locked = skip_locked};
    if (busy)
        *busy = 0;
    if (s->depth == 0)
        return VG_FAIL(err, VIGIL_ESTATE, "a record can be locked only inside a transaction");
    vigil_code rc = s->methods->control(s, VG_STORE_CTRL_LOCK, &l, err);
    if (!rc && busy)
        *busy = l.busy;
    return rc;
}

vigil_code vg_store_lock_for_write(struct vg_store *s, const char *kind, const char *id,
                                   vigil_error *err)
{
    struct vg_store_lock l = {.kind = kind, .id = id, .exclusive = 1};
    if (s->depth == 0)
        return VIGIL_OK;
    return s->methods->control(s, VG_STORE_CTRL_LOCK, &l, err);
}

vigil_code vg_store_durable_commits(struct vg_store *s, int durable, vigil_error *err)
{
    if (s->depth > 0)
        return VG_FAIL(err, VIGIL_ESTATE, "commit durability cannot change inside a transaction");
    if (s->sync_wait) { /* the adapter never syncs on commit; vg_store_commit decides */
        s->group_commit = !durable;
        return VIGIL_OK;
    }
    int was = s->group_commit;
    s->group_commit = !durable;
    s->durability_unset |= was != s->group_commit;
    return durability_settle(s, err);
}

vigil_code vg_store_commit_durable(struct vg_store *s, vigil_error *err)
{
    if (s->depth != 1)
        return VG_FAIL(err, VIGIL_ESTATE, "only a whole transaction can be committed durably");
    if (!s->group_commit)
        return vg_store_commit(s, err);
    if (s->sync_wait) { /* under shared syncs the flag alone decides, at the commit */
        s->group_commit = 0;
        vigil_code rc = vg_store_commit(s, err);
        s->group_commit = 1;
        return rc;
    }
    /* The adapter switched for this commit (SQLite's log VFS reads its switch as it writes the
     * commit), and back when the next transaction begins; one that cannot switch inside a
     * transaction commits, then syncs. */
    int on = 1;
    s->durability_unset = 1;
    if (s->methods->control(s, VG_STORE_CTRL_DURABLE_COMMITS, &on, NULL) == VIGIL_OK)
        return vg_store_commit(s, err);
    vigil_code rc = vg_store_commit(s, err);
    if (rc)
        return rc;
    /* A store outside write-ahead-log mode (where WAL cannot be enabled) has no log to sync
     * apart: there every commit syncs the database file itself (a rollback journal syncs at
     * commit in both durability modes), so this one is durable already. */
    rc = s->methods->control(s, VG_STORE_CTRL_SYNC, NULL, err);
    if (rc == VIGIL_EUNSUPPORTED && err)
        vigil_error_clear(err);
    return rc == VIGIL_EUNSUPPORTED ? VIGIL_OK : rc;
}

int vg_store_durable(const struct vg_store *s)
{
    return !s->group_commit;
}

int vg_store_loses_group_commits_alone(const struct vg_store *s)
{
    return (s->methods->caps & VG_STORE_CAP_RECONNECTS) != 0;
}

vigil_code vg_store_defer(struct vg_store *s, vg_store_pending_fn fn, void *user, vigil_error *err)
{
    if (s->depth <= 0)
        return VG_FAIL(err, VIGIL_ESTATE, "writes can be kept back only inside a transaction");
    int free_slot = -1;
    for (int i = 0; i < VG_STORE_PENDING_SLOTS; i++) {
        if (s->pending[i] == fn && s->pending_user[i] == user)
            return VIGIL_OK;
        if (s->pending[i] == fn)
            return VG_FAIL(err, VIGIL_EBUSY, "another owner keeps writes back in this transaction");
        if (!s->pending[i] && free_slot < 0)
            free_slot = i;
    }
    if (free_slot < 0)
        return VG_FAIL(err, VIGIL_EBUSY, "too many owners keep writes back in this transaction");
    s->pending[free_slot] = fn;
    s->pending_user[free_slot] = user;
    return VIGIL_OK;
}

int vg_store_deferred(const struct vg_store *s, vg_store_pending_fn fn, const void *user)
{
    for (int i = 0; s->depth > 0 && i < VG_STORE_PENDING_SLOTS; i++)
        if (s->pending[i] == fn && s->pending_user[i] == user)
            return 1;
    return 0;
}

uint64_t vg_store_tx_serial(const struct vg_store *s)
{
    return s->tx_serial;
}

int vg_store_depth(const struct vg_store *s)
{
    return s->depth;
}

void vg_store_defer_cancel(struct vg_store *s, void *user)
{
    for (int i = 0; i < VG_STORE_PENDING_SLOTS; i++) {
        if (!s->pending[i] || s->pending_user[i] != user)
            continue;
        s->pending[i] = NULL;
        if (s->depth > 0)
            doom(s);
    }
}

int vg_store_flat(const struct vg_store *s)
{
    return s->depth > 0 && s->flat;
}

/* Commit the open round for every transaction that joined it (the adapter rolls back a
 * commit that fails), noting the outcome for them; a round rolled back already fails them. */
static vigil_code round_commit(struct vg_store *s, vigil_error *err)
{
    if (s->depth > 0)
        return VG_FAIL(err, VIGIL_ESTATE, "a round of commits cannot end inside a transaction");
    vigil_code rc = s->methods->commit(s, 0, err);
    round_tell(s, rc == VIGIL_OK);
    s->round = s->round_members = s->round_durable = 0;
    return rc;
}

vigil_code vg_store_sync(struct vg_store *s, vigil_error *err)
{
    if (s->round) {
        vigil_code rc = round_commit(s, err);
        if (rc != VIGIL_OK)
            return rc;
    }
    return s->methods->control(s, VG_STORE_CTRL_SYNC, NULL, err);
}

vigil_code vg_store_round_end(struct vg_store *s, vigil_error *err)
{
    if (!s->fold)
        return vg_store_sync(s, err);
    if (!s->round)
        return VIGIL_OK; /* ended already (a run before, a lost round): its members know */
    int durable = s->round_durable;
    vigil_code rc = round_commit(s, err);
    if (rc != VIGIL_OK || !durable)
        return rc;
    return s->methods->control(s, VG_STORE_CTRL_SYNC, NULL, err);
}

vigil_code vg_store_fold_commits(struct vg_store *s, int on, vigil_error *err)
{
    if (s->depth > 0)
        return VG_FAIL(err, VIGIL_ESTATE, "folded commits cannot change inside a transaction");
    if (on && !s->sync_wait)
        return VG_FAIL(err, VIGIL_ESTATE, "folded commits need shared syncs");
    if (!on && s->round) {
        vigil_code rc = vg_store_sync(s, err);
        if (rc != VIGIL_OK)
            return rc;
    }
    s->fold = on != 0;
    return VIGIL_OK;
}

vigil_code vg_store_share_syncs(struct vg_store *s, vg_store_sync_wait_fn wait, void *user,
                                vigil_error *err)
{
    if (s->depth > 0)
        return VG_FAIL(err, VIGIL_ESTATE, "shared syncs cannot change inside a transaction");
    if (wait) {
        /* Everything committed so far becomes durable first: the adapter's own durability
         * ends here (a sync it cannot do means it cannot share one either). */
        vigil_code rc = vg_store_sync(s, err);
        int lazy = 0;
        if (rc == VIGIL_OK)
            rc = s->methods->control(s, VG_STORE_CTRL_DURABLE_COMMITS, &lazy, err);
        if (rc != VIGIL_OK)
            return rc;
    } else if (s->sync_wait) {
        vigil_code rc = vg_store_fold_commits(s, 0, err);
        if (rc != VIGIL_OK)
            return rc;
        int durable = !s->group_commit;
        rc = s->methods->control(s, VG_STORE_CTRL_DURABLE_COMMITS, &durable, err);
        if (rc != VIGIL_OK)
            return rc;
        s->durability_unset = 0;
    }
    s->sync_wait = wait;
    s->sync_wait_user = user;
    return VIGIL_OK;
}

static int has_text(const struct vg_store *s)
{
    return s->methods->version >= 2 && s->methods->text_index && s->methods->text_search;
}

vigil_code vg_store_text_index(struct vg_store *s, const char *kind, const char *id,
                               const char *owner, const char *text, vigil_error *err)
{
    IN_OWN_TX(s, vg_store_text_index(s, kind, id, owner, text, err));
    SETTLE_DURABILITY(s);
    vigil_code rc = check_key(kind, id, err);
    if (rc)
        return rc;
    if (!has_text(s))
        return VG_FAIL(err, VIGIL_EUNSUPPORTED, "store adapter \"%s\" has no text index",
                       s->methods->name);
    return note_write(s, s->methods->text_index(s, kind, id, owner ? owner : "", text, err));
}

vigil_code vg_store_text_search(struct vg_store *s, const char *kind, const char *owner,
                                const char *const *terms, size_t n_terms, int limit,
                                vg_text_hit_cb cb, void *user, vigil_error *err)
{
    if (!kind_valid(kind))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid record kind \"%s\"", kind ? kind : "");
    if (limit <= 0 || limit > 1000)
        return VG_FAIL(err, VIGIL_EINVAL, "text search limit %d is out of range 1..1000", limit);
    if (!has_text(s))
        return VG_FAIL(err, VIGIL_EUNSUPPORTED, "store adapter \"%s\" has no text index",
                       s->methods->name);
    if (n_terms == 0)
        return VIGIL_OK;
    return s->methods->text_search(s, kind, owner ? owner : "", terms, n_terms, limit, cb, user,
                                   err);
}

/* ---- record copies ------------------------------------------------------------------------- */

struct vg_record *vg_record_dup(const struct vg_record *r)
{
    const char *strs[] = {r->kind, r->id, r->owner, r->k1, r->k2, r->body};
    size_t lens[VG_ARRAY_LEN(strs)], total = sizeof(struct vg_record);
    for (size_t i = 0; i < VG_ARRAY_LEN(strs); i++) {
        lens[i] = strs[i] ? strlen(strs[i]) : 0;
        total += lens[i] + 1;
    }
    struct vg_record *c = vg_malloc(total);
    if (!c)
        return NULL;
    *c = *r;
    char *p = (char *)(c + 1);
    const char **dst[] = {&c->kind, &c->id, &c->owner, &c->k1, &c->k2, &c->body};
    for (size_t i = 0; i < VG_ARRAY_LEN(strs); i++) {
        if (lens[i])
            memcpy(p, strs[i], lens[i]);
        p[lens[i]] = '\0';
        *dst[i] = p;
        p += lens[i] + 1;
    }
    return c;
}

struct copy_ctx {
    struct vg_record *copy;
};

static int copy_cb(void *user, const struct vg_record *r)
{
    struct copy_ctx *c = user;
    c->copy = vg_record_dup(r);
    return 1;
}

vigil_code vg_store_get_copy(struct vg_store *s, const char *kind, const char *id,
                             struct vg_record **out, vigil_error *err)
{
    struct copy_ctx c = {NULL};
    vigil_code rc = vg_store_get(s, kind, id, copy_cb, &c, err);
    if (rc != VIGIL_OK)
        return rc;
    if (!c.copy)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %s \"%s\"", kind, id);
    *out = c.copy;
    return VIGIL_OK;
}

/* ---- id lists -------------------------------------------------------------------------------- */

struct ids_ctx {
    struct vg_id_list *l;
    int oom;
};

static int ids_cb(void *user, const struct vg_record *r)
{
    struct ids_ctx *c = user;
    struct vg_id_list *l = c->l;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **p = vg_realloc(l->ids, cap * sizeof *p);
        if (!p) {
            c->oom = 1;
            return 1;
        }
        l->ids = p;
        l->cap = cap;
    }
    if (!(l->ids[l->n] = vg_strdup(r->id))) {
        c->oom = 1;
        return 1;
    }
    l->n++;
    return 0;
}

vigil_code vg_store_scan_ids(struct vg_store *s, const struct vg_query *q, struct vg_id_list *out,
                             vigil_error *err)
{
    struct ids_ctx c = {out, 0};
    vigil_code rc = vg_store_scan(s, q, ids_cb, &c, err);
    if (!rc && c.oom)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing %s records", q->kind);
    return rc;
}

void vg_id_list_release(struct vg_id_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        vg_free(l->ids[i]);
    vg_free(l->ids);
    memset(l, 0, sizeof *l);
}
