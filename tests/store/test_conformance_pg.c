/*
 * test_conformance_pg.c: the store conformance suite against the PostgreSQL adapter on a real
 * server (scripts/test.sh starts a private one and exports VIGIL_PG_URI; without it this test
 * is skipped, or fails when VIGIL_REQUIRE_PG=1). Each fresh store is a new schema. Then what is
 * PostgreSQL's own: migrations from every earlier version, a newer schema refused, a foreign
 * database refused, the text index's PostgreSQL limits, an unreachable server reported.
 */
#include "helpers/test.h"

#include "conformance/store/conformance.h"
#include "helpers/pg_env.h"

#include <unistd.h>

struct pg_opener {
    int n;
    char schema[64];
};

static vigil_code open_pg(void *user, int fresh, struct vg_store **out, vigil_error *err)
{
    struct pg_opener *o = user;
    char uri[1024];
    if (fresh)
        snprintf(o->schema, sizeof o->schema, "vg_conf_%ld_%d", (long)getpid(), ++o->n);
    vg_test_pg_schema_uri(o->schema, fresh, uri, sizeof uri);
    struct vg_store_options opts = {.create_if_missing = 1};
    return vg_store_open(uri, &opts, out, err);
}

static void drop_schemas(int n)
{
    char sql[128];
    for (int i = 1; i <= n; i++) {
        snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS vg_conf_%ld_%d CASCADE", (long)getpid(),
                 i);
        vg_test_pg_sql(sql);
    }
}

/* proves: S0-155 (migrations preserve data across upgrade paths), on PostgreSQL */
TEST(pg_migrations_and_versions)
{
    char uri[1024];
    int latest = 0;
    struct vg_store *s = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    vg_test_pg_schema_uri("vg_mig_latest", 1, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &s, E));
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_SCHEMA_VERSION, &latest, E));
    vg_store_close(s);
    ASSERT(latest >= 2);
    for (int v = 1; v < latest; v++) {
        vg_test_pg_schema_uri("vg_mig_old", 1, uri, sizeof uri);
        o.target_version = v;
        ASSERT_OK(vg_store_open(uri, &o, &s, E));
        int got = 0;
        ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_SCHEMA_VERSION, &got, E));
        ASSERT_EQ(got, v);
        struct vg_record r = {.kind = "message",
                              .id = "m1",
                              .owner = "a",
                              .k1 = "t",
                              .k2 = "user",
                              .seq = 1,
                              .body = "{\"v\":1}"};
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
        r.kind = "link";
        r.k1 = "from";
        r.k2 = "to";
        ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
        vg_store_close(s);
        o.target_version = 0;
        ASSERT_OK(vg_store_open(uri, &o, &s, E));
        ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_SCHEMA_VERSION, &got, E));
        ASSERT_EQ(got, latest);
        int64_t n = 0;
        struct vg_query q = {.kind = "link", .k2 = "to"};
        ASSERT_OK(vg_store_count(s, &q, &n, E));
        ASSERT_EQ(n, 1);
        q = (struct vg_query){.kind = "message", .owner = "a", .k1 = "t"};
        ASSERT_OK(vg_store_count(s, &q, &n, E));
        ASSERT_EQ(n, 1);
        vg_store_close(s);
    }

    /* A newer schema is refused, and left as it was. */
    vg_test_pg_sql("UPDATE vg_mig_latest.vigil_meta SET value = '999' WHERE key = "
                   "'schema_version'");
    vg_test_pg_schema_uri("vg_mig_latest", 0, uri, sizeof uri);
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EVERSION, vg_store_open(uri, &o, &s, &err));
    ASSERT_CONTAINS(err.message, "upgrade vigil");

    /* Another program's tables. */
    vg_test_pg_schema_uri("vg_foreign", 1, uri, sizeof uri);
    vg_test_pg_sql("CREATE TABLE vg_foreign.records(x int)");
    ASSERT_CODE(VIGIL_ECORRUPT, vg_store_open(uri, &o, &s, &err));
    ASSERT_CONTAINS(err.message, "not a vigil store");
    vg_test_pg_sql("DROP SCHEMA vg_mig_latest CASCADE; DROP SCHEMA vg_mig_old CASCADE;"
                   " DROP SCHEMA vg_foreign CASCADE");
}

/* PostgreSQL's 13 (SQLite's 21; tests/store/test_migrations.c has the same for SQLite): a
 * database of schema 12 holds a message's ids as text and a finished run's projection whole;
 * upgraded, it reads every body as written, leaves the rows as they were stored, and the same
 * bodies written again take the new form (ids as their bytes). */
#define S12_ACTION "0190aaaa-0000-7000-8000-0000000000a1"
#define S12_ACTION_B64 "AZCqqgAAcACAAAAAAAAAoQ"
#define S12_RUN "0190aaaa-0000-7000-8000-0000000000b1"
#define S12_OP "06586399f210e25e657d910d17bf17a7f850d60b15c9a97bddef1cb6a19eb349"
#define S12_RESULT_STORED                                                                          \
    "{\"\":24576,\"content\":[\"" S12_OP "\",\"\\\"12\\\"\"],\"metadata\":[\"add\"],"              \
    "\"prev_id\":\"" S12_ACTION "\",\"run_id\":\"" S12_RUN "\",\"tokens\":57}"
#define S12_PROJECTION                                                                             \
    "{\"activity\":\"idle\",\"ended_at\":\"1970-01-01T00:00:01.000Z\",\"run_key\":\"" S12_OP "\"}"
static const char s12_result[] =
    "{\"content\":\"{\\\"action_id\\\":\\\"" S12_ACTION "\\\",\\\"changed_entity_ids\\\":[],"
    "\\\"changed_tokens\\\":[],\\\"operation_id\\\":\\\"" S12_OP "\\\",\\\"replayed\\\":false,"
    "\\\"result\\\":\\\"12\\\",\\\"status\\\":\\\"success\\\"}\",\"metadata\":{\"actionRefId\":"
    "\"" S12_ACTION "\",\"toolName\":\"add\"},\"prev_id\":\"" S12_ACTION "\",\"run_id\":\"" S12_RUN
    "\",\"tokens\":57}";

static void pg_check_body(struct vg_store *s, const char *kind, const char *id, const char *want)
{
    struct vg_record *g = NULL;
    ASSERT_OK(vg_store_get_copy(s, kind, id, &g, E));
    ASSERT_STREQ(g->body, want);
    vg_free(g);
}

TEST(pg_a_schema_12_databases_ids_read_as_written_after_the_upgrade)
{
    char uri[1024], got[64];
    struct vg_store *s = NULL;
    struct vg_store_options o = {.create_if_missing = 1, .target_version = 12};
    vg_test_pg_schema_uri("vg_mig_s12", 1, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &s, E));
    struct vg_record m = {"message", "m12", "a", "t", "toolResult", 1, 0, 1000, "{}"};
    struct vg_record p = {"run_projection", "p12", "a", "p12", "", 0, 0, 1000, "{}"};
    ASSERT_OK(vg_store_put(s, &m, 0, NULL, E));
    ASSERT_OK(vg_store_put(s, &p, 0, NULL, E));
    vg_store_close(s);
    vg_test_pg_sql("UPDATE vg_mig_s12.records SET body = '" S12_RESULT_STORED "' WHERE id = 'm12'");
    vg_test_pg_sql("UPDATE vg_mig_s12.records SET body = '" S12_PROJECTION "' WHERE id = 'p12'");

    o.target_version = 0;
    ASSERT_OK(vg_store_open(uri, &o, &s, E));
    int v = 0;
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_SCHEMA_VERSION, &v, E));
    ASSERT(v >= 13);
    pg_check_body(s, "message", "m12", s12_result);
    pg_check_body(s, "run_projection", "p12", S12_PROJECTION);
    m.id = "m13";
    m.body = s12_result;
    p.id = p.k1 = "p13";
    p.body = S12_PROJECTION;
    ASSERT_OK(vg_store_put(s, &m, 0, NULL, E));
    ASSERT_OK(vg_store_put(s, &p, 0, NULL, E));
    pg_check_body(s, "message", "m13", s12_result);
    pg_check_body(s, "run_projection", "p13", S12_PROJECTION);
    vg_store_close(s);
    vg_test_pg_value(
        "SELECT count(*) FROM vg_mig_s12.records WHERE (id = 'm12' AND body = '" S12_RESULT_STORED
        "') OR (id = 'p12' AND body = '" S12_PROJECTION "')",
        got, sizeof got);
    ASSERT_STREQ(got, "2");
    vg_test_pg_value("SELECT count(*) FROM vg_mig_s12.records WHERE id = 'm13' AND body LIKE "
                     "'%\"prev_id\":\"" S12_ACTION_B64 "\"%' AND body NOT LIKE '%" S12_OP "%'",
                     got, sizeof got);
    ASSERT_STREQ(got, "1");
    vg_test_pg_value("SELECT count(*) FROM vg_mig_s12.records WHERE id = 'p13' AND body NOT LIKE "
                     "'%" S12_OP "%'",
                     got, sizeof got);
    ASSERT_STREQ(got, "1");
    vg_test_pg_sql("DROP SCHEMA vg_mig_s12 CASCADE");
}

/* The server's plan of a query (FORMAT JSON, one value). */
static void pg_plan(const char *sql, char *plan, size_t n)
{
    char explain[1024];
    snprintf(explain, sizeof explain, "EXPLAIN (FORMAT JSON) %s", sql);
    vg_test_pg_value(explain, plan, n);
}

/* A link's row is found from either end by type through an index: from (its k1,
 * "type:from") through records_k1, to (its k2, "type:to") through records_k2, which hold
 * every row of every kind on PostgreSQL (tests/store/test_sqlite_layout.c has SQLite's).
 * proves: S3-013 (the from and to indexes, on PostgreSQL) */
TEST(pg_links_are_found_from_either_end_through_an_index)
{
    char uri[1024], plan[8192];
    struct vg_store *s = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    vg_test_pg_schema_uri("vg_links", 1, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &s, E));
    vg_store_close(s);
    vg_test_pg_sql("INSERT INTO vg_links.records(kind, id, owner, k1, k2, seq, rev, at, body) "
                   "SELECT 'link', 'tool_effect|m' || i || '|task-' || (i % 300), 'a', "
                   "'tool_effect:m' || i, 'tool_effect:task-' || (i % 300), i, 1, 0, '{}' "
                   "FROM generate_series(1, 20000) AS i;"
                   "ANALYZE vg_links.records");
    pg_plan("SELECT id FROM vg_links.records WHERE kind='link' AND k2='tool_effect:task-7' "
            "ORDER BY seq ASC, id ASC",
            plan, sizeof plan);
    ASSERT_CONTAINS(plan, "\"Index Name\": \"records_k2\"");
    ASSERT(!strstr(plan, "\"Seq Scan\""));
    pg_plan("SELECT id FROM vg_links.records WHERE kind='link' AND k1='tool_effect:m7' "
            "ORDER BY seq ASC, id ASC",
            plan, sizeof plan);
    ASSERT_CONTAINS(plan, "\"Index Name\": \"records_k1\"");
    vg_test_pg_sql("DROP SCHEMA vg_links CASCADE");
}

static int count_hit(void *user, const char *id, double score)
{
    VG_UNUSED(id);
    VG_UNUSED(score);
    ++*(int *)user;
    return 0;
}

/* What is PostgreSQL's own about the text index: a schema before version 4 has none, a text
 * larger than a tsvector can hold is indexed up to 256 KiB, and text the server would refuse
 * (invalid UTF-8) is refused before it is sent, so the open transaction stays usable. */
TEST(pg_text_index_limits)
{
    char uri[1024];
    struct vg_store *s = NULL;
    struct vg_store_options o = {.create_if_missing = 1, .target_version = 3};
    vg_test_pg_schema_uri("vg_text_limits", 1, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &s, E));
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EUNSUPPORTED, vg_store_text_index(s, "message", "m", "a", "x", &err));
    ASSERT_CONTAINS(err.message, "without the text index");
    vg_store_close(s);
    o.target_version = 0;
    ASSERT_OK(vg_store_open(uri, &o, &s, E));

    /* 2 MiB of distinct words: its tsvector would exceed the server's 1 MB limit. */
    size_t cap = 2u * 1024 * 1024, len = 0;
    char *big = vg_malloc(cap + 32);
    ASSERT(big != NULL);
    for (unsigned i = 0; len < cap; i++)
        len += (size_t)snprintf(big + len, 32, "w%u ", i);
    int hits = 0;
    const char *first[] = {"w0", "w100"}, *late[] = {"w300000"};
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_text_index(s, "message", "big", "a", big, E));
    ASSERT_OK(vg_store_text_search(s, "message", "a", first, 2, 10, count_hit, &hits, E));
    ASSERT_EQ(hits, 1);
    hits = 0;
    ASSERT_OK(vg_store_text_search(s, "message", "a", late, 1, 10, count_hit, &hits, E));
    ASSERT_EQ(hits, 0); /* past the indexed 256 KiB */

    /* Invalid UTF-8: the text is refused, the term skipped; the transaction commits. */
    ASSERT_CODE(VIGIL_EINVAL, vg_store_text_index(s, "message", "bad", "a", "ab\xff\xfe", &err));
    const char *bad[] = {"\xc3", "w0\xff"};
    hits = 0;
    ASSERT_OK(vg_store_text_search(s, "message", "a", bad, 2, 10, count_hit, &hits, E));
    ASSERT_EQ(hits, 0);
    ASSERT_OK(vg_store_text_index(s, "message", "ok", "a", "after the refusal", E));
    ASSERT_OK(vg_store_commit(s, E));
    hits = 0;
    const char *after[] = {"refusal", "w0"};
    ASSERT_OK(vg_store_text_search(s, "message", "a", after, 2, 10, count_hit, &hits, E));
    ASSERT_EQ(hits, 2);
    vg_free(big);
    vg_store_close(s);
    vg_test_pg_sql("DROP SCHEMA vg_text_limits CASCADE");
}

/* The server makes commits durable; a client cannot sync them apart, so a worker keeps a sync
 * per durable commit (vg_store_share_syncs refuses, and durable commits still work). */
static vigil_code never_called(void *user, vigil_error *err)
{
    (void)user;
    return VG_FAIL(err, VIGIL_ERROR, "a PostgreSQL store waited for a shared sync");
}

TEST(pg_does_not_share_syncs)
{
    char uri[1024];
    struct vg_store *s = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    vg_test_pg_schema_uri("vg_share_syncs", 1, uri, sizeof uri);
    ASSERT_OK(vg_store_open(uri, &o, &s, E));
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EUNSUPPORTED, vg_store_share_syncs(s, never_called, NULL, &err));
    ASSERT_CONTAINS(err.message, "durable on the server");
    struct vg_record r = {.kind = "note", .id = "n", .owner = "a", .seq = 1, .body = "{}"};
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT_OK(vg_store_commit(s, E));
    vg_store_close(s);
    vg_test_pg_sql("DROP SCHEMA vg_share_syncs CASCADE");
}

TEST(pg_unreachable)
{
    vigil_error err = {0};
    struct vg_store *s = NULL;
    struct vg_store_options o = {.create_if_missing = 1};
    ASSERT_CODE(VIGIL_EIO, vg_store_open("postgresql://nobody@/none?host=/nonexistent-vigil-dir",
                                         &o, &s, &err));
    ASSERT_CONTAINS(err.message, "could not connect");
    ASSERT(s == NULL);
}

int main(void)
{
    vg_test_pg_uri(); /* skips (77) or fails early without a server */
    struct pg_opener po = {0};
    struct vg_conf_opener op = {"postgres", open_pg, &po};
    vg_store_conformance(&op);
    drop_schemas(po.n);
    RUN(pg_migrations_and_versions);
    RUN(pg_a_schema_12_databases_ids_read_as_written_after_the_upgrade);
    RUN(pg_text_index_limits);
    RUN(pg_links_are_found_from_either_end_through_an_index);
    RUN(pg_does_not_share_syncs);
    RUN(pg_unreachable);
    return 0;
}
