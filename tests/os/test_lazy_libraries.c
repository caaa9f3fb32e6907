/*
 * test_lazy_libraries.c: libpq and libical are loaded when a feature first needs them
 * (src/os/dl.h): a process working on a SQLite store maps neither; when one cannot be loaded,
 * the feature fails, every time, with an error that says what to install, and nothing crashes.
 * Loading the real libraries is what every PostgreSQL test and every timer test does.
 * The cases share the process's one load of each library, so they run in this order.
 */
#include "helpers/test.h"

#include "store/store.h"
#include "wake/wake.h"

#include <stdlib.h>

/* Whether a library whose file name contains name is mapped into this process. */
static int mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    ASSERT(f != NULL);
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

TEST(a_sqlite_store_maps_neither)
{
    ASSERT(!mapped("/libpq.so"));
    ASSERT(!mapped("/libical.so"));
    char path[4200];
    snprintf(path, sizeof path, "%s/s.db", vg_test_tmpdir("lazy_libraries"));
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    struct vg_record r = {.kind = "message",
                          .id = "m1",
                          .owner = "a",
                          .k1 = "t",
                          .seq = 1,
                          .at = 5,
                          .body = "{\"x\":1}"};
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    vg_store_close(s);
    ASSERT(!mapped("/libpq.so"));
    ASSERT(!mapped("/libical.so"));
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
        ASSERT_CONTAINS(err.message, "the PostgreSQL store needs libpq");
        ASSERT_CONTAINS(err.message, "/nonexistent/libpq.so.5");
        ASSERT_CONTAINS(err.message, "apt-get install libpq5");
        ASSERT_CONTAINS(err.message, "VIGIL_LIBPQ");
    }
    ASSERT(!mapped("/libpq.so"));
}

TEST(a_missing_libical_is_a_clear_error)
{
    ASSERT_EQ(setenv("VIGIL_LIBICAL", "/nonexistent/libical.so.3", 1), 0);
    for (int attempt = 0; attempt < 2; attempt++) {
        struct vg_timer_spec spec;
        vigil_error err = {0};
        ASSERT_CODE(VIGIL_EUNSUPPORTED, vg_timer_spec_parse(&spec, VG_TIMER_CRON, "0 7 * * *",
                                                            "Europe/Berlin", 0, &err));
        ASSERT_CONTAINS(err.message, "timers need libical");
        ASSERT_CONTAINS(err.message, "apt-get install libical3, or libical3t64 on Debian 13");
        ASSERT_CONTAINS(err.message, "VIGIL_LIBICAL");
    }
    /* Without libical no zone can be checked, so none is taken as valid. */
    ASSERT(!vg_timer_zone_valid("UTC"));
    ASSERT(!mapped("/libical.so"));
}

int main(void)
{
    RUN(a_sqlite_store_maps_neither);
    RUN(a_missing_libpq_is_a_clear_error);
    RUN(a_missing_libical_is_a_clear_error);
    return 0;
}
