/*
 * fs.c: file helpers. Every failure names the path and the system call.
 */
#include "base/common.h"

#include "os/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static vigil_code errno_code(int e)
{
    switch (e) {
    case ENOENT:
        return VIGIL_ENOTFOUND;
    case ENOSPC:
    case EDQUOT:
        return VIGIL_EFULL;
    case EACCES:
    case EPERM:
    case EROFS:
        return VIGIL_EDENIED;
    case ENOMEM:
        return VIGIL_ENOMEM;
    default:
        return VIGIL_EIO;
    }
}

static vigil_code fail_errno_as(vigil_error *err, vigil_code code, const char *what,
                                const char *path)
{
    int e = errno;
    vigil_code rc = VG_FAIL(err, code ? code : errno_code(e), "could not %s \"%s\": %s", what, path,
                            strerror(e));
    if (err)
        err->subcode = e;
    return rc;
}

static vigil_code fail_errno(vigil_error *err, const char *what, const char *path)
{
    return fail_errno_as(err, VIGIL_OK, what, path);
}

const char *vg_os_getenv(const char *name)
{
    return getenv(name);
}

int vg_fs_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

void vg_fs_dirname(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, n, ".");
        return;
    }
    if (slash == path) {
        snprintf(out, n, "/");
        return;
    }
    snprintf(out, n, "%.*s", (int)(slash - path), path);
}

vigil_code vg_fs_mkdir_p(const char *path, vigil_error *err)
{
    char tmp[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof tmp)
        return VG_FAIL(err, VIGIL_EINVAL, "directory path is empty or too long");
    memcpy(tmp, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0')
            continue;
        char saved = tmp[i];
        tmp[i] = '\0';
        int made = mkdir(tmp, 0700) == 0;
        if (!made && errno != EEXIST) {
            /* A missing parent here means a place where directories cannot be made. */
            return fail_errno_as(err, errno == ENOENT ? VIGIL_EIO : VIGIL_OK, "create directory",
                                 tmp);
        }
        /* A folder vigil makes holds a person's conversations and memory: 0700 whatever the
         * umask (mkdir applies it). One that was there already keeps the mode it has. */
        if (made && chmod(tmp, 0700) != 0)
            return fail_errno(err, "set the mode of directory", tmp);
        tmp[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return VG_FAIL(err, VIGIL_EIO, "\"%s\" exists but is not a directory", path);
    return VIGIL_OK;
}

vigil_code vg_fs_read_file(const char *path, size_t max, char **out, size_t *out_len,
                           vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    char *data = NULL;
    int fd = -1;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return fail_errno(err, "open", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = fail_errno(err, "stat", path);
        goto out;
    }
    if ((size_t)st.st_size > max) {
        rc = VG_FAIL(err, VIGIL_ETOOBIG, "file \"%s\" is larger than %zu bytes", path, max);
        goto out;
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    data = vg_malloc(cap);
    if (!data) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading \"%s\"", path);
        goto out;
    }
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > max) {
                rc = VG_FAIL(err, VIGIL_ETOOBIG, "file \"%s\" is larger than %zu bytes", path, max);
                goto out;
            }
            char *p = vg_realloc(data, cap * 2);
            if (!p) {
                rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading \"%s\"", path);
                goto out;
            }
            data = p;
            cap *= 2;
        }
        ssize_t n = read(fd, data + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = fail_errno(err, "read", path);
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    data[len] = '\0';
    *out = data;
    if (out_len)
        *out_len = len;
    data = NULL;
out:
    vg_free(data);
    if (fd >= 0)
        close(fd);
    return rc;
}

vigil_code vg_fs_write_file(const char *path, const void *data, size_t len, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    char tmp[4096], dir[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return VG_FAIL(err, VIGIL_EINVAL, "path \"%s\" is too long", path);
    int fd = -1;
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
        return fail_errno(err, "create", tmp);
    /* 0600 whatever the umask, before a byte is written: an export holds a conversation. */
    if (fchmod(fd, 0600) != 0) {
        rc = fail_errno(err, "set the mode of", tmp);
        goto fail;
    }
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = fail_errno(err, "write", tmp);
            goto fail;
        }
        p += n;
        left -= (size_t)n;
    }
    if (fsync(fd) != 0) {
        rc = fail_errno(err, "sync", tmp);
        goto fail;
    }
    close(fd);
    fd = -1;
    if (rename(tmp, path) != 0) {
        rc = fail_errno(err, "rename into place", path);
        goto fail;
    }
    vg_fs_dirname(path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return VIGIL_OK;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return rc;
}
