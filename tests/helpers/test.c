/*
 * test.c: shared state and helpers of the test macros.
 */
#include "helpers/test.h"

#include "os/fs.h"
#include "store/store.h"

#include <unistd.h>

int vg_test_failures;
const char *vg_test_current;

const char *vg_test_tmpdir(const char *name)
{
    static char path[4096];
    const char *root = getenv("VIGIL_TEST_TMP");
    char cmd[4200];
    if (!root || !*root)
        root = "/tmp/vigil-test";
    snprintf(path, sizeof path, "%s/%s-%ld", root, name, (long)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        TEST_FAIL_("could not clear %s", path);
    vigil_error err = {0};
    if (vg_fs_mkdir_p(path, &err) != VIGIL_OK)
        TEST_FAIL_("could not create %s: %s", path, err.message);
    return path;
}

int64_t vg_test_store_count(struct vg_store *s, const char *kind)
{
    int64_t n = -1;
    struct vg_query q = {.kind = kind};
    return vg_store_count(s, &q, &n, NULL) == VIGIL_OK ? n : -1;
}

struct vg_store *vg_test_store_open(const char *path, int busy_ms)
{
    struct vg_store_options o = {.create_if_missing = 1, .busy_timeout_ms = busy_ms};
    struct vg_store *s = NULL;
    vigil_error err = {0};
    if (vg_store_open(path, &o, &s, &err) != VIGIL_OK) {
        fprintf(stderr, "open %s: %s\n", path, err.message);
        return NULL;
    }
    return s;
}
