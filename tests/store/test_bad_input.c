/*
 * test_bad_input.c: the SQLite store facing what the outside world hands it: random bytes, a
 * damaged vigil store, another program's database, an empty file, a directory, places it cannot
 * write, two processes writing at once, and a disk that fills up (through the fault VFS and
 * through a real file-size limit). Every case ends in a clear error code and message, never a
 * crash, never a partial record, and a store that still opens when it was one to begin with.
 */
#include "helpers/test.h"

#include "os/fs.h"
#include "helpers/fault_vfs.h"
#include "store/store.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[4096];

static void path_of(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ASSERT(f != NULL);
    ASSERT_EQ(fwrite(data, 1, n, f), n);
    ASSERT_EQ(fclose(f), 0);
}

static struct vg_store *create(const char *path)
{
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    return s;
}

static int64_t count(struct vg_store *s, const char *kind)
{
    struct vg_query q = {.kind = kind};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(s, &q, &n, E));
    return n;
}

/* Append n records of about body_len bytes in one transaction; returns the first failure. */
static vigil_code append_tx(struct vg_store *s, const char *prefix, int n, size_t body_len,
                            vigil_error *err)
{
    static char body[8192];
    char id[64];
    memset(body, 'x', sizeof body);
    body[0] = '"';
    body[body_len - 1] = '"';
    body[body_len] = '\0';
    vigil_code rc = vg_store_begin(s, err);
    if (rc)
        return rc;
    for (int i = 0; i < n && rc == VIGIL_OK; i++) {
        snprintf(id, sizeof id, "%s-%d", prefix, i);
        struct vg_record r = {.kind = "msg", .id = id, .owner = "a", .seq = i, .body = body};
        rc = vg_store_put(s, &r, 0, NULL, err);
    }
    return vg_store_end(s, rc, err);
}

/* ---- files that are not vigil stores ------------------------------------------------------- */

TEST(random_bytes_refused)
{
    char path[4200];
    unsigned char junk[8192];
    uint32_t x = 7;
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 1664525u + 1013904223u;
        junk[i] = (unsigned char)(x >> 24);
    }
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    vigil_error err = {0};
    path_of(path, sizeof path, "random.db");
    write_bytes(path, junk, sizeof junk);
    ASSERT_CODE(VIGIL_ECORRUPT, vg_store_open(path, &o, &s, &err));
    ASSERT_CONTAINS(err.message, "not a vigil store");
    ASSERT_CONTAINS(err.message, "random.db");
    /* a SQLite header followed by garbage */
    memcpy(junk, "SQLite format 3", 16);
    path_of(path, sizeof path, "header.db");
    write_bytes(path, junk, sizeof junk);
    vigil_code rc = vg_store_open(path, &o, &s, &err);
    ASSERT(rc == VIGIL_ECORRUPT);
}

TEST(damaged_store_detected)
{
    char path[4200];
    path_of(path, sizeof path, "damaged.db");
    struct vg_store *s = create(path);
    for (int t = 0; t < 10; t++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "t%d", t);
        ASSERT_OK(append_tx(s, prefix, 50, 400, E));
    }
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_CHECKPOINT, NULL, E));
    int64_t size = 0;
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_FILE_SIZE, &size, E));
    vg_store_close(s);
    ASSERT(size > 40 * 4096);

    /* Overwrite pages in the middle of the file (not the header) with a pattern. */
    int fd = open(path, O_WRONLY);
    ASSERT(fd >= 0);
    unsigned char junk[4096 * 8];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 131 + 17);
    ASSERT_EQ(pwrite(fd, junk, sizeof junk, (off_t)(size / 2 / 4096) * 4096), sizeof junk);
    ASSERT_EQ(close(fd), 0);

    struct vg_store_options o = {0};
    vigil_error err = {0};
    vigil_code rc = vg_store_open(path, &o, &s, &err);
    if (rc == VIGIL_OK) {
        rc = vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, &err);
        ASSERT_CODE(VIGIL_ECORRUPT, rc);
        ASSERT_CONTAINS(err.message, "integrity");
        /* reads over the damage fail cleanly or succeed; they never crash */
        struct vg_query q = {.kind = "msg"};
        int64_t n;
        rc = vg_store_count(s, &q, &n, &err);
        ASSERT(rc == VIGIL_OK || rc == VIGIL_ECORRUPT);
        vg_store_close(s);
    } else {
        ASSERT_CODE(VIGIL_ECORRUPT, rc);
    }
}

TEST(foreign_database_refused_untouched)
{
    char path[4200];
    path_of(path, sizeof path, "foreign.db");
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL);"
                           "INSERT INTO invoices(total) VALUES (12.5)",
                           NULL, NULL, NULL),
              SQLITE_OK);
    sqlite3_close(db);
    char *before = NULL, *after = NULL;
    size_t nb = 0, na = 0;
    ASSERT_OK(vg_fs_read_file(path, 1 << 20, &before, &nb, E));
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ECORRUPT, vg_store_open(path, &o, &s, &err));
    ASSERT_CONTAINS(err.message, "not a vigil store");
    ASSERT_CONTAINS(err.message, "another program");
    /* not switched to WAL, not migrated: the same bytes */
    ASSERT_OK(vg_fs_read_file(path, 1 << 20, &after, &na, E));
    ASSERT_EQ(na, nb);
    ASSERT(memcmp(before, after, nb) == 0);
    vg_free(before);
    vg_free(after);
}

/* Found by fuzz_store_open: a negative schema version once indexed the migrations backwards. */
TEST(invalid_schema_version)
{
    char path[4200];
    path_of(path, sizeof path, "negative.db");
    vg_store_close(create(path));
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=-335544318", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    struct vg_store *s = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ECORRUPT, vg_store_open(path, &(struct vg_store_options){0}, &s, &err));
    ASSERT_CONTAINS(err.message, "invalid schema version");
}

TEST(empty_file)
{
    char path[4200];
    path_of(path, sizeof path, "empty.db");
    write_bytes(path, "", 0);
    struct vg_store_options o = {0};
    struct vg_store *s = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_open(path, &o, &s, &err));
    ASSERT_CONTAINS(err.message, "empty");
    /* asked to create, an empty file becomes a store */
    o.create_if_missing = 1;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    ASSERT_OK(append_tx(s, "e", 3, 10, E));
    vg_store_close(s);
    o.create_if_missing = 0;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    ASSERT_EQ(count(s, "msg"), 3);
    vg_store_close(s);
}

TEST(directory_and_unwritable_paths)
{
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_store_open(dir, &o, &s, &err));
    ASSERT_CONTAINS(err.message, "is a directory");

    char file[4200], under_file[4300], missing[4300];
    path_of(file, sizeof file, "plain-file");
    write_bytes(file, "x", 1);
    snprintf(under_file, sizeof under_file, "%s/s.db", file);
    vigil_code rc = vg_store_open(under_file, &o, &s, &err);
    ASSERT_CODE(VIGIL_EIO, rc);
    ASSERT_CONTAINS(err.message, "s.db");
    snprintf(missing, sizeof missing, "%s/no/such/dir/s.db", dir);
    o.create_if_missing = 0;
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_store_open(missing, &o, &s, &err));
    ASSERT_CONTAINS(err.message, "vigil init");
    ASSERT(s == NULL);
    /* Asked to create it, the store's missing folders are made too (vigil.h). */
    o.create_if_missing = 1;
    ASSERT_OK(vg_store_open(missing, &o, &s, E));
    vg_store_close(s);
    s = NULL;

    if (geteuid() != 0) { /* root ignores permission bits */
        char ro_dir[4200], in_ro[4300];
        path_of(ro_dir, sizeof ro_dir, "ro");
        ASSERT_OK(vg_fs_mkdir_p(ro_dir, E));
        ASSERT_EQ(chmod(ro_dir, 0500), 0);
        snprintf(in_ro, sizeof in_ro, "%s/s.db", ro_dir);
        o.create_if_missing = 1;
        rc = vg_store_open(in_ro, &o, &s, &err);
        ASSERT(rc == VIGIL_EIO || rc == VIGIL_EDENIED);
        ASSERT_EQ(chmod(ro_dir, 0700), 0);
    }
}

/* ---- two processes ------------------------------------------------------------------------- */

TEST(two_processes_append)
{
    char path[4200];
    path_of(path, sizeof path, "shared.db");
    vg_store_close(create(path));
    fflush(NULL);
    pid_t pid[2];
    for (int w = 0; w < 2; w++) {
        pid[w] = fork();
        ASSERT(pid[w] >= 0);
        if (pid[w] == 0) {
            struct vg_store_options o = {.busy_timeout_ms = 20000};
            struct vg_store *s = NULL;
            vigil_error err = {0};
            int bad = vg_store_open(path, &o, &s, &err) != VIGIL_OK;
            for (int t = 0; t < 20 && !bad; t++) {
                char prefix[32];
                snprintf(prefix, sizeof prefix, "w%d-t%d", w, t);
                if (append_tx(s, prefix, 10, 100, &err) != VIGIL_OK) {
                    fprintf(stderr, "writer %d: %s\n", w, err.message);
                    bad = 1;
                }
            }
            vg_store_close(s);
            _exit(bad);
        }
    }
    for (int w = 0; w < 2; w++) {
        int st = 0;
        ASSERT(waitpid(pid[w], &st, 0) == pid[w]);
        ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &(struct vg_store_options){0}, &s, E));
    ASSERT_EQ(count(s, "msg"), 2 * 20 * 10);
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    vg_store_close(s);
}

/* ---- a full disk --------------------------------------------------------------------------- */

/* The disk fills (or the device fails) from the nth write/sync/truncate on: the transaction
 * fails with EFULL or EIO, nothing of it is visible, the same handle works again once there is
 * room, and the file reopens and passes its integrity check. */
TEST(full_disk_through_fault_vfs)
{
    ASSERT_OK(vg_sqlite_fault_vfs_install(E));
    static const unsigned ops[] = {VG_FAULT_WRITE, VG_FAULT_SYNC, VG_FAULT_TRUNCATE};
    static const vigil_code codes[] = {VIGIL_EFULL, VIGIL_EIO};
    int failures = 0;
    for (size_t oi = 0; oi < VG_ARRAY_LEN(ops); oi++)
        for (size_t ci = 0; ci < VG_ARRAY_LEN(codes); ci++)
            for (long nth = 1; nth <= 3; nth++) {
                char path[4200], name[64];
                snprintf(name, sizeof name, "full-%zu-%zu-%ld.db", oi, ci, nth);
                path_of(path, sizeof path, name);
                struct vg_store *s = create(path);
                ASSERT_OK(append_tx(s, "base", 10, 200, E));
                int64_t expect = 10;
                vg_sqlite_fault_vfs_arm(nth, ops[oi], codes[ci], 1);
                vigil_error err = {0};
                vigil_code rc = append_tx(s, "big", 40, 4000, &err);
                int hit = vg_sqlite_fault_vfs_hit();
                vg_sqlite_fault_vfs_arm(0, 0, VIGIL_OK, 0);
                if (rc == VIGIL_OK) {
                    expect += 40; /* the armed operation never came (e.g. no truncate) */
                    /* one sync per commit in WAL mode, no truncate inside one, and one
                     * write per 128 KiB of a commit's log frames (log_vfs.c): this commit's
                     * 160 KB make two */
                    ASSERT(!(ops[oi] == VG_FAULT_WRITE && nth <= 2) &&
                           !(ops[oi] == VG_FAULT_SYNC && nth == 1));
                } else {
                    failures++;
                    ASSERT(hit);
                    if (rc != codes[ci])
                        TEST_FAIL_("%s: got %s (%s), want %s", name, vigil_code_name(rc),
                                   err.message, vigil_code_name(codes[ci]));
                    ASSERT_CONTAINS(err.message, name);
                }
                ASSERT(!vg_store_in_tx(s));
                ASSERT_EQ(count(s, "msg"), expect);
                /* room again: the same handle writes */
                ASSERT_OK(append_tx(s, "after", 5, 100, E));
                expect += 5;
                vg_store_close(s);
                struct vg_store_options o = {0};
                ASSERT_OK(vg_store_open(path, &o, &s, E));
                ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
                ASSERT_EQ(count(s, "msg"), expect);
                vg_store_close(s);
            }
    ASSERT_EQ(failures, 2 * 2 + 2); /* the commit's two writes, and the first sync */
}

/* A real limit: the child may not grow any file past 256 KiB (SIGXFSZ ignored, so writes fail
 * with EFBIG). It appends until refused, and reports how many transactions committed. */
TEST(file_size_limit)
{
    char path[4200];
    path_of(path, sizeof path, "rlimit.db");
    vg_store_close(create(path));
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {256 * 1024, 256 * 1024};
        struct vg_store *s = NULL;
        vigil_error err = {0};
        int committed = 0, status = 1;
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0 ||
            vg_store_open(path, &(struct vg_store_options){0}, &s, &err) != VIGIL_OK)
            _exit(2);
        for (int t = 0; t < 1000; t++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "t%d", t);
            vigil_code rc = append_tx(s, prefix, 5, 2000, &err);
            if (rc == VIGIL_OK) {
                committed++;
                continue;
            }
            fprintf(stderr, "child refused after %d transactions: %s: %s\n", committed,
                    vigil_code_name(rc), err.message);
            status = (rc == VIGIL_EFULL || rc == VIGIL_EIO) ? 0 : 3;
            break;
        }
        vg_store_close(s);
        if (write(fds[1], &committed, sizeof committed) != (ssize_t)sizeof committed)
            status = 4;
        _exit(status);
    }
    close(fds[1]);
    int committed = -1, st = 0;
    ASSERT_EQ(read(fds[0], &committed, sizeof committed), sizeof committed);
    close(fds[0]);
    ASSERT(waitpid(pid, &st, 0) == pid);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
    ASSERT(committed > 0);
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &(struct vg_store_options){0}, &s, E));
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_INTEGRITY, NULL, E));
    ASSERT_EQ(count(s, "msg"), committed * 5);
    vg_store_close(s);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("bad_input"));
    RUN(random_bytes_refused);
    RUN(damaged_store_detected);
    RUN(foreign_database_refused_untouched);
    RUN(invalid_schema_version);
    RUN(empty_file);
    RUN(directory_and_unwritable_paths);
    RUN(two_processes_append);
    RUN(full_disk_through_fault_vfs);
    RUN(file_size_limit);
    return 0;
}
