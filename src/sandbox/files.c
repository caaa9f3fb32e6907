/*
 * files.c: the bridge's file requests, answered by the host inside the working directory.
 * Every path is resolved beneath the directory at the moment of use by the kernel (openat2
 * with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_XDEV), so "..",
 * an absolute path, a symlink planted by an earlier run, or a rename race cannot lead outside;
 * a regular file with more than one link (a hardlink to something elsewhere) is refused, and
 * nothing but regular files and directories is opened. Writes and removes keep the folder's
 * total (limits.dir_bytes) when the caller passes the room left: vg_sandbox_dir_usage measures it.
 */
#include "base/common.h"

#include "sandbox/sandbox.h"

#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Fill the bridge's error answer; returns -1 so callers can `return answer(...)`. */
static int answer(char code[32], char msg[256], const char *c, const char *path, const char *why)
{
    snprintf(code, 32, "%s", c);
    snprintf(msg, 256, "%s: %s", path, why);
    return -1;
}

static int fail_errno(char code[32], char msg[256], const char *path, int e)
{
    if (e == EXDEV || e == ELOOP || e == EAGAIN)
        return answer(code, msg, "denied", path, "outside the working directory or through a link");
    const char *c = e == ENOENT                   ? "not_found"
                    : (e == EACCES || e == EPERM) ? "denied"
                    : e == EFBIG                  ? "too_large"
                                                  : "failed";
    return answer(code, msg, c, path, strerror(e));
}

static int open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .mode = (flags & O_CREAT) ? mode : 0,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    return (int)syscall(SYS_openat2, dirfd, *path ? path : ".", &how, sizeof how);
}

/* Only a regular file with one link; a directory when dir is set. */
static int check_kind(int fd, int dir, const char *path, char code[32], char msg[256])
{
    struct stat st;
    if (fstat(fd, &st))
        return fail_errno(code, msg, path, errno);
    if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
        return answer(code, msg, "denied", path, dir ? "not a directory" : "not a regular file");
    if (!dir && st.st_nlink != 1)
        return answer(code, msg, "denied", path, "a file with other links is refused");
    return 0;
}

json_t *vg_sandbox_file_read(int dirfd, const char *path, size_t max, char code[32], char msg[256])
{
    int fd = open_beneath(dirfd, path, O_RDONLY | O_NONBLOCK, 0);
    if (fd < 0)
        return fail_errno(code, msg, path, errno), NULL;
    struct stat st;
    json_t *out = NULL;
    if (check_kind(fd, 0, path, code, msg) == 0 && fstat(fd, &st) == 0) {
        if ((size_t)st.st_size > max) {
            answer(code, msg, "too_large", path, "larger than a read may return");
        } else {
            char *buf = vg_malloc((size_t)st.st_size + 1);
            ssize_t n = buf ? pread(fd, buf, (size_t)st.st_size, 0) : -1;
            if (n < 0)
                fail_errno(code, msg, path, buf ? errno : ENOMEM);
            else if (!(out = json_stringn(buf, (size_t)n)))
                answer(code, msg, "failed", path, "not UTF-8 text");
            vg_free(buf);
        }
    }
    close(fd);
    return out;
}

/* A write that would take the folder past its cap (room: what it may still grow). */
static int over_room(long long grow, const long long *room, const char *path, char code[32],
                     char msg[256])
{
    if (!room || grow <= 0 || grow <= *room)
        return 0;
    return answer(code, msg, "dir_limit", path,
                  "the working directory would pass its size limit (sandbox limits.dir_bytes): "
                  "remove files first");
}

int vg_sandbox_file_write(int dirfd, const char *path, const char *data, size_t len, int append,
                          size_t max, long long *room, char code[32], char msg[256])
{
    int flags = O_WRONLY | O_NONBLOCK | (append ? O_APPEND : 0), made = 0;
    int fd = open_beneath(dirfd, path, flags, 0);
    if (fd < 0 && errno == ENOENT) { /* a new file: checked against the cap before it exists */
        if (len > max)
            return answer(code, msg, "too_large", path, "the file would pass the size limit");
        if (over_room(vg_sandbox_dir_cost((long long)len), room, path, code, msg))
            return -1;
        fd = open_beneath(dirfd, path, flags | O_CREAT | O_EXCL, 0600);
        made = 1;
    }
    if (fd < 0)
        return fail_errno(code, msg, path, errno);
    struct stat st;
    int rc = check_kind(fd, 0, path, code, msg);
    if (!rc && fstat(fd, &st))
        rc = fail_errno(code, msg, path, errno);
    long long had = made || rc ? 0 : vg_sandbox_dir_cost((long long)st.st_size);
    size_t size = (append && !rc ? (size_t)st.st_size : 0) + len;
    long long grow = vg_sandbox_dir_cost((long long)size) - had;
    if (!rc && size > max)
        rc = answer(code, msg, "too_large", path, "the file would pass the size limit");
    if (!rc)
        rc = over_room(grow, room, path, code, msg);
    if (!rc && !append && ftruncate(fd, 0))
        rc = fail_errno(code, msg, path, errno);
    for (size_t off = 0; !rc && off < len;) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0)
            rc = fail_errno(code, msg, path, errno);
        else
            off += (size_t)n;
    }
    close(fd);
    if (!rc && room)
        *room -= grow;
    return rc;
}

json_t *vg_sandbox_file_list(int dirfd, const char *path, char code[32], char msg[256])
{
    int fd = open_beneath(dirfd, path, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return fail_errno(code, msg, path, errno), NULL;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return fail_errno(code, msg, path, errno), NULL;
    }
    json_t *names = json_array();
    struct dirent *e;
    while (names && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            json_array_append_new(names, json_string(e->d_name));
    closedir(d);
    if (!names)
        answer(code, msg, "failed", path, "out of memory");
    return names;
}

int vg_sandbox_file_remove(int dirfd, const char *path, long long *room, char code[32],
                           char msg[256])
{
    /* The parent is opened beneath the root; the last name is removed in it, never followed. */
    const char *slash = strrchr(path, '/');
    char parent[4096];
    const char *name = slash ? slash + 1 : path;
    snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - path) : 0, path);
    if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
        return answer(code, msg, "denied", path, "not a file name");
    int pfd = open_beneath(dirfd, parent, O_RDONLY | O_DIRECTORY, 0);
    if (pfd < 0)
        return fail_errno(code, msg, path, errno);
    struct stat st;
    long long freed = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) ? 0
                      : S_ISREG(st.st_mode) ? vg_sandbox_dir_cost((long long)st.st_size)
                                            : VG_SBX_DIR_BLOCK;
    int rc = unlinkat(pfd, name, 0) ? fail_errno(code, msg, path, errno) : 0;
    close(pfd);
    if (!rc && room)
        *room += freed;
    return rc;
}

/* ---- the folder's total ------------------------------------------------------------------- */

/* nftw's callback has no user pointer: each thread walks with its own tally. */
static _Thread_local struct {
    long long used, stop_above;
    int unreadable; /* a folder could not be read: its owner's rights were given back */
} tally;

static int count_entry(const char *path, const struct stat *st, int kind, struct FTW *at)
{
    /* A program that can chmod (Deno) could hide files in a folder its owner cannot read: the
     * host, that owner when it is not root, gives the owner's rights back and walks again. */
    if (kind == FTW_DNR && chmod(path, (st->st_mode & 07777) | S_IRWXU) == 0)
        tally.unreadable = 1;
    if (at->level == 0) /* the folder itself */
        return 0;
    tally.used += kind == FTW_F && S_ISREG(st->st_mode)
                      ? vg_sandbox_dir_cost((long long)st->st_size)
                      : VG_SBX_DIR_BLOCK;
    return tally.used > tally.stop_above; /* nonzero ends the walk: over is all that matters */
}

long long vg_sandbox_dir_usage(const char *dir, long long stop_above)
{
    for (int walk = 0; walk < 64; walk++) { /* each walk opens at least one more level */
        tally.used = 0;
        tally.stop_above = stop_above;
        tally.unreadable = 0;
        /* Links are counted, never followed; nothing on another file system is entered. */
        nftw(dir, count_entry, 16, FTW_PHYS | FTW_MOUNT);
        if (!tally.unreadable || tally.used > stop_above)
            break;
    }
    return tally.used;
}
