/*
 * test_pg_scale_out.c: what many daemons on one PostgreSQL store rely on, against the test
 * server (VIGIL_PG_URI; skipped without it, failing with VIGIL_REQUIRE_PG=1). Each case uses a
 * database of its own, so the connections it cuts (pg_terminate_backend, as a server restart or
 * a network cut does) are only its own.
 *  - a connection lost outside a transaction is made again and the statement sent again;
 *    inside one, the transaction fails (EIO), rolls back cleanly, and the next one works;
 *  - record locks: FOR SHARE holds off a claimer (SKIP LOCKED: busy), a claim holds off
 *    another claimer, an absent record is not busy;
 *  - the work signal: a commit that queues a wake wakes a listener on another connection, and
 *    a listener whose connection was cut reports a signal (it may have missed one);
 *  - timers fire once: three connections firing the same 10,000 due timers at once;
 *  - two daemons writing one agent's state at once (one queues wakes, the other writes the
 *    state as a run's phase does) take turns on its row: neither fails its compare-and-swap;
 *  - the daemon's lease renewal and a run's phase writing the same lease take turns: neither
 *    is ended by PostgreSQL's deadlock detection;
 *  - asynchronous commit, undone by a rollback, is set again with the next statement;
 *  - a durable commit under asynchronous commit is made synchronous, the ones after it not;
 *  - the daemon list (per-daemon health in /metrics) counts the leases each holder holds;
 *  - a password in the store URI is refused (PGPASSWORD or ~/.pgpass instead);
 *  - records a connection keeps between reads (agents, kill switches, cancel requests) follow
 *    what another connection commits, and what a rolled-back transaction wrote is forgotten;
 *    a read during which a notification arrived is not kept;
 *  - memory compaction's commit holds the agent's lease: it waits while a run on another
 *    daemon holds the agent, and once it commits, that run's epoch is fenced off;
 *  - a task's run whose end loses a compare-and-swap goes back to the queue under its run key
 *    and records the end on its next claim;
 *  - daemons starting together on an empty database migrate it once (the advisory lock).
 * The end-to-end daemons with kill -9 loops are tests/cli/test_pg_scale_out.sh.
 */
#include "helpers/test.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "helpers/hand_clock.h"
#include "helpers/pg_env.h"
#include "memory/compact.h"
#include "orch/task.h"
#include "os/clock.h"
#include "runtime/runtime_int.h"
#include "runtime/wake_runner.h"
#include "store/store.h"
#include "wake/wake.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh database named db on the test server, as a store URI in out. */
static void fresh_db(const char *db, char *out, size_t n)
{
    char sql[160];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", db);
    vg_test_pg_sql(sql);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
    vg_test_pg_sql(sql);
    const char *base = vg_test_pg_uri();
    const char *auth = strstr(base, "://");
    ASSERT(auth);
    const char *path = strchr(auth + 3, '/');
    ASSERT(path);
    const char *rest = path + strcspn(path, "?");
    snprintf(out, n, "%.*s/%s%s", (int)(path - base), base, db, rest);
}

static void drop_db(const char *db)
{
    char sql[160];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", db);
    vg_test_pg_sql(sql);
}

/* Cut every vigil connection to db, as a server restart would. */
static void cut(const char *db)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s'"
             " AND application_name = 'vigil'",
             db);
    vg_test_pg_sql(sql);
}

static struct vg_record rec(const char *kind, const char *id, const char *k1)
{
    return (struct vg_record){
        .kind = kind, .id = id, .owner = "", .k1 = k1, .k2 = "", .body = "{}"};
}

static int found_cb(void *user, const struct vg_record *r)
{
    (void)r;
    *(int *)user = 1;
    return 0;
}

static int has(struct vg_store *s, const char *kind, const char *id)
{
    int got = 0;
    vigil_code rc = vg_store_get(s, kind, id, found_cb, &got, NULL);
    ASSERT(rc == VIGIL_OK || rc == VIGIL_ENOTFOUND);
    return got;
}

static int body_cb(void *user, const struct vg_record *r)
{
    snprintf(user, 32, "%s", r->body);
    return 0;
}

/* The body of (kind, id) on s, "" when absent. */
static const char *body_of(struct vg_store *s, const char *kind, const char *id, char out[32])
{
    out[0] = '\0';
    vigil_code rc = vg_store_get(s, kind, id, body_cb, out, NULL);
    ASSERT(rc == VIGIL_OK || rc == VIGIL_ENOTFOUND);
    return out;
}

/* Read (kind, id) on s until its body is want ("": absent). Another connection's commit
 * reaches s's copy through a notification: waited for by polling, with a 30 s safety bound. */
static int reaches(struct vg_store *s, const char *kind, const char *id, const char *want)
{
    char got[32];
    for (int i = 0; i < 30000; i++) {
        if (!strcmp(body_of(s, kind, id, got), want))
            return 1;
        vg_clock_sleep_ms(vg_clock_real(), 1);
    }
    return 0;
}

TEST(cached_records_follow_other_connections)
{
    char db[64], uri[1024], got[32];
    struct vg_store *a = NULL, *b = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_record r = rec("kill_switch", "k", "on");
    snprintf(db, sizeof db, "vg_cache_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &a, E));
    ASSERT_OK(vg_store_open(uri, &o, &b, E));
    ASSERT_STREQ(body_of(a, "kill_switch", "k", got), ""); /* absent, and kept as absent */
    r.body = "{\"v\":1}";
    ASSERT_OK(vg_store_put(b, &r, 0, NULL, E));
    ASSERT(reaches(a, "kill_switch", "k", "{\"v\":1}"));
    r.body = "{\"v\":2}";
    ASSERT_OK(vg_store_update(b, &r, 1, E));
    ASSERT(reaches(a, "kill_switch", "k", "{\"v\":2}"));
    /* A's own write, read back and rolled back: the committed record again. */
    ASSERT_OK(vg_store_begin(a, E));
    r.body = "{\"v\":3}";
    ASSERT_OK(vg_store_update(a, &r, 2, E));
    ASSERT_STREQ(body_of(a, "kill_switch", "k", got), "{\"v\":3}");
    ASSERT_OK(vg_store_rollback(a, E));
    ASSERT_STREQ(body_of(a, "kill_switch", "k", got), "{\"v\":2}");
    ASSERT_OK(vg_store_remove(b, "kill_switch", "k", E));
    ASSERT(reaches(a, "kill_switch", "k", ""));
    vg_store_close(a);
    vg_store_close(b);
    drop_db(db);
}

/* SQL on a libpq connection of the test's own; a failure fails the test. */
static void raw_sql(PGconn *c, const char *sql)
{
    PGresult *res = PQexec(c, sql);
    ExecStatusType t = PQresultStatus(res);
    if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK)
        TEST_FAIL_("%s: %s", sql, PQerrorMessage(c));
    PQclear(res);
}

struct reader {
    struct vg_store *s;
    char got[32];
};

static void *read_k2(void *arg)
{
    struct reader *r = arg;
    body_of(r->s, "kill_switch", "k2", r->got);
    return NULL;
}

static int lock_waited(const char *db);

/* Change kill switch id's body on c with the triggers off: no notification tells anyone. */
static void change_unannounced(PGconn *c, const char *id, const char *body)
{
    char sql[256];
    snprintf(
        sql, sizeof sql,
        "UPDATE records SET body = '%s', rev = rev + 1 WHERE kind = 'kill_switch' AND id = '%s'",
        body, id);
    raw_sql(c, "ALTER TABLE records DISABLE TRIGGER USER");
    raw_sql(c, sql);
    raw_sql(c, "ALTER TABLE records ENABLE TRIGGER USER");
}

/* A read of a cached kind during which a notification arrived is not kept: the notification
 * may name a commit the row it read predates. Made to happen: the reader's SELECT waits for the
 * test's lock of the table while the test commits a change of the record (its trigger's
 * NOTIFY reaches the reader's backend then, and goes out with the SELECT's result). What the
 * reader kept is told apart by a change made with the triggers off (no notification): a kept
 * copy does not see it, a read from the server does. */
TEST(a_read_a_notification_arrived_during_is_not_kept)
{
    char db[64], uri[1024], got[32];
    struct vg_store *a = NULL, *b = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_record r = rec("kill_switch", "k", "on");
    snprintf(db, sizeof db, "vg_cache_race_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &a, E));
    ASSERT_OK(vg_store_open(uri, &o, &b, E));
    PGconn *c = PQconnectdb(uri);
    ASSERT(PQstatus(c) == CONNECTION_OK);
    r.body = "{\"v\":1}";
    ASSERT_OK(vg_store_put(b, &r, 0, NULL, E));
    struct vg_record r2 = rec("kill_switch", "k2", "on");
    r2.body = "{\"v\":1}";
    ASSERT_OK(vg_store_put(b, &r2, 0, NULL, E));
    /* The method: a read with no notification during it is kept, and an unannounced change is
     * not seen through the kept copy. (A first read may take the notification of the put.) */
    ASSERT(reaches(a, "kill_switch", "k", "{\"v\":1}"));
    ASSERT_STREQ(body_of(a, "kill_switch", "k", got), "{\"v\":1}");
    change_unannounced(c, "k", "{\"v\":2}");
    ASSERT_STREQ(body_of(a, "kill_switch", "k", got), "{\"v\":1}");
    /* The race: a's first read of k2 waits for the table while a change of k2 commits. */
    raw_sql(c, "BEGIN");
    raw_sql(c, "LOCK TABLE records IN ACCESS EXCLUSIVE MODE");
    struct reader rd = {.s = a};
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, read_k2, &rd), 0);
    ASSERT(lock_waited(db)); /* the reader's SELECT waits for the lock */
    raw_sql(c, "UPDATE records SET body = '{\"v\":3}', rev = rev + 1"
               " WHERE kind = 'kill_switch' AND id = 'k2'");
    raw_sql(c, "COMMIT"); /* its NOTIFY reaches the reader's backend, busy with the SELECT */
    pthread_join(th, NULL);
    ASSERT_STREQ(rd.got, "{\"v\":3}");
    /* The signal of that commit may reach the reader's backend only after the SELECT ended (a
     * busy machine); it then goes out on its own, later. An announced change of k committed
     * after it is delivered after it (one queue, in commit order): once a sees k's, k2's has
     * been taken too, whether it came with the read or after. */
    raw_sql(c, "UPDATE records SET body = '{\"v\":5}', rev = rev + 1"
               " WHERE kind = 'kill_switch' AND id = 'k'");
    ASSERT(reaches(a, "kill_switch", "k", "{\"v\":5}"));
    /* Not kept: the next read goes to the server and sees an unannounced change. */
    change_unannounced(c, "k2", "{\"v\":4}");
    ASSERT_STREQ(body_of(a, "kill_switch", "k2", got), "{\"v\":4}");
    PQfinish(c);
    vg_store_close(a);
    vg_store_close(b);
    drop_db(db);
}

/* A lost connection is made again (with backoff, src/store/pg/pg.c reconnect): a read outside
 * a transaction goes through on the new connection, and nothing committed before the cut is
 * lost; a transaction the cut ended is refused whole, never acknowledged, so no write is held in
 * memory to flush later (REQUIREMENTS.md's reconciliation: nothing is acknowledged until it is
 * durable). proves: S4-064 */
TEST(lost_connection_made_again)
{
    char db[64], uri[1024];
    struct vg_store *s = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_record r = rec("thing", "a", "");
    snprintf(db, sizeof db, "vg_reconnect_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &s, E));
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    /* Outside a transaction: the read is sent again on a new connection. */
    cut(db);
    ASSERT(has(s, "thing", "a"));
    /* Inside one: the transaction is gone with the connection; it fails, nothing of it stays,
     * and the next transaction works on a new connection. */
    ASSERT_OK(vg_store_begin(s, E));
    r.id = "b";
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    cut(db);
    r.id = "c";
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EIO, vg_store_put(s, &r, 0, NULL, &err));
    ASSERT_CODE(VIGIL_EIO, vg_store_end(s, VIGIL_EIO, NULL));
    ASSERT(!vg_store_in_tx(s));
    ASSERT(!has(s, "thing", "b"));
    ASSERT_OK(vg_store_begin(s, E));
    r.id = "d";
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT(has(s, "thing", "d"));
    vg_store_close(s);
    drop_db(db);
}

TEST(record_locks)
{
    char db[64], uri[1024];
    struct vg_store *a = NULL, *b = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_record r = rec("agent_lease", "ag", "");
    int busy = -1;
    snprintf(db, sizeof db, "vg_locks_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &a, E));
    ASSERT_OK(vg_store_open(uri, &o, &b, E));
    ASSERT_OK(vg_store_put(a, &r, 0, NULL, E));
    ASSERT_CODE(VIGIL_ESTATE, vg_store_lock(a, "agent_lease", "ag", 0, NULL, NULL));
    /* A writer's fencing check (FOR SHARE) holds off a claimer until it commits. */
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(vg_store_lock(a, "agent_lease", "ag", 0, &busy, E));
    ASSERT_EQ(busy, 0);
    ASSERT_OK(vg_store_begin(b, E));
    ASSERT_OK(vg_store_lock(b, "agent_lease", "ag", 1, &busy, E));
    ASSERT_EQ(busy, 1);
    ASSERT_OK(vg_store_lock(b, "agent_lease", "absent", 1, &busy, E));
    ASSERT_EQ(busy, 0);
    ASSERT_OK(vg_store_commit(a, E));
    ASSERT_OK(vg_store_lock(b, "agent_lease", "ag", 1, &busy, E));
    ASSERT_EQ(busy, 0);
    /* Now b's claim holds it: a claimer passes it by. */
    ASSERT_OK(vg_store_begin(a, E));
    ASSERT_OK(vg_store_lock(a, "agent_lease", "ag", 1, &busy, E));
    ASSERT_EQ(busy, 1);
    ASSERT_OK(vg_store_rollback(a, E));
    ASSERT_OK(vg_store_commit(b, E));
    vg_store_close(a);
    vg_store_close(b);
    drop_db(db);
}

/* proves: S3-068 (on PostgreSQL, across processes: a commit that queues work wakes listeners) */
TEST(work_signal)
{
    char db[64], uri[1024];
    struct vg_store *lis = NULL, *w = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store_await aw = {.timeout_ms = 0};
    snprintf(db, sizeof db, "vg_signal_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &lis, E));
    ASSERT_OK(vg_store_open(uri, &o, &w, E));
    ASSERT_OK(vg_store_control(lis, VG_STORE_CTRL_AWAIT_WORK, &aw, E)); /* LISTEN */
    ASSERT_EQ(aw.signalled, 0);
    /* A record that is no work signals nothing. */
    struct vg_record r = rec("message", "m1", "");
    ASSERT_OK(vg_store_put(w, &r, 0, NULL, E));
    aw.timeout_ms = 200;
    ASSERT_OK(vg_store_control(lis, VG_STORE_CTRL_AWAIT_WORK, &aw, E));
    ASSERT_EQ(aw.signalled, 0);
    /* A queued wake does, once its transaction commits. */
    r = rec("wake_run", "k1", "queued");
    ASSERT_OK(vg_store_begin(w, E));
    ASSERT_OK(vg_store_put(w, &r, 0, NULL, E));
    aw.timeout_ms = 0;
    ASSERT_OK(vg_store_control(lis, VG_STORE_CTRL_AWAIT_WORK, &aw, E));
    ASSERT_EQ(aw.signalled, 0);
    ASSERT_OK(vg_store_commit(w, E));
    aw.timeout_ms = 30000; /* a safety bound: the signal ends the wait */
    ASSERT_OK(vg_store_control(lis, VG_STORE_CTRL_AWAIT_WORK, &aw, E));
    ASSERT_EQ(aw.signalled, 1);
    /* A listener whose connection was cut says so: it may have missed a signal. */
    cut(db);
    ASSERT_OK(vg_store_control(lis, VG_STORE_CTRL_AWAIT_WORK, &aw, E));
    ASSERT_EQ(aw.signalled, 1);
    /* and listens again on its new connection */
    r = rec("notification", "n1", "pending");
    ASSERT_OK(vg_store_put(w, &r, 0, NULL, E));
    ASSERT_OK(vg_store_control(lis, VG_STORE_CTRL_AWAIT_WORK, &aw, E));
    ASSERT_EQ(aw.signalled, 1);
    vg_store_close(lis);
    vg_store_close(w);
    drop_db(db);
}

/* The password comes from PGPASSWORD or ~/.pgpass (libpq's own), never from the URI, which
 * vigil prints and which ends up in configs and shell histories. */
TEST(password_in_uri_refused)
{
    static const char *const uris[] = {"postgres://u:secret@localhost/db",
                                       "postgresql://u:@localhost:5432/db",
                                       "postgresql://u@localhost/db?password=secret"};
    for (size_t i = 0; i < sizeof uris / sizeof *uris; i++) {
        struct vg_store *s = NULL;
        struct vg_store_options o = {0};
        vigil_error err = {0};
        ASSERT_CODE(VIGIL_EINVAL, vg_store_open(uris[i], &o, &s, &err));
        ASSERT_CONTAINS(err.message, "PGPASSWORD");
        ASSERT(!strstr(err.message, "secret"));
    }
}

#define TIMER_AGENTS 50
#define TIMERS_DEFAULT 10000 /* VIGIL_SCALE_TIMERS: fewer under a sanitizer */
#define FIRERS 3

struct firer {
    const char *uri;
    struct vg_test_clock *clock;
    int fired;
    vigil_code rc;
    char msg[256];
};

static void *fire_all(void *arg)
{
    struct firer *f = arg;
    vigil_runtime_options ro = {.size = sizeof ro, .store_uri = f->uri};
    vigil_runtime *rt = NULL;
    struct vg_wake w;
    vigil_error err = {0};
    if ((f->rc = vg_runtime_open_with(&ro, &f->clock->base, NULL, &rt, &err)) ||
        (f->rc = vg_wake_init(&w, vg_runtime_env(rt), NULL, &err))) {
        snprintf(f->msg, sizeof f->msg, "%s", err.message);
        vigil_runtime_close(rt);
        return NULL;
    }
    /* Until no timer is due: one that another connection was firing is passed by (and then
     * found fired), one whose agent's queued wake moved meanwhile waits for the next round. */
    struct vg_query due = {.kind = "timer", .k1 = "on"};
    int64_t left = 1;
    while (!f->rc && left > 0) {
        int n = 0;
        if ((f->rc = vg_timer_fire_due(&w, 0, &n, &err)) ||
            (f->rc = vg_store_count(vg_runtime_env(rt)->store, &due, &left, &err)))
            snprintf(f->msg, sizeof f->msg, "%s", err.message);
        f->fired += n;
    }
    vg_wake_release(&w);
    vigil_runtime_close(rt);
    return NULL;
}

static int fired_once_cb(void *user, const struct vg_record *r)
{
    json_t *b = json_loads(r->body, 0, NULL);
    if (json_integer_value(json_object_get(b, "fired")) != 1)
        ++*(int *)user;
    json_decref(b);
    return 0;
}

/* proves: S0-161 (timers fire once), across three connections on one PostgreSQL store */
TEST(timers_fire_once_across_connections)
{
    char db[64], uri[1024], agents[TIMER_AGENTS][37], tid[37];
    const char *env_timers = getenv("VIGIL_SCALE_TIMERS");
    const int timers = env_timers ? (int)strtol(env_timers, NULL, 10) : TIMERS_DEFAULT;
    struct vg_test_clock clock;
    vigil_runtime *rt = NULL;
    vigil_runtime_options ro;
    vigil_runtime_options_default(&ro);
    snprintf(db, sizeof db, "vg_timers_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    ro.store_uri = uri;
    ro.create_if_missing = 1;
    vg_test_clock_init(&clock, 1767225600000LL); /* 2026-01-01T00:00:00Z */
    ASSERT_OK(vg_runtime_open_with(&ro, &clock.base, NULL, &rt, E));
    struct vg_env *env = vg_runtime_env(rt);
    for (int i = 0; i < TIMER_AGENTS; i++) {
        char agent_name[32];
        snprintf(agent_name, sizeof agent_name, "clock-%d", i);
        vigil_agent_spec spec = {.name = agent_name, .mode = "autonomous"};
        ASSERT_OK(vigil_agent_create(rt, &spec, agents[i], E));
        ASSERT_OK(vg_agent_transition(env, agents[i], VIGIL_LIFECYCLE_ACTIVE, "test", E));
    }
    ASSERT_OK(vg_store_begin(env->store, E));
    for (int i = 0; i < timers; i++)
        ASSERT_OK(vg_timer_add(env, agents[i % TIMER_AGENTS], VG_TIMER_AT, "2026-01-01T00:00:01Z",
                               "UTC", tid, E));
    ASSERT_OK(vg_store_commit(env->store, E));
    vg_test_clock_advance(&clock, 5000); /* every timer is due */
    struct firer f[FIRERS];
    pthread_t th[FIRERS];
    for (int i = 0; i < FIRERS; i++) {
        f[i] = (struct firer){.uri = uri, .clock = &clock};
        ASSERT_EQ(pthread_create(&th[i], NULL, fire_all, &f[i]), 0);
    }
    int total = 0, bad = 0;
    for (int i = 0; i < FIRERS; i++) {
        pthread_join(th[i], NULL);
        if (f[i].rc)
            TEST_FAIL_("firer %d: %s", i, f[i].msg);
        total += f[i].fired;
    }
    ASSERT_EQ(total, timers);
    struct vg_query q = {.kind = "timer"};
    ASSERT_OK(vg_store_scan(env->store, &q, fired_once_cb, &bad, E));
    ASSERT_EQ(bad, 0);
    fprintf(stderr, "%d timers fired once by %d connections (%d, %d, %d)\n", timers, FIRERS,
            f[0].fired, f[1].fired, f[2].fired);
    vigil_runtime_close(rt);
    drop_db(db);
}

/* ---- one agent's state written by two daemons at once -----------------------------------------
 */

#define STATE_WRITES 150

struct state_writer {
    const char *uri, *agent;
    int enqueue; /* 1: queue user wakes (the counter); 0: write a slot, as a run's phase does */
    int done;
    vigil_code rc;
    char msg[256];
};

static vigil_code write_slot(struct vg_env *env, const char *agent, int i, vigil_error *err)
{
    json_t *state = NULL, *changes = json_pack("{s:{s:i}}", "slots", "n", i);
    int64_t rev = 0;
    vigil_code rc = vg_store_begin(env->store, err);
    if (!rc) {
        if (!(rc = vg_state_get_for_write(env, agent, &state, &rev, err)))
            rc = vg_state_update(env, agent, changes, rev, NULL, err);
        rc = vg_store_end(env->store, rc, err);
    }
    json_decref(state);
    json_decref(changes);
    return rc;
}

static void *write_state(void *arg)
{
    struct state_writer *sw = arg;
    vigil_runtime_options ro = {.store_uri = sw->uri};
    vigil_runtime *rt = NULL;
    struct vg_wake w;
    vigil_error err = {0};
    if ((sw->rc = vigil_runtime_open(&ro, &rt, &err)) ||
        (sw->rc = vg_wake_init(&w, vg_runtime_env(rt), NULL, &err))) {
        snprintf(sw->msg, sizeof sw->msg, "%s", err.message);
        vigil_runtime_close(rt);
        return NULL;
    }
    for (int i = 0; i < STATE_WRITES && !sw->rc; i++) {
        char turn[32], key[65];
        snprintf(turn, sizeof turn, "turn-%d", i);
        struct vg_wake_req req = {
            .reason = VG_REASON_USER, .agent_id = sw->agent, .session_id = "s", .turn_id = turn};
        sw->rc = sw->enqueue ? vg_wake_enqueue(&w, &req, key, NULL, &err)
                             : write_slot(vg_runtime_env(rt), sw->agent, i, &err);
        if (sw->rc)
            snprintf(sw->msg, sizeof sw->msg, "write %d: %.200s", i, err.message);
        else
            sw->done++;
    }
    vg_wake_release(&w);
    vigil_runtime_close(rt);
    return NULL;
}

/* Without the row lock, READ COMMITTED lets both read one revision and the second
 * compare-and-swap fails ("agent_state ... was changed meanwhile"): a wake refused, or a run's
 * phase failed, where SQLite would have made one writer wait. */
TEST(state_written_by_two_daemons)
{
    char db[64], uri[1024], agent[37];
    vigil_runtime *rt = NULL;
    vigil_runtime_options ro = {.create_if_missing = 1};
    json_t *state = NULL;
    int64_t rev0 = 0, rev = 0;
    snprintf(db, sizeof db, "vg_state_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    ro.store_uri = uri;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    vigil_agent_spec spec = {.name = "shared"};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    ASSERT_OK(vigil_agent_resume(rt, agent, NULL, E));
    struct vg_env *env = vg_runtime_env(rt);
    ASSERT_OK(vg_state_get(env, agent, &state, &rev0, E));
    json_decref(state);
    struct state_writer sw[2] = {{.uri = uri, .agent = agent, .enqueue = 1},
                                 {.uri = uri, .agent = agent, .enqueue = 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(pthread_create(&th[i], NULL, write_state, &sw[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        if (sw[i].rc)
            TEST_FAIL_("writer %d (%s): %s", i, i ? "state" : "wakes", sw[i].msg);
    }
    ASSERT_OK(vg_state_get(env, agent, &state, &rev, E));
    /* The wakes' counter is a record of its own: only the state writer moved the snapshot. */
    ASSERT_EQ(rev - rev0, STATE_WRITES);
    ASSERT_EQ(json_integer_value(json_object_get(state, "wake_counter")), STATE_WRITES);
    json_decref(state);
    vigil_runtime_close(rt);
    drop_db(db);
}

/* ---- commit durability set again after a rollback --------------------------------------------
 */

/* From offset on in the server log file, the first line of backend pid holding needle, or -1;
 * its end in *at. */
static int log_find(const char *log, long offset, const char *pid, const char *needle, long *at)
{
    FILE *f = fopen(log, "r");
    char line[4096], tag[32];
    ASSERT(f);
    snprintf(tag, sizeof tag, "[%s]", pid);
    fseek(f, offset, SEEK_SET);
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, tag) && strstr(line, needle);
    *at = ftell(f);
    fclose(f);
    return found ? 0 : -1;
}

/* Asynchronous commit is a session setting sent with the next transaction's BEGIN; a rollback
 * undoes a SET made in its transaction, so the adapter sends it again with the next statement.
 * Seen in the server's log (log_statement=all for this database). */
TEST(commit_durability_set_again_after_rollback)
{
    char db[64], uri[1024], log[1024], sql[256], pid[16];
    struct vg_store *s = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_record r = rec("thing", "a", "");
    struct stat st;
    long at = 0;
    vg_test_pg_log(log, sizeof log);
    if (!log[0] || stat(log, &st) != 0) {
        fprintf(stderr, "skipped: no server log (BENCH_PG_LOG)\n");
        return;
    }
    snprintf(db, sizeof db, "vg_durable_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    snprintf(sql, sizeof sql, "ALTER DATABASE %s SET log_statement = 'all'", db);
    vg_test_pg_sql(sql);
    ASSERT_OK(vg_store_open(uri, &o, &s, E));
    ASSERT_OK(vg_store_durable_commits(s, 0, E));
    snprintf(sql, sizeof sql,
             "SELECT pid FROM pg_stat_activity WHERE datname = '%s' AND application_name = "
             "'vigil'",
             db);
    vg_test_pg_value(sql, pid, sizeof pid);
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT(!has(s, "thing", "a")); /* the next statement */
    ASSERT_EQ(log_find(log, (long)st.st_size, pid, "synchronous_commit TO off", &at), 0);
    ASSERT_EQ(log_find(log, at, pid, "ROLLBACK", &at), 0);
    ASSERT_EQ(log_find(log, at, pid, "synchronous_commit TO off", &at), 0); /* sent again */
    vg_store_close(s);
    drop_db(db);
}

/* ---- a durable commit under asynchronous commit ---------------------------------------------
 */

/* What each commit on db used, oldest first, as "on,off,...": a deferred trigger on records
 * notes synchronous_commit as the COMMIT runs (PostgreSQL reads it after such triggers). */
static void commit_settings(PGconn *c, char *out, size_t n)
{
    PGresult *res = PQexec(c, "SELECT string_agg(v, ',' ORDER BY n) FROM commit_setting");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        TEST_FAIL_("read the commits' settings: %s", PQerrorMessage(c));
    snprintf(out, n, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
}

/* A durable commit (a tool step's start, before its effect runs) under asynchronous commit
 * is made with synchronous_commit on, the SET sent inside its transaction ahead of the COMMIT;
 * the commits after it are asynchronous again. The switch was owed to the next statement, so
 * the durable commit itself went out asynchronous: a server crash could lose it. */
TEST(durable_commit_is_synchronous)
{
    char db[64], uri[1024], got[128];
    struct vg_store *s = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_record a = rec("thing", "a", ""), b = rec("thing", "b", ""),
                     third = rec("thing", "c", "");
    snprintf(db, sizeof db, "vg_sync_commit_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &s, E));
    PGconn *c = PQconnectdb(uri);
    ASSERT(PQstatus(c) == CONNECTION_OK);
    raw_sql(c, "CREATE TABLE commit_setting(n serial PRIMARY KEY, v text NOT NULL)");
    raw_sql(c, "CREATE FUNCTION note_commit_setting() RETURNS trigger LANGUAGE plpgsql AS $$"
               " BEGIN INSERT INTO commit_setting(v)"
               " VALUES (current_setting('synchronous_commit')); RETURN NULL; END $$");
    raw_sql(c, "CREATE CONSTRAINT TRIGGER note_commit_setting AFTER INSERT OR UPDATE ON records"
               " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
               " EXECUTE FUNCTION note_commit_setting()");
    ASSERT_OK(vg_store_durable_commits(s, 0, E));
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_put(s, &a, 0, NULL, E));
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_put(s, &b, 0, NULL, E));
    ASSERT_OK(vg_store_commit_durable(s, E));
    ASSERT(!vg_store_durable(s)); /* the store's mode is still the group's */
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_put(s, &third, 0, NULL, E));
    ASSERT_OK(vg_store_commit(s, E));
    commit_settings(c, got, sizeof got);
    ASSERT_STREQ(got, "off,on,off");
    PQfinish(c);
    vg_store_close(s);
    drop_db(db);
}

/* ---- the daemon's lease renewal while a run's phase writes the lease ----------------------- */

struct renewer {
    const char *uri, *agent;
    int64_t epoch;
    vigil_code rc;
    char msg[256];
};

static void *renew(void *arg)
{
    struct renewer *r = arg;
    vigil_runtime_options ro = {.store_uri = r->uri};
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    if (!(r->rc = vigil_runtime_open(&ro, &rt, &err)))
        r->rc = vg_wake_lease_renew(vg_runtime_env(rt), r->agent, r->epoch, 60000, &err);
    if (r->rc)
        snprintf(r->msg, sizeof r->msg, "%s", err.message);
    vigil_runtime_close(rt);
    return NULL;
}

/* Until a connection to db waits for a row lock (30 s safety bound). */
static int lock_waited(const char *db)
{
    char sql[256], n[16];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE datname = '%s'"
             " AND wait_event_type = 'Lock'",
             db);
    for (int i = 0; i < 30000; i++) {
        vg_test_pg_value(sql, n, sizeof n);
        if (strcmp(n, "0") != 0)
            return 1;
        vg_clock_sleep_ms(vg_clock_real(), 1);
    }
    return 0;
}

/* A run's phase has checked the lease (its fencing check) and then writes it (its fence's
 * renewal, or the finish releasing it) while the daemon's loop renews the same lease on
 * another connection. When the renewal also took the lease shared before writing it, each
 * transaction waited for the other's shared lock and PostgreSQL ended one with "deadlock
 * detected"; the renewal now locks it exclusively first and waits for the phase. */
TEST(lease_renewed_while_a_phase_writes_it)
{
    char db[64], uri[1024], agent[37];
    vigil_runtime *rt = NULL;
    vigil_runtime_options ro = {.create_if_missing = 1};
    int64_t epoch = 0;
    int got = 0;
    snprintf(db, sizeof db, "vg_renew_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    ro.store_uri = uri;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    struct vg_env *env = vg_runtime_env(rt);
    vigil_agent_spec spec = {.name = "leased"};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    ASSERT_OK(vg_wake_lease_take(env, agent, "daemon:1:a", 60000, &epoch, &got, E));
    ASSERT_EQ(got, 1);
    ASSERT_OK(vg_store_begin(env->store, E));
    ASSERT_OK(vg_wake_lease_check(env, agent, epoch, E)); /* the phase's fencing check */
    struct renewer r = {.uri = uri, .agent = agent, .epoch = epoch};
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, renew, &r), 0);
    ASSERT(lock_waited(db)); /* the daemon's renewal waits for the phase */
    ASSERT_OK(vg_wake_lease_renew(env, agent, epoch, 60000, E)); /* the phase writes it */
    ASSERT_OK(vg_store_commit(env->store, E));
    pthread_join(th, NULL);
    if (r.rc)
        TEST_FAIL_("the daemon's renewal: %s", r.msg);
    vigil_runtime_close(rt);
    drop_db(db);
}

/* The fleet as /metrics shows it: each daemon record with the leases its holder holds. */
TEST(daemon_list_counts_leases)
{
    char db[64], uri[1024];
    vigil_runtime *rt = NULL;
    vigil_runtime_options ro = {.create_if_missing = 1};
    char *text = NULL;
    snprintf(db, sizeof db, "vg_daemons_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    ro.store_uri = uri;
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    struct vg_store *s = vg_runtime_env(rt)->store;
    struct vg_record d = rec("daemon", "daemon:1:a", "");
    d.body = "{\"holder\":\"daemon:1:a\",\"host\":\"h\",\"pid\":1,\"beat_ms\":5,\"runs\":2}";
    ASSERT_OK(vg_store_put(s, &d, 0, NULL, E));
    struct vg_record held = rec("agent_lease", "ag1", "daemon:1:a"),
                     other = rec("agent_lease", "ag2", "daemon:2:b"),
                     released = rec("agent_lease", "ag3", "");
    ASSERT_OK(vg_store_put(s, &held, 0, NULL, E));
    ASSERT_OK(vg_store_put(s, &other, 0, NULL, E));
    ASSERT_OK(vg_store_put(s, &released, 0, NULL, E));
    ASSERT_OK(vigil_daemon_list(rt, &text, E));
    json_t *v = json_loads(text, 0, NULL);
    vigil_free(text);
    ASSERT_EQ(json_array_size(v), 1);
    json_t *one = json_array_get(v, 0);
    ASSERT_EQ(json_integer_value(json_object_get(one, "leases")), 1);
    ASSERT_EQ(json_integer_value(json_object_get(one, "runs")), 2);
    json_decref(v);
    vigil_runtime_close(rt);
    drop_db(db);
}

/* ---- memory compaction under the agent's lease ---------------------------------------------- */

/* Twenty messages in thread, enough for a job under a small budget. */
static void fill_thread(struct vg_env *env, const char *agent, const char *thread)
{
    for (int i = 0; i < 20; i++) {
        char text[96];
        snprintf(text, sizeof text, "message %d about topic%d, with a few more words.", i, i);
        struct vg_message_in in = {
            .agent_id = agent, .thread_id = thread, .kind = VG_MSG_USER, .content = text};
        ASSERT_OK(vg_message_append(env, &in, NULL, E));
    }
}

static const char *job_status(struct vg_env *env, const char *id, char out[32])
{
    json_t *j = NULL;
    ASSERT_OK(vg_compact_job_get(env, id, &j, E));
    snprintf(out, 32, "%s", json_string_value(json_object_get(j, "status")));
    json_decref(j);
    return out;
}

/* Compaction writes the agent's summary thread, cursor and state. Without the lease, a daemon
 * compacting after its run committed them while another daemon's run held the agent (the job
 * was done at once), and a run presumed dead could still write after it. A run compacting its
 * own agent before its finish does so under its own lease. */
TEST(compaction_commits_under_the_agents_lease)
{
    char db[64], uri[1024], agent[37], jid[VG_RECORD_ID_MAX], st[32];
    struct vg_test_clock tc;
    vigil_runtime *rt = NULL, *run_rt = NULL;
    vg_test_clock_init(&tc, 1767225600000);
    snprintf(db, sizeof db, "vg_compact_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    vigil_runtime_options ro = {.size = sizeof ro, .store_uri = uri, .create_if_missing = 1};
    ASSERT_OK(vg_runtime_open_with(&ro, &tc.base, NULL, &rt, E));
    ASSERT_OK(vg_runtime_open_with(&ro, &tc.base, NULL, &run_rt, E));
    struct vg_env *env = vg_runtime_env(rt), *run_env = vg_runtime_env(run_rt);
    vigil_agent_spec spec = {.name = "compacted"};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    fill_thread(env, agent, "chat");
    struct vg_compaction_policy small = {.thread_budget = 200, .keep_tokens = 100};
    ASSERT_OK(vg_compact_consider(env, agent, "chat", &small, jid, E));
    ASSERT(jid[0]);
    /* A run on the other daemon holds the agent. */
    int64_t epoch = 0;
    int got = 0;
    ASSERT_OK(vg_wake_lease_take(run_env, agent, "daemon:other", 60000, &epoch, &got, E));
    ASSERT(got);
    ASSERT_OK(vg_runtime_prepare(rt, E));
    vg_runtime_after_run(rt); /* this daemon compacts after a run of its own */
    ASSERT_STREQ(job_status(env, jid, st), "pending");
    json_t *j = NULL;
    ASSERT_OK(vg_compact_job_get(env, jid, &j, E));
    ASSERT_EQ(json_integer_value(json_object_get(j, "attempts")), 0); /* nothing failed */
    ASSERT(!json_object_get(j, "summary_id"));
    json_decref(j);
    ASSERT_OK(vg_wake_lease_check(run_env, agent, epoch, E)); /* the run's lease is untouched */
    /* The run's daemon is presumed dead (its lease expired); compaction goes ahead, and the
     * dead run's epoch may not write after it. */
    vg_test_clock_advance(&tc, 61000);
    vg_runtime_after_run(rt);
    ASSERT_STREQ(job_status(env, jid, st), "done");
    vigil_error fenced = {0};
    ASSERT_EQ(vg_wake_lease_check(run_env, agent, epoch, &fenced), VIGIL_ESTATE);
    got = 0;
    ASSERT_OK(vg_wake_lease_take(run_env, agent, "daemon:next", 60000, &epoch, &got, E));
    ASSERT(got); /* the commit left the lease free */
    /* A run compacting after itself, its lease still held until its finish: its agent's job
     * commits under that lease, whose epoch stays the run's. */
    fill_thread(env, agent, "later");
    ASSERT_OK(vg_compact_consider(env, agent, "later", &small, jid, E));
    ASSERT(jid[0]);
    vg_runtime_after_run_of(rt, agent, epoch);
    ASSERT_STREQ(job_status(env, jid, st), "done");
    ASSERT_OK(vg_wake_lease_check(run_env, agent, epoch, E));
    vigil_runtime_close(run_rt);
    vigil_runtime_close(rt);
    drop_db(db);
}

/* ---- a run end that loses a compare-and-swap ------------------------------------------------ */

/* A task's run ends; recording its end (the task done, src/orch) loses a compare-and-swap the
 * first time, as when another daemon moved the task meanwhile (made to happen by a trigger that
 * skips the first update of a task to done: PostgreSQL then reports no row updated, which the
 * adapter reports as a lost compare-and-swap). The run goes back to the queue under its run
 * key, as after a crash, and its next claim replays it and records its end: the wake completes
 * under its key, not failed and retried under another one. */
TEST(a_run_end_that_loses_a_compare_and_swap_is_requeued_under_its_run_key)
{
    char db[64], uri[1024], agent[37], task[37], key[65], retry[65];
    vigil_runtime *rt = NULL;
    snprintf(db, sizeof db, "vg_end_cas_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    unsetenv("VIGIL_WAKE_RUNNER");
    vigil_runtime_options ro = {.size = sizeof ro, .store_uri = uri, .create_if_missing = 1};
    ASSERT_OK(vigil_runtime_open(&ro, &rt, E));
    struct vg_env *env = vg_runtime_env(rt);
    PGconn *c = PQconnectdb(uri);
    ASSERT(PQstatus(c) == CONNECTION_OK);
    raw_sql(c, "CREATE SEQUENCE task_done_updates");
    raw_sql(c, "CREATE FUNCTION lose_first_task_end() RETURNS trigger LANGUAGE plpgsql AS $$"
               " BEGIN IF nextval('task_done_updates') = 1 THEN RETURN NULL; END IF;"
               " RETURN NEW; END $$");
    raw_sql(c, "CREATE TRIGGER lose_first_task_end BEFORE UPDATE ON records FOR EACH ROW"
               " WHEN (NEW.kind = 'task' AND NEW.k1 = 'done' AND OLD.k1 <> 'done')"
               " EXECUTE FUNCTION lose_first_task_end()");
    vigil_agent_spec spec = {.name = "w", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    ASSERT_OK(vigil_task_add(rt, "one task", "worker", NULL, 0, task, E));
    int started = 0, ran = 0;
    ASSERT_OK(vigil_task_dispatch(rt, 1, &started, E));
    ASSERT_EQ(started, 1);
    json_t *t = NULL;
    ASSERT_OK(vg_task_get(env, task, &t, NULL, E));
    snprintf(key, sizeof key, "%s", json_string_value(json_object_get(t, "run_key")));
    json_decref(t);
    struct vg_wake w;
    ASSERT_OK(vg_wake_init(&w, env, NULL, E));
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 4, &ran, E));
    ASSERT_OK(vg_task_get(env, task, &t, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(t, "status")), "done");
    json_decref(t);
    json_t *run = NULL;
    ASSERT_OK(vg_env_get_json(env, "wake_run", key, &run, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(run, "status")), "completed");
    ASSERT_EQ(json_integer_value(json_object_get(run, "attempts")), 2); /* claimed again */
    json_decref(run);
    const char *parts[] = {agent, "retry", key};
    vg_sha256_hex_parts(retry, parts, 3);
    ASSERT_EQ(vg_env_get_json(env, "wake_run", retry, &run, NULL, NULL), VIGIL_ENOTFOUND);
    char n[16];
    PGresult *res = PQexec(c, "SELECT last_value FROM task_done_updates");
    ASSERT(PQresultStatus(res) == PGRES_TUPLES_OK);
    snprintf(n, sizeof n, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    ASSERT_STREQ(n, "2"); /* the end lost once, then recorded */
    PQfinish(c);
    vg_wake_release(&w);
    vigil_runtime_close(rt);
    drop_db(db);
}

/* ---- daemons starting together migrate once ------------------------------------------------- */

#define OPENERS 8

struct opener {
    const char *uri;
    pthread_barrier_t *go;
    vigil_code rc;
    char msg[256];
};

static void *open_store(void *arg)
{
    struct opener *o = arg;
    struct vg_store *s = NULL;
    struct vg_store_options so = {.create_if_missing = 1};
    vigil_error err = {0};
    pthread_barrier_wait(o->go);
    if ((o->rc = vg_store_open(o->uri, &so, &s, &err)))
        snprintf(o->msg, sizeof o->msg, "%s", err.message);
    vg_store_close(s);
    return NULL;
}

/* Eight stores opened at once on an empty database: each finds the schema missing, and the
 * schema is made once, under the advisory lock, by whichever takes it first; the others wait
 * for the lock and find the schema current. Without the lock the others' CREATE TABLE failed
 * ("relation already exists"). */
TEST(daemons_starting_together_migrate_once)
{
    char db[64], uri[1024];
    snprintf(db, sizeof db, "vg_migrate_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, OPENERS);
    struct opener o[OPENERS];
    pthread_t th[OPENERS];
    for (int i = 0; i < OPENERS; i++) {
        o[i] = (struct opener){.uri = uri, .go = &go};
        ASSERT_EQ(pthread_create(&th[i], NULL, open_store, &o[i]), 0);
    }
    for (int i = 0; i < OPENERS; i++)
        ASSERT_EQ(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < OPENERS; i++)
        if (o[i].rc)
            TEST_FAIL_("store %d of %d failed to open: %s", i, OPENERS, o[i].msg);
    struct vg_store *s = NULL;
    struct vg_store_options so = {0};
    ASSERT_OK(vg_store_open(uri, &so, &s, E));
    struct vg_record r = rec("thing", "after", "");
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E)); /* the schema is whole */
    vg_store_close(s);
    drop_db(db);
}

/* The store's tables in a later schema of the role's search path (made in public, then an
 * earlier schema added to the path) are the store: its records are there when it is opened
 * again, not hidden behind empty tables migrated into the first schema. */
TEST(tables_in_a_later_schema_of_the_path_are_the_store)
{
    char db[64], uri[1024], sql[160];
    snprintf(db, sizeof db, "vg_path_%ld", (long)getpid());
    fresh_db(db, uri, sizeof uri);
    struct vg_store *s = NULL;
    struct vg_store_options so = {0};
    ASSERT_OK(vg_store_open(uri, &so, &s, E));
    struct vg_record r = rec("thing", "kept", "");
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    vg_store_close(s);
    PGconn *c = PQconnectdb(uri);
    ASSERT(PQstatus(c) == CONNECTION_OK);
    raw_sql(c, "CREATE SCHEMA other");
    snprintf(sql, sizeof sql, "ALTER DATABASE %s SET search_path = other, public", db);
    raw_sql(c, sql);
    PQfinish(c);
    ASSERT_OK(vg_store_open(uri, &so, &s, E));
    ASSERT(has(s, "thing", "kept"));
    vg_store_close(s);
    drop_db(db);
}

int main(void)
{
    RUN(password_in_uri_refused);
    vg_test_pg_uri(); /* skips (77) or fails early without a server */
    RUN(lost_connection_made_again);
    RUN(record_locks);
    RUN(work_signal);
    RUN(timers_fire_once_across_connections);
    RUN(state_written_by_two_daemons);
    RUN(lease_renewed_while_a_phase_writes_it);
    RUN(commit_durability_set_again_after_rollback);
    RUN(durable_commit_is_synchronous);
    RUN(daemon_list_counts_leases);
    RUN(cached_records_follow_other_connections);
    RUN(a_read_a_notification_arrived_during_is_not_kept);
    RUN(compaction_commits_under_the_agents_lease);
    RUN(a_run_end_that_loses_a_compare_and_swap_is_requeued_under_its_run_key);
    RUN(daemons_starting_together_migrate_once);
    RUN(tables_in_a_later_schema_of_the_path_are_the_store);
    return 0;
}
