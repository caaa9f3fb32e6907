/*
 * test_bridge.c: the host's side of the bridge without a child: the line reader (caps, split
 * writes, floods), the message checker (every forged shape refused before anything acts), and
 * 1,000 generated file requests outside policy — traversal, absolute and encoded paths,
 * symlinks and hardlinks planted beside the root — each refused with no effect outside.
 */
#include "base/common.h"

#include "os/fs.h"
#include "sandbox/sandbox_helpers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TEST(reader_splits_and_caps)
{
    struct vg_bridge_reader r = {0};
    const char *line;
    size_t len;
    ASSERT_OK(vg_bridge_reader_feed(&r, "{\"op\":", 6, E));
    ASSERT(!vg_bridge_reader_next(&r, &line, &len)); /* half a line: nothing yet */
    ASSERT_OK(vg_bridge_reader_feed(&r, "\"result\"}\n{}\n", 13, E));
    ASSERT(vg_bridge_reader_next(&r, &line, &len));
    ASSERT_EQ(len, 15);
    ASSERT(!memcmp(line, "{\"op\":\"result\"}", 15));
    ASSERT(vg_bridge_reader_next(&r, &line, &len));
    ASSERT_EQ(len, 2);
    ASSERT(!vg_bridge_reader_next(&r, &line, &len));
    /* a flood without a newline breaks the stream instead of growing without end */
    static char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 100 && !r.overflow; i++)
        ASSERT_OK(vg_bridge_reader_feed(&r, chunk, sizeof chunk, E));
    ASSERT(!vg_bridge_reader_next(&r, &line, &len));
    ASSERT(r.overflow);
    ASSERT(r.len <= 2 * (size_t)VG_BRIDGE_MAX_LINE + sizeof chunk);
    vg_bridge_reader_free(&r);
}

/* Each is refused by the checker (forged ids, unknown ops, wrong types, not JSON). */
static const char *const forged[] = {
    "",
    "x",
    "[]",
    "null",
    "1",
    "\"tool\"",
    "{}",
    "{\"op\":\"exec\",\"id\":1}",
    "{\"op\":\"tool\"}",
    "{\"op\":\"tool\",\"id\":-1,\"name\":\"a\"}",
    "{\"op\":\"tool\",\"id\":\"1\",\"name\":\"a\"}",
    "{\"op\":\"tool\",\"id\":1.5,\"name\":\"a\"}",
    "{\"op\":\"tool\",\"id\":1}",
    "{\"op\":\"tool\",\"id\":1,\"name\":\"\"}",
    "{\"op\":\"tool\",\"id\":1,\"name\":\"a\",\"args\":[1]}",
    "{\"op\":\"tool\",\"id\":1,\"name\":7}",
    "{\"op\":\"read\",\"id\":1}",
    "{\"op\":\"read\",\"id\":1,\"path\":1}",
    "{\"op\":\"read\",\"id\":1,\"path\":\"a\\u0000b\"}",
    "{\"op\":\"write\",\"id\":1,\"path\":\"a\"}",
    "{\"op\":\"write\",\"id\":1,\"path\":\"a\",\"data\":1}",
    "{\"op\":\"error\"}",
    "{\"op\":\"error\",\"code\":\"x\"}",
    "{\"op\":\"tool\",\"op\":\"read\",\"id\":1,\"name\":\"a\"}", /* duplicate keys */
    "{\"op\":\"tool\",\"id\":1,\"name\":\"a\"",
    "{\"op\":null,\"id\":1}",
};

TEST(forged_messages_refused)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(forged); i++) {
        struct vg_bridge_msg m;
        if (vg_bridge_msg_parse(forged[i], strlen(forged[i]), &m) != VG_BRIDGE_BAD)
            TEST_FAIL_("accepted a forged message: %s", forged[i]);
        ASSERT(m.why[0]);
        vg_bridge_msg_release(&m);
    }
    struct vg_bridge_msg m;
    const char *ok =
        "{\"op\":\"write\",\"id\":3,\"path\":\"a.txt\",\"data\":\"hi\",\"append\":true}";
    ASSERT_EQ(vg_bridge_msg_parse(ok, strlen(ok), &m), VG_BRIDGE_WRITE);
    ASSERT_EQ(m.id, 3);
    ASSERT_STREQ(m.path, "a.txt");
    ASSERT_EQ(m.data_len, 2);
    ASSERT(m.append);
    vg_bridge_msg_release(&m);
}

static char wd[4096], outside_dir[4200], outside[4300];

static const char *const prefixes[] = {
    "..",      "../",          "/",    "./..",  "sub/../..",          "sub/../../",  "dirlink/",
    "dirlink", "link-out",     "hard", "//",    "/proc/self/",        "/etc/",       "sub/./../../",
    ".//..//", "sub/dirlink/", "fifo", "/tmp/", "../../../../../../", "sub/..//../",
};
static const char *const names[] = {
    "outside.txt",
    "",
    "planted",
    "..",
    "passwd",
    "environ",
    "%2e%2e/outside.txt",
    "..%2f..%2foutside.txt",
    "outside.txt/",
    "outside.txt/.",
    "x/../../outside.txt",
    "..\\outside.txt",
    "\xc0\xae\xc0\xae/outside.txt",
    "fd/3",
    "root/outside.txt",
};

/* Every file operation on a path built from an escaping prefix and a name is refused or
 * touches only the root; the file outside stays as it was. */
TEST(generated_requests_refused)
{
    int dirfd = open(wd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT(dirfd >= 0);
    int n = 0;
    for (size_t p = 0; p < VG_ARRAY_LEN(prefixes); p++)
        for (size_t k = 0; k < VG_ARRAY_LEN(names); k++)
            for (int op = 0; op < 4; op++, n++) {
                char path[512], code[32] = "", msg[256] = "";
                snprintf(path, sizeof path, "%s%s%s", prefixes[p],
                         prefixes[p][strlen(prefixes[p]) - 1] == '/' ? "" : "/", names[k]);
                int rc;
                json_t *v = NULL;
                switch (op) {
                case 0:
                    v = vg_sandbox_file_read(dirfd, path, 1 << 20, code, msg);
                    rc = v ? 0 : -1;
                    break;
                case 1:
                    rc =
                        vg_sandbox_file_write(dirfd, path, "pwned", 5, 0, 1 << 20, NULL, code, msg);
                    break;
                case 2:
                    rc =
                        vg_sandbox_file_write(dirfd, path, "pwned", 5, 1, 1 << 20, NULL, code, msg);
                    break;
                default:
                    rc = vg_sandbox_file_remove(dirfd, path, NULL, code, msg);
                }
                json_decref(v);
                if (rc == 0)
                    TEST_FAIL_("op %d on %s was allowed", op, path);
                ASSERT(code[0]);
            }
    ASSERT(n >= 1000);
    close(dirfd);
    char *text = NULL;
    size_t len = 0;
    ASSERT_OK(vg_fs_read_file(outside, 100, &text, &len, E));
    ASSERT_STREQ(text, "secret");
    vg_free(text);
    char p[4400];
    snprintf(p, sizeof p, "%s/planted", outside_dir);
    ASSERT(access(p, F_OK) != 0);
}

/* The check is at use: a directory swapped for a symlink after an earlier, legal use is
 * refused at the next one (no path is resolved once and trusted). */
TEST(checked_at_use)
{
    int dirfd = open(wd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char code[32], msg[256], p[4400];
    ASSERT_EQ(vg_sandbox_file_write(dirfd, "swap/f.txt", "a", 1, 0, 100, NULL, code, msg), -1);
    snprintf(p, sizeof p, "%s/swap", wd);
    ASSERT_EQ(mkdir(p, 0700), 0);
    ASSERT_EQ(vg_sandbox_file_write(dirfd, "swap/f.txt", "a", 1, 0, 100, NULL, code, msg), 0);
    char f[4500];
    snprintf(f, sizeof f, "%s/f.txt", p);
    unlink(f);
    rmdir(p);
    ASSERT_EQ(symlink(outside_dir, p), 0);
    ASSERT_EQ(vg_sandbox_file_write(dirfd, "swap/outside.txt", "b", 1, 0, 100, NULL, code, msg),
              -1);
    ASSERT_STREQ(code, "denied");
    close(dirfd);
}

/* The folder's total counts what a program hid in folders their owner cannot read (Deno can
 * chmod): the host, that owner when it is not root, gives the rights back and counts them
 * (trial E12). Run as the sandbox's uid, 65534, in a child: as root nothing is unreadable. */
TEST(dir_usage_counts_unreadable_folders)
{
    if (geteuid() != 0)
        return; /* needs to become another user to make the folder its own */
    char dir[4096], path[4200];
    sbx_workdir("sandbox-bridge-hidden", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a", dir);
    ASSERT_EQ(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/a/b", dir);
    ASSERT_EQ(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/a/b/big", dir);
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    ASSERT(fd >= 0 && ftruncate(fd, 100000) == 0);
    close(fd);
    const char *own[] = {"", "/a", "/a/b", "/a/b/big"};
    for (size_t i = 0; i < VG_ARRAY_LEN(own); i++) {
        snprintf(path, sizeof path, "%s%s", dir, own[i]);
        ASSERT_EQ(chown(path, 65534, 65534), 0);
    }
    snprintf(path, sizeof path, "%s/a/b", dir);
    ASSERT_EQ(chmod(path, 0), 0);
    snprintf(path, sizeof path, "%s/a", dir);
    ASSERT_EQ(chmod(path, 0), 0);
    pid_t pid = fork();
    if (pid == 0) {
        /* From inside: the test folder's parents are closed to that uid. */
        if (chdir(dir) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
            _exit(2);
        /* a and b one block each, big 100,000 bytes in 25 blocks */
        _exit(vg_sandbox_dir_usage(".", 1LL << 40) == 27 * VG_SBX_DIR_BLOCK ? 0 : 1);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
}

int main(void)
{
    sbx_plant("sandbox-bridge/wd", wd, sizeof wd, outside, sizeof outside);
    snprintf(outside_dir, sizeof outside_dir, "%s/..", wd);
    RUN(reader_splits_and_caps);
    RUN(forged_messages_refused);
    RUN(generated_requests_refused);
    RUN(checked_at_use);
    RUN(dir_usage_counts_unreadable_folders);
    return 0;
}
