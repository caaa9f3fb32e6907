/*
 * schema_int.h: private to src/tool/schema*.c. The ECMA-262 to POSIX ERE pattern translation
 * used by `pattern` and `patternProperties`, exposed here so tests can check translations.
 */
#ifndef VG_TOOL_SCHEMA_INT_H
#define VG_TOOL_SCHEMA_INT_H

#include <regex.h>

struct vg_buf;

struct vg_schema_regex {
    regex_t re;
};

/* Limits of a translated pattern: repetition bound, group nesting, expansion weight. */
#define VG_REGEX_MAX_REPEAT 1000
#define VG_REGEX_MAX_GROUPS 64
#define VG_REGEX_MAX_WEIGHT 20000

/*
 * Translate an ECMA-262 pattern (len bytes of UTF-8) into POSIX ERE text appended to out.
 * utf8_bytes: the ERE will run in a single-byte locale, so `.` and negated classes are spelled
 * as UTF-8 byte sequences to consume whole code points. Returns VIGIL_OK, EUNSUPPORTED (a
 * construct that has no translation) or EINVAL (malformed), with the reason in why.
 */
vigil_code vg_schema_regex_translate(const char *src, size_t len, int utf8_bytes,
                                     struct vg_buf *out, char *why, size_t why_len);

/* Translate and regcomp. On success *out is owned (vg_schema_regex_free). */
vigil_code vg_schema_regex_compile(const char *src, size_t len, struct vg_schema_regex **out,
                                   char *why, size_t why_len);
/* Unanchored search, like ECMA-262 RegExp.test. Thread-safe. */
int vg_schema_regex_search(const struct vg_schema_regex *rx, const char *s, size_t len);
void vg_schema_regex_free(struct vg_schema_regex *rx);

#endif
