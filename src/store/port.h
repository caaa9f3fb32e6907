/*
 * port.h: the store port, the only way vigil reaches durable storage. It is a record store:
 * every agent-domain thing (agents, states, messages, links, reports, journal records, run
 * logs, memory blocks...) is a record of some kind with a JSON body and a few index columns.
 * Domain modules never write SQL, so each adapter (SQLite, PostgreSQL) implements only the
 * methods below and passes the same conformance suite (tests/conformance/store/).
 *
 * Append-only: new methods go at the end and VG_STORE_VERSION goes up. Adapter types never
 * appear here; adapter error codes travel only in err->subcode.
 */
#ifndef VG_STORE_PORT_H
#define VG_STORE_PORT_H

#include <stddef.h>
#include <stdint.h>

/*
 * A record. Records of one kind are unique by id. The index columns let a query find records
 * without reading bodies: owner (the agent they belong to, "" for none), k1 and k2 (kind-specific
 * keys such as a thread id or a status) and seq (the sort key: a sequence number or a time).
 * Scans return records ordered by (seq, id). All strings are NUL-terminated UTF-8; NULL index
 * strings are stored as "".
 */
struct vg_record {
    const char *kind;  /* collection name: [a-z0-9_.]{1,40} */
    const char *id;    /* unique within kind, 1..200 bytes */
    const char *owner; /* owning agent id or "" */
    const char *k1;    /* first index key or "" */
    const char *k2;    /* second index key or "" */
    int64_t seq;       /* sort key */
    int64_t rev;       /* revision: 1 after insert, +1 per update (set by the store) */
    int64_t at;        /* ms since epoch of the last write (set by the caller) */
    const char *body;  /* JSON text */
};

/* A query over one kind. NULL filters match anything. Zero-initialize, then set fields. */
struct vg_query {
    const char *kind;  /* required */
    const char *owner; /* NULL: any owner */
    const char *k1;    /* NULL: any */
    const char *k2;    /* NULL: any */
    int has_seq_min;   /* seq >= seq_min */
    int64_t seq_min;
    int has_seq_max; /* seq <= seq_max */
    int64_t seq_max;
    int has_after;        /* keyset cursor: start strictly after (after_seq, after_id) */
    int64_t after_seq;    /* in the scan's direction */
    const char *after_id; /* with has_after */
    int descending;       /* newest (highest seq) first */
    int limit;            /* 0: no limit */
};

/* Called per record of a scan; the record is borrowed for the call. Non-zero stops the scan. */
typedef int (*vg_record_cb)(void *user, const struct vg_record *r);

/* Called per hit of a text search, best first; id is borrowed. score: higher is better (the
 * adapter's own relevance scale). Non-zero stops the search. */
typedef int (*vg_text_hit_cb)(void *user, const char *id, double score);

enum vg_put_flags {
    VG_PUT_IF_ABSENT = (1 << 0) /* an existing (kind, id) is left alone and is not an error */
};

enum vg_store_control_op {
    VG_STORE_CTRL_SCHEMA_VERSION = 1, /* arg: int * receives the schema version */
    VG_STORE_CTRL_CHECKPOINT = 2,     /* arg: NULL; flush the write-ahead log */
    VG_STORE_CTRL_FILE_SIZE = 3,      /* arg: int64_t * receives bytes on disk */
    VG_STORE_CTRL_INTEGRITY = 4,      /* arg: NULL; ECORRUPT if the store fails its check */
    /* arg: int *: 1 (the default) every commit is durable before it returns; 0 group commit:
     * commits are atomic, ordered and survive a process crash, but reach the disk only with
     * the next durable commit, which makes every earlier one durable too. Set it between
     * transactions, never inside one. */
    VG_STORE_CTRL_DURABLE_COMMITS = 5,
    /* arg: NULL; make every transaction committed so far on this connection durable now
     * (SQLite: sync the write-ahead log; nothing to do when no commit wrote since the last
     * sync). EUNSUPPORTED where durability is the server's (PostgreSQL). */
    VG_STORE_CTRL_SYNC = 6,
    /* arg: int *: 1 starts a read batch, 0 ends it (batches nest). A hint: the reads made
     * outside a write transaction until its end may share one read transaction, and so one
     * snapshot (SQLite: one shared-memory read lock instead of one per read). A write
     * transaction or another control call in the batch ends the shared read first. Adapters
     * without it say so by failing; callers ignore that (vg_store_read_batch). */
    VG_STORE_CTRL_READ_BATCH = 7,
    /* arg: struct vg_store_lock *; inside a transaction only. Lock one record until the
     * transaction ends, so that no other connection changes it meanwhile: a check read after
     * it (a lease's fencing epoch) still holds when the transaction commits. PostgreSQL:
     * SELECT ... FOR SHARE, FOR UPDATE with exclusive (a read-modify-write: two writers of the
     * record take turns instead of failing the loser's compare-and-swap), or FOR UPDATE SKIP
     * LOCKED with skip_locked (busy = 1 when another transaction holds the record: it was not
     * locked). SQLite: nothing to do, a write
     * transaction already holds the whole store. An absent record locks nothing. */
    VG_STORE_CTRL_LOCK = 8,
    /* arg: struct vg_store_await *; outside a transaction, on a connection kept for it. Wait
     * up to timeout_ms for another connection to commit work: a wake_run queued, a
     * notification raised, a timer written (PostgreSQL: a trigger NOTIFYs, this LISTENs).
     * signalled = 1 when one did, or when the connection was lost and made again (something
     * may have been missed). EUNSUPPORTED where processes cannot signal (SQLite: the daemon's
     * control socket and poll serve instead). */
    VG_STORE_CTRL_AWAIT_WORK = 9,
    /* arg: int *: the page cache this connection may keep, in KiB (SQLite: cache_size; 2048
     * unless told). A process with several connections to one store (the daemon: a worker's
     * each and the intake's) pays for each cache, and each is emptied whenever another
     * connection commits, so a smaller one costs little there. A hint: adapters without a
     * cache of their own say so by failing, and callers ignore that. */
    VG_STORE_CTRL_CACHE_KIB = 10,
    /* arg: struct vg_store_change_mark *: a mark of the records of one kind as this connection
     * sees them now, inside a write transaction or a read batch's read transaction once its
     * snapshot is taken (a read batch that has not read yet takes it for the mark, as its
     * first read would). The same mark later (in the same state) means no record of that kind
     * was written since, by this connection or any other, so what was read under the first is
     * still what a read would give; another connection's commit moves it, seen when a
     * snapshot is taken. ESTATE when it cannot say now (outside a transaction, before the
     * snapshot); an
     * adapter that keeps no marks (PostgreSQL) fails as for an unknown op. Callers then read
     * again. */
    VG_STORE_CTRL_CHANGE_MARK = 11,
    /* arg: struct vg_store_key *. A hint: the record (kind, id) is rarely rewritten from now on
     * (a finished run's projection). SQLite moves a row kept at the table's left
     * end, among the rows rewritten at most commits (sqlite_put), to the right end among the
     * appended ones, so a finished run's projection no longer keeps a nearly empty leaf of its own
     * (docs/internals/PERF.md, session 25). An absent record is left alone. Adapters without it
     * say so by failing; callers ignore that (vg_store_settle). */
    VG_STORE_CTRL_SETTLE = 12,
    /* arg: int *: 1 joins this connection to the process's read anchor of the store, 0 leaves
     * it. A hint for a process whose threads read one store at once (the daemon's HTTP threads):
     * SQLite keeps one read lock held for the process, following the newest snapshot, so the
     * readers' own locks cost no fcntl and no wait on the mutex around it
     * (src/store/sqlite/anchor.h). Reads see what they saw without it. Adapters without it say
     * so by failing; callers ignore that (vg_store_read_anchor). */
    VG_STORE_CTRL_READ_ANCHOR = 13,
    /* arg: int64_t *: bytes the records take now, which falls as soon as records are removed
     * (what a storage budget is compared with: docs/storage.md, "Growth and retention").
     * SQLite: the pages in use, the file's size less its free pages; PostgreSQL: the size of the
     * live rows of the records table (a scan of it). */
    VG_STORE_CTRL_USED_BYTES = 14,
    /* arg: NULL; outside a transaction. Give the space of removed records back (SQLite: VACUUM
     * rewrites the file without them, then the write-ahead log is checkpointed and truncated, so
     * neither file keeps a removed record's bytes; PostgreSQL: VACUUM records, which makes the
     * space reusable and lets the server drop what it no longer needs). */
    VG_STORE_CTRL_COMPACT = 15,
    /* arg: NULL, or int *: OK when the store's schema lets a step's action and toolResult
     * messages be kept in the row of the thought before them (store/rows.c; SQLite 24,
     * PostgreSQL 14): a store at an older schema (a test's target_version) keeps a row a
     * message. Fails otherwise, as for an unknown op. With arg, *arg is set to 1 when the schema
     * also lets a member name a string of the member before it instead of repeating it (SQLite
     * 26, PostgreSQL 15), 0 when not. */
    VG_STORE_CTRL_MEMBER_ROWS = 16
};

struct vg_store_change_mark {
    const char *kind; /* in */
    uint64_t foreign; /* out: the other connections' commits this one has noticed */
    uint64_t own;     /* out: this connection's writes of the kind, and its undoings */
};

struct vg_store_key {
    const char *kind, *id;
};

/* The daemon's page cache a connection (VG_STORE_CTRL_CACHE_KIB): 100 agents x 5 turns through
 * `vigil serve` peaked at 18.5-19.3 MB with SQLite's 2 MiB, 17.3-17.5 MB with 512 KiB and
 * 16.8-17.0 MB with 256 KiB, at the same daemon CPU (docs/internals/PERF.md, session 21). A step's
 * hot pages are a few dozen (an append, the thread's newest messages). */
#define VG_STORE_DAEMON_CACHE_KIB 256

struct vg_store_lock {
    const char *kind, *id;
    int skip_locked; /* claim: exclusive, and skip (busy = 1) a record another holds */
    int exclusive;   /* read-modify-write: exclusive, waiting for a record another holds */
    int busy;        /* out */
};

struct vg_store_await {
    int timeout_ms;
    int signalled; /* out */
};

#define VG_STORE_CAP_DURABLE_COMMIT (1u << 0) /* commit returns only once the data is durable */
#define VG_STORE_CAP_MULTI_PROCESS (1u << 1)  /* several processes may open one store */
/* A server store: a lost connection is made again on the next statement outside a
 * transaction, so EIO inside one means that transaction was lost, not the store. */
#define VG_STORE_CAP_RECONNECTS (1u << 2)

/* Options for opening a store; zero-initialize. */
struct vg_store_options {
    int create_if_missing; /* create the store if it does not exist */
    int read_only;         /* refuse writes */
    int busy_timeout_ms;   /* wait for other writers this long; 0: 5000 */
    int target_version;    /* tests: migrate only up to this schema version; 0: latest */
    /* SQLite's fast paths, on by default; off to test the store without them (the store
     * matrix, tests/store/test_sqlite_matrix.c) or to rule them out when a store misbehaves. */
    int no_log_vfs;      /* open through the platform's VFS, not the log VFS (log_vfs.h) */
    int no_record_cache; /* keep no records between transactions (record_cache.h) */
};

struct vg_store;

struct vg_store_methods {
    int version;      /* 1: up to control; 2: also text_index and text_search */
    const char *name; /* "sqlite", "postgres", "fault" */
    unsigned caps;    /* VG_STORE_CAP_* */
    /* Open uri into the caller-allocated instance (methods already set). The instance must be
     * closable with close() even when open fails. */
    vigil_code (*open)(struct vg_store *s, const char *uri, const struct vg_store_options *o,
                       vigil_error *err);
    void (*close)(struct vg_store *s);
    /* Transactions. depth 0 is the outermost; deeper levels are savepoints. */
    vigil_code (*begin)(struct vg_store *s, int depth, vigil_error *err);
    vigil_code (*commit)(struct vg_store *s, int depth, vigil_error *err);
    vigil_code (*rollback)(struct vg_store *s, int depth, vigil_error *err);
    /* Insert. EEXISTS for an existing (kind, id) unless VG_PUT_IF_ABSENT, in which case
     * *inserted (may be NULL) is 0. r->rev is ignored; the stored revision is 1. */
    vigil_code (*put)(struct vg_store *s, const struct vg_record *r, unsigned flags, int *inserted,
                      vigil_error *err);
    /* Compare-and-swap update of (kind, id): k1, k2, seq, at and body change, owner does not.
     * ECONFLICT if the stored revision is not expected_rev, ENOTFOUND if absent. */
    vigil_code (*update)(struct vg_store *s, const struct vg_record *r, int64_t expected_rev,
                         vigil_error *err);
    /* Read one record; ENOTFOUND if absent. The record is borrowed for the callback. */
    vigil_code (*get)(struct vg_store *s, const char *kind, const char *id, vg_record_cb cb,
                      void *user, vigil_error *err);
    /* Scan in (seq, id) order. */
    vigil_code (*scan)(struct vg_store *s, const struct vg_query *q, vg_record_cb cb, void *user,
                       vigil_error *err);
    vigil_code (*count)(struct vg_store *s, const struct vg_query *q, int64_t *out,
                        vigil_error *err);
    /* Remove one record; ENOTFOUND if absent. */
    vigil_code (*remove)(struct vg_store *s, const char *kind, const char *id, vigil_error *err);
    /* Remove every record whose owner is owner, of every kind; *removed gets the count. */
    vigil_code (*remove_owner)(struct vg_store *s, const char *owner, int64_t *removed,
                               vigil_error *err);
    /* Rare extras; unknown op: ENOTFOUND. */
    vigil_code (*control)(struct vg_store *s, int op, void *arg, vigil_error *err);
    /* end of version 1 */
    /*
     * Full-text index (version 2). Index `text` for the record (kind, id) owned by owner,
     * replacing what was indexed for it before; text NULL removes it from the index. The index
     * is separate from the records (a record need not exist), written in the open transaction,
     * and cleared by remove_owner. SQLite: FTS5; PostgreSQL: a tsvector column with a GIN index.
     */
    vigil_code (*text_index)(struct vg_store *s, const char *kind, const char *id,
                             const char *owner, const char *text, vigil_error *err);
    /*
     * Search the index of one kind and owner for any of the given plain terms (words, never
     * query syntax: the adapter quotes them for its engine, so no term can change the query's
     * meaning). Hits come best first, at most limit (1..1000). No terms: no hits.
     */
    vigil_code (*text_search)(struct vg_store *s, const char *kind, const char *owner,
                              const char *const *terms, size_t n_terms, int limit,
                              vg_text_hit_cb cb, void *user, vigil_error *err);
    /* end of version 2 */
};

/* Called after the outermost transaction commits (committed = 1) or rolls back (0). */
typedef void (*vg_store_tx_cb)(void *user, int committed);
/* Called after a record was written (vg_store_set_write_hook). */
typedef vigil_code (*vg_store_write_fn)(void *user, const struct vg_record *r, int updated,
                                        vigil_error *err);
/* Waits for a sync of the store begun after the call (vg_store_share_syncs). */
typedef vigil_code (*vg_store_sync_wait_fn)(void *user, vigil_error *err);

/* Writes kept back until the outermost commit (vg_store_defer): FLUSH just before it, inside
 * the transaction (a failure rolls the transaction back); then DONE once it committed, or ABORT
 * when it did not (rolled back, or a failed commit or flush). Meanwhile RELEASE when a
 * savepoint was released into the level below and PARTIAL when one was rolled back
 * (vg_store_depth then says which levels are left). */
enum vg_store_pending {
    VG_PENDING_FLUSH,
    VG_PENDING_DONE,
    VG_PENDING_ABORT,
    VG_PENDING_RELEASE,
    VG_PENDING_PARTIAL
};
typedef vigil_code (*vg_store_pending_fn)(void *user, enum vg_store_pending phase,
                                          vigil_error *err);
#define VG_STORE_PENDING_SLOTS 3

struct vg_round_waiter;

struct vg_store {
    const struct vg_store_methods *methods; /* must stay first */
    int depth;                              /* open transaction levels (0: none) */
    int failed;                             /* a write failed inside the open transaction */
    int wrote;                              /* the open transaction has written */
    uint64_t tx_serial;                     /* outermost transactions begun (vg_store_tx_serial) */
    vg_store_tx_cb on_tx_end;               /* one hook, for the embedder's own use */
    void *on_tx_end_user;
    int group_commit; /* set by vg_store_durable_commits: 1 while commits are not durable */
    /* The adapter's own durability differs from group_commit: switching it failed, and it is
     * switched again before the next write or transaction, which fails if it still cannot be
     * (a fiber resuming with its own durability: no commit of it may end the other way). */
    int durability_unset;
    /* Shared syncs (vg_store_share_syncs): durable commits commit without syncing, then call
     * this, which returns once a sync (VG_STORE_CTRL_SYNC) that began after the commit is
     * done. NULL: the adapter makes each durable commit durable itself. */
    vg_store_sync_wait_fn sync_wait;
    void *sync_wait_user;
    /* vg_store_defer: kept-back writes, one owner per function (a run's journal, the pointer
     * writes of a flat transaction); NULL in a free slot. */
    vg_store_pending_fn pending[VG_STORE_PENDING_SLOTS];
    void *pending_user[VG_STORE_PENDING_SLOTS];
    int flat;      /* the open transaction began with vg_store_begin_flat: no savepoints in it */
    int committed; /* the last outermost transaction committed (vg_store_committed) */
    /* The open transaction is a lone write's own, begun for it under folded commits: like a
     * write outside a transaction anywhere else, it fires no end-of-transaction hook. */
    int lone_write;
    /* Folded commits (vg_store_fold_commits): the outermost transactions of the fibers sharing
     * the connection are savepoints of one adapter transaction, a round, which the shared
     * sync's batch commits for all of them (vg_store_round_end). */
    int fold;
    int round;         /* a round's adapter transaction is open: adapter levels are one deeper */
    int round_members; /* transactions released into it, waiting for its end */
    int round_durable; /* one of them was a durable commit: the round's end syncs */
    /* The open round's waiting transactions (store.c, join_round), each told its round's
     * outcome where it waits, however many rounds end before it resumes. */
    struct vg_round_waiter *round_waiters;
    int read_batches; /* read batches open (vg_store_read_batch), for a fiber that parks */
    vg_store_write_fn write_hook; /* vg_store_set_write_hook; NULL: none */
    int member_rows; /* VG_STORE_CTRL_MEMBER_ROWS asked once: 0 not yet, 1 yes, -1 no (rows.c) */
    int member_refs; /* and its answer: a member may name its predecessor's string (rows.c) */
    struct vg_rows_last *rows_last; /* rows.c: the message row this connection wrote last */
    void *write_hook_user;
};

#endif
