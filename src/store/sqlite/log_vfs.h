/*
 * log_vfs.h: the SQLite VFS every vigil store opens through. It passes everything to the VFS
 * below (the platform's), except that a write-ahead log's frames are gathered in memory and
 * written with one system call per commit instead of two per page; see log_vfs.c.
 */
#ifndef VG_STORE_SQLITE_LOG_VFS_H
#define VG_STORE_SQLITE_LOG_VFS_H

#include <sqlite3.h>
#include <stdatomic.h>

/* Register the "vigil" VFS over the current default, which stays the default: stores open
 * through "vigil" by name, and a program that embeds libvigil and shares its SQLite keeps its
 * own databases as they were. Call once, after SQLite is configured (vg_store_sqlite_setup
 * does). Returns an SQLite result code. */
int vg_sqlite_log_vfs_register(void);

/* The VFS below: the one the log VFS passes to. Files opened after vg_sqlite_log_vfs_set_base
 * pass to the new one (tests put their fault-injecting VFS there, so that what fails is the
 * write that reaches the operating system); call it while no other thread opens files.
 * Refused (SQLITE_ERROR) for a VFS whose files are bigger than the room the log VFS keeps for
 * them. */
sqlite3_vfs *vg_sqlite_log_vfs_base(void);
int vg_sqlite_log_vfs_set_base(sqlite3_vfs *base);

/* A file control of the database file (sqlite3_file_control(db, "main", op, &int)): nonzero
 * makes each commit of that connection durable by syncing the log as the commit is written,
 * which is what synchronous=FULL does, but switched without preparing a statement; 0 leaves
 * commits to synchronous=NORMAL (durable with the next sync). Use it with synchronous=NORMAL and
 * the log in WAL mode. SQLITE_NOTFOUND when the file is not opened through the log VFS. */
#define VG_LOG_FCNTL_COMMIT_SYNC 0x76670001

/* A file control of the database file (arg: void **): the address of the first page of the
 * log's shared index as SQLite maps it in this process (the wal-index format SQLite documents),
 * valid while the connection is open; NULL until a read has mapped it. Only ever read: the read
 * anchor (anchor.h) follows the index's change counter there. SQLITE_NOTFOUND when the file is
 * not opened through the log VFS. */
#define VG_LOG_FCNTL_INDEX 0x76670002

/* What the VFS does, counted into a struct a program hands it (vg_sqlite_log_vfs_count_into;
 * NULL stops the counting): log writes SQLite asked for and writes made (their difference is
 * the system calls saved), writes and bytes of zeros appended to grow logs ahead of their
 * frames, and logs kept, emptied in place, at their last connection's close (see log_vfs.c).
 * Nothing is counted unless asked: the product asks for none; the tests check the savings. */
struct vg_log_vfs_counts {
    atomic_long writes_asked, writes_made, grown_writes, grown_bytes, logs_kept;
};
void vg_sqlite_log_vfs_count_into(struct vg_log_vfs_counts *c);

#endif
