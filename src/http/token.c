/*
 * token.c: the API token. 32 bytes from libsodium's randombytes, as 64 hex characters, in
 * <data folder>/api-token with mode 0600, created with O_EXCL so two daemons starting at once
 * cannot each write their own. A file others may read is refused rather than silently used.
 */
#include "base/common.h"

#include "http/http.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

static vigil_code token_read(const char *path, char out[65], vigil_error *err)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT
                   ? VG_FAIL(err, VIGIL_ENOTFOUND, "no API token file \"%s\"", path)
                   : VG_FAIL(err, VIGIL_EIO, "could not open \"%s\": %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || (st.st_mode & 077)) {
        close(fd);
        return VG_FAIL(err, VIGIL_EDENIED,
                       "API token file \"%s\" is readable by others: chmod 600 it, or delete "
                       "it to get a new token",
                       path);
    }
    ssize_t n = read(fd, out, 64);
    close(fd);
    if (n != 64)
        return VG_FAIL(err, VIGIL_EIO,
                       "API token file \"%s\" is damaged: delete it to get a new "
                       "token",
                       path);
    out[64] = '\0';
    for (int i = 0; i < 64; i++)
        if (!((out[i] >= '0' && out[i] <= '9') || (out[i] >= 'a' && out[i] <= 'f')))
            return VG_FAIL(err, VIGIL_EIO,
                           "API token file \"%s\" is damaged: delete it to get "
                           "a new token",
                           path);
    return VIGIL_OK;
}

static vigil_code token_create(const char *path, char out[65], vigil_error *err)
{
    unsigned char raw[32];
    if (sodium_init() < 0)
        return VG_FAIL(err, VIGIL_ERROR, "libsodium could not start");
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(out, 65, raw, sizeof raw);
    sodium_memzero(raw, sizeof raw);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno == EEXIST)
        return token_read(path, out, err); /* another process made it first */
    if (fd < 0)
        return VG_FAIL(err, VIGIL_EIO, "could not create \"%s\": %s", path, strerror(errno));
    int ok = write(fd, out, 64) == 64 && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    close(fd);
    if (!ok) {
        unlink(path);
        return VG_FAIL(err, VIGIL_EIO, "could not write \"%s\"", path);
    }
    return VIGIL_OK;
}

vigil_code vg_http_token(const char *folder, int create, char out[65], vigil_error *err)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", folder, VG_HTTP_TOKEN_FILE) >= (int)sizeof path)
        return VG_FAIL(err, VIGIL_EINVAL, "data folder path is too long");
    vigil_code rc = token_read(path, out, NULL);
    if (rc == VIGIL_ENOTFOUND && create)
        return token_create(path, out, err);
    return rc ? token_read(path, out, err) : VIGIL_OK;
}
