/*
 * pg.c: the PostgreSQL adapter of the store port, for deployments where several daemons share
 * one database. Same record table, same numbered migrations and same semantics as the SQLite
 * adapter (the conformance suite runs against both).
 *
 * Concurrency: READ COMMITTED transactions. The port's compare-and-swap update is a single
 * `UPDATE ... WHERE rev = $expected`: a concurrent writer blocks on the row lock and then
 * re-checks the revision, so exactly one of two racing writers wins. Inserts use
 * `ON CONFLICT DO NOTHING`, so an existing id is reported without raising a server error:
 * expected refusals (EEXISTS, ECONFLICT, ENOTFOUND) never abort the surrounding transaction.
 * Durability: synchronous_commit=on, so COMMIT returns after the WAL is flushed.
 * Scans fetch bounded pages with the same keyset cursor callers use, so a callback may run
 * further queries on the connection and memory stays bounded for large results.
 * Round trips: a transaction's BEGIN, a nested level's SAVEPOINT and its RELEASE are owed and
 * go with the next statement (pipeline mode); each statement is prepared on the connection in
 * the round trip of its first use and then sent by name (the server parses and plans it once).
 *
 * Full-text index (port version 2): one tsvector row per (kind, id) in text_index, searched
 * with a tsquery built from bound parameters only (see pg_text_search).
 *
 * Sections: errors; queries; migrations; open and close; transactions; record methods;
 * full-text index.
 */
#include "base/common.h"

#include "base/buf.h"
#include "os/clock.h"
#include "store/pg/cache.h"
#include "store/pg/libpq.h"
#include "store/store.h"
#include "store/store_int.h"

#include <ctype.h>
#include <poll.h>

#define SCAN_PAGE 256 /* rows per round trip of a scan */
/* Rows a transaction locked, kept for its reads of them (locked_get); more are not kept. */
#define LOCKED_MAX 8
/* pg_advisory_xact_lock key serializing schema upgrades across processes ("vigl"). */
#define MIGRATION_LOCK 0x7669676c
/* A lost connection is made again with backoff (50 ms doubling to 2 s) for this long. */
#define RECONNECT_MAX_MS 30000
/* Savepoints owed at once (nested levels none of whose statements were sent yet); a deeper one
 * is sent when it starts. */
#define SP_OWED_MAX 8
/* Statements owed at most: a SET, the BEGIN, a RELEASE and the savepoints. */
#define OWED_MAX (3 + SP_OWED_MAX)
/* Statements a connection prepares at most (named "vgs<slot>"); others go unnamed, parsed and
 * planned at each use. The adapter's statements come in a few dozen shapes (query_sql). */
#define PREPARED_MAX 128
/* A transaction idle this long is ended by the server (configure_session). */
#define IDLE_TX_MS 10000

/* The channel a trigger NOTIFYs when a commit queues work (work_signal_ddl). */
#define WORK_CHANNEL "vigil_work"
/* The channel a trigger NOTIFYs "kind:id" on when a record of a cached kind changes (cache.h). */
#define RECORD_CHANNEL "vigil_records"

struct pg_store {
    struct vg_store base; /* must stay first */
    PGconn *conn;
    char where[128]; /* database name for messages */
    int read_only;
    int schema_version;
    int lock_timeout_ms;
    int in_tx;        /* BEGIN sent, no COMMIT or ROLLBACK yet: a lost connection lost it */
    int async_commit; /* synchronous_commit off (DURABLE_COMMITS 0), kept on a new connection */
    int listening;    /* LISTEN issued (AWAIT_WORK), issued again on a new connection */
    /* Owed to the server, sent ahead of the next statement in its round trip: the BEGIN of the
     * open transaction (pg_begin sends nothing), a change of commit durability. */
    int owe_begin, owe_sync;
    /* Savepoints are owed too. A nested level's SAVEPOINT goes with the first statement sent
     * inside it, so a level that sends nothing (a read the caches answered, a write kept back)
     * costs nothing, and its RELEASE goes with the next statement (a COMMIT releases them all
     * unsent). sp_open: the caller's depth; sp_server: the savepoints the server holds;
     * owe_release: the depth whose RELEASE is owed, 0 for none (once sent, the server holds
     * owe_release - 1). The savepoints from sp_kept() + 1 to sp_open are owed. */
    int sp_open, sp_server, owe_release;
    char owed_sql[OWED_MAX][40];
    /* The statements this connection prepared, by their text (slot i is "vgs<i>"): the server
     * parsed them once and keeps their plans, and each use sends the name and the parameters
     * only. A statement's first use prepares it in the same round trip (run_owed). A prepared
     * statement outlives a rolled-back transaction; a new connection has none (reconnect). */
    char *prepared[PREPARED_MAX];
    uint32_t prepared_hash[PREPARED_MAX];
    int prepared_no[PREPARED_MAX]; /* its name: "vgs<no>", never used twice on a connection */
    int n_prepared, next_prepared_no;
    int record_signal; /* the trigger of RECORD_CHANNEL is installed: the cache may be used */
    int work_seen;     /* a work signal read while draining for the cache, for AWAIT_WORK */
    /* RECORD_CHANNEL notifications taken so far: a read during which one arrived does not
     * cache its row (the notification may name a commit the row predates, already taken). */
    uint64_t record_notes;
    struct vg_pg_cache cache;
    /* Rows the open transaction locked (VG_STORE_CTRL_LOCK), as the lock read them: no other
     * transaction can change them before it ends, so its reads of them need no round trip.
     * A write of one by this transaction forgets it; the transaction's end forgets all. */
    struct vg_record *locked[LOCKED_MAX];
    int n_locked;
};

const size_t vg_store_pg_instance_size = sizeof(struct pg_store);

/* libpq's functions (see libpq.h): pg_open loads them, and every other call follows it. */
static const struct vg_libpq *const pq = &vg_libpq;

/* ---- errors -------------------------------------------------------------------------------- */

/* SQLSTATE as an int, the way PostgreSQL's MAKE_SQLSTATE packs it (6 bits per character). */
static int sqlstate_int(const char *st)
{
    int v = 0;
    for (int i = 0; i < 5 && st && st[i]; i++)
        v |= ((st[i] - '0') & 0x3f) << (6 * i);
    return v;
}

static vigil_code map_sqlstate(const char *st)
{
    if (!st || strlen(st) != 5)
        return VIGIL_EIO; /* no SQLSTATE: the connection itself failed */
    if (strcmp(st, "23505") == 0)
        return VIGIL_EEXISTS;
    if (strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0 || strcmp(st, "55P03") == 0)
        return VIGIL_EBUSY; /* serialization failure, deadlock, lock timeout: retry */
    if (strcmp(st, "57014") == 0)
        return VIGIL_ECANCELED;
    if (strcmp(st, "53100") == 0)
        return VIGIL_EFULL;
    if (strcmp(st, "53200") == 0)
        return VIGIL_ENOMEM;
    if (strcmp(st, "54000") == 0 || strcmp(st, "54001") == 0)
        return VIGIL_ETOOBIG;
    if (strcmp(st, "25006") == 0 || strcmp(st, "42501") == 0 || strncmp(st, "28", 2) == 0)
        return VIGIL_EDENIED;
    if (strcmp(st, "XX001") == 0 || strcmp(st, "XX002") == 0)
        return VIGIL_ECORRUPT;
    if (strncmp(st, "08", 2) == 0 || strncmp(st, "58", 2) == 0 || strncmp(st, "57P", 3) == 0)
        return VIGIL_EIO;
    if (strncmp(st, "22", 2) == 0)
        return VIGIL_EINVAL;
    return VIGIL_ESTORE;
}

/* First line of a libpq message, without its trailing newline. */
static void first_line(char *out, size_t n, const char *msg)
{
    snprintf(out, n, "%s", msg ? msg : "");
    out[strcspn(out, "\n")] = '\0';
}

/* Report a failed statement: what vigil was doing, the server's words, SQLSTATE in detail. */
static vigil_code fail_pg(struct pg_store *ps, const PGresult *res, vigil_error *err,
                          const char *what)
{
    const char *st = res ? pq->PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? pq->PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char line[200];
    if (!msg || !*msg)
        msg = ps->conn ? pq->PQerrorMessage(ps->conn) : "no connection";
    first_line(line, sizeof line, msg);
    if (!res && ps->conn && pq->PQstatus(ps->conn) != CONNECTION_OK)
        st = NULL;
    vigil_code code = map_sqlstate(st);
    VG_FAIL(err, code, "could not %s in store \"%s\": %s", what, ps->where, line);
    if (err) {
        err->subcode = sqlstate_int(st);
        vg_error_detail(err, "postgres: SQLSTATE %s", st ? st : "(none: connection failure)");
    }
    return code;
}

/* ---- queries ------------------------------------------------------------------------------- */

static vigil_code reconnect(struct pg_store *ps, vigil_error *err);
static int take_signals(struct pg_store *ps, int read_socket);
static void locked_clear(struct pg_store *ps);

static int conn_lost(const struct pg_store *ps)
{
    return pq->PQstatus(ps->conn) != CONNECTION_OK;
}

/* Before a statement: a connection lost outside a transaction is made again (nothing was lost
 * with it); inside one, the server rolled the transaction back, which only the caller can
 * redo (the loop's phase fails, and its run is re-queued). */
static vigil_code need_conn(struct pg_store *ps, vigil_error *err)
{
    if (!conn_lost(ps))
        return VIGIL_OK;
    if (ps->in_tx && !ps->owe_begin)
        return VG_FAIL(err, VIGIL_EIO,
                       "lost the connection to store \"%s\" inside a transaction: the server "
                       "rolled it back",
                       ps->where);
    int tx = ps->in_tx; /* a transaction whose BEGIN is still owed lost nothing */
    vigil_code code = reconnect(ps, err);
    ps->in_tx = tx && !code;
    ps->owe_begin = ps->in_tx;
    return code;
}

/* The savepoints the server holds once the owed RELEASE is sent. */
static int sp_kept(const struct pg_store *ps)
{
    return ps->owe_release ? ps->owe_release - 1 : ps->sp_server;
}

static int owe_savepoints(const struct pg_store *ps)
{
    return ps->owe_release || ps->sp_open > sp_kept(ps);
}

/* The statements owed (owe_sync, owe_begin and, with savepoints, the owed RELEASE and
 * SAVEPOINTs), in order, into sql; returns how many. sp_after[i] (when not NULL) is how many
 * savepoints the server holds once sql[i] succeeded, -1 for a statement that moves none. */
static int owed(struct pg_store *ps, int savepoints, const char *sql[OWED_MAX], int *sp_after)
{
    int n = 0, after[OWED_MAX];
    if (ps->owe_sync)
        sql[n++] =
            ps->async_commit ? "SET synchronous_commit TO off" : "SET synchronous_commit TO on";
    if (ps->owe_begin)
        sql[n++] = "BEGIN";
    for (int i = 0; i < n; i++)
        after[i] = -1;
    if (savepoints && ps->owe_release) {
        snprintf(ps->owed_sql[n], sizeof ps->owed_sql[n], "RELEASE SAVEPOINT vg%d",
                 ps->owe_release);
        after[n] = ps->owe_release - 1;
        sql[n] = ps->owed_sql[n];
        n++;
    }
    for (int d = sp_kept(ps) + 1; savepoints && d <= ps->sp_open && n < OWED_MAX; d++) {
        snprintf(ps->owed_sql[n], sizeof ps->owed_sql[n], "SAVEPOINT vg%d", d);
        after[n] = d;
        sql[n] = ps->owed_sql[n];
        n++;
    }
    if (sp_after)
        memcpy(sp_after, after, (size_t)n * sizeof *after);
    return n;
}

/* Read one statement's result in pipeline mode: the result, and the NULL that ends it. */
static PGresult *pipeline_result(struct pg_store *ps)
{
    PGresult *res = pq->PQgetResult(ps->conn), *more;
    if (res)
        while ((more = pq->PQgetResult(ps->conn)))
            pq->PQclear(more);
    return res;
}

/* How one statement goes: by the name it was prepared under, or prepared now (with the text
 * kept for the slot), or unnamed (name ""). */
struct stmt {
    char name[24];
    int no;
    char *keep; /* prepare now: the text for slot n_prepared once the server took it */
    uint32_t hash;
};

static uint32_t sql_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void stmt_of(struct pg_store *ps, const char *sql, struct stmt *st)
{
    st->name[0] = '\0';
    st->keep = NULL;
    st->hash = sql_hash(sql);
    for (int i = 0; i < ps->n_prepared; i++)
        if (ps->prepared_hash[i] == st->hash && !strcmp(ps->prepared[i], sql)) {
            snprintf(st->name, sizeof st->name, "vgs%d", ps->prepared_no[i]);
            return;
        }
    /* A fresh name each time: one the server took while its answer was lost is never asked
     * for again. */
    if (ps->n_prepared < PREPARED_MAX && (st->keep = vg_strdup(sql))) {
        st->no = ps->next_prepared_no++;
        snprintf(st->name, sizeof st->name, "vgs%d", st->no);
    }
}

/* The server took the statement st prepares (or did not: its slot stays free). */
static void stmt_prepared(struct pg_store *ps, struct stmt *st, int ok)
{
    if (ok && st->keep) {
        ps->prepared[ps->n_prepared] = st->keep;
        ps->prepared_no[ps->n_prepared] = st->no;
        ps->prepared_hash[ps->n_prepared++] = st->hash;
    } else {
        vg_free(st->keep);
    }
    st->keep = NULL;
}

/* A new connection: the server holds none of the old one's statements. */
static void prepared_forget(struct pg_store *ps)
{
    for (int i = 0; i < ps->n_prepared; i++)
        vg_free(ps->prepared[i]);
    ps->n_prepared = 0;
}

/* An owed RELEASE or SAVEPOINT went through: the server now holds `holds` savepoints. A
 * statement of the pipeline that failed leaves the rest owed, as the server has them not. */
static void paid_savepoint(struct pg_store *ps, int holds)
{
    if (ps->owe_release && holds == ps->owe_release - 1)
        ps->owe_release = 0;
    ps->sp_server = holds;
}

/* The owed statements and sql in one round trip (libpq's pipeline mode), sql prepared first
 * when st says so. On success *out holds sql's result; the owed ones are paid either way (a
 * failure leaves no transaction open, or one the server aborted: the caller rolls it back). */
static vigil_code run_owed(struct pg_store *ps, const char *sql, struct stmt *st, int n,
                           const char *const *params, PGresult **out, vigil_error *err,
                           const char *what)
{
    const char *pre[OWED_MAX];
    int sp_after[OWED_MAX], np = owed(ps, 1, pre, sp_after), ok = pq->PQenterPipelineMode(ps->conn);
    int parse = st->keep != NULL, last = np + parse; /* res[last]: the statement's own */
    PGresult *res[OWED_MAX + 2] = {NULL};
    vigil_code code = VIGIL_OK;
    for (int i = 0; ok && i < np; i++)
        ok = pq->PQsendQueryParams(ps->conn, pre[i], 0, NULL, NULL, NULL, NULL, 0);
    if (ok && parse)
        ok = pq->PQsendPrepare(ps->conn, st->name, sql, n, NULL);
    if (ok)
        ok = st->name[0] ? pq->PQsendQueryPrepared(ps->conn, st->name, n, params, NULL, NULL, 0)
                         : pq->PQsendQueryParams(ps->conn, sql, n, NULL, params, NULL, NULL, 0);
    ok = ok && pq->PQpipelineSync(ps->conn);
    for (int i = 0; ok && i <= last; i++)
        ok = (res[i] = pipeline_result(ps)) != NULL;
    PGresult *sync = ok ? pq->PQgetResult(ps->conn) : NULL;
    ok = ok && sync && pq->PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    pq->PQclear(sync);
    pq->PQexitPipelineMode(ps->conn);
    int sent_sync = ps->owe_sync;
    ps->owe_begin = ps->owe_sync = 0;
    for (int i = 0; i <= last && !code; i++) {
        ExecStatusType t = res[i] ? pq->PQresultStatus(res[i]) : PGRES_FATAL_ERROR;
        if (!ok || (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK))
            code = fail_pg(ps, ok ? res[i] : NULL, err, i < np ? "start a transaction" : what);
        else if (i < np && sp_after[i] >= 0) /* a savepoint made or released: paid */
            paid_savepoint(ps, sp_after[i]);
        else if (i == np && parse)
            stmt_prepared(ps, st, 1);
    }
    stmt_prepared(ps, st, 0); /* not taken: its text goes (a no-op once kept) */
    for (int i = 0; i < last; i++)
        pq->PQclear(res[i]);
    /* A failed statement ends the pipeline's implicit transaction, the SET with it. */
    ps->owe_sync = code && sent_sync;
    if (code || !out)
        pq->PQclear(res[last]);
    else
        *out = res[last];
    return code;
}

/* A statement cut by a lost connection outside a transaction is safe to send again: it was a
 * read or a BEGIN (every write runs inside a transaction, whose COMMIT is never resent). */
static int retry_safe(const struct pg_store *ps, int attempt)
{
    return attempt == 0 && !ps->in_tx && conn_lost(ps);
}

/* Run a statement with text parameters. On success *out holds the result (PQclear it). */
static vigil_code run(struct pg_store *ps, const char *sql, int n, const char *const *params,
                      PGresult **out, vigil_error *err, const char *what)
{
    vigil_code code = need_conn(ps, err);
    if (code)
        return code;
    PGresult *res = NULL;
    ExecStatusType t = PGRES_FATAL_ERROR;
    for (int attempt = 0;; attempt++) {
        struct stmt st;
        stmt_of(ps, sql, &st);
        if (st.keep || ps->owe_begin || ps->owe_sync || owe_savepoints(ps)) {
            code = run_owed(ps, sql, &st, n, params, out, err, what);
            if (!code || !retry_safe(ps, attempt))
                return code;
        } else {
            res = st.name[0] ? pq->PQexecPrepared(ps->conn, st.name, n, params, NULL, NULL, 0)
                             : pq->PQexecParams(ps->conn, sql, n, NULL, params, NULL, NULL, 0);
            t = res ? pq->PQresultStatus(res) : PGRES_FATAL_ERROR;
            if ((t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK) || !retry_safe(ps, attempt))
                break;
            pq->PQclear(res);
        }
        if ((code = reconnect(ps, err)))
            return code;
    }
    if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK) {
        code = fail_pg(ps, res, err, what);
        pq->PQclear(res);
        return code;
    }
    if (out)
        *out = res;
    else
        pq->PQclear(res);
    /* libpq keeps the notifications it read with the result until taken: take them, so a
     * connection that never reads a cached kind does not hold them all. */
    take_signals(ps, 0);
    return VIGIL_OK;
}

/* Several statements without parameters (simple protocol), sent once. */
static vigil_code exec_once(struct pg_store *ps, const char *sql, vigil_error *err,
                            const char *what)
{
    PGresult *res = pq->PQexec(ps->conn, sql);
    ExecStatusType t = res ? pq->PQresultStatus(res) : PGRES_FATAL_ERROR;
    vigil_code code = VIGIL_OK;
    if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK)
        code = fail_pg(ps, res, err, what);
    pq->PQclear(res);
    return code;
}

/* exec_once, on a connection made again first when lost outside a transaction. */
static vigil_code exec(struct pg_store *ps, const char *sql, vigil_error *err, const char *what)
{
    vigil_code code = need_conn(ps, err);
    const char *pre[OWED_MAX];
    /* Only a savepoint's own RELEASE or ROLLBACK TO comes here inside a transaction, with no
     * savepoint owed (pg_commit, pg_rollback): the savepoints are paid in run_owed alone. Nor
     * does a SET owed go first there: the transaction may be one a failed statement aborted
     * (the reason for a ROLLBACK TO), where it would fail and take the ROLLBACK TO with it; it
     * goes with the next statement instead (run_owed), in a transaction in good order. */
    int np = code || (ps->in_tx && !ps->owe_begin) ? 0 : owed(ps, 0, pre, NULL);
    if (np) { /* the simple protocol takes several statements in one round trip */
        struct vg_buf all;
        vg_buf_init(&all, strlen(sql) + 128);
        for (int i = 0; i < np; i++)
            vg_buf_printf(&all, "%s; ", pre[i]);
        vg_buf_printf(&all, "%s", sql);
        int sent_sync = ps->owe_sync;
        ps->owe_begin = ps->owe_sync = 0;
        code = all.fail ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory sending a statement")
                        : exec_once(ps, all.data, err, what);
        ps->owe_sync = code && sent_sync; /* undone with the statements it went with */
        vg_buf_release(&all);
        return code;
    }
    for (int attempt = 0; !code; attempt++) {
        if (!(code = exec_once(ps, sql, err, what)) || !retry_safe(ps, attempt))
            return code;
        code = reconnect(ps, err);
    }
    return code;
}

static void i64(char *buf, size_t n, int64_t v)
{
    snprintf(buf, n, "%lld", (long long)v);
}

static int64_t col_i64(const PGresult *res, int row, int col)
{
    return (int64_t)strtoll(pq->PQgetvalue(res, row, col), NULL, 10);
}

#define COLS "kind, id, owner, k1, k2, seq, rev, at, body"
#define N_COLS 9 /* in COLS */

static void row_record(const PGresult *res, int row, struct vg_record *r)
{
    r->kind = pq->PQgetvalue(res, row, 0);
    r->id = pq->PQgetvalue(res, row, 1);
    r->owner = pq->PQgetvalue(res, row, 2);
    r->k1 = pq->PQgetvalue(res, row, 3);
    r->k2 = pq->PQgetvalue(res, row, 4);
    r->seq = col_i64(res, row, 5);
    r->rev = col_i64(res, row, 6);
    r->at = col_i64(res, row, 7);
    r->body = pq->PQgetvalue(res, row, 8);
}

/* ---- migrations ---------------------------------------------------------------------------- */

/*
 * The schema as numbered steps; steps 1-4 are the SQLite adapter's 1-4, and later ones number
 * their own (SQLite's 5-12 are about its own indexes). Text columns use the "C" collation: ids and
 * keys compare as bytes, which is the order the port promises. Never edit a released step; append.
 */
static const char *const migrations[] = {
    /* 1: the record table with its identity and per-owner indexes, and the meta table. */
    ("CREATE TABLE vigil_meta(key text PRIMARY KEY, value text NOT NULL);"
     "CREATE TABLE records("
     "  kind text COLLATE \"C\" NOT NULL, id text COLLATE \"C\" NOT NULL,"
     "  owner text COLLATE \"C\" NOT NULL, k1 text COLLATE \"C\" NOT NULL,"
     "  k2 text COLLATE \"C\" NOT NULL, seq bigint NOT NULL, rev bigint NOT NULL,"
     "  at bigint NOT NULL, body text NOT NULL);"
     "CREATE UNIQUE INDEX records_id ON records(kind, id);"
     "CREATE INDEX records_owner_seq ON records(kind, owner, seq, id);"
     "CREATE INDEX records_owner_k1 ON records(kind, owner, k1, seq, id);"),
    /* 2: indexes for queries across owners by either key (run lists, link reverse lookups). */
    ("CREATE INDEX records_k1 ON records(kind, k1, seq, id);"
     "CREATE INDEX records_k2 ON records(kind, k2, seq, id);"),
    /* 3: lists of a whole kind in (seq, id) order (all agents, oldest first). */
    ("CREATE INDEX records_seq ON records(kind, seq, id);"),
    /* 4: the full-text index (port version 2). One row per indexed (kind, id); doc is built
     * with the 'simple' configuration: lowercased words, no stemming and no stop words, so it
     * is language-neutral like the SQLite adapter's FTS5 unicode61 tokenizer (which also folds
     * diacritics; 'simple' keeps them). GIN on doc answers the match; (kind, owner) serves the
     * filter and remove_owner. */
    ("CREATE TABLE text_index("
     "  kind text COLLATE \"C\" NOT NULL, id text COLLATE \"C\" NOT NULL,"
     "  owner text COLLATE \"C\" NOT NULL, doc tsvector NOT NULL, PRIMARY KEY(kind, id));"
     "CREATE INDEX text_index_doc ON text_index USING gin(doc);"
     "CREATE INDEX text_index_owner ON text_index(kind, owner);"),
    /* 5: bodies may hold shapes (src/store/body.c; SQLite's 13): nothing moves, but a vigil
     * that cannot read them back must refuse the database rather than show their holes. The
     * SQLite adapter's steps 5-12 are about its own indexes and have no step here. */
    ("SELECT 1;"),
    /* 6: a task stored pending whose blockers are all done is ready (SQLite's 14, src/orch/
     * task.c derive_ready): nothing moves, but a vigil that waits for a written `ready` would
     * never start such a task, so it must refuse the database. */
    ("SELECT 1;"),
    /* 7: a task stored pending or ready whose next attempt's wake exists is running (SQLite's
     * 15, src/orch/task.c derive_running): nothing moves, but a vigil that waits for a written
     * `running` would start such a task a second time, so it must refuse the database. */
    ("SELECT 1;"),
    /* 8: a tool call's end record may be kept in its toolResult message's row (SQLite's 16,
     * src/journal/ends.c): nothing moves, but a vigil that reads a run's journal from its
     * journal rows alone would see such calls still running, so it must refuse the database. */
    ("SELECT 1;"),
    /* 9: a tool call's start record may be kept in its action message's row, and a start's
     * body in a shape naming the row's own id (SQLite's 17, src/journal/ends.c, store/body.c
     * 18): nothing moves, but a vigil that reads a run's journal from its journal rows alone
     * would miss such calls, so it must refuse the database. */
    ("SELECT 1;"),
    /* 10: a spawn call's children queued for a slot may be kept in its spawn_call record, with
     * no spawn_child record until they start (SQLite's 18, src/orch/child.c): nothing moves,
     * but a vigil that looks for waiting children in spawn_child records alone would never
     * start them, so it must refuse the database. */
    ("SELECT 1;"),
    /* 11: a model call's journal record may be kept in its answer's thought message row
     * (SQLite's 19, src/journal/ends.c): nothing moves, but a vigil that reads a run's journal
     * from its rows and the tool call messages alone would see sequence gaps, so it must refuse
     * the database. */
    ("SELECT 1;"),
    /* 12: a journal record kept in a message may leave its time and its call's id to the
     * message (SQLite's 20, src/journal/ends.c), and a run's header its constants (store/
     * body.c, 20-22): nothing moves, but a vigil that reads the member's time from it would not
     * read such a record, so it must refuse the database. */
    ("SELECT 1;"),
    /* 13: a message's prev_id and run_id, and a tool call's operation id in its action and
     * result, may be stored as the bytes of the UUID or SHA-256 they are (store/body.c, message
     * entries 19-22) (SQLite's 21): nothing moves (a body stored before reads as it did), but a
     * vigil without those entries would read such a body as its stored text, so it must refuse the
     * database. */
    ("SELECT 1;"),
    /* 14: a step's action and toolResult messages may be kept in the row of the thought before
     * them (SQLite's 24, store/rows.c): nothing moves, but a vigil that reads a row as one
     * message would not see the others in it, so it must refuse the database. */
    ("SELECT 1;"),
    /* 15: a member of a step's row may name a string of the member before it instead of
     * repeating it (SQLite's 26, store/rows.c): nothing moves, but a vigil that knows no such
     * member would read it as stored, so it must refuse the database. */
    ("SELECT 1;"),
};

/* The schema from which a step's messages may share a row (store/rows.c). */
#define MEMBER_ROWS 14
/* The schema from which a member may name a string of the member before it (store/rows.c). */
#define MEMBER_REFS 15

#define SCHEMA_LATEST ((int)VG_ARRAY_LEN(migrations))

/* Read the schema state: *version (0 for an empty database), or ECORRUPT for a foreign one.
 * The tables are looked up in pg_class with the statement's snapshot, not with to_regclass:
 * that answers from the backend's catalog cache, which a transaction that waited for the
 * migration lock has not refreshed since it began, so it missed the tables another process
 * had just made under the lock and ran the migrations again ("relation "vigil_meta" already
 * exists": daemons_starting_together_migrate_once in tests/wake/test_pg_scale_out.c). Any
 * schema of the search path counts, as it did for to_regclass and as the store's unqualified
 * statements resolve: tables in a later schema are the store, not an empty database. */
static vigil_code read_version(struct pg_store *ps, int *version, vigil_error *err)
{
    PGresult *res = NULL;
    vigil_code code = run(ps,
                          "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n"
                          "  ON n.oid = c.relnamespace WHERE c.relname = 'vigil_meta'"
                          "  AND n.nspname = ANY (current_schemas(false))),"
                          " EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n"
                          "  ON n.oid = c.relnamespace WHERE c.relname = 'records'"
                          "  AND n.nspname = ANY (current_schemas(false)))",
                          0, NULL, &res, err, "read the schema");
    if (code)
        return code;
    int has_meta = pq->PQgetvalue(res, 0, 0)[0] == 't';
    int has_records = pq->PQgetvalue(res, 0, 1)[0] == 't';
    pq->PQclear(res);
    *version = 0;
    if (!has_meta) {
        if (has_records)
            return VG_FAIL(err, VIGIL_ECORRUPT,
                           "database \"%s\" has a records table of another program, not a vigil "
                           "store",
                           ps->where);
        return VIGIL_OK;
    }
    code = run(ps,
               "SELECT (SELECT value FROM vigil_meta WHERE key = 'application'),"
               " (SELECT value FROM vigil_meta WHERE key = 'schema_version')",
               0, NULL, &res, err, "read the schema version");
    if (code)
        return code;
    if (pq->PQgetisnull(res, 0, 0) || strcmp(pq->PQgetvalue(res, 0, 0), "vigil") != 0) {
        pq->PQclear(res);
        return VG_FAIL(err, VIGIL_ECORRUPT,
                       "database \"%s\" has a vigil_meta table of another program, not a vigil "
                       "store",
                       ps->where);
    }
    *version = pq->PQgetisnull(res, 0, 1) ? 0 : (int)strtol(pq->PQgetvalue(res, 0, 1), NULL, 10);
    pq->PQclear(res);
    return VIGIL_OK;
}

static vigil_code migrate(struct pg_store *ps, int target, vigil_error *err)
{
    int version = 0;
    vigil_code code = read_version(ps, &version, err);
    if (code)
        return code;
    if (version > SCHEMA_LATEST)
        return VG_FAIL(err, VIGIL_EVERSION,
                       "store \"%s\" has schema version %d, newer than this vigil supports (%d): "
                       "upgrade vigil",
                       ps->where, version, SCHEMA_LATEST);
    if (target <= 0 || target > SCHEMA_LATEST)
        target = SCHEMA_LATEST;
    ps->schema_version = version;
    if (version >= target)
        return VIGIL_OK;
    if (ps->read_only)
        return VG_FAIL(err, VIGIL_EDENIED,
                       "store \"%s\" needs a schema upgrade but was opened read-only", ps->where);

    char sql[96];
    if ((code = exec(ps, "BEGIN", err, "start the schema upgrade")))
        return code;
    ps->in_tx = 1;
    /* One upgrader at a time; re-read under the lock, another daemon may have migrated. */
    snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%d)", MIGRATION_LOCK);
    if ((code = exec(ps, sql, err, "lock the schema")) || (code = read_version(ps, &version, err)))
        goto out;
    for (int v = version + 1; v <= target; v++)
        if ((code = exec(ps, migrations[v - 1], err, "upgrade the schema")))
            goto out;
    if (version < target) {
        char vbuf[24];
        const char *params[] = {vbuf};
        snprintf(vbuf, sizeof vbuf, "%d", target);
        code = run(ps,
                   "INSERT INTO vigil_meta(key, value) VALUES('application', 'vigil'),"
                   " ('schema_version', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                   1, params, NULL, err, "record the schema version");
        if (code)
            goto out;
    }
    code = exec(ps, "COMMIT", err, "commit the schema upgrade");
    if (code == VIGIL_OK)
        ps->schema_version = VG_MAX(version, target);
out:
    ps->in_tx = 0;
    if (code != VIGIL_OK && pq->PQtransactionStatus(ps->conn) != PQTRANS_IDLE)
        pq->PQclear(pq->PQexec(ps->conn, "ROLLBACK"));
    return code;
}

/*
 * The work signal: a trigger NOTIFYs WORK_CHANNEL when a commit queues a wake (a wake_run
 * written with k1 "queued": enqueued, re-queued by recovery), raises a durable notification or
 * writes a timer, so idle daemons LISTENing (VG_STORE_CTRL_AWAIT_WORK) look at once, whoever
 * committed it (`vigil wake` on another machine included). NOTIFY is sent at commit, once per
 * transaction and payload. Not a numbered migration: the numbers mean the same schema in both
 * adapters, and SQLite has no such trigger. Installed once, under the migration lock.
 */
static const char *const work_signal_ddl =
    "CREATE OR REPLACE FUNCTION vigil_signal_work() RETURNS trigger LANGUAGE plpgsql AS"
    " $f$ BEGIN PERFORM pg_notify('" WORK_CHANNEL "', NEW.kind); RETURN NULL; END $f$;"
    "DROP TRIGGER IF EXISTS records_signal_work ON records;"
    "CREATE TRIGGER records_signal_work AFTER INSERT OR UPDATE ON records FOR EACH ROW"
    " WHEN (NEW.kind = 'timer' OR (NEW.kind = 'notification' AND NEW.k1 = 'pending')"
    " OR (NEW.kind = 'wake_run' AND NEW.k1 = 'queued'))"
    " EXECUTE FUNCTION vigil_signal_work();"
    "INSERT INTO vigil_meta(key, value) VALUES('work_signal', '1')"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value;";

/* The record signal (cache.h): "kind:id" on RECORD_CHANNEL when a record of a cached kind is
 * inserted, updated or deleted, so every connection forgets its copy. */
static const char *const record_signal_ddl =
    "CREATE OR REPLACE FUNCTION vigil_signal_record() RETURNS trigger LANGUAGE plpgsql AS"
    " $f$ BEGIN IF TG_OP = 'DELETE' THEN"
    " PERFORM pg_notify('" RECORD_CHANNEL "', OLD.kind || ':' || OLD.id);"
    " ELSE PERFORM pg_notify('" RECORD_CHANNEL "', NEW.kind || ':' || NEW.id); END IF;"
    " RETURN NULL; END $f$;"
    "DROP TRIGGER IF EXISTS records_signal_record ON records;"
    "DROP TRIGGER IF EXISTS records_signal_record_gone ON records;"
    "CREATE TRIGGER records_signal_record AFTER INSERT OR UPDATE ON records FOR EACH ROW"
    " WHEN (NEW.kind IN " VG_PG_CACHED_KINDS_SQL ") EXECUTE FUNCTION vigil_signal_record();"
    "CREATE TRIGGER records_signal_record_gone AFTER DELETE ON records FOR EACH ROW"
    " WHEN (OLD.kind IN " VG_PG_CACHED_KINDS_SQL ") EXECUTE FUNCTION vigil_signal_record();"
    "INSERT INTO vigil_meta(key, value) VALUES('record_signal', '1')"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value;";

/* Install a signal's triggers once (ddl records meta_key = '1'), under the migration lock.
 * *present = 1 when they are there afterwards. A read-only store installs nothing. */
static vigil_code install_signal(struct pg_store *ps, const char *meta_key, const char *ddl,
                                 int *present_out, vigil_error *err)
{
    static const char *const have = "SELECT 1 FROM vigil_meta WHERE key = $1 AND value = '1'";
    const char *params[] = {meta_key};
    PGresult *res = NULL;
    char sql[96];
    vigil_code code;
    *present_out = 0;
    if ((code = run(ps, have, 1, params, &res, err, "read the schema")))
        return code;
    int present = pq->PQntuples(res) > 0;
    pq->PQclear(res);
    *present_out = present;
    if (present || ps->read_only || (code = exec(ps, "BEGIN", err, "start the schema upgrade")))
        return present || ps->read_only ? VIGIL_OK : code;
    ps->in_tx = 1;
    snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%d)", MIGRATION_LOCK);
    if (!(code = exec(ps, sql, err, "lock the schema")) &&
        !(code = run(ps, have, 1, params, &res, err, "read the schema"))) {
        present = pq->PQntuples(res) > 0;
        pq->PQclear(res);
        if (!present)
            code = exec(ps, ddl, err, "install a signal trigger");
    }
    if (!code)
        code = exec(ps, "COMMIT", err, "commit the schema upgrade");
    ps->in_tx = 0;
    if (code != VIGIL_OK && pq->PQtransactionStatus(ps->conn) != PQTRANS_IDLE)
        pq->PQclear(pq->PQexec(ps->conn, "ROLLBACK"));
    *present_out = code == VIGIL_OK;
    return code;
}

static vigil_code install_signals(struct pg_store *ps, vigil_error *err)
{
    int present = 0;
    vigil_code code = install_signal(ps, "work_signal", work_signal_ddl, &present, err);
    if (!code)
        code = install_signal(ps, "record_signal", record_signal_ddl, &ps->record_signal, err);
    return code;
}

/* ---- open and close ------------------------------------------------------------------------ */

static void quiet_notices(void *arg, const char *message)
{
    VG_UNUSED(arg);
    VG_UNUSED(message); /* "relation already exists" and such: not for the user's terminal */
}

/* The session's settings, on every new connection (a lost one made again included). The lock
 * timeout is the PostgreSQL side of the busy timeout: a writer waiting on a row lock longer
 * gets EBUSY (55P03). A transaction idle longer than IDLE_TX_MS is ended by the server: vigil
 * never waits on a tool, a model or a person inside one, so only a stalled or stopped daemon
 * does, and its row locks (an agent's state, its lease) must not keep the daemons that take
 * its runs over waiting until it wakes. Commits wait for the WAL flush unless group commit is
 * on. Sent once: a connection lost meanwhile fails it, and the caller's reconnect tries again. */
static vigil_code configure_session(struct pg_store *ps, vigil_error *err)
{
    char sql[512];
    pq->PQsetNoticeProcessor(ps->conn, quiet_notices, NULL);
    snprintf(sql, sizeof sql,
             "SET lock_timeout = %d; SET idle_in_transaction_session_timeout = %d;"
             " SET synchronous_commit = %s;"
             " SET default_transaction_isolation = 'read committed';"
             " SET default_transaction_read_only = %s; SET application_name = 'vigil';"
             " LISTEN " RECORD_CHANNEL "%s",
             ps->lock_timeout_ms, IDLE_TX_MS, ps->async_commit ? "off" : "on",
             ps->read_only ? "on" : "off", ps->listening ? "; LISTEN " WORK_CHANNEL : "");
    vg_pg_cache_clear(&ps->cache); /* what changed while there was no connection is unknown */
    prepared_forget(ps);           /* a new session has none */
    ps->owe_sync = 0;              /* set here */
    return exec_once(ps, sql, err, "configure the session");
}

/* Make a lost connection again, with backoff, for up to RECONNECT_MAX_MS (a server restart, a
 * network cut). What the session had set is set again. */
static vigil_code reconnect(struct pg_store *ps, vigil_error *err)
{
    int64_t delay = 50, waited = 0;
    char line[200];
    ps->in_tx = 0;
    locked_clear(ps);
    for (;;) {
        pq->PQreset(ps->conn);
        if (!conn_lost(ps) && configure_session(ps, NULL) == VIGIL_OK)
            return VIGIL_OK;
        if (waited >= RECONNECT_MAX_MS)
            break;
        vg_clock_sleep_ms(vg_clock_real(), delay);
        waited += delay;
        delay = VG_MIN(delay * 2, 2000);
    }
    first_line(line, sizeof line, pq->PQerrorMessage(ps->conn));
    vigil_code code = VG_FAIL(err, VIGIL_EIO,
                              "lost the connection to store \"%s\" and could not make it again "
                              "within %d s: %s",
                              ps->where, RECONNECT_MAX_MS / 1000, line);
    if (err)
        vg_error_detail(err, "postgres: connection lost (is the server up?)");
    return code;
}

/* A password in the URI (user:secret@ or password=) would be stored wherever the URI is (the
 * config, shell history, `vigil serve`'s log line, the process list): libpq takes it from
 * $PGPASSWORD or ~/.pgpass instead, and vigil never sees it. */
static int uri_has_password(const char *uri)
{
    const char *auth = strstr(uri, "://");
    if (!auth)
        return strstr(uri, "password=") != NULL;
    auth += 3;
    size_t host_end = strcspn(auth, "/?");
    const char *at = memchr(auth, '@', host_end);
    return (at && memchr(auth, ':', (size_t)(at - auth))) || strstr(uri, "password=") != NULL;
}

static vigil_code pg_open(struct vg_store *s, const char *uri, const struct vg_store_options *o,
                          vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    char line[200];
    snprintf(ps->where, sizeof ps->where, "postgres");
    ps->read_only = o->read_only;
    if (uri_has_password(uri))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "the PostgreSQL store URI holds a password: remove it and set PGPASSWORD "
                       "or a ~/.pgpass entry instead (vigil never stores or prints it)");
    vigil_code code = vg_libpq_load(err);
    if (code)
        return code;
    ps->conn = pq->PQconnectdb(uri);
    if (!ps->conn)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory connecting to PostgreSQL");
    if (pq->PQstatus(ps->conn) != CONNECTION_OK) {
        first_line(line, sizeof line, pq->PQerrorMessage(ps->conn));
        code = VG_FAIL(err, VIGIL_EIO, "could not connect to the PostgreSQL store: %s", line);
        if (err)
            vg_error_detail(err, "postgres: connection failed (check the URI and the server)");
        return code;
    }
    const char *db = pq->PQdb(ps->conn);
    snprintf(ps->where, sizeof ps->where, "postgres:%s", db ? db : "?");
    ps->lock_timeout_ms = o->busy_timeout_ms > 0 ? o->busy_timeout_ms : 5000;
    if ((code = configure_session(ps, err)) || (code = migrate(ps, o->target_version, err)))
        return code;
    return o->target_version > 0 ? VIGIL_OK : install_signals(ps, err);
}

static void pg_close(struct vg_store *s)
{
    struct pg_store *ps = (struct pg_store *)s;
    if (ps->conn)
        pq->PQfinish(ps->conn);
    ps->conn = NULL;
    vg_pg_cache_clear(&ps->cache);
    locked_clear(ps);
    prepared_forget(ps);
}

/* ---- transactions -------------------------------------------------------------------------- */

static vigil_code pg_begin(struct vg_store *s, int depth, vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    char sql[64];
    if (depth == 0) { /* BEGIN goes with the first statement (run_owed) */
        ps->in_tx = ps->owe_begin = 1;
        ps->cache.wrote = 0;
        ps->sp_open = ps->sp_server = ps->owe_release = 0;
        locked_clear(ps);
        return VIGIL_OK;
    }
    ps->sp_open = depth; /* its SAVEPOINT goes with the first statement inside it (run_owed) */
    if (depth - sp_kept(ps) <= SP_OWED_MAX)
        return VIGIL_OK;
    ps->sp_open = depth - 1; /* too many owed: this one goes now, with those before it */
    snprintf(sql, sizeof sql, "SAVEPOINT vg%d", depth);
    vigil_code code = run(ps, sql, 0, NULL, NULL, err, "start a savepoint");
    if (code == VIGIL_OK)
        ps->sp_open = ps->sp_server = depth;
    return code;
}

/* Release savepoint `depth`, at its level's end. */
static vigil_code release_savepoint(struct pg_store *ps, int depth, vigil_error *err)
{
    char sql[64];
    ps->sp_open = depth - 1;
    if (depth > sp_kept(ps)) /* nothing was sent inside it: the server never saw it */
        return VIGIL_OK;
    /* In a transaction in good order a RELEASE cannot fail: it goes with the next statement.
     * One a failed statement aborted (or a lost connection) answers now, as before. */
    if (pq->PQtransactionStatus(ps->conn) == PQTRANS_INTRANS) {
        ps->owe_release = depth; /* it takes any deeper one owed with it */
        return VIGIL_OK;
    }
    ps->owe_release = 0;
    snprintf(sql, sizeof sql, "RELEASE SAVEPOINT vg%d", depth);
    vigil_code code = exec(ps, sql, err, "release a savepoint");
    if (code == VIGIL_OK)
        ps->sp_server = depth - 1;
    return code;
}

static vigil_code pg_commit(struct vg_store *s, int depth, vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    if (depth > 0)
        return release_savepoint(ps, depth, err);
    ps->sp_open = ps->sp_server = ps->owe_release = 0; /* COMMIT releases them all */
    if (ps->owe_begin) {                               /* nothing was sent: nothing to commit */
        ps->in_tx = ps->owe_begin = 0;
        return VIGIL_OK;
    }
    vigil_code code = need_conn(ps, err);
    ps->in_tx = 0;
    locked_clear(ps);
    if (code)
        return code;
    /* A change of commit durability owed now was made for this commit (vg_store_commit_durable
     * switches inside the transaction): sent ahead of the COMMIT, in the transaction, so the
     * COMMIT is made as the store asks. A session SET, kept when the transaction commits (the
     * next settle sends the group's setting again); a transaction a failed statement aborted
     * only rolls back, and takes no SET. */
    int sent_sync = ps->owe_sync && pq->PQtransactionStatus(ps->conn) == PQTRANS_INTRANS;
    const char *commit = !sent_sync         ? "COMMIT"
                         : ps->async_commit ? "SET synchronous_commit TO off; COMMIT"
                                            : "SET synchronous_commit TO on; COMMIT";
    PGresult *res = pq->PQexec(ps->conn, commit);
    if (conn_lost(ps)) {
        /* The server may have committed before the connection went: only a read can tell. */
        code = VG_FAIL(err, VIGIL_EIO,
                       "lost the connection to store \"%s\" while committing: the transaction "
                       "may or may not have committed",
                       ps->where);
    } else if (!res || pq->PQresultStatus(res) != PGRES_COMMAND_OK) {
        code = fail_pg(ps, res, err, "commit");
    } else if (strcmp(pq->PQcmdStatus(res), "ROLLBACK") == 0) {
        /* COMMIT of a transaction a failed statement aborted is a rollback, not an error. */
        code = VG_FAIL(err, VIGIL_ESTORE,
                       "could not commit in store \"%s\": an earlier statement of the "
                       "transaction failed, so it was rolled back",
                       ps->where);
    }
    pq->PQclear(res);
    if (code != VIGIL_OK && pq->PQtransactionStatus(ps->conn) != PQTRANS_IDLE)
        pq->PQclear(pq->PQexec(ps->conn, "ROLLBACK"));
    if (code != VIGIL_OK && ps->cache.wrote)
        vg_pg_cache_clear(&ps->cache);
    if (code != VIGIL_OK) /* a SET of commit durability sent in it was undone too */
        ps->owe_sync = 1;
    else if (sent_sync)
        ps->owe_sync = 0;
    ps->cache.wrote = 0;
    return code;
}

static vigil_code pg_rollback(struct vg_store *s, int depth, vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    char sql[96];
    if (ps->cache.wrote) /* what the transaction wrote and read back is undone */
        vg_pg_cache_clear(&ps->cache);
    locked_clear(ps); /* a savepoint's rollback releases the row locks taken after it */
    if (depth == 0) {
        ps->in_tx = 0;
        ps->sp_open = ps->sp_server = ps->owe_release = 0;
        if (ps->owe_begin) { /* nothing was sent */
            ps->owe_begin = 0;
            return VIGIL_OK;
        }
        ps->cache.wrote = 0;
        /* The server undoes a SET of commit durability sent in the transaction (run_owed sends
         * it with the BEGIN): send the current setting again with the next statement. */
        ps->owe_sync = 1;
        /* A lost connection took the transaction with it: the server rolled it back. */
        if (conn_lost(ps) || pq->PQtransactionStatus(ps->conn) == PQTRANS_IDLE)
            return VIGIL_OK;
        return exec_once(ps, "ROLLBACK", err, "roll back");
    }
    ps->sp_open = depth - 1;
    if (depth > sp_kept(ps)) /* its SAVEPOINT was never sent: nothing was done inside it */
        return VIGIL_OK;
    if (ps->owe_release > depth) /* released deeper levels: the ROLLBACK TO ends them too */
        ps->owe_release = 0;
    snprintf(sql, sizeof sql, "ROLLBACK TO SAVEPOINT vg%d; RELEASE SAVEPOINT vg%d", depth, depth);
    vigil_code code = exec(ps, sql, err, "roll back a savepoint");
    if (code == VIGIL_OK)
        ps->sp_server = depth - 1;
    return code;
}

/* ---- record methods ------------------------------------------------------------------------ */

static void locked_clear(struct pg_store *ps)
{
    for (int i = 0; i < ps->n_locked; i++)
        vg_free(ps->locked[i]);
    ps->n_locked = 0;
}

static int locked_find(const struct pg_store *ps, const char *kind, const char *id)
{
    for (int i = 0; i < ps->n_locked; i++)
        if (!strcmp(ps->locked[i]->kind, kind) && !strcmp(ps->locked[i]->id, id))
            return i;
    return -1;
}

static void locked_forget(struct pg_store *ps, const char *kind, const char *id)
{
    int i = locked_find(ps, kind, id);
    if (i >= 0) {
        vg_free(ps->locked[i]);
        ps->locked[i] = ps->locked[--ps->n_locked];
    }
}

/* A write of (kind, id): its cached copy is forgotten now; until the transaction commits the
 * cache may hold what it wrote, which a rollback must forget. */
static void forget_written(struct pg_store *ps, const char *kind, const char *id)
{
    locked_forget(ps, kind, id);
    if (!vg_pg_cache_kind(kind))
        return;
    vg_pg_cache_forget(&ps->cache, kind, id);
    ps->cache.wrote |= ps->in_tx;
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

static vigil_code pg_put(struct vg_store *s, const struct vg_record *r, unsigned flags,
                         int *inserted, vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    char seq[24], at[24];
    forget_written(ps, r->kind, r->id);
    i64(seq, sizeof seq, r->seq);
    i64(at, sizeof at, r->at);
    const char *params[] = {r->kind, r->id, nz(r->owner), nz(r->k1), nz(r->k2), seq, at, r->body};
    PGresult *res = NULL;
    vigil_code code = run(ps,
                          "INSERT INTO records(" COLS ") VALUES($1,$2,$3,$4,$5,$6,1,$7,$8)"
                          " ON CONFLICT (kind, id) DO NOTHING",
                          8, params, &res, err, "insert a record");
    if (code)
        return code;
    int n = (int)strtol(pq->PQcmdTuples(res), NULL, 10);
    pq->PQclear(res);
    if (n == 0 && !(flags & VG_PUT_IF_ABSENT))
        return VG_FAIL(err, VIGIL_EEXISTS, "%s \"%s\" already exists", r->kind, r->id);
    if (inserted)
        *inserted = n > 0;
    return VIGIL_OK;
}

static vigil_code pg_update(struct vg_store *s, const struct vg_record *r, int64_t expected_rev,
                            vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    char seq[24], at[24], rev[24];
    forget_written(ps, r->kind, r->id);
    i64(seq, sizeof seq, r->seq);
    i64(at, sizeof at, r->at);
    i64(rev, sizeof rev, expected_rev);
    const char *params[] = {nz(r->k1), nz(r->k2), seq, at, r->body, r->kind, r->id, rev};
    PGresult *res = NULL;
    /* The row lock makes this a true compare-and-swap: a racing writer waits for our commit,
     * then re-evaluates rev = $8 against the new row and updates nothing. */
    vigil_code code = run(ps,
                          "UPDATE records SET k1=$1, k2=$2, seq=$3, at=$4, body=$5, rev=rev+1"
                          " WHERE kind=$6 AND id=$7 AND rev=$8",
                          8, params, &res, err, "update a record");
    if (code)
        return code;
    int n = (int)strtol(pq->PQcmdTuples(res), NULL, 10);
    pq->PQclear(res);
    if (n > 0)
        return VIGIL_OK;
    const char *key[] = {r->kind, r->id};
    code = run(ps, "SELECT rev FROM records WHERE kind=$1 AND id=$2", 2, key, &res, err,
               "read a revision");
    if (code)
        return code;
    if (pq->PQntuples(res) == 0) {
        pq->PQclear(res);
        return VG_FAIL(err, VIGIL_ENOTFOUND, "%s \"%s\" not found", r->kind, r->id);
    }
    long long current = (long long)col_i64(res, 0, 0);
    pq->PQclear(res);
    return VG_FAIL(err, VIGIL_ECONFLICT,
                   "%s \"%s\" was changed meanwhile (revision %lld, expected %lld)", r->kind, r->id,
                   current, (long long)expected_rev);
}

/* Take the notifications libpq has received (reading what the socket holds, no round trip):
 * a changed record of a cached kind is forgotten, a work signal kept for AWAIT_WORK. 1 when
 * there was a work signal. */
static int take_signals(struct pg_store *ps, int read_socket)
{
    PGnotify *n;
    if (read_socket && !pq->PQconsumeInput(ps->conn))
        vg_pg_cache_clear(&ps->cache);
    while ((n = pq->PQnotifies(ps->conn))) {
        if (!strcmp(n->relname, RECORD_CHANNEL)) {
            vg_pg_cache_forget_payload(&ps->cache, n->extra);
            ps->record_notes++;
        } else
            ps->work_seen = 1;
        pq->PQfreemem(n);
    }
    int work = ps->work_seen;
    ps->work_seen = 0;
    if (work && !ps->listening)
        work = 0; /* a connection that does not wait for work does not keep the news */
    else if (work)
        ps->work_seen = 1; /* AWAIT_WORK takes it */
    return work;
}

/* A cached record (cache.h), or ENOTFOUND from the cache; 0 in *hit when not cached. */
static vigil_code cached_get(struct pg_store *ps, const char *kind, const char *id, vg_record_cb cb,
                             void *user, int *hit, vigil_error *err)
{
    *hit = 0;
    if (!ps->record_signal || !vg_pg_cache_kind(kind) || conn_lost(ps))
        return VIGIL_OK;
    take_signals(ps, 1);
    const struct vg_pg_cache_entry *e = vg_pg_cache_find(&ps->cache, kind, id);
    if (!e) {
        ps->cache.misses++;
        return VIGIL_OK;
    }
    *hit = 1;
    ps->cache.hits++;
    if (!e->found)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "%s \"%s\" not found", kind, id);
    cb(user, e->found);
    return VIGIL_OK;
}

static vigil_code pg_get(struct vg_store *s, const char *kind, const char *id, vg_record_cb cb,
                         void *user, vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    const char *params[] = {kind, id};
    PGresult *res = NULL;
    int hit = 0, at = ps->in_tx ? locked_find(ps, kind, id) : -1;
    if (at >= 0) {
        cb(user, ps->locked[at]);
        return VIGIL_OK;
    }
    vigil_code code = cached_get(ps, kind, id, cb, user, &hit, err);
    if (hit)
        return code;
    uint64_t notes = ps->record_notes;
    code = run(ps, "SELECT " COLS " FROM records WHERE kind=$1 AND id=$2", 2, params, &res, err,
               "read a record");
    if (code)
        return code;
    int keep = ps->record_signal && vg_pg_cache_kind(kind) && ps->record_notes == notes;
    if (pq->PQntuples(res) == 0) {
        code = VG_FAIL(err, VIGIL_ENOTFOUND, "%s \"%s\" not found", kind, id);
        if (keep)
            vg_pg_cache_put(&ps->cache, kind, id, NULL);
    } else {
        struct vg_record r;
        row_record(res, 0, &r);
        if (keep)
            vg_pg_cache_put(&ps->cache, kind, id, &r);
        cb(user, &r);
    }
    pq->PQclear(res);
    return code;
}

/* Build the WHERE clause of q (and the keyset condition when after is set). */
static void query_sql(char *sql, size_t n, const struct vg_query *q, int for_count,
                      const char **params, int *np, char nums[4][24], int after, int64_t after_seq,
                      const char *after_id, int limit)
{
    int o = snprintf(sql, n, "SELECT %s FROM records WHERE kind=$1", for_count ? "count(*)" : COLS);
    int k = 0;
    params[k++] = q->kind;
    if (q->owner) {
        params[k++] = q->owner;
        o += snprintf(sql + o, n - o, " AND owner=$%d", k);
    }
    if (q->k1) {
        params[k++] = q->k1;
        o += snprintf(sql + o, n - o, " AND k1=$%d", k);
    }
    if (q->k2) {
        params[k++] = q->k2;
        o += snprintf(sql + o, n - o, " AND k2=$%d", k);
    }
    if (q->has_seq_min) {
        i64(nums[0], 24, q->seq_min);
        params[k++] = nums[0];
        o += snprintf(sql + o, n - o, " AND seq>=$%d", k);
    }
    if (q->has_seq_max) {
        i64(nums[1], 24, q->seq_max);
        params[k++] = nums[1];
        o += snprintf(sql + o, n - o, " AND seq<=$%d", k);
    }
    if (after) {
        i64(nums[2], 24, after_seq);
        params[k++] = nums[2];
        params[k++] = after_id;
        o += snprintf(sql + o, n - o, " AND (seq, id) %s ($%d::bigint, $%d)",
                      q->descending ? "<" : ">", k - 1, k);
    }
    if (!for_count) {
        const char *dir = q->descending ? "DESC" : "ASC";
        i64(nums[3], 24, limit);
        params[k++] = nums[3];
        o += snprintf(sql + o, n - o, " ORDER BY seq %s, id %s LIMIT $%d", dir, dir, k);
    }
    *np = k;
}

static vigil_code pg_scan(struct vg_store *s, const struct vg_query *q, vg_record_cb cb, void *user,
                          vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    char sql[640], nums[4][24], last_id[256];
    const char *params[10];
    int np = 0, after = q->has_after;
    int64_t after_seq = q->after_seq;
    const char *after_id = q->after_id;
    long left = q->limit > 0 ? q->limit : -1; /* records still wanted; -1: all */
    vigil_code code = VIGIL_OK;
    for (;;) {
        int page = left < 0 || left > SCAN_PAGE ? SCAN_PAGE : (int)left;
        PGresult *res = NULL;
        query_sql(sql, sizeof sql, q, 0, params, &np, nums, after, after_seq, after_id, page);
        if ((code = run(ps, sql, np, params, &res, err, "scan records")))
            return code;
        int rows = pq->PQntuples(res), stop = 0;
        for (int i = 0; i < rows && !stop; i++) {
            struct vg_record r;
            row_record(res, i, &r);
            stop = cb(user, &r);
        }
        if (rows > 0) {
            after = 1;
            after_seq = col_i64(res, rows - 1, 5);
            snprintf(last_id, sizeof last_id, "%s", pq->PQgetvalue(res, rows - 1, 1));
            after_id = last_id;
        }
        pq->PQclear(res);
        if (left > 0)
            left -= rows;
        if (stop || rows < page || left == 0)
            return VIGIL_OK;
    }
}

static vigil_code pg_count(struct vg_store *s, const struct vg_query *q, int64_t *out,
                           vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    char sql[640], nums[4][24];
    const char *params[10];
    int np = 0;
    PGresult *res = NULL;
    query_sql(sql, sizeof sql, q, 1, params, &np, nums, 0, 0, NULL, 0);
    vigil_code code = run(ps, sql, np, params, &res, err, "count records");
    if (code)
        return code;
    *out = col_i64(res, 0, 0);
    pq->PQclear(res);
    return VIGIL_OK;
}

static vigil_code pg_remove(struct vg_store *s, const char *kind, const char *id, vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    const char *params[] = {kind, id};
    PGresult *res = NULL;
    forget_written(ps, kind, id);
    vigil_code code = run(ps, "DELETE FROM records WHERE kind=$1 AND id=$2", 2, params, &res, err,
                          "delete a record");
    if (code)
        return code;
    int n = (int)strtol(pq->PQcmdTuples(res), NULL, 10);
    pq->PQclear(res);
    if (n == 0)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "%s \"%s\" not found", kind, id);
    return VIGIL_OK;
}

static vigil_code pg_remove_owner(struct vg_store *s, const char *owner, int64_t *removed,
                                  vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    const char *params[] = {owner};
    PGresult *res = NULL;
    vg_pg_cache_clear(&ps->cache);
    ps->cache.wrote |= ps->in_tx;
    locked_clear(ps);
    /* The kinds are found by skipping through the (kind, ...) index (a loose index scan), then
     * each kind's records of this owner through (kind, owner, seq, id): no full scan. */
    vigil_code code =
        run(ps,
            "WITH RECURSIVE k(kind) AS (SELECT min(kind) FROM records UNION ALL"
            " SELECT (SELECT min(kind) FROM records WHERE kind > k.kind) FROM k"
            " WHERE k.kind IS NOT NULL)"
            " DELETE FROM records r USING k WHERE k.kind IS NOT NULL AND r.kind = k.kind"
            " AND r.owner = $1",
            1, params, &res, err, "delete records");
    if (code)
        return code;
    if (removed)
        *removed = (int64_t)strtoll(pq->PQcmdTuples(res), NULL, 10);
    pq->PQclear(res);
    /* The text index belongs to the owner's records too (not counted: not records). Same loose
     * index scan over the kinds, then (kind, owner). */
    if (ps->schema_version >= 4)
        code = run(ps,
                   "WITH RECURSIVE k(kind) AS (SELECT min(kind) FROM text_index UNION ALL"
                   " SELECT (SELECT min(kind) FROM text_index WHERE kind > k.kind) FROM k"
                   " WHERE k.kind IS NOT NULL)"
                   " DELETE FROM text_index t USING k WHERE k.kind IS NOT NULL"
                   " AND t.kind = k.kind AND t.owner = $1",
                   1, params, NULL, err, "clear the text index");
    return code;
}

/* VG_STORE_CTRL_LOCK. A row lock, not a write: the fencing check of every phase of a run
 * costs one round trip and no WAL. FOR SHARE waits for a writer of the record and then holds
 * off any other until this transaction ends; FOR UPDATE (exclusive) also holds off other
 * read-modify-writers, so READ COMMITTED's next statement reads what the last one committed;
 * FOR UPDATE SKIP LOCKED claims it, or passes. */
static vigil_code lock_record(struct pg_store *ps, struct vg_store_lock *l, vigil_error *err)
{
    const char *params[] = {l->kind, l->id};
    PGresult *res = NULL;
    l->busy = 0;
    if (vg_pg_cache_kind(l->kind)) /* read it again under the lock */
        vg_pg_cache_forget(&ps->cache, l->kind, l->id);
    /* A claim's row passed over (SKIP LOCKED) is absent or held by another transaction: the
     * one row answered says which (its last column: present), in the same round trip. */
    const char *sql =
        l->skip_locked
            ? "SELECT l.*, EXISTS (SELECT 1 FROM records WHERE kind=$1 AND id=$2) FROM (SELECT 1)"
              " one LEFT JOIN LATERAL (SELECT " COLS " FROM records WHERE kind=$1 AND id=$2"
              " FOR UPDATE SKIP LOCKED) l ON true"
        : l->exclusive ? "SELECT " COLS " FROM records WHERE kind=$1 AND id=$2 FOR UPDATE"
                       : "SELECT " COLS " FROM records WHERE kind=$1 AND id=$2 FOR SHARE";
    vigil_code code = run(ps, sql, 2, params, &res, err, "lock a record");
    if (code)
        return code;
    int got = pq->PQntuples(res) > 0 && !pq->PQgetisnull(res, 0, 0);
    if (got && ps->n_locked < LOCKED_MAX && locked_find(ps, l->kind, l->id) < 0) {
        struct vg_record r;
        row_record(res, 0, &r);
        if ((ps->locked[ps->n_locked] = vg_record_dup(&r)))
            ps->n_locked++;
    }
    if (!got && l->skip_locked && pq->PQntuples(res) > 0) /* "t": present, so someone holds it */
        l->busy = !strcmp(pq->PQgetvalue(res, 0, N_COLS), "t");
    pq->PQclear(res);
    return VIGIL_OK;
}

/* Take every notification libpq has read; 1 if there was a work signal. */
static int drain_notifies(struct pg_store *ps)
{
    int work = take_signals(ps, 0);
    ps->work_seen = 0;
    return work;
}

/* VG_STORE_CTRL_AWAIT_WORK: LISTEN once, then wait on the connection's socket. A connection
 * lost meanwhile is made again (LISTEN included) and counts as a signal: one may have been
 * sent while nobody listened. */
static vigil_code await_work(struct pg_store *ps, struct vg_store_await *a, vigil_error *err)
{
    vigil_code code;
    a->signalled = 0;
    if (ps->in_tx)
        return VG_FAIL(err, VIGIL_ESTATE, "cannot wait for work inside a transaction");
    if (!ps->listening) {
        if ((code = exec(ps, "LISTEN " WORK_CHANNEL, err, "listen for work")))
            return code;
        ps->listening = 1;
    }
    if (conn_lost(ps)) {
        a->signalled = 1;
        return reconnect(ps, err);
    }
    if ((a->signalled = drain_notifies(ps)))
        return VIGIL_OK;
    /* Input that is no notification (the server's farewell before it closes) waits again for
     * the rest of the time: the close that follows is the news. */
    int64_t end = vg_clock_mono_ns(vg_clock_real()) / 1000000 + VG_MAX(a->timeout_ms, 0);
    for (;;) {
        int64_t left = end - vg_clock_mono_ns(vg_clock_real()) / 1000000;
        struct pollfd p = {.fd = pq->PQsocket(ps->conn), .events = POLLIN};
        if (poll(&p, 1, (int)VG_MAX(left, 0)) <= 0)
            return VIGIL_OK; /* timeout, or a signal interrupted the wait: the caller polls */
        if (!pq->PQconsumeInput(ps->conn) || conn_lost(ps)) {
            a->signalled = 1;
            return reconnect(ps, err);
        }
        if ((a->signalled = drain_notifies(ps)) || left <= 0)
            return VIGIL_OK;
    }
}

static vigil_code pg_control(struct vg_store *s, int op, void *arg, vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    PGresult *res = NULL;
    vigil_code code;
    switch (op) {
    case VG_STORE_CTRL_SCHEMA_VERSION:
        *(int *)arg = ps->schema_version;
        return VIGIL_OK;
    case VG_STORE_CTRL_MEMBER_ROWS:
        if (arg)
            *(int *)arg = ps->schema_version >= MEMBER_REFS;
        return ps->schema_version >= MEMBER_ROWS
                   ? VIGIL_OK
                   : VG_FAIL(err, VIGIL_EUNSUPPORTED, "schema %d keeps a row a message",
                             ps->schema_version);
    case VG_STORE_CTRL_CHECKPOINT:
        return VIGIL_OK; /* the server manages its own WAL */
    case VG_STORE_CTRL_FILE_SIZE:
        code = run(ps, "SELECT pg_total_relation_size('records')", 0, NULL, &res, err,
                   "read the table size");
        if (code)
            return code;
        *(int64_t *)arg = col_i64(res, 0, 0);
        pq->PQclear(res);
        return VIGIL_OK;
    case VG_STORE_CTRL_USED_BYTES:
        code = run(ps, "SELECT coalesce(sum(pg_column_size(r.*)), 0) FROM records r", 0, NULL, &res,
                   err, "read the bytes in use");
        if (code)
            return code;
        *(int64_t *)arg = col_i64(res, 0, 0);
        pq->PQclear(res);
        return VIGIL_OK;
    case VG_STORE_CTRL_COMPACT:
        code = run(ps, "VACUUM records", 0, NULL, &res, err, "vacuum the records");
        pq->PQclear(res);
        return code;
    case VG_STORE_CTRL_DURABLE_COMMITS:
        /* Asynchronous commit: the server flushes its WAL in order shortly after; a later
         * synchronous commit waits for every earlier one. */
        /* Sent with the next statement, or with the open transaction's COMMIT (pg_commit). */
        if (ps->async_commit != !*(int *)arg)
            ps->owe_sync = 1;
        ps->async_commit = !*(int *)arg;
        return VIGIL_OK;
    case VG_STORE_CTRL_LOCK:
        return lock_record(ps, arg, err);
    case VG_STORE_CTRL_AWAIT_WORK:
        return await_work(ps, arg, err);
    case VG_STORE_CTRL_SYNC:
        /* The server syncs its WAL; a client cannot ask it to flush earlier asynchronous
         * commits without committing something. */
        return VG_FAIL(err, VIGIL_EUNSUPPORTED,
                       "PostgreSQL stores make commits durable on "
                       "the server; they do not share syncs");
    case VG_STORE_CTRL_INTEGRITY:
        /* The server checks its pages (checksums); here: the schema is present and readable. */
        code = run(ps, "SELECT count(*) FROM vigil_meta", 0, NULL, &res, err, "check integrity");
        pq->PQclear(res);
        return code;
    default:
        return VG_FAIL(err, VIGIL_ENOTFOUND, "unknown store control op %d", op);
    }
}

/* ---- full-text index ---------------------------------------------------------------------- */

#define TEXT_MAX (256 * 1024) /* bytes of a text that are indexed; see pg_text_index */
#define QUERY_MAX (64 * 1024) /* bytes of all terms of one search, as the SQLite adapter */
#define TERMS_MAX 1024        /* terms of one search (each is one bound parameter) */

static vigil_code need_text(struct pg_store *ps, vigil_error *err)
{
    if (ps->schema_version < 4)
        return VG_FAIL(err, VIGIL_EUNSUPPORTED,
                       "store \"%s\" has schema version %d, without the text index (4)", ps->where,
                       ps->schema_version);
    return VIGIL_OK;
}

/* Length of the valid UTF-8 prefix of s[0..n): the server refuses invalid text with an error
 * that would abort the caller's transaction, so it is checked here first. */
static size_t utf8_valid_len(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len = c < 0x80             ? 1
                     : (c & 0xe0) == 0xc0 ? 2
                     : (c & 0xf0) == 0xe0 ? 3
                     : (c & 0xf8) == 0xf0 ? 4
                                          : 0;
        if (len == 0 || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4) || n - i < len)
            return i;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xc0) != 0x80)
                return i;
        unsigned c1 = s[i + 1];
        if ((len == 3 && c == 0xe0 && c1 < 0xa0) || (len == 3 && c == 0xed && c1 >= 0xa0) ||
            (len == 4 && c == 0xf0 && c1 < 0x90) || (len == 4 && c == 0xf4 && c1 >= 0x90))
            return i;
        i += len;
    }
    return n;
}

/*
 * Upsert the document of (kind, id); NULL text deletes it. A tsvector holds at most 1 MB, and
 * exceeding it is a server error that would abort the caller's transaction, so only the first
 * TEXT_MAX bytes are indexed (a tsvector takes at most about three times its text), cut
 * before the last word boundary so no word fragment is indexed. Words past that point are not
 * found on PostgreSQL (SQLite indexes everything).
 */
static vigil_code pg_text_index(struct vg_store *s, const char *kind, const char *id,
                                const char *owner, const char *text, vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    vigil_code code = need_text(ps, err);
    if (code)
        return code;
    if (!text) {
        const char *params[] = {kind, id};
        return run(ps, "DELETE FROM text_index WHERE kind=$1 AND id=$2", 2, params, NULL, err,
                   "update the text index");
    }
    size_t n = strlen(text);
    if (utf8_valid_len((const unsigned char *)text, n) != n)
        return VG_FAIL(err, VIGIL_EINVAL, "text to index for %s \"%s\" is not valid UTF-8", kind,
                       id);
    char *cut = NULL;
    if (n > TEXT_MAX) {
        size_t end = TEXT_MAX;
        while (end > 0 && ((unsigned char)text[end] & 0xc0) == 0x80)
            end--; /* a UTF-8 boundary */
        size_t word = end;
        while (word > 0 && !isspace((unsigned char)text[word - 1]))
            word--;
        if (word > 0)
            end = word;
        cut = vg_malloc(end + 1);
        if (!cut)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory indexing %s \"%s\"", kind, id);
        memcpy(cut, text, end);
        cut[end] = '\0';
        text = cut;
    }
    const char *params[] = {kind, id, owner, text};
    /* Re-indexing replaces the owner too, as the SQLite adapter's delete-then-insert does. */
    code = run(ps,
               "INSERT INTO text_index(kind, id, owner, doc)"
               " VALUES($1, $2, $3, to_tsvector('simple', $4))"
               " ON CONFLICT (kind, id) DO UPDATE SET owner = excluded.owner, doc = excluded.doc",
               4, params, NULL, err, "update the text index");
    vg_free(cut);
    return code;
}

/*
 * The query ORs one phraseto_tsquery('simple', $n) per term, like the SQLite adapter's
 * `"t1" OR "t2"`: each term is a bound parameter, so it is only ever data; the SQL text holds
 * nothing but placeholder numbers. phraseto_tsquery (not plainto_tsquery) because an FTS5
 * quoted string is a phrase: a term the parser splits ("it's", "a b") must match as adjacent
 * words there too. A term without any word yields an empty query part, which matches nothing.
 * Empty terms are skipped, and terms that are not valid UTF-8 too (indexed text always is,
 * so they cannot match, and the server would refuse them with an error that aborts the
 * caller's transaction). Order: ts_rank descending (higher is better, as the port wants),
 * then id.
 */
static vigil_code pg_text_search(struct vg_store *s, const char *kind, const char *owner,
                                 const char *const *terms, size_t n_terms, int limit,
                                 vg_text_hit_cb cb, void *user, vigil_error *err)
{
    struct pg_store *ps = (struct pg_store *)s;
    vigil_code code = need_text(ps, err);
    if (code)
        return code;
    size_t used = 0, bytes = 0;
    for (size_t i = 0; i < n_terms; i++) {
        size_t len = terms[i] ? strlen(terms[i]) : 0;
        if (len && utf8_valid_len((const unsigned char *)terms[i], len) == len) {
            used++;
            bytes += len;
        }
    }
    if (used == 0)
        return VIGIL_OK;
    if (used > TERMS_MAX || bytes > QUERY_MAX)
        return VG_FAIL(err, VIGIL_ETOOBIG, "text search query is too long");

    const char **params = vg_calloc(used + 3, sizeof *params);
    struct vg_buf q, sql;
    vg_buf_init(&q, 64 * TERMS_MAX);
    vg_buf_init(&sql, 128 * TERMS_MAX);
    if (!params) {
        code = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a text search");
        goto out;
    }
    char lim[24];
    i64(lim, sizeof lim, limit);
    int k = 0;
    params[k++] = kind;
    params[k++] = owner;
    params[k++] = lim;
    for (size_t i = 0; i < n_terms; i++) {
        size_t len = terms[i] ? strlen(terms[i]) : 0;
        if (!len || utf8_valid_len((const unsigned char *)terms[i], len) != len)
            continue;
        params[k++] = terms[i];
        vg_buf_printf(&q, "%sphraseto_tsquery('simple', $%d)", k > 4 ? " || " : "", k);
    }
    vg_buf_printf(&sql,
                  "SELECT t.id, ts_rank(t.doc, q.q) AS r FROM text_index t,"
                  " (SELECT %s AS q) q WHERE t.kind = $1 AND t.owner = $2 AND t.doc @@ q.q"
                  " ORDER BY r DESC, t.id LIMIT $3::int",
                  q.data ? q.data : "");
    if (q.fail || sql.fail) {
        code = (q.fail == VIGIL_ENOMEM || sql.fail == VIGIL_ENOMEM)
                   ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a text search")
                   : VG_FAIL(err, VIGIL_ETOOBIG, "text search query is too long");
        goto out;
    }
    PGresult *res = NULL;
    if ((code = run(ps, sql.data, k, params, &res, err, "search the text index")))
        goto out;
    for (int i = 0, rows = pq->PQntuples(res); i < rows; i++)
        if (cb(user, pq->PQgetvalue(res, i, 0), strtod(pq->PQgetvalue(res, i, 1), NULL)))
            break;
    pq->PQclear(res);
out:
    vg_buf_release(&sql);
    vg_buf_release(&q);
    vg_free(params);
    return code;
}

const struct vg_store_methods vg_store_pg_methods = {
    .version = 2,
    .name = "postgres",
    .caps = VG_STORE_CAP_DURABLE_COMMIT | VG_STORE_CAP_MULTI_PROCESS | VG_STORE_CAP_RECONNECTS,
    .open = pg_open,
    .close = pg_close,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .put = pg_put,
    .update = pg_update,
    .get = pg_get,
    .scan = pg_scan,
    .count = pg_count,
    .remove = pg_remove,
    .remove_owner = pg_remove_owner,
    .control = pg_control,
    .text_index = pg_text_index,
    .text_search = pg_text_search,
};
