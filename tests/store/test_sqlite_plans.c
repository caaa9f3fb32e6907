/*
 * test_sqlite_plans.c: the SQLite adapter's plan of each query the agent store's index plan names
 * (seed 000, "Database and Index Plan"), worded as the adapter words it for the query's kind
 * (its index bits named: sqlite.c, query_sql), so that each is served by an index, in (seq, id)
 * order where it is paged, without a sort. Where vigil keeps a query's keys differently from the
 * seed's tables, docs/internals/STORE.md ("The seed's index plan") says how and why; a query the
 * store answers by id is served by records_id. tests/store/test_sqlite_layout.c has the plans
 * of links from and to a record, tests/store/test_conformance_pg.c PostgreSQL's.
 */
#include "helpers/test.h"

#include "store/store.h"

#include <sqlite3.h>
#include <string.h>

/* Every index bit: the kinds not in the adapter's LEAN_KINDS are in all five first indexes. */
#define ALL_BITS "ix & 1 AND ix & 2 AND ix & 4 AND ix & 8 AND ix & 16"

/* SQLite's plan of sql on the store at path, its steps' details joined by ";". */
static void query_plan(const char *path, const char *sql, char *plan, size_t size)
{
    char explain[1024];
    snprintf(explain, sizeof explain, "EXPLAIN QUERY PLAN %s", sql);
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_prepare_v2(db, explain, -1, &st, NULL), SQLITE_OK);
    size_t len = 0;
    plan[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW && len < size - 1)
        len += (size_t)snprintf(plan + len, size - len, "%s;",
                                (const char *)sqlite3_column_text(st, 3));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* The plan of sql uses `index` (as SQLite words it: "records_k1 (kind=? AND k1=?)") and,
 * unless sorts is set, sorts nothing. */
static void served_by(const char *path, const char *what, const char *sql, const char *index,
                      int sorts)
{
    char plan[1024];
    query_plan(path, sql, plan, sizeof plan);
    if (!strstr(plan, index))
        TEST_FAIL_("%s: the plan \"%s\" does not use %s", what, plan, index);
    if (!sorts && strstr(plan, "TEMP B-TREE"))
        TEST_FAIL_("%s: the plan \"%s\" sorts", what, plan);
}

/*
 * The index plan's queries, each as vigil makes it: active subscriptions by agent and by key
 * (src/wake/match.c: an agent's subscriptions, a batch's tokens in sub_token), due timers by
 * (active, next run) (src/wake/timer.c: k1 "on", seq the next run), messages by agent and time
 * (src/agent/message.c: a thread's newest, an agent's observations), reports by agent, scope
 * and time (src/agent/report.c), heads by agent and scope (pointer links, by id), ready
 * compaction jobs by (status, next attempt) and by (agent, thread, status) (src/memory/
 * compact.c), source references by (agent, source type, source id) (src/agent/source_ref.c).
 * proves: S0-115 (typed links: tests/store/test_sqlite_layout.c; what differs: STORE.md)
 */
TEST(each_query_of_the_index_plan_is_served_by_an_index)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/plans.db", vg_test_tmpdir("sqlite_plans"));
    struct vg_store *s = vg_test_store_open(path, 2000);
    ASSERT(s);
    vg_store_close(s);

    served_by(path, "an agent's subscriptions",
              "SELECT id FROM records WHERE kind='subscription' AND " ALL_BITS
              " AND owner='a' ORDER BY seq ASC, id ASC",
              "records_owner_seq (kind=? AND owner=?)", 0);
    served_by(path, "the subscriptions of a token",
              "SELECT id FROM records WHERE kind='sub_token' AND " ALL_BITS
              " AND k1='entity:task-1' ORDER BY seq ASC, id ASC",
              "records_k1 (kind=? AND k1=?)", 0);
    served_by(path, "due timers",
              "SELECT id FROM records WHERE kind='timer' AND " ALL_BITS
              " AND k1='on' AND seq<=5 ORDER BY seq ASC, id ASC LIMIT 256",
              "records_k1 (kind=? AND k1=? AND seq<?)", 0);
    served_by(path, "a thread's newest messages",
              "SELECT id FROM records WHERE kind='message' AND ix & 64 AND owner='a' AND "
              "k1='a:session:s' ORDER BY seq DESC, id DESC LIMIT 50",
              "records_agent (owner=? AND kind=? AND k1=?)", 0);
    served_by(path, "an agent's newest observations",
              "SELECT id FROM records WHERE kind='message' AND ix & 64 AND ix & 128 AND "
              "owner='a' AND k2='observation' ORDER BY seq DESC, id DESC LIMIT 50",
              "records_agent_k2 (owner=? AND kind=? AND k2=?)", 0);
    /* Across threads an agent's messages are its rows of the agent index, sorted (verify and
     * moves only: STORE.md). */
    served_by(path, "an agent's messages",
              "SELECT id FROM records WHERE kind='message' AND ix & 64 AND owner='a' "
              "ORDER BY seq ASC, id ASC",
              "records_agent (owner=? AND kind=?)", 1);
    served_by(path, "a scope's reports, newest first",
              "SELECT id FROM records WHERE kind='report' AND " ALL_BITS
              " AND owner='a' AND k1='daily' ORDER BY seq DESC, id DESC LIMIT 10",
              "records_owner_k1 (kind=? AND owner=? AND k1=?)", 0);
    /* By id: a scope's report head ("agent_report_head:AGENT:SCOPE"), an agent's reference to a
     * source ("AGENT|TYPE|SOURCE"). */
    served_by(path, "a head or a source reference", "SELECT id FROM records WHERE kind=? AND id=?",
              "records_id (id=? AND kind=?)", 0);
    served_by(path, "the ready compaction jobs",
              "SELECT id FROM records WHERE kind='compaction_job' AND " ALL_BITS
              " AND k2='pending' AND seq<=5 ORDER BY seq ASC, id ASC LIMIT 1",
              "records_k2 (kind=? AND k2=? AND seq<?)", 0);
    served_by(path, "a thread's open compaction jobs",
              "SELECT id FROM records WHERE kind='compaction_job' AND " ALL_BITS
              " AND owner='a' AND k1='a:session:s' AND k2='pending' ORDER BY seq ASC, id ASC",
              "records_owner_k1 (kind=? AND owner=? AND k1=?)", 0);
    served_by(path, "an agent's source references of a type",
              "SELECT id FROM records WHERE kind='source_ref' AND " ALL_BITS
              " AND owner='a' AND k1='task' ORDER BY seq ASC, id ASC",
              "records_owner_k1 (kind=? AND owner=? AND k1=?)", 0);
    served_by(path, "the agents referring to a source",
              "SELECT id FROM records WHERE kind='source_ref' AND " ALL_BITS
              " AND k2='task:task-1' ORDER BY seq ASC, id ASC",
              "records_k2 (kind=? AND k2=?)", 0);
}

int main(void)
{
    RUN(each_query_of_the_index_plan_is_served_by_an_index);
    return 0;
}
