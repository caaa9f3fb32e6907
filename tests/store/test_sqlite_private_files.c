/*
 * test_sqlite_private_files.c: a store holds a person's conversations and memory, so what vigil
 * creates for it through the public API is private whatever the umask. Under umask 000: the
 * store file, its log (-wal) and shared index (-shm), both kept past the close (log_vfs.c), and
 * a journal export are 0600, and every folder made on the way to them is 0700. A log and shared
 * index left with another mode (by an older vigil) take the store file's mode at the next open.
 */
#include "helpers/test.h"

#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>

static char agent[37];

/* What a walk of a folder found: how many folders and files, and the first with a wrong mode. */
static struct {
    int dirs, files;
    char wrong[4300];
} seen;

static int check_mode(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    unsigned mode = st->st_mode & 07777;
    unsigned want = S_ISDIR(st->st_mode) ? 0700 : 0600;
    if (S_ISDIR(st->st_mode))
        seen.dirs++;
    else
        seen.files++;
    if (mode != want && !seen.wrong[0])
        snprintf(seen.wrong, sizeof seen.wrong, "%s is %03o, not %03o", path, mode, want);
    return 0;
}

/* Every folder under (and including) root is 0700 and every file 0600; at least this many. */
static void assert_private(const char *root, int min_dirs, int min_files)
{
    memset(&seen, 0, sizeof seen);
    ASSERT_EQ(nftw(root, check_mode, 16, FTW_PHYS), 0);
    if (seen.wrong[0])
        TEST_FAIL_("%s", seen.wrong);
    ASSERT(seen.dirs >= min_dirs);
    ASSERT(seen.files >= min_files);
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        TEST_FAIL_("%s: %s", path, strerror(errno));
    return st.st_mode & 07777;
}

/* Open (creating it, folders too) the store at path and run one chat turn. */
static vigil_runtime *open_and_chat(const char *path)
{
    vigil_runtime *rt = NULL;
    char *out = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path, .create_if_missing = 1};
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    vigil_agent_spec spec = {.name = "private"};
    ASSERT_OK(vigil_agent_create(rt, &spec, agent, E));
    ASSERT_OK(vigil_chat(rt, agent, NULL, "my diary entry", NULL, &out, E));
    ASSERT_CONTAINS(out, "my diary entry");
    vigil_free(out);
    return rt;
}

TEST(a_store_and_its_files_are_private_under_umask_000)
{
    char data[4200], store[4300], export_dir[4300], wal[4400];
    snprintf(data, sizeof data, "%s/data", vg_test_tmpdir("private_files"));
    snprintf(store, sizeof store, "%s/vigil/agents.db", data);
    snprintf(export_dir, sizeof export_dir, "%s/vigil/exports", data);
    snprintf(wal, sizeof wal, "%s-wal", store);

    vigil_runtime *rt = open_and_chat(store);
    /* Open: the store, its log and shared index; data/ and data/vigil/ made by the open. */
    assert_private(data, 2, 3);
    int64_t n = 0;
    ASSERT_OK(vigil_journal_export(rt, agent, export_dir, &n, E));
    ASSERT(n > 0);
    vigil_runtime_close(rt);
    /* Closed: the log is kept (log_vfs.c), and so is the shared index; the export and its
     * folders (exports/, exports/agent-journals/) are private too. */
    ASSERT_EQ(mode_of(wal), 0600);
    assert_private(data, 4, 4);
}

TEST(an_older_log_takes_the_store_files_mode_at_open)
{
    char store[4200], wal[4300], shm[4300];
    snprintf(store, sizeof store, "%s/agents.db", vg_test_tmpdir("private_files_old"));
    snprintf(wal, sizeof wal, "%s-wal", store);
    snprintf(shm, sizeof shm, "%s-shm", store);
    vigil_runtime_close(open_and_chat(store));
    /* As an older vigil left them: readable by everyone, beside a store file made private. */
    ASSERT_EQ(chmod(wal, 0644), 0);
    ASSERT_EQ(chmod(shm, 0644), 0);
    vigil_runtime *rt = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = store};
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    char *shown = NULL;
    ASSERT_OK(vigil_agent_show(rt, agent, &shown, E)); /* a read opens the log */
    vigil_free(shown);
    ASSERT_EQ(mode_of(wal), 0600);
    ASSERT_EQ(mode_of(shm), 0600);
    vigil_runtime_close(rt);
}

int main(void)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    umask(0);
    RUN(a_store_and_its_files_are_private_under_umask_000);
    RUN(an_older_log_takes_the_store_files_mode_at_open);
    return 0;
}
