/*
 * pg_env.c: PostgreSQL scaffolding for the tests and benchmarks: find the test server
 * (VIGIL_PG_URI, exported by scripts/test.sh), and make a fresh schema per store so that each
 * case starts empty without creating databases.
 */
#include "helpers/test.h"

#include "helpers/pg_env.h"

#include <libpq-fe.h>
#include <unistd.h>

const char *vg_test_pg_uri(void)
{
    const char *uri = getenv("VIGIL_PG_URI");
    const char *require = getenv("VIGIL_REQUIRE_PG");
    if (uri && *uri)
        return uri;
    if (require && strcmp(require, "1") == 0) {
        fprintf(stderr, "VIGIL_REQUIRE_PG=1 but VIGIL_PG_URI is not set: no PostgreSQL server "
                        "for the tests (scripts/test.sh starts one)\n");
        exit(1);
    }
    fprintf(stderr, "skipped: VIGIL_PG_URI is not set (scripts/test.sh starts a PostgreSQL "
                    "server and sets it)\n");
    exit(77);
}

void vg_test_pg_sql(const char *sql)
{
    PGconn *c = PQconnectdb(vg_test_pg_uri());
    if (PQstatus(c) != CONNECTION_OK)
        TEST_FAIL_("connect to %s: %s", vg_test_pg_uri(), PQerrorMessage(c));
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    PGresult *r = PQexec(c, sql);
    ExecStatusType t = PQresultStatus(r);
    if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK)
        TEST_FAIL_("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

void vg_test_pg_value(const char *sql, char *out, size_t n)
{
    PGconn *c = PQconnectdb(vg_test_pg_uri());
    if (PQstatus(c) != CONNECTION_OK)
        TEST_FAIL_("connect to %s: %s", vg_test_pg_uri(), PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1)
        TEST_FAIL_("%s: no value: %s", sql, PQerrorMessage(c));
    snprintf(out, n, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
}

void vg_test_pg_log(char *out, size_t n)
{
    const char *env = getenv("BENCH_PG_LOG"), *host = strstr(vg_test_pg_uri(), "host=");
    if (env)
        snprintf(out, n, "%s", env);
    else if (host)
        snprintf(out, n, "%.*s/log", (int)strcspn(host + 5, "&"), host + 5);
    else
        out[0] = '\0';
}

void vg_test_pg_schema_uri(const char *schema, int create, char *out, size_t n)
{
    char sql[256];
    if (create) {
        snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s", schema,
                 schema);
        vg_test_pg_sql(sql);
    }
    const char *base = vg_test_pg_uri();
    snprintf(out, n, "%s%soptions=-csearch_path%%3D%s", base, strchr(base, '?') ? "&" : "?",
             schema);
}
