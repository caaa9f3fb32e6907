/*
 * test_options_size.c: vigil_runtime_options carries its size while vigil is 0.x (vigil.h), so
 * the struct can grow: a program that zero-initializes (size 0) or was built with this layout
 * opens a runtime with the defaults for what it did not set; one built against a newer, larger
 * layout is refused only when it set a field this library does not know. vigil_daemon_options
 * carries one too, filled in by vigil_daemon_options_default; a size the library does not know
 * (0, or smaller than the first layout: a program built before the field) is refused before
 * the daemon touches the store.
 */
#include "helpers/test.h"

#include <unistd.h>

/* The options of a program built against a newer vigil: one field more. */
struct newer_options {
    vigil_runtime_options known;
    int later_field;
};

static vigil_code open_with(const vigil_runtime_options *o)
{
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    vigil_code rc = vigil_runtime_open(o, &rt, &err);
    if (rc)
        fprintf(stderr, "  %s: %s\n", vigil_code_name(rc), err.message);
    vigil_runtime_close(rt);
    return rc;
}

TEST(the_options_size_keeps_old_and_new_programs_working)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/o.db", vg_test_tmpdir("options_size"));
    vigil_runtime_options zero = {.store_uri = path, .create_if_missing = 1};
    ASSERT_OK(open_with(&zero)); /* size 0: the 0.1 layout */
    vigil_runtime_options sized = {.size = sizeof sized, .store_uri = path};
    ASSERT_OK(open_with(&sized));

    struct newer_options newer = {.known = {.size = sizeof newer, .store_uri = path}};
    ASSERT_OK(open_with(&newer.known)); /* the new field left at its default */
    newer.later_field = 1;
    ASSERT_CODE(VIGIL_EVERSION, open_with(&newer.known));

    vigil_runtime_options small = {.size = sizeof(void *), .store_uri = path};
    ASSERT_CODE(VIGIL_EINVAL, open_with(&small));
}

/* The daemon's options with a larger layout's field set, for a program built against a newer
 * vigil. */
struct newer_daemon_options {
    vigil_daemon_options known;
    int later_field;
};

TEST(the_daemon_refuses_options_of_a_size_it_does_not_know)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/d.db", vg_test_tmpdir("daemon_options_size"));
    vigil_runtime_options ro;
    vigil_runtime_options_default(&ro);
    ASSERT_EQ(ro.size, sizeof ro);
    vigil_daemon_options d;
    vigil_daemon_options_default(&d);
    ASSERT_EQ(d.size, sizeof d);
    ASSERT_EQ(d.workers, 2);

    vigil_error err = {0};
    d.size = 0; /* zero-initialized, or built before the field */
    ASSERT_CODE(VIGIL_EINVAL, vigil_daemon_run(path, &d, &err));
    ASSERT_CONTAINS(err.message, "vigil_daemon_options.size is 0");
    ASSERT_CONTAINS(err.message, "vigil_daemon_options_default");
    d.size = VIGIL_DAEMON_OPTIONS_SIZE_0_1 - 1;
    ASSERT_CODE(VIGIL_EINVAL, vigil_daemon_run(path, &d, NULL));

    struct newer_daemon_options newer = {.later_field = 1};
    vigil_daemon_options_default(&newer.known);
    newer.known.size = sizeof newer;
    ASSERT_CODE(VIGIL_EVERSION, vigil_daemon_run(path, &newer.known, &err));
    ASSERT_CONTAINS(err.message, "does not know");
    ASSERT(access(path, F_OK) != 0); /* refused before the store was opened */
}

int main(void)
{
    RUN(the_options_size_keeps_old_and_new_programs_working);
    RUN(the_daemon_refuses_options_of_a_size_it_does_not_know);
    return 0;
}
