/*
 * fuzz_store_open.c: the only outside input the store parses is the store file itself. Each
 * input is written to a temporary file and opened as a vigil store; when that works, a scan, a
 * count, a write and the integrity check run over it. Every input must end in a clean error
 * code or success: no crash, no leak, no sanitizer report.
 * Seed it with a real store (docs/internals/STORE.md says how).
 */
#include "base/common.h"

#include "store/store.h"

#include <unistd.h>

static char path[256];

static int visit(void *user, const struct vg_record *r)
{
    size_t *n = user;
    *n += strlen(r->body) + strlen(r->id);
    return 0;
}

static void remove_files(void)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    char p[300];
    for (size_t i = 0; i < VG_ARRAY_LEN(sfx); i++) {
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/vigil-fuzz-store-%ld.db", (long)getpid());
    remove_files();
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return 0;
    }
    fclose(f);

    struct vg_store_options o = {.busy_timeout_ms = 1};
    struct vg_store *s = NULL;
    vigil_error err = {0};
    if (vg_store_open(path, &o, &s, &err) == VIGIL_OK) {
        size_t n = 0;
        int64_t count = 0;
        struct vg_query q = {.kind = "message", .descending = 1, .limit = 100};
        (void)vg_store_scan(s, &q, visit, &n, &err);
        (void)vg_store_count(s, &q, &count, &err);
        struct vg_record r = {.kind = "message", .id = "fuzz", .owner = "a", .body = "{}"};
        (void)vg_store_put(s, &r, VG_PUT_IF_ABSENT, NULL, &err);
        (void)vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, &err);
        vg_store_close(s);
    } else if (err.code == VIGIL_OK || !err.message[0]) {
        __builtin_trap(); /* a failure must say what failed */
    }
    remove_files();
    return 0;
}
