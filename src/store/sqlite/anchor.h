/*
 * anchor.h: one read lock a process keeps on a SQLite store it reads from many threads.
 *
 * Each read transaction takes a shared lock on a read mark of the log's shared index. SQLite
 * counts the process's holders of each mark and calls fcntl when that count goes 0 -> 1 or
 * back, inside the index's mutex, one per file and process (unixShmLock's pShmMutex). Two
 * threads of the daemon's pool answering reads in turn moved that count at most requests, and
 * each waited for the other's fcntl on that mutex (a futex wait and a context switch a request:
 * docs/internals/PERF.md, "HTTP API"). The anchor is a connection of its own holding a read
 * transaction on the newest snapshot, so the count never returns to 0 and the readers' locks
 * are counted in memory only. It reads nothing for anyone: every read still opens its own
 * transaction and sees every commit that finished before it began, this process's or another's.
 *
 * A reader holding an old snapshot would stop a checkpoint from copying the frames after it and
 * the log from starting over, so the anchor follows the store: before a read of a store that
 * joined it, the shared index's change counter and checkpoint position are compared with those
 * it was taken at, and a different one moves it to the newest snapshot (if no other thread is
 * moving it: readers never wait for the anchor). A full checkpoint, which must wait for every
 * reader to leave the log, sets it aside while it runs (vg_sqlite_anchor_pause).
 */
#ifndef VG_STORE_SQLITE_ANCHOR_H
#define VG_STORE_SQLITE_ANCHOR_H

struct vg_sqlite_anchor;

/* The anchor of the store file at path (uri: how to open it), shared by the process's stores
 * that join it, or NULL when it cannot be made (the store then reads as before). vfs: the VFS
 * name the store opened with. */
struct vg_sqlite_anchor *vg_sqlite_anchor_get(const char *path, const char *uri, const char *vfs);
void vg_sqlite_anchor_put(struct vg_sqlite_anchor *a);

/* Before a read: move the anchor to the newest snapshot if the store changed since it was
 * taken. Never waits: another thread moving it, or a pause, leaves it as it is. */
void vg_sqlite_anchor_follow(struct vg_sqlite_anchor *a);

/* Around a checkpoint that waits for readers (TRUNCATE): the file's anchor, if the process has
 * one, ends its read transaction and takes no other until resumed. */
struct vg_sqlite_anchor *vg_sqlite_anchor_pause(const char *path);
void vg_sqlite_anchor_resume(struct vg_sqlite_anchor *a);

#endif
