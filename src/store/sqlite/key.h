/*
 * key.h: the key columns of the SQLite records table (id, owner, k1, k2) from schema 11 on.
 *
 * Most keys are UUIDs written as 36 characters of text, or begin with one (a thread's key is
 * its agent's id and a suffix): each row holds three or four of them and each index entry
 * repeats them. A value that begins with a UUID in its canonical form (lowercase, 8-4-4-4-12)
 * is stored as a BLOB of the UUID's 16 bytes followed by the rest of the text; any other value
 * as TEXT. The encoding is a function of the value, so equality and the order among values of
 * one form hold (16 bytes compare as the 32 hex digits did, the rest as text); TEXT sorts
 * before BLOB in SQLite, so values of the two forms are ordered apart, which only the order of
 * rows with the same sequence number (their ids) can show.
 */
#ifndef VG_SQLITE_KEY_H
#define VG_SQLITE_KEY_H

#include <stddef.h>

#define VG_SQLITE_UUID_TEXT 36
#define VG_SQLITE_UUID_BYTES 16
/* A value longer than this stays text, so the decoded text always fits VG_SQLITE_KEY_MAX. */
#define VG_SQLITE_KEY_MAX 256

/* The stored form of text (NUL-terminated) into out (VG_SQLITE_KEY_MAX bytes): its length,
 * or 0 when the value is stored as text as it is. */
size_t vg_sqlite_key_pack(const char *text, unsigned char *out);

/* The text of a stored BLOB of n bytes into out (VG_SQLITE_KEY_MAX bytes, NUL-terminated);
 * 0 when it is not a key's stored form. */
int vg_sqlite_key_unpack(const unsigned char *blob, size_t n, char *out);

#endif
