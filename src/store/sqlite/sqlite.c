/*
 * sqlite.c: the SQLite adapter of the store port, vigil's embedded default.
 *
 * All records live in one table with index columns (see port.h); the schema is created and
 * upgraded by the numbered migrations below. Durability: WAL with synchronous=FULL, so a
 * commit has been fsynced before vigil acknowledges anything (synchronous=NORMAL in WAL mode
 * may lose the last transactions on power loss). Write transactions start with BEGIN IMMEDIATE
 * so two writers queue on the busy timeout instead of deadlocking on a lock upgrade.
 *
 * Sections: errors; migrations; open and close; statements; transactions; record methods.
 */
#include "base/common.h"

#include "store/sqlite/anchor.h"
#include "store/sqlite/gate.h"
#include "store/sqlite/key.h"
#include "store/sqlite/log_vfs.h"
#include "store/sqlite/record_cache.h"
#include "store/store_int.h"
#include "base/buf.h"
#include "base/stats.h"
#include "os/fs.h"

#include <pthread.h>
#include <sqlite3.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

/* "vigl": marks a SQLite file as a vigil store, so foreign databases are refused. */
#define VIGIL_APPLICATION_ID 0x7669676c

#define SCAN_SHAPES 256   /* one cached statement per combination of query filters */
#define TX_CACHED_DEPTH 8 /* savepoint levels whose statements are kept prepared */

/* A kind's writes by this connection, counted apart from every other kind's: a step writes its
 * budget usage, messages and links, and a count shared with the agent record's kind (16 hashed
 * counters did, until Session 33) made the agent kept under its mark read again at every step
 * (docs/internals/PERF.md). A process writes a few dozen kinds; more than the slots share one
 * count, which moves their marks too often, never too rarely. */
#define KIND_SLOTS 64
#define KIND_NAME_MAX 40 /* store.c's kind_valid */
struct kind_count {
    char kind[KIND_NAME_MAX + 1]; /* "" while free */
    uint64_t n;
};

struct sqlite_store {
    struct vg_store base; /* must stay first */
    sqlite3 *db;
    char path[1024];
    int read_only;
    int in_tx; /* an outermost transaction of ours is open (see settle()) */
    /* Read batches (VG_STORE_CTRL_READ_BATCH): while read_batch > 0, reads outside a write
     * transaction share one read transaction (read_tx: open), which the next write
     * transaction, control call or the batch's end closes. */
    int read_batch, read_tx;
    int busy_timeout_ms;
    struct vg_sqlite_gate *gate; /* the file's in-process writer gate, or NULL (gate.h) */
    int in_gate;                 /* this connection holds the gate */
    /* The process's read anchor of the file, once joined (VG_STORE_CTRL_READ_ANCHOR), and what
     * joining it needs: the name the file was opened by and through which VFS. */
    struct vg_sqlite_anchor *anchor;
    char uri[1024];
    const char *vfs;
    int schema_version;
    sqlite3_int64 synced_changes; /* sqlite3_total_changes64 at the last VG_STORE_CTRL_SYNC */
    int wal_checked;              /* the journal mode was found to be WAL */
    /* Commit durability is switched in the log VFS (VG_LOG_FCNTL_COMMIT_SYNC) under
     * synchronous=NORMAL, not by a PRAGMA: a PRAGMA takes effect while it is prepared, so each
     * switch parsed one, twice an agent step (docs/internals/PERF.md). */
    int vfs_commit_sync;
    sqlite3_stmt *st_put, *st_put_ignore, *st_update, *st_get, *st_rev, *st_remove;
    sqlite3_stmt *st_tk_get, *st_tk_put, *st_tk_del, *st_fts_put, *st_fts_del, *st_fts_search;
    sqlite3_stmt *st_put_ix, *st_put_ix_ignore;   /* schema 5 on: the insert that sets ix */
    sqlite3_stmt *st_put_hot, *st_put_hot_ignore; /* the same for a hot kind (sqlite_put) */
    sqlite3_stmt *st_settle;                      /* a hot row to the right end (settle) */
    sqlite3_stmt *st_update_ix; /* schema 7 on: the full update of a kind with k2_only */
    sqlite3_stmt **st_scan;     /* [QUERY_SLOTS][SCAN_SHAPES], prepared on first use */
    sqlite3_stmt **st_count;    /* same */
    /* [NARROW_VARIANTS]: keeps a kind's indexed keys (sqlite_update); one statement for every
     * kind whose k1 and k2 are alike indexed or not, so a runtime prepares at most four. */
    sqlite3_stmt **st_update_narrow;
    /* Transaction control, prepared once: a step of the agent loop opens a dozen savepoints,
     * and parsing each statement again cost more than running it. */
    sqlite3_stmt *st_begin, *st_commit;
    sqlite3_stmt *st_begin_read; /* a read batch's BEGIN (DEFERRED); it ends with st_commit */
    sqlite3_stmt *st_snapshot;   /* a read that takes the batch's snapshot (read_tx_begin) */
    sqlite3_stmt *st_savepoint[TX_CACHED_DEPTH], *st_release[TX_CACHED_DEPTH];
    /* Records read again and again, kept between transactions (record_cache.h), and SQLite's
     * data version when they were last known to be current: another connection's commit
     * changes it, and so does this one's own (counted in after each commit). */
    struct vg_record_cache cache;
    unsigned cache_version;
    /* VG_STORE_CTRL_CHANGE_MARK: other connections' commits noticed (at a write transaction's
     * start), this connection's writes of each kind, and its undoings of any. */
    uint64_t foreign_commits;
    struct kind_count kind_writes[KIND_SLOTS];
    uint64_t other_kind_writes; /* the kinds that found no slot free */
    uint64_t undoings;
};

static int prepared(struct sqlite_store *ss, sqlite3_stmt **slot, const char *sql,
                    sqlite3_stmt **out, int *temp);
static void done(sqlite3_stmt *st, int temp);
static void read_tx_end(struct sqlite_store *ss);

const size_t vg_store_sqlite_instance_size = sizeof(struct sqlite_store);

/* ---- errors -------------------------------------------------------------------------------- */

static vigil_code map_code(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
        return VIGIL_OK;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return VIGIL_EBUSY;
    case SQLITE_NOMEM:
        return VIGIL_ENOMEM;
    case SQLITE_FULL:
        return VIGIL_EFULL;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return VIGIL_ECORRUPT;
    case SQLITE_IOERR:
        return (rc == SQLITE_IOERR_NOMEM) ? VIGIL_ENOMEM : VIGIL_EIO;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return VIGIL_EDENIED;
    case SQLITE_CONSTRAINT:
        return VIGIL_EEXISTS;
    case SQLITE_CANTOPEN:
        return VIGIL_EIO;
    default:
        return VIGIL_ESTORE;
    }
}

/* Whatever may have changed records behind the cache (a rollback, a failure, a bulk delete,
 * another connection's commit) empties it, and moves every change mark
 * (VG_STORE_CTRL_CHANGE_MARK): what was read before may be undone. */
static void forget_kept(struct sqlite_store *ss)
{
    vg_record_cache_clear(&ss->cache);
    ss->undoings++;
}

/* Report a SQLite failure: what vigil was doing, then SQLite's own words. */
static vigil_code fail_sqlite(struct sqlite_store *ss, int rc, vigil_error *err, const char *what)
{
    /* After a failure SQLite may have rolled back more than the statement: nothing kept is
     * trusted any more. */
    forget_kept(ss);
    vigil_code code = map_code(rc);
    if (code == VIGIL_OK)
        code = VIGIL_ESTORE;
    const char *msg = ss->db ? sqlite3_errmsg(ss->db) : sqlite3_errstr(rc);
    VG_FAIL(err, code, "could not %s in store \"%s\": %s", what, ss->path, msg);
    if (err) {
        err->subcode = rc;
        vg_error_detail(err, "sqlite: %s (extended code %d)", sqlite3_errstr(rc), rc);
    }
    return code;
}

/* ---- migrations ---------------------------------------------------------------------------- */

/*
 * The schema as numbered steps. A store at version N has run steps 1..N; opening runs the
 * missing ones in one transaction. Steps are never edited once released: append new ones.
 */
/*
 * The secondary indexes a record is in, a bit each (migration 5). A kind listed here is left
 * out of the indexes none of its queries use: an agent step writes some twenty rows of these
 * kinds, and every index entry is a page the commit writes (docs/internals/STORE.md lists the
 * queries behind each choice). A query of a kind names the bits of that kind in its SQL, so
 * SQLite may use exactly the partial indexes that hold all of that kind's rows; any other
 * index is of no use to it and is not considered. Changing a kind's bits needs a migration
 * that updates its stored rows.
 */
enum {
    IX_OWNER_SEQ = 1,
    IX_OWNER_K1 = 2,
    IX_K1 = 4,
    IX_K2 = 8,
    IX_SEQ = 16,
    IX_ALL = 31, /* what a kind not listed below is in */
    /* Migration 6: (owner) alone, for kinds queried by owner only to remove an agent or to
     * verify it: all of an agent's rows of these kinds go to one place in it, where (kind,
     * owner, seq, id) put each kind in a place of its own, so a commit writes one page of it
     * instead of four. */
    IX_OWNER = 32,
    /* Migration 8: (owner, kind, k1, seq, id), which the kinds an agent step writes are in
     * instead of (owner) and (kind, k1, ...) or (kind, owner, k1, ...): their queries all name
     * the agent, and a commit's new entries of one agent, of every such kind, land side by side
     * in one leaf instead of one place per kind and index. */
    IX_AGENT = 64,
    /* Migration 10: (owner, kind, k2, seq, id), which an agent's observations are in instead of
     * (kind, k2, seq, id): the newest notes of one agent were found by walking every agent's
     * notes, newest first, so each model call's context cost grew with the whole store's
     * history (`vigil serve` got slower every turn). */
    IX_AGENT_K2 = 128,
    IX_K2_BITS = IX_K2 | IX_AGENT_K2 /* the indexes a kind's k2_only row is in */
};

static const struct {
    const char *kind;
    int ix10; /* from schema 10 */
    int ix9;  /* at schema 9 */
    int ix8;  /* at schema 8 */
    int ix;   /* at schemas 6 and 7 */
    int ix5;  /* at schema 5 */
    /* From schema 7: the kind's rows are in records_k2 only when their k2 is this, the one value
     * its queries look up by k2 (NULL: every row of it is in its indexes). A step writes three
     * messages of three types, and each type had a place of its own in (kind, k2, seq, id). */
    const char *k2_only;
    /* Rows rewritten at most commits of a run (its record and projection, head pointers, the
     * thread's step count): inserted at the table's left end, apart from the rows that are
     * only ever appended (sqlite_put). Not a schema property: any store can take it. */
    int hot;
    /* An update never changes the row's k1 and k2 (sqlite_update tries first the statement
     * that sets neither). A guess, not a rule: a change is still written, one try later. */
    int keys_fixed;
    int ix12; /* from schema 12 (0: as at schema 10) */
    /* k1 is a status that nearly every update moves, while k2 and seq stay (sqlite_update
     * tries first the statement that sets k1 and keeps seq). A guess, as keys_fixed is. */
    int status_moves;
    int ix22; /* from schema 22 (0: as before) */
    int ix23; /* from schema 23 (0: as before) */
    int ix25; /* from schema 25 (0: as before) */
} LEAN_KINDS[] = {
    /* Every kind is in (kind, owner, seq), (owner) or (owner, kind, ...): remove_owner deletes
     * through them. */
    /* journal: a run's (owner + k1); k2 a filter */
    {"journal", IX_AGENT, IX_AGENT, IX_AGENT, IX_OWNER | IX_K1, IX_OWNER_SEQ | IX_K1, NULL, 0, 0, 0,
     0, 0, 0, 0},
    /* message: a thread's (owner + k1); an agent's observations (owner + k2); by agent: verify */
    {"message", IX_AGENT | IX_AGENT_K2, IX_AGENT | IX_K2, IX_AGENT | IX_K2,
     IX_OWNER | IX_OWNER_K1 | IX_K2, IX_OWNER_SEQ | IX_OWNER_K1 | IX_K2, "observation", 0, 0, 0, 0,
     0, 0, 0},
    /* link: an end's targets (k1); by agent: verify */
    {"link", IX_OWNER | IX_K1, IX_OWNER | IX_K1, IX_OWNER | IX_K1, IX_OWNER | IX_K1,
     IX_OWNER_SEQ | IX_K1, NULL, 1, 0, 0, 0, 0, 0, 0},
    /* run_tool_call: a run's (owner + k1) */
    {"run_tool_call", IX_AGENT, IX_AGENT, IX_AGENT, IX_OWNER | IX_K1, IX_OWNER_SEQ | IX_K1, NULL, 0,
     0, 0, 0, 0, 0, 0},
    {"run_projection", IX_OWNER_SEQ, IX_OWNER_SEQ, IX_OWNER_SEQ, IX_OWNER_SEQ, IX_OWNER_SEQ, NULL,
     1, 1, 0, 0, 0, 0, 0}, /* by id */
    /* run: by agent, by status; all runs (k2 = "") */
    {"run", IX_ALL & ~IX_SEQ, IX_ALL & ~IX_SEQ, IX_ALL & ~IX_SEQ, IX_ALL & ~IX_SEQ,
     IX_ALL & ~IX_SEQ, NULL, 1, 0, 0, 0, 0, 0, 0},
    {"loop_thread", IX_OWNER_SEQ, IX_OWNER_SEQ, IX_OWNER_SEQ, IX_OWNER_SEQ, IX_OWNER_SEQ, NULL, 1,
     1, 0, 0, 0, 0, 0}, /* by id */
    /* Schema 9: a run's idempotency keys, read by id only, and an agent's change records, read
     * by agent (verify), go with the agent's other rows of a commit: each was an entry in five
     * indexes, two to three a run. */
    {"journal_key", IX_AGENT, IX_AGENT, IX_ALL, IX_ALL, IX_ALL, NULL, 0, 0, 0, 0, 0, 0, 0},
    {"agent_change", IX_AGENT, IX_AGENT, IX_ALL, IX_ALL, IX_ALL, NULL, 0, 0, 0, 0, 0, 0, 0},
    /* Schema 12: a task (owner "") is read by status (k1) and listed whole (seq); no query
     * names its owner or k2 (an agent kind), and (kind, owner, seq) stays for remove_owner.
     * Each status move rewrote its (kind, owner, k1) entry too, three to four a task. */
    {"task", IX_ALL, IX_ALL, IX_ALL, IX_ALL, IX_ALL, NULL, 0, 0, IX_OWNER_SEQ | IX_K1 | IX_SEQ, 1,
     0, 0, 0},
    /* Schema 12: a wake is read by agent and status, by status, by agent and listed whole;
     * no query names its k2 (the reason), an entry each wake's insert wrote. Schema 25: it is
     * in (owner, kind, k1, seq, id) and (kind, k1, seq, id) only, two entries a wake's insert
     * where there were four (a task's start, a child's start). Its queries by agent and status
     * and by status are served as before; by agent alone, it is the agent's wakes in (owner,
     * kind, ...) sorted, and listed whole, its wakes in the status index sorted (both bounded by
     * the wake log's retention; vigil_wake_runs' listings read each status apart, newest
     * first, src/runtime/wake_api.c). remove_owner finds it by owner (IX_AGENT). */
    {"wake_run", IX_ALL, IX_ALL, IX_ALL, IX_ALL, IX_ALL, NULL, 0, 0, IX_ALL & ~IX_K2, 1, 0, 0,
     IX_AGENT | IX_K1},
    /* Schema 22: an agent's lease is read by id and counted by holder (k1); its holder and its
     * expiry (seq, which every index ends in) move at every claim, renewal and release, and
     * each such write rewrote its entry in all five indexes. remove_owner finds it by owner. */
    {"agent_lease", IX_ALL, IX_ALL, IX_ALL, IX_ALL, IX_ALL, NULL, 0, 0, 0, 0, IX_OWNER | IX_K1, 0,
     0},
    /* Schema 23: multi-device sync's log (src/sync/capture.c), one entry a synced write, is read
     * by host and number (k1, seq) and by id; its owner is always "", so remove_owner never
     * looks for it. Each entry was a row in every index: five pages more a commit of a synced
     * store. A record's clock (sync_clock) is read by id only and rewritten at each write of
     * its record; remove_owner finds it by owner. */
    {"sync_log", IX_ALL, IX_ALL, IX_ALL, IX_ALL, IX_ALL, NULL, 0, 1, 0, 0, 0, IX_K1, 0},
    {"sync_clock", IX_ALL, IX_ALL, IX_ALL, IX_ALL, IX_ALL, NULL, 1, 1, 0, 0, 0, IX_OWNER, 0},
    /* Hot, no index change: an agent's wake counter (S3-021, rewritten at each of its wakes'
     * enqueues) and the task graph's stamp (src/orch/graph.c, rewritten by every transaction
     * that writes tasks) are rows made once and rewritten at most commits of the dispatcher and
     * of the wakes' enqueues. Made at their own moments, each sat on a leaf of its own among
     * the rows of that moment (a task's, a wake's), so a task's start wrote both leaves again;
     * at the left end they share one with the other hot rows. */
    {"wake_count", IX_ALL, IX_ALL, IX_ALL, IX_ALL, IX_ALL, NULL, 1, 1, 0, 0, 0, 0, 0},
    {"task_graph", IX_ALL, IX_ALL, IX_ALL, IX_ALL, IX_ALL, NULL, 1, 1, 0, 0, 0, 0, 0},
};

#define IX_SLOTS ((int)VG_ARRAY_LEN(LEAN_KINDS) + 1)
#define NARROW_VARIANTS 4
/* Cached query statements: a kind's usual ones, then its variant ones (query_ix). */
#define QUERY_SLOTS (2 * IX_SLOTS)

/* The kind's slot: 0 for a kind in every index, else 1 + its place in LEAN_KINDS. */
static int kind_slot(const char *kind)
{
    for (int i = 0; i < (int)VG_ARRAY_LEN(LEAN_KINDS); i++)
        if (strcmp(kind, LEAN_KINDS[i].kind) == 0)
            return i + 1;
    return 0;
}

/*
 * Schema 27: links are in records_k2 too, so the links to a record of one type ("type:to", k2)
 * are one indexed scan, as the links from one are through records_k1 (S3-025). Pointer links
 * are not: their target is their k2 and moves at most commits of a run (an agent's head message
 * at every append), and an entry there would be one more page each of those commits writes;
 * they are read by id only. A pointer's k2 begins with its relation, one of these.
 */
#define LINKS_TO 27
static const char *const LINK_POINTERS[] = {
    "agent_state:", "agent_head_message:", "agent_report_head:"};

/* The slot of "link" in LEAN_KINDS (sqlite_open checks it): asked at every statement of the
 * kind's, where a lookup by name cost about 1,000 instructions an agent step. */
#define LINK_SLOT 3

/* The kind's rows are links in a store where they are in records_k2 (LINKS_TO). */
static int links_to(int slot, int schema)
{
    return slot == LINK_SLOT && schema >= LINKS_TO;
}

/* The k2 of a link whose target moves (a pointer's), in a store where links are in records_k2. */
static int link_k2_moves(int slot, int schema, const char *k2)
{
    if (!links_to(slot, schema) || !k2)
        return 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(LINK_POINTERS); i++)
        if (strncmp(k2, LINK_POINTERS[i], strlen(LINK_POINTERS[i])) == 0)
            return 1;
    return 0;
}

/* The kind's index bits in a store at this schema version (5 or later), before LINKS_TO. */
static int slot_ix_before_links(int slot, int schema)
{
    return !slot                                       ? IX_ALL
           : schema >= 25 && LEAN_KINDS[slot - 1].ix25 ? LEAN_KINDS[slot - 1].ix25
           : schema >= 23 && LEAN_KINDS[slot - 1].ix23 ? LEAN_KINDS[slot - 1].ix23
           : schema >= 22 && LEAN_KINDS[slot - 1].ix22 ? LEAN_KINDS[slot - 1].ix22
           : schema >= 12 && LEAN_KINDS[slot - 1].ix12 ? LEAN_KINDS[slot - 1].ix12
           : schema >= 10                              ? LEAN_KINDS[slot - 1].ix10
           : schema >= 9                               ? LEAN_KINDS[slot - 1].ix9
           : schema >= 8                               ? LEAN_KINDS[slot - 1].ix8
           : schema >= 6                               ? LEAN_KINDS[slot - 1].ix
                                                       : LEAN_KINDS[slot - 1].ix5;
}

/* The kind's index bits in a store at this schema version (5 or later). */
static int slot_ix(int slot, int schema)
{
    int ix = slot_ix_before_links(slot, schema);
    return links_to(slot, schema) ? ix | IX_K2 : ix;
}

/* The kind's k2_only value at this schema version, or NULL. */
static const char *slot_k2_only(int slot, int schema)
{
    return slot && schema >= 7 ? LEAN_KINDS[slot - 1].k2_only : NULL;
}

/* The index bits of a row of the kind with this k2. */
static int row_ix(int slot, int schema, const char *k2)
{
    const char *only = slot_k2_only(slot, schema);
    int ix = slot_ix(slot, schema);
    if (link_k2_moves(slot, schema, k2))
        return ix & ~IX_K2_BITS;
    return only && strcmp(k2 ? k2 : "", only) != 0 ? ix & ~IX_K2_BITS : ix;
}

/* The bits a query names, so SQLite may use exactly the indexes that hold every row it can
 * match (see LEAN_KINDS); *variant is 1 when they differ from the kind's usual ones for this
 * shape (a k2 other than the kind's k2_only), which has statements of its own. */
static int query_ix(int slot, int schema, const struct vg_query *q, int *variant)
{
    const char *only = slot_k2_only(slot, schema);
    int ix = slot_ix(slot, schema);
    *variant = 0;
    if (only && !(q->k2 && strcmp(q->k2, only) == 0)) {
        ix &= ~IX_K2_BITS;
        *variant = q->k2 != NULL;
    }
    /* Links: only a query by a k2 no pointer has may name records_k2, which pointers are not
     * in; any other reaches them through the kind's other indexes. */
    if (links_to(slot, schema) && (!q->k2 || link_k2_moves(slot, schema, q->k2))) {
        ix &= ~IX_K2_BITS;
        *variant = q->k2 != NULL;
    }
    return ix;
}

/* SQL for a key column's text (key.h): a BLOB's 16 bytes as a UUID, then the rest. */
#define KEY_TEXT(c)                                                                                \
    "CASE WHEN typeof(" c ") = 'blob' THEN lower(substr(hex(" c "), 1, 8) || '-' || "              \
    "substr(hex(" c "), 9, 4) || '-' || substr(hex(" c "), 13, 4) || '-' || "                      \
    "substr(hex(" c "), 17, 4) || '-' || substr(hex(" c "), 21, 12)) || "                          \
    "CAST(substr(" c ", 17) AS TEXT) ELSE " c " END AS " c

static const char *const migrations[] = {
    /* 1: the record table with its identity and per-owner indexes, and the meta table. */
    ("CREATE TABLE vigil_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
     "CREATE TABLE records("
     "  kind TEXT NOT NULL, id TEXT NOT NULL, owner TEXT NOT NULL, k1 TEXT NOT NULL,"
     "  k2 TEXT NOT NULL, seq INTEGER NOT NULL, rev INTEGER NOT NULL, at INTEGER NOT NULL,"
     "  body TEXT NOT NULL);"
     "CREATE UNIQUE INDEX records_id ON records(kind, id);"
     "CREATE INDEX records_owner_seq ON records(kind, owner, seq, id);"
     "CREATE INDEX records_owner_k1 ON records(kind, owner, k1, seq, id);"),
    /* 2: indexes for queries across owners by either key (run lists, link reverse lookups). */
    ("CREATE INDEX records_k1 ON records(kind, k1, seq, id);"
     "CREATE INDEX records_k2 ON records(kind, k2, seq, id);"),
    /* 3: lists of a whole kind in (seq, id) order (all agents, oldest first). */
    ("CREATE INDEX records_seq ON records(kind, seq, id);"),
    /* 4: the full-text index (port version 2). text_keys maps (kind, id) to the FTS5 rowid so
     * re-indexing and removal are point operations; the FTS5 table holds only the text. */
    ("CREATE TABLE text_keys(rid INTEGER PRIMARY KEY, kind TEXT NOT NULL, id TEXT NOT NULL,"
     "  owner TEXT NOT NULL);"
     "CREATE UNIQUE INDEX text_keys_id ON text_keys(kind, id);"
     "CREATE INDEX text_keys_owner ON text_keys(owner);"
     "CREATE VIRTUAL TABLE text_fts USING fts5(text, tokenize='unicode61 remove_diacritics 2');"),
    /* 5: each row says which secondary indexes it is in (ix, a bit per index), and those
     * indexes hold only the rows whose bit is set. The hot kinds of an agent step leave out
     * the indexes none of their queries use (LEAN_KINDS above); the rows already stored get
     * their kind's bits in migrate(). */
    ("ALTER TABLE records ADD COLUMN ix INTEGER NOT NULL DEFAULT 31;"
     "DROP INDEX records_owner_seq;"
     "DROP INDEX records_owner_k1;"
     "DROP INDEX records_k1;"
     "DROP INDEX records_k2;"
     "DROP INDEX records_seq;"
     "CREATE INDEX records_owner_seq ON records(kind, owner, seq, id) WHERE ix & 1;"
     "CREATE INDEX records_owner_k1 ON records(kind, owner, k1, seq, id) WHERE ix & 2;"
     "CREATE INDEX records_k1 ON records(kind, k1, seq, id) WHERE ix & 4;"
     "CREATE INDEX records_k2 ON records(kind, k2, seq, id) WHERE ix & 8;"
     "CREATE INDEX records_seq ON records(kind, seq, id) WHERE ix & 16;"),
    /* 6: an index of the owner alone (IX_OWNER), which message, journal, link and
     * run_tool_call rows are in instead of (kind, owner, seq, id); migrate() moves their stored
     * rows over. */
    ("CREATE INDEX records_owner ON records(owner) WHERE ix & 32;"),
    /* 7: the identity index leads with the id, so the new rows of a commit, whatever their
     * kinds, land in one leaf of it (ids begin with their time) instead of one per kind: about
     * four log frames a step fewer. Every kind keeps an index that leads with the kind, which
     * the queries that walk a kind use instead. Messages are in records_k2 only when they are
     * observations (LEAN_KINDS' k2_only). */
    ("DROP INDEX records_id;"
     "CREATE UNIQUE INDEX records_id ON records(id, kind);"
     "UPDATE records SET ix = ix & ~8 WHERE kind = 'message' AND ix & 8 AND k2 <> 'observation';"),
    /* 8: the index that leads with the agent (IX_AGENT), which journal records, messages and
     * tool calls are in instead of their owner and key indexes; migrate() moves their stored
     * rows over (a message keeps records_k2 when it is an observation). */
    ("CREATE INDEX records_agent ON records(owner, kind, k1, seq, id) WHERE ix & 64;"),
    /* 9: journal keys and agent change records move to the agent index (LEAN_KINDS); migrate()
     * moves their stored rows over. */
    ("SELECT 1;"),
    /* 10: an agent's observations move from records_k2 to the index that leads with the agent
     * and k2 (IX_AGENT_K2); no other kind is in it. */
    ("CREATE INDEX records_agent_k2 ON records(owner, kind, k2, seq, id) WHERE ix & 128;"
     "UPDATE records SET ix = (ix & ~8) | 128 WHERE kind = 'message' AND ix & 8;"),
    /* 11: key columns that begin with a UUID hold its 16 bytes and the rest (key.h): each row
     * and index entry held three or four UUIDs as 36 characters of text. vigil_key() is the
     * connection's function for it (register_functions). The view records_text shows the
     * table with its keys as text, in plain SQL, for other tools (sqlite3) and scripts. */
    ("UPDATE records SET id = vigil_key(id), owner = vigil_key(owner), k1 = vigil_key(k1),"
     "  k2 = vigil_key(k2);"
     "CREATE VIEW records_text AS SELECT kind, " KEY_TEXT("id") ", " KEY_TEXT(
         "owner") ", " KEY_TEXT("k1") ", " KEY_TEXT("k2") ", seq, rev, at, body, ix FROM records;"),
    /* 12: tasks leave the owner-and-k1 and k2 indexes, wakes the k2 index (LEAN_KINDS);
     * migrate() moves their stored rows over. */
    ("SELECT 1;"),
    /* 13: bodies may hold shapes (src/store/body.c): nothing moves, but a vigil that cannot
     * read them back must refuse the store rather than show their holes as the record. */
    ("SELECT 1;"),
    /* 14: a task stored pending whose blockers are all done is ready (src/orch/task.c
     * derive_ready): nothing moves, but a vigil that waits for a written `ready` would never
     * start such a task, so it must refuse the store. */
    ("SELECT 1;"),
    /* 15: a task stored pending or ready whose next attempt's wake exists is running (src/orch/
     * task.c derive_running): nothing moves, but a vigil that waits for a written `running`
     * would start such a task a second time, so it must refuse the store. */
    ("SELECT 1;"),
    /* 16: a tool call's end record may be kept in its toolResult message's row (src/journal/
     * ends.c) and its body in a shape naming the row's own id: nothing moves, but a vigil that
     * reads a run's journal from its journal rows alone would see such calls still running
     * (and its recovery would close them as crashed), so it must refuse the store. */
    ("SELECT 1;"),
    /* 17: a tool call's start record may be kept in its action message's row (src/journal/
     * ends.c), and a start's body in a shape naming the row's own id (store/body.c, 18): nothing
     * moves, but a vigil that reads a run's journal from its journal rows alone would miss such
     * calls, and one that knows no such shape cannot read the body, so it must refuse the
     * store. */
    ("SELECT 1;"),
    /* 18: a spawn call's children queued for a slot may be kept in its spawn_call record, with
     * no spawn_child record until they start (src/orch/child.c): nothing moves, but a vigil
     * that looks for waiting children in spawn_child records alone would never start them, so
     * it must refuse the store. */
    ("SELECT 1;"),
    /* 19: a model call's journal record may be kept in its answer's thought message row
     * (src/journal/ends.c, "journal_call"): nothing moves, but a vigil that reads a run's journal
     * from its rows and the tool call messages alone would see sequence gaps, so it must refuse
     * the store. */
    ("SELECT 1;"),
    /* 20: a journal record kept in a message may leave its time and its call's id to the
     * message (its created_at, its prev_id: src/journal/ends.c), in a shape naming the prev_id
     * (store/body.c, 19), and a run's header may leave out its constants (store/body.c,
     * 20-22): nothing moves, but a vigil that reads the member's time from it would not read
     * such a record, nor one that knows no such entry the header, so it must refuse the store. */
    ("SELECT 1;"),
    /* 21: a message's prev_id and run_id, and a tool call's operation id in its action and
     * result, may be stored as the bytes of the UUID or SHA-256 they are (store/body.c, message
     * entries 19-22): nothing moves (a body stored before reads as it did), but a vigil
     * without those entries would read such a body as its stored text, so it must refuse the
     * store. */
    ("SELECT 1;"),
    /* 22: an agent's lease leaves every index but the owner and k1 ones (LEAN_KINDS); migrate()
     * moves the stored rows over. */
    ("SELECT 1;"),
    /* 23: multi-device sync's log entries and record clocks leave the indexes their queries do
     * not use (LEAN_KINDS); migrate() moves the stored rows over. */
    ("SELECT 1;"),
    /* 24: a step's action and toolResult messages may be kept in the row of the thought before
     * them (store/rows.c, VG_STORE_CTRL_MEMBER_ROWS): nothing moves (the messages stored before
     * keep their rows), but a vigil that reads a row as one message would not see the others
     * in it, so it must refuse the store. */
    ("SELECT 1;"),
    /* 25: wakes leave (kind, owner, seq, id), (kind, owner, k1, seq, id) and (kind, seq, id)
     * for (owner, kind, k1, seq, id) (LEAN_KINDS); the stored rows move in this step. */
    ("UPDATE records SET ix = 64 | 4 WHERE kind = 'wake_run' AND ix <> (64 | 4);"),
    /* 26: a member of a step's row may name a string of the member before it instead of
     * repeating it (store/rows.c, MEMBER_REFS): nothing moves, but a vigil that knows no such
     * member would read it as stored, so it must refuse the store. And the meta table of step 1
     * goes. Nothing has read or written it since the schema's
     * version and the store's mark moved to the file's header (user_version, application_id),
     * and it and its key's index kept two pages of every store (4 KiB each, empty); a new store's
     * first rows take them back. PostgreSQL keeps its own (pg.c). */
    ("DROP TABLE IF EXISTS vigil_meta;"),
    /* 27: links other than pointers join records_k2 (LINKS_TO), so the links to a record are one
     * indexed scan; the stored rows move in this step. A pointer's k2 begins with its relation,
     * and no key that begins so is stored as bytes (key.h). */
    ("UPDATE records SET ix = ix | 8 WHERE kind = 'link' AND NOT ix & 8"
     "  AND substr(k2, 1, 12) <> 'agent_state:' AND substr(k2, 1, 19) <> 'agent_head_message:'"
     "  AND substr(k2, 1, 18) <> 'agent_report_head:';"),
};

/* The schema from which a step's messages may share a row (store/rows.c). */
#define MEMBER_ROWS 24
/* The schema from which a member may name a string of the member before it (store/rows.c). */
#define MEMBER_REFS 26

/* The schema from which the key columns are stored in their packed form (key.h). */
#define KEYS_PACKED 11

#define SCHEMA_LATEST ((int)VG_ARRAY_LEN(migrations))

static vigil_code exec(struct sqlite_store *ss, const char *sql, vigil_error *err, const char *what)
{
    int rc = sqlite3_exec(ss->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return fail_sqlite(ss, rc, err, what);
    return VIGIL_OK;
}

/* exec() for a statement kept prepared in *slot (transaction control on the hot path). */
static vigil_code exec_cached(struct sqlite_store *ss, sqlite3_stmt **slot, const char *sql,
                              vigil_error *err, const char *what)
{
    sqlite3_stmt *st;
    int temp, rc = prepared(ss, slot, sql, &st, &temp);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        done(st, temp);
        if (rc == SQLITE_DONE || rc == SQLITE_ROW)
            return VIGIL_OK;
    }
    return fail_sqlite(ss, rc, err, what);
}

static int pragma_int(struct sqlite_store *ss, const char *sql, int *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(ss->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int(st, 0);
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            *out = 0;
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* Decide from the header alone (before anything is written) whether this is a vigil store this
 * version can use: refuse another program's database and a newer schema, untouched. */
static vigil_code check_schema(struct sqlite_store *ss, int create, vigil_error *err)
{
    int app_id = 0, user_version = 0, n_tables = 0, rc;
    if ((rc = pragma_int(ss, "PRAGMA application_id", &app_id)) != SQLITE_OK ||
        (rc = pragma_int(ss, "PRAGMA user_version", &user_version)) != SQLITE_OK ||
        (rc = pragma_int(ss, "SELECT count(*) FROM sqlite_schema", &n_tables)) != SQLITE_OK)
        return fail_sqlite(ss, rc, err, "read the schema");
    if (app_id != VIGIL_APPLICATION_ID && (n_tables > 0 || user_version > 0 || app_id != 0))
        return VG_FAIL(err, VIGIL_ECORRUPT,
                       "\"%s\" is a SQLite database of another program, not a vigil store",
                       ss->path);
    if (user_version < 0)
        return VG_FAIL(err, VIGIL_ECORRUPT, "store \"%s\" has an invalid schema version %d",
                       ss->path, user_version);
    if (user_version > SCHEMA_LATEST)
        return VG_FAIL(err, VIGIL_EVERSION,
                       "store \"%s\" has schema version %d, newer than this vigil supports (%d): "
                       "upgrade vigil",
                       ss->path, user_version, SCHEMA_LATEST);
    if (n_tables == 0 && user_version == 0 && !create)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "store \"%s\" is empty (create it with `vigil init`)",
                       ss->path);
    ss->schema_version = user_version;
    return VIGIL_OK;
}

/* vigil_key(text): the stored form of a key column's value (key.h), for migration 11. */
static void key_function(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    unsigned char packed[VG_SQLITE_KEY_MAX];
    size_t n = 0;
    (void)argc;
    int type = sqlite3_value_type(argv[0]); /* before the text conversion can change it */
    const char *text = type == SQLITE_TEXT ? (const char *)sqlite3_value_text(argv[0]) : NULL;
    if (text && strlen(text) == (size_t)sqlite3_value_bytes(argv[0])) /* no NUL inside */
        n = vg_sqlite_key_pack(text, packed);
    if (n)
        sqlite3_result_blob(ctx, packed, (int)n, SQLITE_TRANSIENT);
    else
        sqlite3_result_value(ctx, argv[0]);
}

static int register_functions(struct sqlite_store *ss)
{
    return sqlite3_create_function(ss->db, "vigil_key", 1,
                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY, NULL,
                                   key_function, NULL, NULL);
}

static vigil_code migrate(struct sqlite_store *ss, int target, vigil_error *err)
{
    int user_version = ss->schema_version, rc;
    if (target <= 0 || target > SCHEMA_LATEST)
        target = SCHEMA_LATEST;
    if (user_version >= target)
        return VIGIL_OK;
    if (ss->read_only)
        return VG_FAIL(err, VIGIL_EDENIED,
                       "store \"%s\" needs a schema upgrade but was opened read-only", ss->path);

    vigil_code code = exec(ss, "BEGIN IMMEDIATE", err, "start the schema upgrade");
    if (code)
        return code;
    /* Re-read inside the write lock: another process may have migrated meanwhile. */
    if ((rc = pragma_int(ss, "PRAGMA user_version", &user_version)) != SQLITE_OK) {
        code = fail_sqlite(ss, rc, err, "read the schema version");
        goto out;
    }
    if (user_version < 0 || user_version > SCHEMA_LATEST) {
        code =
            VG_FAIL(err, VIGIL_EVERSION, "store \"%s\" changed to schema version %d while opening",
                    ss->path, user_version);
        goto out;
    }
    for (int v = user_version + 1; v <= target; v++) {
        char sql[64];
        if ((code = exec(ss, migrations[v - 1], err, "upgrade the schema")))
            goto out;
        /* Steps 5, 6, 8, 9, 12, 22 and 23 change which indexes rows are in: the stored rows
         * get their kind's bits now (only those that differ, so a row already right is not
         * rewritten; from 7 on a message's bits depend on its k2). A store made by this
         * upgrade (from version 0) has no rows to move. */
        int moves = user_version > 0 &&
                    (v == 5 || v == 6 || v == 8 || v == 9 || v == 12 || v == 22 || v == 23);
        for (int i = 0; moves && i < (int)VG_ARRAY_LEN(LEAN_KINDS); i++) {
            int ix = slot_ix(i + 1, v), k2_bits = slot_k2_only(i + 1, v) ? IX_K2 : 0;
            if (ix == IX_ALL || (v >= 8 && ix == slot_ix(i + 1, v - 1)))
                continue;
            char upd[200];
            snprintf(upd, sizeof upd,
                     "UPDATE records SET ix=(%d | (ix & %d)) "
                     "WHERE kind='%s' AND ix<>(%d | (ix & %d))",
                     ix & ~k2_bits, k2_bits, LEAN_KINDS[i].kind, ix & ~k2_bits, k2_bits);
            if ((code = exec(ss, upd, err, "upgrade the schema")))
                goto out;
        }
        snprintf(sql, sizeof sql, "PRAGMA user_version=%d", v);
        if ((code = exec(ss, sql, err, "record the schema version")))
            goto out;
    }
    if (user_version == 0) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA application_id=%d", VIGIL_APPLICATION_ID);
        if ((code = exec(ss, sql, err, "mark the store")))
            goto out;
    }
    code = exec(ss, "COMMIT", err, "commit the schema upgrade");
    if (code == VIGIL_OK)
        ss->schema_version = target;
out:
    if (code != VIGIL_OK)
        sqlite3_exec(ss->db, "ROLLBACK", NULL, NULL, NULL);
    return code;
}

/* ---- memory -------------------------------------------------------------------------------- */

/*
 * SQLite allocates through vg_malloc like the rest of vigil, so the allocation torture tests
 * reach inside SQLite too (it turns a failed allocation into SQLITE_NOMEM). Each block carries
 * its size in a 16-byte header for xSize. Installed once, before SQLite initializes; if the
 * process already used SQLite, it keeps its own allocator.
 */
#define MEM_HDR 16

/*
 * With temp_store=MEMORY, SQLite keeps a savepoint's copies of the pages it changes (the
 * sub-journal) in memory, in chunks of 1 KiB that it frees all at once when the outermost
 * savepoint is released. Under folded commits every fiber's transaction is such a savepoint,
 * so each allocates and frees some sixty chunks: malloc and free of them were a measured
 * share of an agent step (docs/internals/PERF.md). Blocks of exactly that size are kept on a
 * short list for the next savepoint instead: at most RECYCLE_MAX, 128 KiB (the sizes tried and
 * what each cost: docs/internals/PERF.md). Not while the torture tests
 * inject failures (their allocations must reach vg_malloc). Under AddressSanitizer a block on
 * the list is poisoned, so a use after free of it is still caught; its link lives in the
 * block's header, which the allocator owns.
 */
#define RECYCLE_SIZE 1024
#define RECYCLE_MAX 128

#ifdef VG_ASAN
#include <sanitizer/asan_interface.h>
#define RECYCLE_HIDE(p) ASAN_POISON_MEMORY_REGION((p), RECYCLE_SIZE)
#define RECYCLE_SHOW(p) ASAN_UNPOISON_MEMORY_REGION((p), RECYCLE_SIZE)
#else
#define RECYCLE_HIDE(p) ((void)(p))
#define RECYCLE_SHOW(p) ((void)(p))
#endif

static pthread_mutex_t recycle_lock = PTHREAD_MUTEX_INITIALIZER;
static void *recycle_top; /* a block's payload; its header's second word links the next */
static int recycle_n;

static void **recycle_link(void *p)
{
    return (void **)((char *)p - MEM_HDR + sizeof(int64_t));
}

static int recycling(int n)
{
    return n == RECYCLE_SIZE && !vg_alloc_has_port();
}

static void *mem_malloc(int n)
{
    /* The list is the process's: where another thread holds it, malloc serves (no waiting). */
    if (recycling(n) && pthread_mutex_trylock(&recycle_lock) == 0) {
        void *p = recycle_top;
        if (p) {
            recycle_top = *recycle_link(p);
            recycle_n--;
        }
        pthread_mutex_unlock(&recycle_lock);
        if (p) {
            RECYCLE_SHOW(p);
            return p; /* its header still says RECYCLE_SIZE */
        }
    }
    char *p = vg_malloc((size_t)n + MEM_HDR);
    if (!p)
        return NULL;
    *(int64_t *)p = n;
    return p + MEM_HDR;
}

static void mem_free(void *p)
{
    if (!p)
        return;
    if (recycling((int)*(int64_t *)((char *)p - MEM_HDR)) &&
        pthread_mutex_trylock(&recycle_lock) == 0) {
        int kept = recycle_n < RECYCLE_MAX;
        if (kept) {
            RECYCLE_HIDE(p);
            *recycle_link(p) = recycle_top;
            recycle_top = p;
            recycle_n++;
        }
        pthread_mutex_unlock(&recycle_lock);
        if (kept)
            return;
    }
    vg_free((char *)p - MEM_HDR);
}

static void *mem_realloc(void *p, int n)
{
    char *q = vg_realloc((char *)p - MEM_HDR, (size_t)n + MEM_HDR);
    if (!q)
        return NULL;
    *(int64_t *)q = n;
    return q + MEM_HDR;
}

static int mem_size(void *p)
{
    return p ? (int)*(int64_t *)((char *)p - MEM_HDR) : 0;
}

static int mem_roundup(int n)
{
    return (n + 7) & ~7;
}

static int mem_init(void *arg)
{
    return SQLITE_OK;
}

static void mem_shutdown(void *arg)
{
}

static void install_allocator(void)
{
    static const sqlite3_mem_methods methods = {mem_malloc,  mem_free, mem_realloc,  mem_size,
                                                mem_roundup, mem_init, mem_shutdown, NULL};
    sqlite3_config(SQLITE_CONFIG_MALLOC, &methods); /* SQLITE_MISUSE if already in use: fine */
    /* No allocation statistics: vigil never reads them, and keeping them takes a global mutex
     * around every allocation SQLite makes (some nine hundred per agent step with Debian's
     * library, which has no lookaside; about a hundred with scripts/sqlite.sh's). */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
#ifdef VG_ASAN
    /* Under AddressSanitizer every allocation goes to malloc, where ASan watches it: a column
     * read after its statement moved on must fail the test, not read a recycled lookaside
     * slot. */
    sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0);
#endif
    /* Every store's files through the log VFS (log_vfs.c). If it cannot be registered, stores
     * open through SQLite's default VFS: the same files, two system calls per log page. */
    (void)vg_sqlite_log_vfs_register();
}

void vg_store_sqlite_setup(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_allocator);
}

/* Run a journal_mode PRAGMA (sql) and put the mode it reports in mode ("" if none). */
static int journal_mode(struct sqlite_store *ss, const char *sql, char mode[16])
{
    sqlite3_stmt *st = NULL;
    mode[0] = '\0';
    int rc = sqlite3_prepare_v2(ss->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        snprintf(mode, 16, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* ---- open and close ------------------------------------------------------------------------ */

/* The folder of the store file at path, made (with its parents) when it is missing. */
static vigil_code make_folder(const char *path, vigil_error *err)
{
    char dir[sizeof((struct sqlite_store *)0)->path];
    vg_fs_dirname(path, dir, sizeof dir);
    return vg_fs_exists(dir) ? VIGIL_OK : vg_fs_mkdir_p(dir, err);
}

/* The VFS a store opens through: the log VFS unless the options turn it off or it could not be
 * registered; then the one it would have sat on (the platform's, or a test's shim under it). */
static const char *vfs_name(const struct vg_store_options *o)
{
    sqlite3_vfs *base = vg_sqlite_log_vfs_base();
    if (o->no_log_vfs || !sqlite3_vfs_find("vigil"))
        return base ? base->zName : NULL;
    return "vigil";
}

/* A store this process cannot write, with no log beside it, in a folder where SQLite cannot
 * make one (a copy on read-only media, a file another user keeps): nothing can be writing it,
 * since a writer keeps its log there, and the file holds every commit. */
static int sealed_copy(const char *path)
{
    char wal[sizeof((struct sqlite_store *)0)->path + 8];
    struct stat st;
    snprintf(wal, sizeof wal, "%s-wal", path);
    return access(path, W_OK) != 0 && stat(wal, &st) != 0 && errno == ENOENT;
}

/* Open such a store as immutable: SQLite reads it without the log and shared-memory files it
 * cannot create. Every write is refused (read-only). */
static int open_sealed(struct sqlite_store *ss, const char *path)
{
    char u[sizeof ss->path * 3 + 32];
    size_t n = (size_t)snprintf(u, sizeof u, "file:");
    for (const char *p = path; *p && n + 4 < sizeof u; p++)
        n += (size_t)(strchr("%?#", *p) ? snprintf(u + n, sizeof u - n, "%%%02X", *p)
                                        : snprintf(u + n, sizeof u - n, "%c", *p));
    snprintf(u + n, sizeof u - n, "?immutable=1");
    sqlite3_close(ss->db);
    ss->db = NULL;
    ss->read_only = 1;
    int rc = sqlite3_open_v2(u, &ss->db,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX |
                                 SQLITE_OPEN_EXRESCODE,
                             ss->vfs);
    if (rc == SQLITE_OK)
        sqlite3_extended_result_codes(ss->db, 1);
    return rc;
}

static vigil_code sqlite_open(struct vg_store *s, const char *uri, const struct vg_store_options *o,
                              vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    vigil_code code = VIGIL_OK;
    int flags, rc;
    if (snprintf(ss->path, sizeof ss->path, "%s", uri) >= (int)sizeof ss->path)
        return VG_FAIL(err, VIGIL_EINVAL, "store path is longer than %zu bytes",
                       sizeof ss->path - 1);
    if (strcmp(LEAN_KINDS[LINK_SLOT - 1].kind, "link") != 0)
        VG_BUG("LINK_SLOT is not the slot of links in LEAN_KINDS");
    ss->read_only = o->read_only;
    ss->cache.off = o->no_record_cache != 0;
    ss->st_scan = vg_calloc((size_t)QUERY_SLOTS * SCAN_SHAPES, sizeof *ss->st_scan);
    ss->st_count = vg_calloc((size_t)QUERY_SLOTS * SCAN_SHAPES, sizeof *ss->st_count);
    ss->st_update_narrow = vg_calloc(NARROW_VARIANTS, sizeof *ss->st_update_narrow);
    if (!ss->st_scan || !ss->st_count || !ss->st_update_narrow)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening store \"%s\"", uri);
    vg_store_sqlite_setup();
    struct stat st;
    if (stat(uri, &st) == 0 && S_ISDIR(st.st_mode))
        return VG_FAIL(err, VIGIL_EINVAL, "store path \"%s\" is a directory, not a store file",
                       uri);
    /* Creating a store creates its folder too (vigil.h), 0700 like every folder vigil makes;
     * the file itself is made 0600 by the log VFS (log_vfs.c). */
    if (o->create_if_missing && !o->read_only && (code = make_folder(uri, err)))
        return code;
    flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
    if (o->read_only)
        flags |= SQLITE_OPEN_READONLY;
    else
        flags |= SQLITE_OPEN_READWRITE | (o->create_if_missing ? SQLITE_OPEN_CREATE : 0);
    ss->vfs = vfs_name(o);
    snprintf(ss->uri, sizeof ss->uri, "%s", uri);
    rc = sqlite3_open_v2(uri, &ss->db, flags, ss->vfs);
    if (rc != SQLITE_OK) {
        if ((rc & 0xff) == SQLITE_CANTOPEN && !o->create_if_missing) {
            code = VG_FAIL(err, VIGIL_ENOTFOUND,
                           "store \"%s\" does not exist or cannot be opened (create it with "
                           "`vigil init`)",
                           uri);
            if (err)
                err->subcode = rc;
            return code;
        }
        return fail_sqlite(ss, rc, err, "open the database");
    }
    sqlite3_extended_result_codes(ss->db, 1);
    ss->busy_timeout_ms = o->busy_timeout_ms > 0 ? o->busy_timeout_ms : 5000;
    sqlite3_busy_timeout(ss->db, ss->busy_timeout_ms);

    /* Reading the schema is the first real access: a foreign or damaged file fails here. */
    int probe = 0;
    rc = pragma_int(ss, "PRAGMA schema_version", &probe);
    if (rc != SQLITE_OK && !o->create_if_missing && sealed_copy(uri) &&
        (rc = open_sealed(ss, uri)) == SQLITE_OK)
        rc = pragma_int(ss, "PRAGMA schema_version", &probe);
    if (rc != SQLITE_OK) {
        if (map_code(rc) == VIGIL_ECORRUPT)
            return VG_FAIL(err, VIGIL_ECORRUPT,
                           "\"%s\" is not a vigil store (the file is not a SQLite database or is "
                           "damaged)",
                           uri);
        return fail_sqlite(ss, rc, err, "read the database header");
    }
    if ((code = check_schema(ss, o->create_if_missing, err)))
        return code;
    if (!ss->read_only) {
        char mode[16];
        if ((rc = journal_mode(ss, "PRAGMA journal_mode=WAL", mode)) != SQLITE_OK)
            return fail_sqlite(ss, rc, err, "enable the write-ahead log");
        int on = 1;
        ss->wal_checked = strcmp(mode, "wal") == 0;
        ss->vfs_commit_sync =
            ss->wal_checked &&
            sqlite3_file_control(ss->db, "main", VG_LOG_FCNTL_COMMIT_SYNC, &on) == SQLITE_OK;
    }
    /* A small page cache holds the hot paths: an append at the millionth message touches a
     * few dozen pages, the latest messages of a thread about as many. Everything else comes
     * from the kernel's page cache. A bigger cache filled with every page a run ever read for
     * no measurable gain, and another connection's commit empties it anyway. 1 MiB, half of
     * SQLite's default: a hundred agents' turns at once read some six more pages a model call
     * from the kernel and the process peaks 0.9 MB lower. A transaction's changed pages still
     * spill to the log only past 512 pages (2 MiB at 4 KiB, as before): spilled at a 512 KiB
     * cache's size, a hundred agents' folded commits wrote three times the log pages. No
     * memory-mapped reads: every connection maps the file on its own and the pages it touches count
     * again in the process's resident memory. (The figures: docs/internals/PERF.md, "Store
     * memory".) */
    if ((code = exec(ss,
                     "PRAGMA foreign_keys=OFF;"
                     "PRAGMA cache_size=-1024; PRAGMA cache_spill=512; PRAGMA mmap_size=0;"
                     /* Deleted and overwritten rows are zeroed in the file (an erased agent's
                      * messages, an edited memory block's old text), whichever SQLite build
                      * is linked (its cost: docs/internals/PERF.md). */
                     "PRAGMA secure_delete=ON;"
                     /* Statement and savepoint journals in memory: no temp file per nested
                      * transaction. */
                     "PRAGMA temp_store=MEMORY;"
                     /* Checkpoint every 10000 pages instead of 1000: hot pages rewritten by
                      * many small commits are copied back once per checkpoint, not once per
                      * few commits, and the database file is synced less often. */
                     "PRAGMA wal_autocheckpoint=10000",
                     err, "set durability")))
        return code;
    /* Every commit durable (a sync of the log at its commit) until told otherwise. */
    if ((code =
             exec(ss, ss->vfs_commit_sync ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL",
                  err, "set durability")))
        return code;
    if ((rc = register_functions(ss)) != SQLITE_OK)
        return fail_sqlite(ss, rc, err, "register the store's functions");
    if ((code = migrate(ss, o->target_version, err)))
        return code;
    if (!ss->read_only)
        ss->gate = vg_sqlite_gate_get(uri); /* the file exists now that it is migrated */
    return VIGIL_OK;
}

static void sqlite_close(struct vg_store *s)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    if (ss->db)
        read_tx_end(ss);
    vg_record_cache_release(&ss->cache);
    sqlite3_finalize(ss->st_put);
    sqlite3_finalize(ss->st_put_ignore);
    sqlite3_finalize(ss->st_update);
    sqlite3_finalize(ss->st_get);
    sqlite3_finalize(ss->st_rev);
    sqlite3_finalize(ss->st_remove);
    sqlite3_finalize(ss->st_tk_get);
    sqlite3_finalize(ss->st_tk_put);
    sqlite3_finalize(ss->st_tk_del);
    sqlite3_finalize(ss->st_fts_put);
    sqlite3_finalize(ss->st_fts_del);
    sqlite3_finalize(ss->st_fts_search);
    /* An open that failed part way may have made one of the two arrays and not the other. */
    for (int i = 0; ss->st_scan && i < QUERY_SLOTS * SCAN_SHAPES; i++)
        sqlite3_finalize(ss->st_scan[i]);
    for (int i = 0; ss->st_count && i < QUERY_SLOTS * SCAN_SHAPES; i++)
        sqlite3_finalize(ss->st_count[i]);
    vg_free(ss->st_scan);
    vg_free(ss->st_count);
    ss->st_scan = ss->st_count = NULL;
    sqlite3_finalize(ss->st_put_ix);
    sqlite3_finalize(ss->st_update_ix);
    sqlite3_finalize(ss->st_put_ix_ignore);
    sqlite3_finalize(ss->st_put_hot);
    sqlite3_finalize(ss->st_put_hot_ignore);
    sqlite3_finalize(ss->st_settle);
    for (int i = 0; ss->st_update_narrow && i < NARROW_VARIANTS; i++)
        sqlite3_finalize(ss->st_update_narrow[i]);
    vg_free(ss->st_update_narrow);
    ss->st_update_narrow = NULL;
    sqlite3_finalize(ss->st_begin);
    sqlite3_finalize(ss->st_begin_read);
    sqlite3_finalize(ss->st_snapshot);
    sqlite3_finalize(ss->st_commit);
    for (int i = 0; i < TX_CACHED_DEPTH; i++) {
        sqlite3_finalize(ss->st_savepoint[i]);
        sqlite3_finalize(ss->st_release[i]);
    }
    vg_sqlite_anchor_put(ss->anchor); /* first: the store's connection stays the file's last */
    ss->anchor = NULL;
    if (ss->db)
        sqlite3_close_v2(ss->db);
    ss->db = NULL;
    if (ss->in_gate)
        vg_sqlite_gate_leave(ss->gate);
    ss->in_gate = 0;
    vg_sqlite_gate_put(ss->gate);
    ss->gate = NULL;
}

/* ---- statements ---------------------------------------------------------------------------- */

/* Prepare once and keep; a statement still running (a nested call from a scan callback) is
 * not reused: the caller gets a fresh one it must finalize (*temp = 1). */
static int prepared(struct sqlite_store *ss, sqlite3_stmt **slot, const char *sql,
                    sqlite3_stmt **out, int *temp)
{
    *temp = 0;
    if (*slot && sqlite3_stmt_busy(*slot)) {
        *temp = 1;
        return sqlite3_prepare_v2(ss->db, sql, -1, out, NULL);
    }
    if (!*slot) {
        int rc = sqlite3_prepare_v3(ss->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, NULL);
        if (rc != SQLITE_OK)
            return rc;
    }
    *out = *slot;
    return SQLITE_OK;
}

static void done(sqlite3_stmt *st, int temp)
{
    if (temp) {
        sqlite3_finalize(st);
    } else if (st) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
    sqlite3_bind_text(st, i, v ? v : "", -1, SQLITE_STATIC);
}

#define COLS "kind, id, owner, k1, k2, seq, rev, at, body"

/* Key columns from schema 11 on (key.h): values stored as text stay text. */
static void bind_key(const struct sqlite_store *ss, sqlite3_stmt *st, int i, const char *v)
{
    unsigned char packed[VG_SQLITE_KEY_MAX];
    size_t n = ss->schema_version >= KEYS_PACKED ? vg_sqlite_key_pack(v, packed) : 0;
    if (n)
        sqlite3_bind_blob(st, i, packed, (int)n, SQLITE_TRANSIENT);
    else
        bind_text(st, i, v);
}

/* The text of the key in column col: a BLOB is decoded into buf (VG_SQLITE_KEY_MAX bytes). */
static const char *column_key(sqlite3_stmt *st, int col, char *buf)
{
    if (sqlite3_column_type(st, col) != SQLITE_BLOB)
        return (const char *)sqlite3_column_text(st, col);
    const unsigned char *b = sqlite3_column_blob(st, col);
    return vg_sqlite_key_unpack(b, (size_t)sqlite3_column_bytes(st, col), buf) ? buf : NULL;
}

/* Where a row's decoded keys live while its record is in use. */
struct row_keys {
    char text[4][VG_SQLITE_KEY_MAX];
};

/* The row as a record; 0 when SQLite ran out of memory or a key is not one of ours. */
static int row_record(sqlite3_stmt *st, struct vg_record *r, struct row_keys *keys)
{
    r->kind = (const char *)sqlite3_column_text(st, 0);
    r->id = column_key(st, 1, keys->text[0]);
    r->owner = column_key(st, 2, keys->text[1]);
    r->k1 = column_key(st, 3, keys->text[2]);
    r->k2 = column_key(st, 4, keys->text[3]);
    r->seq = sqlite3_column_int64(st, 5);
    r->rev = sqlite3_column_int64(st, 6);
    r->at = sqlite3_column_int64(st, 7);
    r->body = (const char *)sqlite3_column_text(st, 8);
    return r->body && r->id && r->owner && r->k1 && r->k2;
}

/* ---- transactions -------------------------------------------------------------------------- */

/*
 * SQLite rolls a whole transaction back by itself after some failures (SQLITE_FULL, IOERR,
 * NOMEM, BUSY during commit). The wrappers still count open levels then, and a later write would
 * silently run in autocommit mode, outside the transaction the caller believes is open. Refuse
 * it: the caller's rollback ends the level cleanly.
 */
static vigil_code check_tx(struct sqlite_store *ss, vigil_error *err)
{
    if (ss->base.depth > 0 && sqlite3_get_autocommit(ss->db))
        return VG_FAIL(err, VIGIL_ESTATE,
                       "the transaction on store \"%s\" was already rolled back after an "
                       "earlier failure",
                       ss->path);
    return VIGIL_OK;
}

#define CHECK_TX(ss)                                                                               \
    do {                                                                                           \
        vigil_code tx_rc_ = check_tx((ss), err);                                                   \
        if (tx_rc_)                                                                                \
            return tx_rc_;                                                                         \
    } while (0)

/*
 * With no level open, SQLite must not be inside a transaction either. It can be, when a
 * rollback failed (out of memory, I/O): then even a plain read would see the rolled-back
 * transaction's writes. Every operation outside a transaction first finishes that rollback,
 * and fails rather than show a partial record when it cannot.
 */
static vigil_code settle(struct sqlite_store *ss, vigil_error *err)
{
    if (ss->in_tx || ss->read_tx || !ss->db || sqlite3_get_autocommit(ss->db))
        return VIGIL_OK;
    forget_kept(ss);
    return exec(ss, "ROLLBACK", err, "finish an earlier rollback");
}

#define SETTLE(ss)                                                                                 \
    do {                                                                                           \
        vigil_code settle_rc_ = settle((ss), err);                                                 \
        if (settle_rc_ != VIGIL_OK)                                                                \
            return settle_rc_;                                                                     \
    } while (0)

/* End a batch's read transaction (it wrote nothing: its end cannot fail but on a lost
 * connection, when SQLite has ended it already). */
static void read_tx_end(struct sqlite_store *ss)
{
    if (!ss->read_tx)
        return;
    ss->read_tx = 0;
    if (!sqlite3_get_autocommit(ss->db))
        exec_cached(ss, &ss->st_commit, "COMMIT", NULL, "end a read transaction");
}

/* Before a read: in a read batch and outside a write transaction, open the batch's read
 * transaction, so that the batch's reads take SQLite's shared-memory read lock once (two
 * fcntl calls and the log index's header check per read transaction otherwise). Failing to
 * open it only loses the saving: the read then runs on its own. */
static void read_tx_begin(struct sqlite_store *ss)
{
    if (!(ss->read_batch > 0 && !ss->read_tx && !ss->in_tx && sqlite3_get_autocommit(ss->db)))
        return;
    ss->read_tx =
        exec_cached(ss, &ss->st_begin_read, "BEGIN", NULL, "start a read transaction") == VIGIL_OK;
    /* A connection of the read anchor's (the HTTP threads: a batch a request, whose first read,
     * the agent's lifecycle, was kept at the last request) takes the snapshot at once, so that
     * the first read too can be served from the kept records (cache_current needs the
     * snapshot): a pragma's step instead of a record's two B-tree descents. */
    if (ss->read_tx && ss->anchor)
        (void)exec_cached(ss, &ss->st_snapshot, "PRAGMA schema_version", NULL,
                          "take a read snapshot");
}

/* Before a read that opens a read transaction: the process's anchor (anchor.h) moved to the
 * newest snapshot, so that the read's lock on it is one the process holds already. */
static void follow_anchor(struct sqlite_store *ss)
{
    if (ss->anchor && !ss->read_tx && !ss->in_tx)
        vg_sqlite_anchor_follow(ss->anchor);
}

#define SETTLE_READ(ss)                                                                            \
    do {                                                                                           \
        SETTLE(ss);                                                                                \
        follow_anchor(ss);                                                                         \
        read_tx_begin(ss);                                                                         \
    } while (0)

static void leave_gate(struct sqlite_store *ss)
{
    if (ss->in_gate)
        vg_sqlite_gate_leave(ss->gate);
    ss->in_gate = 0;
}

/* "SAVEPOINT vg<depth>" or "RELEASE vg<depth>" in buf (64 bytes): a folded fiber transaction
 * runs both, so the usual one-digit depths are written without printf's cost. */
static const char *savepoint_sql(char *buf, const char *verb, int depth)
{
    if (depth < 1 || depth > 9) {
        snprintf(buf, 64, "%s vg%d", verb, depth);
        return buf;
    }
    size_t n = strlen(verb);
    memcpy(buf, verb, n);
    memcpy(buf + n, " vg", 3);
    buf[n + 3] = (char)('0' + depth);
    buf[n + 4] = '\0';
    return buf;
}

/* SQLite's count of changes to the database file: this connection's commits and any other's
 * it has noticed (which it does when it starts a transaction). */
static unsigned data_version(struct sqlite_store *ss)
{
    unsigned v = 0;
    if (sqlite3_file_control(ss->db, "main", SQLITE_FCNTL_DATA_VERSION, &v) != SQLITE_OK)
        v = ss->cache_version + 1; /* unknown: treat as changed */
    return v;
}

static vigil_code sqlite_begin(struct vg_store *s, int depth, vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    char sql[64];
    if (depth == 0) {
        read_tx_end(ss);
        SETTLE(ss);
        if (ss->gate && !ss->in_gate) {
            enum vg_gate_entry e = vg_sqlite_gate_enter(ss->gate, ss->busy_timeout_ms);
            if (e == VG_GATE_TIMEOUT)
                return VG_FAIL(err, VIGIL_EBUSY,
                               "store \"%s\" is busy: another writer of this process kept it "
                               "for more than %d ms",
                               ss->path, ss->busy_timeout_ms);
            ss->in_gate = e == VG_GATE_ENTERED;
        }
        vigil_code code =
            exec_cached(ss, &ss->st_begin, "BEGIN IMMEDIATE", err, "start a transaction");
        ss->in_tx = code == VIGIL_OK;
        if (code)
            leave_gate(ss);
        /* BEGIN IMMEDIATE took the write lock and the snapshot: a commit of another connection
         * since this one's last shows as a new data version, and nothing else writes now. */
        else if (data_version(ss) != ss->cache_version) {
            forget_kept(ss);
            ss->foreign_commits++;
        }
        return code;
    }
    CHECK_TX(ss);
    if (depth <= TX_CACHED_DEPTH) /* the text only matters while the statement is prepared */
        return exec_cached(ss, &ss->st_savepoint[depth - 1], savepoint_sql(sql, "SAVEPOINT", depth),
                           err, "start a savepoint");
    return exec(ss, savepoint_sql(sql, "SAVEPOINT", depth), err, "start a savepoint");
}

static vigil_code sqlite_commit(struct vg_store *s, int depth, vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    char sql[64];
    if (depth == 0) {
        ss->in_tx = 0; /* committed, or rolled back (settle finishes a failed rollback) */
        if (sqlite3_get_autocommit(ss->db)) {
            forget_kept(ss);
            leave_gate(ss);
            return VG_FAIL(err, VIGIL_ESTATE,
                           "the transaction on store \"%s\" was already rolled back after an "
                           "earlier failure",
                           ss->path);
        }
        vigil_code code = exec_cached(ss, &ss->st_commit, "COMMIT", err, "commit");
        if (code != VIGIL_OK) {
            /* Rolled back: what the cache kept of its writes goes too (fail_sqlite cleared it
             * already; said here as well, for the path's sake; the test is
             * a_failed_commit_leaves_nothing_of_its_writes_kept). */
            forget_kept(ss);
            if (!sqlite3_get_autocommit(ss->db))
                sqlite3_exec(ss->db, "ROLLBACK", NULL, NULL, NULL);
        }
        if (code == VIGIL_OK)
            ss->cache_version = data_version(ss); /* the commit counted itself in */
        leave_gate(ss);
        return code;
    }
    CHECK_TX(ss);
    if (depth <= TX_CACHED_DEPTH)
        return exec_cached(ss, &ss->st_release[depth - 1], savepoint_sql(sql, "RELEASE", depth),
                           err, "release a savepoint");
    return exec(ss, savepoint_sql(sql, "RELEASE", depth), err, "release a savepoint");
}

/* A rollback must not be lost to a passing failure (an allocation SQLite could not make while
 * preparing the statement): the transaction would stay open and later writes would join it.
 * So it is tried again a few times before giving up. */
/* The counter of writes of `kind` by this connection: its own slot, taken at its first use
 * (a mark asked before any write takes it too, at 0), or the shared one once every slot is
 * taken. Slots are never given back, so a kind keeps the counter it was first given. */
static uint64_t *kind_writes(struct sqlite_store *ss, const char *kind)
{
    unsigned h = 5381;
    size_t len = 0;
    for (const char *p = kind; *p; p++, len++)
        h = h * 33 + (unsigned char)*p;
    if (len > KIND_NAME_MAX)
        return &ss->other_kind_writes;
    for (unsigned i = 0; i < KIND_SLOTS; i++) {
        struct kind_count *c = &ss->kind_writes[(h + i) % KIND_SLOTS];
        if (!c->kind[0]) {
            memcpy(c->kind, kind, len + 1);
            return &c->n;
        }
        if (memcmp(c->kind, kind, len + 1) == 0)
            return &c->n;
    }
    return &ss->other_kind_writes;
}

static vigil_code sqlite_rollback(struct vg_store *s, int depth, vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    char sql[96];
    vigil_code code = VIGIL_OK;
    forget_kept(ss); /* what the undone writes left in it is gone */
    if (depth == 0) {
        ss->in_tx = 0; /* a rollback that fails here is finished by the next settle() */
        snprintf(sql, sizeof sql, "ROLLBACK");
    } else {
        snprintf(sql, sizeof sql, "ROLLBACK TO vg%d; RELEASE vg%d", depth, depth);
    }
    for (int attempt = 0; attempt < 3; attempt++) {
        if (sqlite3_get_autocommit(ss->db)) { /* SQLite already rolled back */
            code = depth == 0 ? VIGIL_OK : check_tx(ss, err);
            break;
        }
        int rc = sqlite3_exec(ss->db, sql, NULL, NULL, NULL);
        if (rc == SQLITE_OK) {
            code = VIGIL_OK;
            break;
        }
        code = fail_sqlite(ss, rc, err, depth == 0 ? "roll back" : "roll back a savepoint");
    }
    /* A rollback that failed even so is finished by the next settle(); SQLite's own lock keeps
     * other writers out until then. */
    if (depth == 0)
        leave_gate(ss);
    return code;
}

/* ---- record methods ------------------------------------------------------------------------ */

static vigil_code sqlite_put(struct vg_store *s, const struct vg_record *r, unsigned flags,
                             int *inserted, vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    ++*kind_writes(ss, r->kind);
    SETTLE(ss);
    CHECK_TX(ss);
    int ignore = (flags & VG_PUT_IF_ABSENT) != 0, temp, rc;
    int lean = ss->schema_version >= 5; /* the row says which indexes it is in */
    sqlite3_stmt *st;
    /*
     * A new row goes to the table's right end (the largest rowid plus one), among the rows of
     * the same moment: a run's record, projection and pointers would sit each on a leaf of
     * their own between messages and journal records, and every commit that rewrites them
     * writes each of those leaves again. A hot kind's row takes the smallest rowid less one
     * instead (no row is negative otherwise), so the rows rewritten together share a leaf at
     * the left end: fewer log frames a commit (docs/internals/PERF.md, item 44).
     * Nothing reads rowids of this table (text_keys has its own).
     */
#define HOT_ROWID "min(coalesce((SELECT min(rowid) FROM records), 0), 0) - 1"
    static const char *const sql[3][2] = {
        {"INSERT INTO records(" COLS ") VALUES(?,?,?,?,?,?,1,?,?)",
         "INSERT OR IGNORE INTO records(" COLS ") VALUES(?,?,?,?,?,?,1,?,?)"},
        {"INSERT INTO records(" COLS ", ix) VALUES(?,?,?,?,?,?,1,?,?,?)",
         "INSERT OR IGNORE INTO records(" COLS ", ix) VALUES(?,?,?,?,?,?,1,?,?,?)"},
        {"INSERT INTO records(rowid, " COLS ", ix) VALUES(" HOT_ROWID ",?,?,?,?,?,?,1,?,?,?)",
         "INSERT OR IGNORE INTO records(rowid, " COLS ", ix) VALUES(" HOT_ROWID
         ",?,?,?,?,?,?,1,?,?,?)"}};
    int kslot = lean ? kind_slot(r->kind) : 0;
    int hot = kslot && LEAN_KINDS[kslot - 1].hot;
    sqlite3_stmt **slot = hot    ? (ignore ? &ss->st_put_hot_ignore : &ss->st_put_hot)
                          : lean ? (ignore ? &ss->st_put_ix_ignore : &ss->st_put_ix)
                                 : (ignore ? &ss->st_put_ignore : &ss->st_put);
    rc = prepared(ss, slot, sql[hot ? 2 : lean][ignore], &st, &temp);
    if (rc != SQLITE_OK)
        return fail_sqlite(ss, rc, err, "prepare an insert");
    if (lean)
        sqlite3_bind_int(st, 9, row_ix(kslot, ss->schema_version, r->k2));
    bind_text(st, 1, r->kind);
    bind_key(ss, st, 2, r->id);
    bind_key(ss, st, 3, r->owner);
    bind_key(ss, st, 4, r->k1);
    bind_key(ss, st, 5, r->k2);
    sqlite3_bind_int64(st, 6, r->seq);
    sqlite3_bind_int64(st, 7, r->at);
    bind_text(st, 8, r->body);
    rc = sqlite3_step(st);
    done(st, temp);
    vg_record_cache_forget(&ss->cache, r->kind, r->id);
    if (rc == SQLITE_DONE) {
        if (inserted)
            *inserted = sqlite3_changes(ss->db) > 0;
        return VIGIL_OK;
    }
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        return VG_FAIL(err, VIGIL_EEXISTS, "%s \"%s\" already exists", r->kind, r->id);
    return fail_sqlite(ss, rc, err, "insert a record");
}

/* VG_STORE_CTRL_SETTLE: a row that sqlite_put kept at the left end (a negative rowid) moves to
 * the right end, among the appended rows, once it is rarely rewritten. Left there, a finished
 * run's projection kept a leaf of its own nearly empty: the next run's hot rows go in to its
 * left and split the leaf (about 150 B of a 13-call run's model call;
 * docs/internals/PERF.md, session 25). SQLite moves the row and its index entries. */
static vigil_code move_right(struct sqlite_store *ss, const struct vg_store_key *k,
                             vigil_error *err)
{
    sqlite3_stmt *st;
    int temp, rc = prepared(ss, &ss->st_settle,
                            "UPDATE records SET rowid=(SELECT max(rowid) FROM records)+1 "
                            "WHERE id=?1 AND kind=?2 AND rowid<0",
                            &st, &temp);
    if (rc != SQLITE_OK)
        return fail_sqlite(ss, rc, err, "prepare a row's move");
    bind_key(ss, st, 1, k->id);
    bind_text(st, 2, k->kind);
    rc = sqlite3_step(st);
    done(st, temp);
    return rc == SQLITE_DONE ? VIGIL_OK : fail_sqlite(ss, rc, err, "move a row");
}

/* The update that keeps the indexed key columns of a kind in the indexes ix: it sets the row
 * and the unindexed key columns, and matches only if the indexed ones are unchanged. */
/* Which of k1 and k2 a kind's indexes hold (bit 0: k1, bit 1: k2): the narrow update's SQL
 * depends on nothing else. */
static int narrow_variant(int ix)
{
    return ((ix & (IX_K1 | IX_OWNER_K1 | IX_AGENT)) != 0) | ((ix & IX_K2_BITS) != 0) << 1;
}

static void narrow_update_sql(char *sql, size_t size, int variant)
{
    int k1_indexed = variant & 1, k2_indexed = variant & 2;
    snprintf(sql, size,
             "UPDATE records SET at=?4, body=?5, rev=rev+1%s%s "
             "WHERE kind=?6 AND id=?7 AND rev=?8%s%s AND seq=?3",
             k1_indexed ? "" : ", k1=?1", k2_indexed ? "" : ", k2=?2",
             k1_indexed ? " AND k1=?1" : "", k2_indexed ? " AND k2=?2" : "");
}

static vigil_code sqlite_update(struct vg_store *s, const struct vg_record *r, int64_t expected_rev,
                                vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    ++*kind_writes(ss, r->kind);
    SETTLE(ss);
    CHECK_TX(ss);
    int temp, rc;
    sqlite3_stmt *st;
    /*
     * An index entry is rewritten whenever its column is in the SET list, even when the value
     * stays the same (SQLite decides from the statement, not the values), and each rewrite
     * dirties a page the commit then writes. Most updates keep every indexed key column (a
     * projection, a counter, a tool call's status, which no index of its kind holds), so the
     * narrow statement that sets only the row and the kind's unindexed key columns (LEAN_KINDS)
     * is tried first, and the one that sets every key column only when it matched nothing.
     * (Every index ends in seq, so no narrower second try would spare an index.) Both number
     * their parameters alike, so one binding serves either.
     */
    int lean = ss->schema_version >= 5;
    int slot = lean ? kind_slot(r->kind) : 0;
    int k2_only = lean && slot_k2_only(slot, ss->schema_version) != NULL;
    /*
     * The narrow statement still sets the key columns no index of the kind holds, and SQLite
     * then opens and checks every index that has such a column (four for k1 and k2), partial
     * or not. For a kind whose keys never change (keys_fixed) the narrowest is tried first: it
     * sets neither key and matches only if they are unchanged, so were they changed after all
     * it would cost one more try, never a wrong row. A run's projection and thread row are
     * rewritten three times a step (docs/internals/PERF.md). (Asking the record
     * cache whether the keys stay, for the other kinds, cost more than it saved.)
     * A task's or a wake's status is its k1, which nearly every update moves while k2 and seq
     * stay (status_moves): the narrow statement that keeps k1 matched nothing, and the full one
     * rewrote every index entry of the row; the first try sets k1 (and k2 when no index of
     * the kind holds it) and keeps seq, so only the entries that hold k1 are rewritten
     * (docs/internals/PERF.md, session 26).
     */
    int kind_ix = lean ? slot_ix(slot, ss->schema_version) : IX_ALL;
    /* A link's k2 counts as unindexed here: a pointer's moves at each of its updates and is in
     * no index (LINKS_TO), so the narrow statement sets it; a stored link's own keeps its value,
     * and setting it again rewrites its one entry in records_k2 (a removal, which is rare). */
    if (lean && links_to(slot, ss->schema_version))
        kind_ix &= ~IX_K2_BITS;
    int ix_variant = narrow_variant(kind_ix);
    int guess = slot && LEAN_KINDS[slot - 1].keys_fixed     ? 3
                : slot && LEAN_KINDS[slot - 1].status_moves ? ix_variant & 2
                                                            : ix_variant;
    /* 0: the guess, 1: the kind's narrow statement, 2: every key column set */
    for (int full = guess == ix_variant; full < 3; full++) {
        char sql[320];
        sqlite3_stmt **cache = NULL;
        if (full < 2) {
            int variant = full == 0 ? guess : ix_variant;
            cache = &ss->st_update_narrow[variant];
            if (!*cache || sqlite3_stmt_busy(*cache)) /* the text is needed only to prepare */
                narrow_update_sql(sql, sizeof sql, variant);
        } else if (k2_only) { /* a new k2 may move the row in or out of records_k2 */
            snprintf(sql, sizeof sql,
                     "UPDATE records SET k1=?1, k2=?2, seq=?3, at=?4, body=?5, "
                     "rev=rev+1, ix=?9 WHERE kind=?6 AND id=?7 AND rev=?8");
            cache = &ss->st_update_ix;
        } else {
            snprintf(sql, sizeof sql,
                     "UPDATE records SET k1=?1, k2=?2, seq=?3, at=?4, body=?5, "
                     "rev=rev+1 WHERE kind=?6 AND id=?7 AND rev=?8");
            cache = &ss->st_update;
        }
        rc = prepared(ss, cache, sql, &st, &temp);
        if (rc != SQLITE_OK)
            return fail_sqlite(ss, rc, err, "prepare an update");
        bind_key(ss, st, 1, r->k1);
        bind_key(ss, st, 2, r->k2);
        sqlite3_bind_int64(st, 3, r->seq);
        sqlite3_bind_int64(st, 4, r->at);
        bind_text(st, 5, r->body);
        bind_text(st, 6, r->kind);
        bind_key(ss, st, 7, r->id);
        sqlite3_bind_int64(st, 8, expected_rev);
        if (full == 2 && k2_only)
            sqlite3_bind_int(st, 9, row_ix(slot, ss->schema_version, r->k2));
        rc = sqlite3_step(st);
        done(st, temp);
        if (rc != SQLITE_DONE)
            return fail_sqlite(ss, rc, err, "update a record");
        if (sqlite3_changes(ss->db) > 0) {
            vg_record_cache_refresh(&ss->cache, r, expected_rev + 1);
            return VIGIL_OK;
        }
    }
    vg_record_cache_forget(&ss->cache, r->kind, r->id);

    /* Nothing changed: tell a missing record from a stale revision. */
    rc = prepared(ss, &ss->st_rev, "SELECT rev FROM records WHERE kind=? AND id=?", &st, &temp);
    if (rc != SQLITE_OK)
        return fail_sqlite(ss, rc, err, "prepare a read");
    bind_text(st, 1, r->kind);
    bind_key(ss, st, 2, r->id);
    rc = sqlite3_step(st);
    int64_t current = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    done(st, temp);
    if (rc == SQLITE_DONE)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "%s \"%s\" not found", r->kind, r->id);
    if (rc != SQLITE_ROW)
        return fail_sqlite(ss, rc, err, "read a revision");
    return VG_FAIL(err, VIGIL_ECONFLICT,
                   "%s \"%s\" was changed meanwhile (revision %lld, expected %lld)", r->kind, r->id,
                   (long long)current, (long long)expected_rev);
}

/* In a read batch's read transaction, once its snapshot is taken: are the kept records and the
 * change marks current for it? A snapshot that shows a commit of another connection since they
 * were (SQLite's data version moved) drops the kept records and counts the commit, as a write
 * transaction's start does, and they are from then on: a connection that only reads (the
 * daemon's HTTP threads) keeps its records between requests until the store changes, instead of
 * never again once anyone committed after its last own commit. */
static int read_snapshot_current(struct sqlite_store *ss)
{
    if (!ss->read_tx || sqlite3_txn_state(ss->db, "main") != SQLITE_TXN_READ)
        return 0;
    unsigned v = data_version(ss);
    if (v != ss->cache_version) {
        forget_kept(ss);
        ss->foreign_commits++;
        ss->cache_version = v;
    }
    return 1;
}

/* Whether what the record cache holds is current. Inside a write transaction of ours it is
 * (sqlite_begin checked the data version under the write lock). Inside a read batch's read
 * transaction it is once the transaction's snapshot is taken (read_snapshot_current: what was
 * kept at an older data version is dropped then): the records a step reads again before each
 * model call (the agent, its budget) are then not read again. Before the snapshot is taken, the
 * data version is the last snapshot's and proves nothing. */
static int cache_current(struct sqlite_store *ss)
{
    if (sqlite3_get_autocommit(ss->db))
        return 0;
    return ss->in_tx || read_snapshot_current(ss);
}

static vigil_code sqlite_get(struct vg_store *s, const char *kind, const char *id, vg_record_cb cb,
                             void *user, vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    int temp, rc;
    sqlite3_stmt *st;
    SETTLE_READ(ss);
    int cached = cache_current(ss);
    const struct vg_record *kept = cached ? vg_record_cache_find(&ss->cache, kind, id) : NULL;
    if (kept && kept->rev == 0) /* kept as absent (a step asks for its kill switches each time) */
        return VG_FAIL(err, VIGIL_ENOTFOUND, "%s \"%s\" not found", kind, id);
    if (kept && vg_record_cache_serve(kept, cb, user) == 0)
        return VIGIL_OK;
    rc =
        prepared(ss, &ss->st_get, "SELECT " COLS " FROM records WHERE kind=? AND id=?", &st, &temp);
    if (rc != SQLITE_OK)
        return fail_sqlite(ss, rc, err, "prepare a read");
    bind_text(st, 1, kind);
    bind_key(ss, st, 2, id);
    rc = sqlite3_step(st);
    vigil_code code = VIGIL_OK;
    if (rc == SQLITE_ROW) {
        struct vg_record r;
        struct row_keys keys;
        if (!row_record(st, &r, &keys)) {
            code = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %s \"%s\"", kind, id);
        } else {
            if (cached)
                vg_record_cache_keep(&ss->cache, &r);
            cb(user, &r);
        }
    } else if (rc == SQLITE_DONE) {
        if (cached)
            vg_record_cache_keep(&ss->cache, &(struct vg_record){.kind = kind, .id = id, .rev = 0});
        code = VG_FAIL(err, VIGIL_ENOTFOUND, "%s \"%s\" not found", kind, id);
    } else {
        code = fail_sqlite(ss, rc, err, "read a record");
    }
    done(st, temp);
    return code;
}

enum shape_bits {
    SH_OWNER = 1,
    SH_K1 = 2,
    SH_K2 = 4,
    SH_MIN = 8,
    SH_MAX = 16,
    SH_AFTER = 32,
    SH_DESC = 64,
    SH_LIMIT = 128
};

static unsigned query_shape(const struct vg_query *q, int for_count)
{
    unsigned sh = 0;
    sh |= q->owner ? SH_OWNER : 0;
    sh |= q->k1 ? SH_K1 : 0;
    sh |= q->k2 ? SH_K2 : 0;
    sh |= q->has_seq_min ? SH_MIN : 0;
    sh |= q->has_seq_max ? SH_MAX : 0;
    if (!for_count) {
        sh |= q->has_after ? SH_AFTER : 0;
        sh |= q->descending ? SH_DESC : 0;
        sh |= q->limit > 0 ? SH_LIMIT : 0;
    }
    return sh;
}

/* ix: the kind's index bits (-1 before schema 5): named in the SQL so SQLite may use the
 * partial indexes that hold the kind's rows (see LEAN_KINDS). */
static void query_sql(char *sql, size_t n, unsigned sh, int for_count, int ix)
{
    int o = snprintf(sql, n, "SELECT %s FROM records WHERE kind=?1", for_count ? "count(*)" : COLS);
    for (int bit = 1; ix > 0 && bit <= IX_AGENT_K2; bit <<= 1)
        if (ix & bit)
            o += snprintf(sql + o, n - o, " AND ix & %d", bit);
    if (sh & SH_OWNER)
        o += snprintf(sql + o, n - o, " AND owner=?2");
    if (sh & SH_K1)
        o += snprintf(sql + o, n - o, " AND k1=?3");
    if (sh & SH_K2)
        o += snprintf(sql + o, n - o, " AND k2=?4");
    if (sh & SH_MIN)
        o += snprintf(sql + o, n - o, " AND seq>=?5");
    if (sh & SH_MAX)
        o += snprintf(sql + o, n - o, " AND seq<=?6");
    if (sh & SH_AFTER)
        o += snprintf(sql + o, n - o, " AND (seq, id) %s (?7, ?8)", (sh & SH_DESC) ? "<" : ">");
    if (!for_count)
        o += snprintf(sql + o, n - o, " ORDER BY seq %s, id %s", (sh & SH_DESC) ? "DESC" : "ASC",
                      (sh & SH_DESC) ? "DESC" : "ASC");
    if (sh & SH_LIMIT)
        snprintf(sql + o, n - o, " LIMIT ?9");
}

static void query_bind(struct sqlite_store *ss, sqlite3_stmt *st, const struct vg_query *q,
                       unsigned sh)
{
    bind_text(st, 1, q->kind);
    if (sh & SH_OWNER)
        bind_key(ss, st, 2, q->owner);
    if (sh & SH_K1)
        bind_key(ss, st, 3, q->k1);
    if (sh & SH_K2)
        bind_key(ss, st, 4, q->k2);
    if (sh & SH_MIN)
        sqlite3_bind_int64(st, 5, q->seq_min);
    if (sh & SH_MAX)
        sqlite3_bind_int64(st, 6, q->seq_max);
    if (sh & SH_AFTER) {
        sqlite3_bind_int64(st, 7, q->after_seq);
        bind_key(ss, st, 8, q->after_id);
    }
    if (sh & SH_LIMIT)
        sqlite3_bind_int(st, 9, q->limit);
}

static vigil_code sqlite_scan(struct vg_store *s, const struct vg_query *q, vg_record_cb cb,
                              void *user, vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    unsigned sh = query_shape(q, 0);
    int slot = kind_slot(q->kind), variant = 0;
    int ix = ss->schema_version >= 5 ? query_ix(slot, ss->schema_version, q, &variant) : -1;
    char sql[640];
    int temp, rc;
    sqlite3_stmt *st;
    SETTLE_READ(ss);
    sqlite3_stmt **cache = &ss->st_scan[(slot + variant * IX_SLOTS) * SCAN_SHAPES + (int)sh];
    if (!*cache || sqlite3_stmt_busy(*cache)) /* the text is needed only to prepare */
        query_sql(sql, sizeof sql, sh, 0, ix);
    rc = prepared(ss, cache, sql, &st, &temp);
    if (rc != SQLITE_OK)
        return fail_sqlite(ss, rc, err, "prepare a scan");
    query_bind(ss, st, q, sh);
    vigil_code code = VIGIL_OK;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct vg_record r;
        struct row_keys keys;
        if (!row_record(st, &r, &keys)) {
            code = VG_FAIL(err, VIGIL_ENOMEM, "out of memory scanning %s", q->kind);
            break;
        }
        if (cb(user, &r))
            break;
    }
    if (code == VIGIL_OK && rc != SQLITE_ROW && rc != SQLITE_DONE)
        code = fail_sqlite(ss, rc, err, "scan records");
    done(st, temp);
    return code;
}

static vigil_code sqlite_count(struct vg_store *s, const struct vg_query *q, int64_t *out,
                               vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    unsigned sh = query_shape(q, 1);
    int slot = kind_slot(q->kind), variant = 0;
    int ix = ss->schema_version >= 5 ? query_ix(slot, ss->schema_version, q, &variant) : -1;
    char sql[640];
    int temp, rc;
    sqlite3_stmt *st;
    SETTLE_READ(ss);
    sqlite3_stmt **cache = &ss->st_count[(slot + variant * IX_SLOTS) * SCAN_SHAPES + (int)sh];
    if (!*cache || sqlite3_stmt_busy(*cache))
        query_sql(sql, sizeof sql, sh, 1, ix);
    rc = prepared(ss, cache, sql, &st, &temp);
    if (rc != SQLITE_OK)
        return fail_sqlite(ss, rc, err, "prepare a count");
    query_bind(ss, st, q, sh);
    rc = sqlite3_step(st);
    vigil_code code = VIGIL_OK;
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        code = fail_sqlite(ss, rc, err, "count records");
    done(st, temp);
    return code;
}

static vigil_code sqlite_remove(struct vg_store *s, const char *kind, const char *id,
                                vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    ++*kind_writes(ss, kind);
    SETTLE(ss);
    CHECK_TX(ss);
    int temp, rc;
    sqlite3_stmt *st;
    vg_record_cache_forget(&ss->cache, kind, id);
    rc = prepared(ss, &ss->st_remove, "DELETE FROM records WHERE kind=? AND id=?", &st, &temp);
    if (rc != SQLITE_OK)
        return fail_sqlite(ss, rc, err, "prepare a delete");
    bind_text(st, 1, kind);
    bind_key(ss, st, 2, id);
    rc = sqlite3_step(st);
    done(st, temp);
    if (rc != SQLITE_DONE)
        return fail_sqlite(ss, rc, err, "delete a record");
    if (sqlite3_changes(ss->db) == 0)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "%s \"%s\" not found", kind, id);
    return VIGIL_OK;
}

static vigil_code sqlite_remove_owner(struct vg_store *s, const char *owner, int64_t *removed,
                                      vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    SETTLE(ss);
    CHECK_TX(ss);
    forget_kept(ss);
    /* One delete per kind, each through the (kind, owner, ...) or the (owner) index; the kinds
     * themselves are found by skipping through an index that leads with the kind rather than
     * scanning every record: the identity index up to schema 6; from 7 on, where that leads
     * with the id, (kind, owner, seq, id), which holds every kind not in the owner index, and
     * the rows in the owner index go in one delete whatever their kinds. */
    static const char *const sql[2] = {
        "WITH RECURSIVE k(kind) AS (SELECT min(kind) FROM records UNION ALL "
        "SELECT (SELECT min(kind) FROM records WHERE kind > k.kind) FROM k "
        "WHERE k.kind IS NOT NULL) SELECT kind FROM k WHERE kind IS NOT NULL",
        "WITH RECURSIVE k(kind) AS (SELECT min(kind) FROM records WHERE ix & 1 UNION ALL "
        "SELECT (SELECT min(kind) FROM records WHERE kind > k.kind AND ix & 1) FROM k "
        "WHERE k.kind IS NOT NULL) SELECT kind FROM k WHERE kind IS NOT NULL"};
    int by_owner = ss->schema_version >= 7;
    sqlite3_stmt *kinds = NULL, *del = NULL, *del_ix = NULL, *del_owner = NULL;
    int64_t total = 0;
    vigil_code code = VIGIL_OK;
    int rc = sqlite3_prepare_v2(ss->db, sql[by_owner], -1, &kinds, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(ss->db, "DELETE FROM records WHERE kind=? AND owner=?", -1, &del,
                                NULL);
    /* Schema 5: a kind in the owner index says so, or SQLite would not use the index. */
    if (rc == SQLITE_OK && ss->schema_version >= 5)
        rc = sqlite3_prepare_v2(ss->db, "DELETE FROM records WHERE kind=? AND owner=? AND ix & 1",
                                -1, &del_ix, NULL);
    /* Schema 6: per kind through the owner index; from 7 on those rows go in one delete. */
    if (rc == SQLITE_OK && ss->schema_version >= 6 && !by_owner)
        rc = sqlite3_prepare_v2(ss->db, "DELETE FROM records WHERE kind=? AND owner=? AND ix & 32",
                                -1, &del_owner, NULL);
    if (rc != SQLITE_OK) {
        code = fail_sqlite(ss, rc, err, "prepare a delete");
        goto out;
    }
    /* From 7 on the rows in the owner index go in one delete whatever their kinds, and from 8
     * on those in the agent index too. */
    static const char *const by_index[] = {"DELETE FROM records WHERE owner=? AND ix & 32",
                                           "DELETE FROM records WHERE owner=? AND ix & 64"};
    for (int i = 0; by_owner && i < (ss->schema_version >= 8 ? 2 : 1); i++) {
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(ss->db, by_index[i], -1, &st, NULL);
        if (rc == SQLITE_OK) {
            bind_key(ss, st, 1, owner);
            rc = sqlite3_step(st);
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) {
            code = fail_sqlite(ss, rc, err, "delete records");
            goto out;
        }
        total += sqlite3_changes(ss->db);
    }
    /* Collect the kinds first: deleting while the kind scan runs would move under it. */
    char names[64][48];
    int n = 0;
    while ((rc = sqlite3_step(kinds)) == SQLITE_ROW && n < 64)
        snprintf(names[n++], sizeof names[0], "%s", (const char *)sqlite3_column_text(kinds, 0));
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        code = fail_sqlite(ss, rc, err, "list record kinds");
        goto out;
    }
    if (rc == SQLITE_ROW) {
        code = VG_FAIL(err, VIGIL_ESTORE, "store \"%s\" has more than 64 record kinds", ss->path);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        int ix = slot_ix(kind_slot(names[i]), ss->schema_version);
        sqlite3_stmt *d = del_ix && (ix & IX_OWNER_SEQ)  ? del_ix
                          : del_owner && (ix & IX_OWNER) ? del_owner
                                                         : del;
        sqlite3_reset(d);
        bind_text(d, 1, names[i]);
        bind_key(ss, d, 2, owner);
        rc = sqlite3_step(d);
        if (rc != SQLITE_DONE) {
            code = fail_sqlite(ss, rc, err, "delete records");
            goto out;
        }
        total += sqlite3_changes(ss->db);
    }
    if (ss->schema_version >= 4) {
        /* The text index belongs to the owner's records too (not counted: not records). */
        sqlite3_stmt *st = NULL;
        static const char *const text_sql[] = {
            "DELETE FROM text_fts WHERE rowid IN (SELECT rid FROM text_keys WHERE owner=?)",
            "DELETE FROM text_keys WHERE owner=?"};
        for (size_t i = 0; i < VG_ARRAY_LEN(text_sql); i++) {
            rc = sqlite3_prepare_v2(ss->db, text_sql[i], -1, &st, NULL);
            if (rc == SQLITE_OK) {
                bind_text(st, 1, owner);
                rc = sqlite3_step(st);
            }
            sqlite3_finalize(st);
            st = NULL;
            if (rc != SQLITE_DONE && rc != SQLITE_OK) {
                code = fail_sqlite(ss, rc, err, "clear the text index");
                goto out;
            }
        }
    }
    if (removed)
        *removed = total;
out:
    sqlite3_finalize(kinds);
    sqlite3_finalize(del);
    sqlite3_finalize(del_ix);
    sqlite3_finalize(del_owner);
    return code;
}

/* In a write transaction, sqlite_begin counted in any commit of another connection (under the
 * write lock: none comes meanwhile). In a read transaction, the snapshot's data version is the
 * one this connection's last commit left unless another connection committed since. */
static vigil_code change_mark(struct sqlite_store *ss, struct vg_store_change_mark *m,
                              vigil_error *err)
{
    /* A read batch that has not read yet takes its snapshot now, as its first read would: a
     * record kept under a mark is then served from the batch's first read on, not only after
     * one read of the store (docs/internals/PERF.md, Session 33). */
    if (ss->read_batch > 0 && !ss->read_tx && !ss->in_tx && sqlite3_get_autocommit(ss->db)) {
        SETTLE_READ(ss);
        if (ss->read_tx && !ss->anchor)
            (void)exec_cached(ss, &ss->st_snapshot, "PRAGMA schema_version", NULL,
                              "take a read snapshot");
    }
    int current = !sqlite3_get_autocommit(ss->db) && (ss->in_tx || read_snapshot_current(ss));
    if (!current)
        return VG_FAIL(err, VIGIL_ESTATE, "store \"%s\" cannot mark its records now", ss->path);
    m->foreign = ss->foreign_commits;
    m->own = ss->undoings + *kind_writes(ss, m->kind);
    return VIGIL_OK;
}

/* VG_STORE_CTRL_READ_ANCHOR. Only a connection that may write has the log in WAL mode for
 * sure (a read-only one reads whatever mode the file is in). */
static vigil_code join_anchor(struct sqlite_store *ss, int on)
{
    if (on && !ss->anchor && ss->wal_checked)
        ss->anchor = vg_sqlite_anchor_get(ss->uri, ss->uri, ss->vfs);
    else if (!on && ss->anchor) {
        vg_sqlite_anchor_put(ss->anchor);
        ss->anchor = NULL;
    }
    return VIGIL_OK;
}

static vigil_code sqlite_control(struct vg_store *s, int op, void *arg, vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    int rc, pages = 0, page_size = 0;
    char msg[128] = "";
    if (op == VG_STORE_CTRL_CHANGE_MARK)
        return change_mark(ss, arg, err);
    if (op == VG_STORE_CTRL_READ_ANCHOR)
        return join_anchor(ss, *(int *)arg);
    if (op == VG_STORE_CTRL_READ_BATCH) {
        ss->read_batch += *(int *)arg ? 1 : -1;
        if (ss->read_batch <= 0) {
            ss->read_batch = 0;
            read_tx_end(ss);
        }
        return VIGIL_OK;
    }
    read_tx_end(ss); /* what follows may need to be outside any transaction */
    switch (op) {
    case VG_STORE_CTRL_SCHEMA_VERSION:
        *(int *)arg = ss->schema_version;
        return VIGIL_OK;
    case VG_STORE_CTRL_MEMBER_ROWS:
        if (arg)
            *(int *)arg = ss->schema_version >= MEMBER_REFS;
        return ss->schema_version >= MEMBER_ROWS
                   ? VIGIL_OK
                   : VG_FAIL(err, VIGIL_EUNSUPPORTED, "schema %d keeps a row a message",
                             ss->schema_version);
    case VG_STORE_CTRL_CACHE_KIB: {
        /* A cache made small to hold a process's memory down (the daemon's workers) spills a
         * transaction's changed pages at its own size too: kept past it, a worker's folded
         * commits held up to 2 MiB more each (docs/internals/PERF.md, session 33). The store's
         * pages are 4 KiB. */
        char sql[80];
        if (*(int *)arg < 64)
            return VG_FAIL(err, VIGIL_EINVAL, "a page cache needs at least 64 KiB");
        snprintf(sql, sizeof sql, "PRAGMA cache_size=-%d; PRAGMA cache_spill=%d", *(int *)arg,
                 *(int *)arg / 4);
        return exec(ss, sql, err, "set the page cache size");
    }
    case VG_STORE_CTRL_CHECKPOINT: {
        /* TRUNCATE waits for every reader to leave the log: the anchor too. */
        struct vg_sqlite_anchor *paused = vg_sqlite_anchor_pause(ss->uri);
        rc = sqlite3_wal_checkpoint_v2(ss->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        vg_sqlite_anchor_resume(paused);
        return rc == SQLITE_OK ? VIGIL_OK : fail_sqlite(ss, rc, err, "checkpoint");
    }
    case VG_STORE_CTRL_USED_BYTES: {
        int free_pages = 0;
        if ((rc = pragma_int(ss, "PRAGMA page_count", &pages)) != SQLITE_OK ||
            (rc = pragma_int(ss, "PRAGMA freelist_count", &free_pages)) != SQLITE_OK ||
            (rc = pragma_int(ss, "PRAGMA page_size", &page_size)) != SQLITE_OK)
            return fail_sqlite(ss, rc, err, "read the pages in use");
        *(int64_t *)arg = (int64_t)(pages - free_pages) * page_size;
        return VIGIL_OK;
    }
    case VG_STORE_CTRL_COMPACT:
        if (!sqlite3_get_autocommit(ss->db))
            return VG_FAIL(err, VIGIL_ESTATE, "the store cannot be compacted inside a transaction");
        if ((rc = exec(ss, "VACUUM", err, "vacuum the store")))
            return rc;
        return sqlite_control(s, VG_STORE_CTRL_CHECKPOINT, NULL, err);
    case VG_STORE_CTRL_FILE_SIZE:
        if ((rc = pragma_int(ss, "PRAGMA page_count", &pages)) != SQLITE_OK ||
            (rc = pragma_int(ss, "PRAGMA page_size", &page_size)) != SQLITE_OK)
            return fail_sqlite(ss, rc, err, "read the file size");
        *(int64_t *)arg = (int64_t)pages * page_size;
        return VIGIL_OK;
    case VG_STORE_CTRL_DURABLE_COMMITS:
        /* In WAL mode NORMAL appends commits to the log without syncing it; the next FULL
         * commit syncs the log, and with it every frame before it (the log is sequential). */
        /* The log VFS reads its switch when it writes the commit frame, so it may change
         * inside a transaction (vg_store_commit_durable); a PRAGMA may not. */
        if (!ss->vfs_commit_sync && !sqlite3_get_autocommit(ss->db))
            return VG_FAIL(err, VIGIL_ESTATE,
                           "commit durability cannot change inside a "
                           "transaction");
        if (ss->vfs_commit_sync) {
            int on = *(int *)arg != 0;
            rc = sqlite3_file_control(ss->db, "main", VG_LOG_FCNTL_COMMIT_SYNC, &on);
            return rc == SQLITE_OK ? VIGIL_OK : fail_sqlite(ss, rc, err, "set commit durability");
        }
        return exec(ss, *(int *)arg ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", err,
                    "set commit durability");
    case VG_STORE_CTRL_SYNC: {
        /* Outside a transaction the log holds only committed frames: syncing it makes them
         * durable, as synchronous=FULL would have at each commit. The log file is SQLite's own
         * (through whatever VFS opened it), synced the way SQLite syncs it. */
        if (!sqlite3_get_autocommit(ss->db))
            return VG_FAIL(err, VIGIL_ESTATE, "a sync cannot run inside a transaction");
        sqlite3_int64 changes = sqlite3_total_changes64(ss->db);
        if (changes == ss->synced_changes)
            return VIGIL_OK; /* no commit of this connection wrote since the last sync */
        sqlite3_file *log = NULL;
        if (!ss->wal_checked) {
            char mode[16];
            (void)journal_mode(ss, "PRAGMA journal_mode", mode);
            if (strcmp(mode, "wal") != 0)
                return VG_FAIL(err, VIGIL_EUNSUPPORTED,
                               "store \"%s\" is not in write-ahead-log mode; it cannot sync "
                               "commits apart",
                               ss->path);
            ss->wal_checked = 1;
        }
        rc = sqlite3_file_control(ss->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &log);
        if (rc == SQLITE_OK && log && log->pMethods) {
            vg_stats_log_sync();
            rc = log->pMethods->xSync(log, SQLITE_SYNC_NORMAL);
        }
        if (rc != SQLITE_OK) {
            vigil_code code = map_code(rc);
            VG_FAIL(err, code == VIGIL_OK ? VIGIL_EIO : code,
                    "could not sync the write-ahead log of store \"%s\": %s; what was "
                    "committed since the last sync may not survive a power loss",
                    ss->path, sqlite3_errstr(rc));
            if (err)
                err->subcode = rc;
            return code == VIGIL_OK ? VIGIL_EIO : code;
        }
        ss->synced_changes = changes;
        return VIGIL_OK;
    }
    case VG_STORE_CTRL_LOCK:
        ((struct vg_store_lock *)arg)->busy = 0; /* the write transaction holds the store */
        return VIGIL_OK;
    case VG_STORE_CTRL_SETTLE:
        return move_right(ss, arg, err);
    case VG_STORE_CTRL_AWAIT_WORK:
        return VG_FAIL(err, VIGIL_EUNSUPPORTED, "SQLite stores do not signal other processes");
    case VG_STORE_CTRL_INTEGRITY: {
        sqlite3_stmt *st = NULL;
        rc = sqlite3_prepare_v2(ss->db, "PRAGMA quick_check", -1, &st, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
            snprintf(msg, sizeof msg, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        if (rc != SQLITE_ROW)
            return fail_sqlite(ss, rc, err, "check integrity");
        if (strcmp(msg, "ok") != 0)
            return VG_FAIL(err, VIGIL_ECORRUPT, "store \"%s\" failed its integrity check: %s",
                           ss->path, msg);
        return VIGIL_OK;
    }
    default:
        return VG_FAIL(err, VIGIL_ENOTFOUND, "unknown store control op %d", op);
    }
}

/* ---- full-text index ---------------------------------------------------------------------- */

static vigil_code need_text(struct sqlite_store *ss, vigil_error *err)
{
    if (ss->schema_version < 4)
        return VG_FAIL(err, VIGIL_EUNSUPPORTED,
                       "store \"%s\" has schema version %d, without the text index (4)", ss->path,
                       ss->schema_version);
    return VIGIL_OK;
}

/* One prepared step with up to three text bindings and one integer; returns the SQLite code. */
static int step_text(struct sqlite_store *ss, sqlite3_stmt **slot, const char *sql, const char *a,
                     const char *b, const char *c, int64_t n, int64_t *row_out)
{
    sqlite3_stmt *st;
    int temp, rc = prepared(ss, slot, sql, &st, &temp);
    if (rc != SQLITE_OK)
        return rc;
    int i = 1;
    if (n >= 0)
        sqlite3_bind_int64(st, i++, n);
    if (a)
        bind_text(st, i++, a);
    if (b)
        bind_text(st, i++, b);
    if (c)
        bind_text(st, i++, c);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && row_out)
        *row_out = sqlite3_column_int64(st, 0);
    done(st, temp);
    return rc;
}

static vigil_code sqlite_text_index(struct vg_store *s, const char *kind, const char *id,
                                    const char *owner, const char *text, vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    vigil_code code = need_text(ss, err);
    SETTLE(ss);
    if (code)
        return code;
    int64_t rid = -1;
    int rc = step_text(ss, &ss->st_tk_get, "SELECT rid FROM text_keys WHERE kind=? AND id=?", kind,
                       id, NULL, -1, &rid);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return fail_sqlite(ss, rc, err, "read the text index");
    if (rc == SQLITE_ROW) {
        rc = step_text(ss, &ss->st_fts_del, "DELETE FROM text_fts WHERE rowid=?", NULL, NULL, NULL,
                       rid, NULL);
        if (rc == SQLITE_DONE)
            rc = step_text(ss, &ss->st_tk_del, "DELETE FROM text_keys WHERE rid=?", NULL, NULL,
                           NULL, rid, NULL);
        if (rc != SQLITE_DONE)
            return fail_sqlite(ss, rc, err, "update the text index");
    }
    if (!text)
        return VIGIL_OK;
    rc = step_text(ss, &ss->st_tk_put, "INSERT INTO text_keys(kind, id, owner) VALUES(?,?,?)", kind,
                   id, owner, -1, NULL);
    if (rc != SQLITE_DONE)
        return fail_sqlite(ss, rc, err, "update the text index");
    rid = sqlite3_last_insert_rowid(ss->db);
    rc = step_text(ss, &ss->st_fts_put, "INSERT INTO text_fts(rowid, text) VALUES(?,?)", text, NULL,
                   NULL, rid, NULL);
    if (rc != SQLITE_DONE)
        return fail_sqlite(ss, rc, err, "update the text index");
    return VIGIL_OK;
}

/*
 * Build an FTS5 query that ORs the terms, each as a quoted string with embedded quotes
 * doubled: inside "..." FTS5 treats every character as text, so no term can add an operator,
 * a column filter or a NEAR group. Empty terms are skipped. Returns 0, or -1 if the buffer is
 * full or nothing remains.
 */
int vg_sqlite_fts_query(const char *const *terms, size_t n, struct vg_buf *out)
{
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (!terms[i] || !*terms[i])
            continue;
        if (used++)
            vg_buf_puts(out, " OR ");
        vg_buf_putc(out, '"');
        for (const char *p = terms[i]; *p; p++) {
            if (*p == '"')
                vg_buf_putc(out, '"');
            vg_buf_putc(out, *p);
        }
        vg_buf_putc(out, '"');
    }
    return (used && out->fail == VIGIL_OK) ? 0 : -1;
}

static vigil_code sqlite_text_search(struct vg_store *s, const char *kind, const char *owner,
                                     const char *const *terms, size_t n_terms, int limit,
                                     vg_text_hit_cb cb, void *user, vigil_error *err)
{
    struct sqlite_store *ss = (struct sqlite_store *)s;
    vigil_code code = need_text(ss, err);
    SETTLE(ss);
    if (code)
        return code;
    struct vg_buf q;
    vg_buf_init(&q, 64 * 1024);
    if (vg_sqlite_fts_query(terms, n_terms, &q) != 0) {
        vigil_code failed = q.fail;
        vg_buf_release(&q);
        if (failed == VIGIL_ENOMEM)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a text search");
        return failed ? VG_FAIL(err, VIGIL_ETOOBIG, "text search query is too long") : VIGIL_OK;
    }
    sqlite3_stmt *st;
    int temp, rc = prepared(ss, &ss->st_fts_search,
                            "SELECT k.id, bm25(text_fts) AS r FROM text_fts JOIN text_keys k "
                            "ON k.rid = text_fts.rowid WHERE text_fts MATCH ?1 AND k.kind=?2 "
                            "AND k.owner=?3 ORDER BY r LIMIT ?4",
                            &st, &temp);
    if (rc != SQLITE_OK) {
        vg_buf_release(&q);
        return fail_sqlite(ss, rc, err, "prepare a text search");
    }
    sqlite3_bind_text(st, 1, q.data, -1, SQLITE_STATIC);
    bind_text(st, 2, kind);
    bind_text(st, 3, owner);
    sqlite3_bind_int(st, 4, limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 0);
        /* bm25() is lower-is-better; the port promises higher-is-better. */
        if (id && cb(user, id, -sqlite3_column_double(st, 1)))
            break;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        code = fail_sqlite(ss, rc, err, "search the text index");
    done(st, temp);
    vg_buf_release(&q);
    return code;
}

const struct vg_store_methods vg_store_sqlite_methods = {
    .version = 2,
    .name = "sqlite",
    .caps = VG_STORE_CAP_DURABLE_COMMIT | VG_STORE_CAP_MULTI_PROCESS,
    .open = sqlite_open,
    .close = sqlite_close,
    .begin = sqlite_begin,
    .commit = sqlite_commit,
    .rollback = sqlite_rollback,
    .put = sqlite_put,
    .update = sqlite_update,
    .get = sqlite_get,
    .scan = sqlite_scan,
    .count = sqlite_count,
    .remove = sqlite_remove,
    .remove_owner = sqlite_remove_owner,
    .control = sqlite_control,
    .text_index = sqlite_text_index,
    .text_search = sqlite_text_search,
};
