/*
 * store.h: what other modules use of the store. Wrappers check arguments, keep the transaction
 * depth (so nested vg_store_begin calls become savepoints, except in a transaction begun with
 * vg_store_begin_flat), and call the adapter.
 *
 * Usage of a write transaction:
 *     if ((rc = vg_store_begin(s, err))) goto out;
 *     ... writes ...
 *     rc = vg_store_end(s, rc, err);   // commits when rc == VIGIL_OK, else rolls back
 */
#ifndef VG_STORE_H
#define VG_STORE_H

#include "store/port.h"

struct vg_buf;

/*
 * Open a store by URI: "sqlite:PATH", "postgres://..." / "postgresql://...", or a plain path
 * (SQLite). On success *out is owned; close it with vg_store_close. */
vigil_code vg_store_open(const char *uri, const struct vg_store_options *o, struct vg_store **out,
                         vigil_error *err);
void vg_store_close(struct vg_store *s);

/* Adapter registry: names "sqlite" and "postgres". Returns NULL if unknown. */
const struct vg_store_methods *vg_store_adapter(const char *name);
/* Size of an adapter's instance struct, for callers that allocate it. */
size_t vg_store_adapter_size(const char *name);

vigil_code vg_store_begin(struct vg_store *s, vigil_error *err);
/*
 * Begin a transaction that succeeds or fails as a whole: its nested levels take no savepoints,
 * and a nested level that rolls back rolls the whole transaction back at once (every later
 * write, level and commit of it then fails with ESTATE until the caller has ended every
 * level). For a caller that gives the whole transaction up on any failure anyway (each phase
 * of the agent loop): a savepoint per nested level cost it more than the writes. Inside an
 * open transaction it is vg_store_begin: the outer transaction's kind decides.
 */
vigil_code vg_store_begin_flat(struct vg_store *s, vigil_error *err);
/* From here the open transaction is flat, as if begun with vg_store_begin_flat: the levels it
 * opens later take no savepoints. For a transaction that needed a savepoint early on (a tool's
 * effect undone alone) and is then handed to a caller that gives it up whole on any failure.
 * Only at its outermost level (depth 1): ESTATE otherwise. */
vigil_code vg_store_flatten(struct vg_store *s, vigil_error *err);
vigil_code vg_store_commit(struct vg_store *s, vigil_error *err);
vigil_code vg_store_rollback(struct vg_store *s, vigil_error *err);
/* Commit if rc is VIGIL_OK, else roll back; returns the first failure (rc or the commit's). */
vigil_code vg_store_end(struct vg_store *s, vigil_code rc, vigil_error *err);
int vg_store_in_tx(const struct vg_store *s);
/* The adapter's name, "sqlite" or "postgres": for a person to read (`vigil status`), never
 * to branch on (a capability says what an adapter can do). */
const char *vg_store_kind(const struct vg_store *s);
/* 1 when the last outermost transaction committed, even if the commit then returned a failure
 * (a shared sync that failed after it: see vg_store_share_syncs); 0 when it rolled back or
 * could not start (also a write outside a transaction whose own one, under folded commits,
 * could not start). */
int vg_store_committed(const struct vg_store *s);

vigil_code vg_store_put(struct vg_store *s, const struct vg_record *r, unsigned flags,
                        int *inserted, vigil_error *err);
vigil_code vg_store_update(struct vg_store *s, const struct vg_record *r, int64_t expected_rev,
                           vigil_error *err);
vigil_code vg_store_get(struct vg_store *s, const char *kind, const char *id, vg_record_cb cb,
                        void *user, vigil_error *err);
vigil_code vg_store_scan(struct vg_store *s, const struct vg_query *q, vg_record_cb cb, void *user,
                         vigil_error *err);
/* vg_store_scan with each record as stored: its body in its stored form (store/body.h), the
 * body as written only through vg_store_written_body. For a reader that keeps what it made of
 * a record by the record as stored, and so unpacks only the records it has not seen (the run
 * listing: unpacking 21 runs' bodies was most of a page's cost, docs/internals/PERF.md,
 * session 37). */
vigil_code vg_store_scan_stored(struct vg_store *s, const struct vg_query *q, vg_record_cb cb,
                                void *user, vigil_error *err);
/* The body as written of a record vg_store_scan_stored gave: r->body itself, or out's text;
 * NULL when out of memory. */
const char *vg_store_written_body(const struct vg_record *r, struct vg_buf *out);
vigil_code vg_store_count(struct vg_store *s, const struct vg_query *q, int64_t *out,
                          vigil_error *err);
vigil_code vg_store_remove(struct vg_store *s, const char *kind, const char *id, vigil_error *err);
vigil_code vg_store_remove_owner(struct vg_store *s, const char *owner, int64_t *removed,
                                 vigil_error *err);
vigil_code vg_store_control(struct vg_store *s, int op, void *arg, vigil_error *err);
/* The record (kind, id) is rarely rewritten from now on (VG_STORE_CTRL_SETTLE): a placement
 * hint, fine to ignore where the adapter has none. Inside the transaction that wrote it last. */
vigil_code vg_store_settle(struct vg_store *s, const char *kind, const char *id, vigil_error *err);
/* Start (on = 1) or end (0) a read batch (VG_STORE_CTRL_READ_BATCH): a hint, its failure
 * ignored. Every start needs its end. */
void vg_store_read_batch(struct vg_store *s, int on);
/* A fiber that parks leaves its read batches (returns how many it had open, ending the batch's
 * read transaction) and takes them up again when it resumes: fibers share the connection, and
 * one fiber's open batch would otherwise keep the others' reads on its snapshot. */
int vg_store_read_batch_leave(struct vg_store *s);
void vg_store_read_batch_rejoin(struct vg_store *s, int batches);
/* Join (on = 1) or leave (0) the process's read anchor of the store (VG_STORE_CTRL_READ_ANCHOR):
 * a hint, its failure ignored. */
void vg_store_read_anchor(struct vg_store *s, int on);
/* Group commit on (durable = 0) or off (1): see VG_STORE_CTRL_DURABLE_COMMITS. Outside a
 * transaction only. */
vigil_code vg_store_durable_commits(struct vg_store *s, int durable, vigil_error *err);
/* Commit the open transaction (outermost level only) durably whatever the commit mode: one
 * commit that is also the log sync, for a transaction begun before its writer knew it would
 * need one (the agent loop's turn, which the tool executor's started operation joins as the
 * barrier before an effect). Group commit resumes with the next transaction. An adapter that
 * cannot switch inside a transaction (SQLite without its log VFS) commits, then syncs. */
vigil_code vg_store_commit_durable(struct vg_store *s, vigil_error *err);
/* 1 when commits are durable (the default), 0 under group commit. */
int vg_store_durable(const struct vg_store *s);
/* 1 when a group commit can be lost while this process lives on and goes on writing after it
 * (a server store: the server may crash and the connection be made again, VG_STORE_CAP_
 * RECONNECTS); 0 when losing one takes this process too (SQLite: a power loss). A commit that
 * something outside the transaction relies on (a lease's epoch, a run's start) is then made
 * durable. */
int vg_store_loses_group_commits_alone(const struct vg_store *s);
/*
 * Shared syncs: from now on a durable commit commits without syncing and then calls
 * wait(user, err), which must return once vg_store_sync has run after the commit (a fiber
 * batch: src/os/fiber.h), so the durable commits of many fibers on one connection share a
 * sync. Its notifications go out at the commit, before the sync, as under group commit.
 * When the sync fails the commit stays (it is visible, and durable or not as the disk kept
 * it) and the commit returns the failure: nothing that needed it durable may go on. NULL
 * wait returns to a sync per durable commit. EUNSUPPORTED where the adapter cannot sync on
 * its own (PostgreSQL); outside a transaction only.
 */
vigil_code vg_store_share_syncs(struct vg_store *s, vg_store_sync_wait_fn wait, void *user,
                                vigil_error *err);
/* Make every transaction committed so far on this connection durable (VG_STORE_CTRL_SYNC);
 * an open round of folded commits is committed first. */
vigil_code vg_store_sync(struct vg_store *s, vigil_error *err);
/*
 * Folded commits, on top of shared syncs (STORE.md): while on, the outermost transactions on
 * this connection are savepoints of one adapter transaction, a round, begun by the first of
 * them. A commit releases its savepoint and then waits (the shared sync's wait) until the
 * batch's operation, vg_store_round_end, commits the round for every transaction in it, so
 * the pages that many fibers' commits share (the tables' newest leaves, the file header) go to
 * the log once a round instead of once a commit. A commit returns, and its kept-back writes'
 * owners and the end-of-transaction hook hear of it, only once the round has committed (and
 * synced, when the commit was durable); a round that fails to commit fails every commit in it.
 * A rollback undoes only its own transaction. Reads outside a transaction see the round's
 * released writes. The fibers must never park inside a transaction (their scheduler's guard).
 * ESTATE inside a transaction or without shared syncs.
 */
vigil_code vg_store_fold_commits(struct vg_store *s, int on, vigil_error *err);
/* The shared sync's operation under folded commits: commit the open round, then sync when a
 * durable commit joined it. Without folded commits, vg_store_sync. */
vigil_code vg_store_round_end(struct vg_store *s, vigil_error *err);
/*
 * Keep writes back until the outermost commit of the open transaction: fn(user, FLUSH) makes
 * them just before it (the journal writes a run's projection once per transaction instead of
 * once per record), then fn(user, DONE or ABORT) says how the transaction ended. One owner per
 * function at a time, and VG_STORE_PENDING_SLOTS functions: EBUSY while another owner of fn
 * has writes kept back, or every slot is taken (the caller then writes at once); OK again for
 * the same owner. ESTATE outside a transaction.
 */
vigil_code vg_store_defer(struct vg_store *s, vg_store_pending_fn fn, void *user, vigil_error *err);
/* Is fn with user keeping writes back in the open transaction? Under folded commits the end of
 * a transaction reaches its owners only when its round ends, so an owner that several
 * transactions share may hear of an earlier one while a later one uses it. */
int vg_store_deferred(const struct vg_store *s, vg_store_pending_fn fn, const void *user);
/* How many outermost transactions this connection has begun: a write hook that does something
 * once a transaction (sync's check for a join another connection made) compares it. */
uint64_t vg_store_tx_serial(const struct vg_store *s);
/* Open transaction levels: 0 outside a transaction, 1 in one, 2 and more in savepoints. */
int vg_store_depth(const struct vg_store *s);
/* 1 inside a transaction begun with vg_store_begin_flat (all or nothing: a failure at any level
 * rolls back the whole of it), else 0. */
int vg_store_flat(const struct vg_store *s);
/* The owner gives up its kept-back writes without making them: the open transaction is
 * rolled back as a whole (what it wrote needed them). No-op for another owner. */
void vg_store_defer_cancel(struct vg_store *s, void *user);
/* Full-text index and search (port version 2); EUNSUPPORTED on an older adapter. */
vigil_code vg_store_text_index(struct vg_store *s, const char *kind, const char *id,
                               const char *owner, const char *text, vigil_error *err);
vigil_code vg_store_text_search(struct vg_store *s, const char *kind, const char *owner,
                                const char *const *terms, size_t n_terms, int limit,
                                vg_text_hit_cb cb, void *user, vigil_error *err);

/* Lock one record for the open transaction (VG_STORE_CTRL_LOCK): every check the transaction
 * made on it after this stands when it commits. skip_locked: take it exclusively, or set *busy
 * and lock nothing when another transaction holds it (claims: FOR UPDATE SKIP LOCKED). busy may
 * be NULL. ESTATE outside a transaction. */
vigil_code vg_store_lock(struct vg_store *s, const char *kind, const char *id, int skip_locked,
                         int *busy, vigil_error *err);
/* Lock one record exclusively for the open transaction before reading it to write it back:
 * another writer waits until this transaction ends, then reads what it wrote, so neither
 * fails its compare-and-swap (PostgreSQL: FOR UPDATE; SQLite: the write transaction already
 * holds the store). Outside a transaction it does nothing: the caller's compare-and-swap
 * still decides. */
vigil_code vg_store_lock_for_write(struct vg_store *s, const char *kind, const char *id,
                                   vigil_error *err);

/* An owned deep copy of a record: one allocation, freed with vg_free. */
struct vg_record *vg_record_dup(const struct vg_record *r);
/* Read one record as an owned copy (*out freed with vg_free). ENOTFOUND if absent. */
vigil_code vg_store_get_copy(struct vg_store *s, const char *kind, const char *id,
                             struct vg_record **out, vigil_error *err);

/* The ids of the records a query finds, in scan order. Zero-initialize; release with
 * vg_id_list_release (also after a failure). */
struct vg_id_list {
    char **ids; /* owned strings */
    size_t n, cap;
};
vigil_code vg_store_scan_ids(struct vg_store *s, const struct vg_query *q, struct vg_id_list *out,
                             vigil_error *err);
void vg_id_list_release(struct vg_id_list *l);

/*
 * Install the write hook (one per store; NULL removes): fn is called after every put that
 * inserted and every update that succeeded, inside the writing transaction (a write made outside
 * one gets its own), with the record as the caller wrote it and updated = 1 for an update. What
 * fn writes joins that transaction; a failure fails the write. Multi-device sync's capture
 * (src/sync/capture.c) is its one user: a store that does not sync has none and pays one test.
 */
void vg_store_set_write_hook(struct vg_store *s, vg_store_write_fn fn, void *user);
/* Install the end-of-transaction hook (one per store; NULL removes). */
void vg_store_set_tx_hook(struct vg_store *s, vg_store_tx_cb cb, void *user);
/* In the end-of-transaction hook: whether the transaction wrote anything. */
int vg_store_tx_wrote(const struct vg_store *s);

#endif
