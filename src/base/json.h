/*
 * json.h: writing JSON text straight into a vg_buf, for the hot paths (message appends) where
 * building a jansson tree only to serialize it would cost more than the store write itself.
 * Everything else uses jansson.
 */
#ifndef VG_JSON_H
#define VG_JSON_H

#include "base/buf.h"

#include <stdint.h>
#include <stdio.h>

/* 1 when s (NUL-terminated) is valid UTF-8, as jansson requires of every string it makes. */
int vg_utf8_valid(const char *s);
/* How many of s's len bytes to keep to keep at most max: len when it fits, else max less the
 * first bytes of a character the cut would split, so a valid text stays valid (jansson refuses
 * a string that ends inside a character). */
size_t vg_utf8_cut(const char *s, size_t len, size_t max);
/* Append s as a JSON string literal (quotes included). Invalid UTF-8 becomes U+FFFD, so the
 * output always parses. NULL appends null. */
void vg_json_put_string(struct vg_buf *b, const char *s);
/* Append "key": (with a leading comma unless first). */
void vg_json_put_key(struct vg_buf *b, const char *key, int first);
void vg_json_put_int(struct vg_buf *b, int64_t v);

/*
 * Reals. Every writer here writes a real as the fewest significant digits that read back as the
 * same double (0.8, 21.5, 5e-324), in jansson's form otherwise (".0" after what would read as
 * an integer, an exponent without "+" or leading zeros). jansson itself, and vigil before
 * session 37, wrote %.17g (0.80000000000000004): texts stored then read as the same doubles, and
 * vg_json_hash_text still writes that form, for the hashes that must not change.
 */
/* Append v as canonical JSON: compact, object keys sorted by their bytes, byte for byte what
 * jansson's json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) writes where v holds
 * no real, and the same value where it does (a differential fuzz target holds the two
 * together), without its per-object key copies and callback chunks. -1 when v cannot be
 * written (a string that is not UTF-8). */
struct json_t;
int vg_json_put_canonical(struct vg_buf *b, const struct json_t *v);
/* Whether text (len bytes) is already what vg_json_put_canonical writes for what jansson reads
 * from it (json_loadb with JSON_DECODE_ANY | JSON_REJECT_DUPLICATES): then it can be stored as
 * it is, without a tree. 0 says only "not known to be": text with white space, unsorted or
 * repeated keys, an escape in a key or one jansson would write otherwise, a number with a
 * fraction or an exponent or of more than 18 digits, nesting past 32, or not JSON at all; the
 * caller then parses and writes it (fuzz/fuzz_canonical_json.c holds the two to agree). */
int vg_json_is_canonical(const char *text, size_t len);
/* The same for an object, with the values of some of its top-level keys written as raw,
 * canonical JSON text of the caller's where raw is set, and where each value's text went in b
 * noted (start, end; both 0 when the object has no such key): for the run projection, whose
 * newest activity is kept as the text it was written as, and whose text is reused between the
 * two values every step changes. */
struct vg_json_splice {
    const char *key;
    const char *raw;
    size_t start, end;
};
int vg_json_put_canonical_splice(struct vg_buf *b, const struct json_t *v,
                                 struct vg_json_splice *sp, size_t n);
/* A string as jansson writes it (its escapes); -1, having written part of it, when s is not
 * valid UTF-8, where jansson would have refused to make the string at all. */
int vg_json_put_text(struct vg_buf *b, const char *s);
/* A real: the fewest digits that read back as v. */
void vg_json_put_real(struct vg_buf *b, double v);
/* The same without sorting: keys in the order they were set, what json_dumps(v, JSON_COMPACT |
 * JSON_ENCODE_ANY) writes, reals aside (the same fuzz target holds this too). */
int vg_json_put_compact(struct vg_buf *b, const struct json_t *v);
/*
 * An object from a list of fields, written as the canonical writer writes it (keys sorted by
 * their bytes) without building a jansson tree: for objects the hot path makes at every step.
 * A NULL string is written null; a VG_JF_RAW value is JSON text used as it is (the caller's:
 * canonical itself). Keys are the caller's names, plain printable ASCII without quote or
 * backslash: written as they are (debug builds refuse any other). -1 when a string is not UTF-8
 * (or the list has more than 32 fields), having written part of it.
 */
enum vg_jfield_type { VG_JF_STR, VG_JF_BOOL, VG_JF_INT, VG_JF_RAW };
struct vg_jfield {
    const char *key;
    enum vg_jfield_type type;
    const char *s; /* VG_JF_STR, VG_JF_RAW */
    int64_t i;     /* VG_JF_BOOL (0 or not), VG_JF_INT */
};
int vg_json_put_fields(struct vg_buf *b, const struct vg_jfield *f, size_t n);
/* A drop-in for json_dumps(v, JSON_COMPACT [| JSON_SORT_KEYS] | JSON_ENCODE_ANY): canonical
 * when sorted, else compact; the text is the caller's (vg_free); NULL when out of memory or
 * v holds a string that is not UTF-8. Several times faster than json_dumps on the hot path. */
char *vg_json_dump(const struct json_t *v, int sorted);
/* A drop-in for json_dumps(v, flags) for text a user reads (answers, events, printed JSON):
 * JSON_COMPACT, JSON_SORT_KEYS, JSON_INDENT(n) and JSON_ENCODE_ANY as jansson lays them out,
 * reals as above. The text is the caller's (vg_free); NULL as json_dumps (out of memory, a
 * string not UTF-8, a scalar without JSON_ENCODE_ANY). */
char *vg_json_dumps(const struct json_t *v, size_t flags);
/* The same written to out, as json_dumpf: 0, or -1 when it could not be. */
int vg_json_dumpf(const struct json_t *v, FILE *out, size_t flags);
/* The canonical text vigil hashes for v (operation ids, argument hashes): reals in jansson's
 * %.17g, as they were hashed before session 37, so a call started before an upgrade and retried
 * after has the same id. The caller's (vg_free); NULL as vg_json_dump. */
char *vg_json_hash_text(const struct json_t *v);
/* 1 when v holds a real anywhere (then vg_json_dump and vg_json_hash_text may differ). */
int vg_json_has_real(const struct json_t *v);
/* Sort a JSON array in place by cmp, which qsort calls with pointers to its json_t *s. 0, or -1
 * (the array as it was) when out of memory. */
int vg_json_array_sort(struct json_t *items, int (*cmp)(const void *, const void *));

#endif
