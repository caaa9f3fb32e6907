/*
 * test_pg_loading.c: libpq is loaded only when a PostgreSQL store is opened
 * (src/store/pg/libpq.h). A process on a SQLite store never maps it; when it cannot be loaded,
 * opening a PostgreSQL store fails, every time, with an error that says what to install.
 * Loading the real library is what every PostgreSQL test does (test_conformance_pg).
 * The cases share the process's one load, so they run in this order.
 */
#include "helpers/test.h"

#include "store/store.h"

#include <stdlib.h>

/* Whether libpq is mapped into this process. */
static int libpq_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ASSERT(f != NULL);
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, "/libpq.so") != NULL;
    fclose(f);
    return found;
}

TEST(a_sqlite_store_never_loads_libpq)
{
    ASSERT(!libpq_mapped());
    char path[4200];
    snprintf(path, sizeof path, "%s/s.db", vg_test_tmpdir("pg_loading"));
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    struct vg_record r = {.kind = "message", .id = "m1", .owner = "a", .k1 = "t", .seq = 1,
                          .at = 5, .body = "{\"x\":1}"};
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    vg_store_close(s);
    ASSERT(!libpq_mapped());
}

TEST(a_missing_libpq_is_a_clear_error)
{
    ASSERT_EQ(setenv("VIGIL_LIBPQ", "/nonexistent/libpq.so.5", 1), 0);
    for (int attempt = 0; attempt < 2; attempt++) {
        struct vg_store_options o = {0};
        struct vg_store *s = NULL;
        vigil_error err = {0};
        ASSERT_CODE(VIGIL_EUNSUPPORTED,
                    vg_store_open("postgresql://vigil@/vigil?host=/nonexistent", &o, &s, &err));
        ASSERT(s == NULL);
        ASSERT_CONTAINS(err.message, "needs libpq");
        ASSERT_CONTAINS(err.message, "/nonexistent/libpq.so.5");
        ASSERT_CONTAINS(err.message, "apt-get install libpq5");
        ASSERT_CONTAINS(err.message, "VIGIL_LIBPQ");
    }
    ASSERT(!libpq_mapped());
}

int main(void)
{
    RUN(a_sqlite_store_never_loads_libpq);
    RUN(a_missing_libpq_is_a_clear_error);
    return 0;
}
