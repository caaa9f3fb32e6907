/*
 * fs.h: the file-system and environment calls vigil makes outside its store adapters, in one
 * place, each failure naming the path and the system call.
 */
#ifndef VG_FS_H
#define VG_FS_H

#include <stddef.h>

/* getenv, through one place so tests can see every variable vigil reads. */
const char *vg_os_getenv(const char *name);

/* Create a directory and its parents (mode 0700 for new ones, whatever the umask). */
vigil_code vg_fs_mkdir_p(const char *path, vigil_error *err);
/* 1 if path exists (any type), 0 if not. */
int vg_fs_exists(const char *path);
/* Read a whole file, at most max bytes (ETOOBIG past that). *out is owned (vg_free), NUL-ended. */
vigil_code vg_fs_read_file(const char *path, size_t max, char **out, size_t *out_len,
                           vigil_error *err);
/* Write a file atomically and durably: temp file, fsync, rename, fsync of the directory. The
 * file is mode 0600 whatever the umask. */
vigil_code vg_fs_write_file(const char *path, const void *data, size_t len, vigil_error *err);
/* The directory part of path into out (size n); "." when there is none. */
void vg_fs_dirname(const char *path, char *out, size_t n);

#endif
