/*
 * pg_env.h: PostgreSQL scaffolding shared by the PostgreSQL tests and benchmarks.
 */
#ifndef VG_TEST_PG_ENV_H
#define VG_TEST_PG_ENV_H

#include <stddef.h>

/* The test server's URI. When unset: exit 77 (CTest: skipped), or fail when
 * VIGIL_REQUIRE_PG=1. */
const char *vg_test_pg_uri(void);
/* Run SQL on the test server (as the test's superuser); a failure fails the test. */
void vg_test_pg_sql(const char *sql);
/* The first value of a query on the test server, as text in out; no row fails the test. */
void vg_test_pg_value(const char *sql, char *out, size_t n);
/* The test server's log: BENCH_PG_LOG, or scripts/pg.sh's DIR/log for the socket folder DIR
 * of the URI ("" when neither). */
void vg_test_pg_log(char *out, size_t n);
/* A store URI whose tables live in schema (created empty first when create is set). */
void vg_test_pg_schema_uri(const char *schema, int create, char *out, size_t n);

#endif
