/*
 * jscan.h: reading a few values out of a JSON text without building a tree, for the one
 * document read on every agent step (the model's answer), where jansson's decoder allocates
 * for every value and key (its cost a byte: docs/internals/PERF.md).
 *
 * It accepts only text that jansson's decoder (json_loadb with no flags) accepts, and reads
 * the same values from it. Where matching jansson exactly would take more than it is worth (a
 * number with a fraction or an exponent, an integer of more than 18 digits, a \u0000, an
 * escape inside a key the caller looks at, nesting past VG_JSCAN_DEPTH), it declines instead:
 * the caller then reads the text with jansson, which also gives the errors. Malformed text
 * declines too. So a reader built on it is a fast path in front of a jansson one, and a
 * differential fuzz target (fuzz/fuzz_openai_stream.c) holds the two to the same answers.
 *
 * Every function returns -1 once the text declined; the state is then sticky.
 */
#ifndef VG_JSCAN_H
#define VG_JSCAN_H

#include "base/buf.h"

#include <stdint.h>

#define VG_JSCAN_DEPTH 32

struct vg_jscan {
    const unsigned char *p, *end;
    int failed;
    int depth;                           /* containers entered and not left */
    unsigned char open[VG_JSCAN_DEPTH];  /* '{' or '[' for each */
    unsigned char first[VG_JSCAN_DEPTH]; /* no member read yet */
};

void vg_jscan_init(struct vg_jscan *s, const char *text, size_t len);
/* The kind of the next value: '{', '[', '"', 'n' (null), 't', 'f', '0' (a number); -1. */
int vg_jscan_peek(struct vg_jscan *s);
/* Enter the next value, which must be an object or an array (`open`, '{' or '['). */
int vg_jscan_enter(struct vg_jscan *s, int open);
/* Move to the next member of the innermost container: 1 when there is one (in an object, its
 * key, as it is in the text, is *key, *len: a key holding an escape declines), 0 when the
 * container ended (it is left), -1. */
int vg_jscan_next(struct vg_jscan *s, const char **key, size_t *len);
/* A string value, decoded and NUL-terminated, appended to b; *at is where it starts in b->data
 * (which may move as b grows). A null value gives *at = (size_t)-1. Anything else declines. */
int vg_jscan_string(struct vg_jscan *s, struct vg_buf *b, size_t *at);
/* An integer value (a null one or any other kind declines). */
int vg_jscan_int(struct vg_jscan *s, int64_t *v);
/* Step over the next value, whatever it is, checking it. */
int vg_jscan_skip(struct vg_jscan *s);
/* The same, also over numbers with a fraction or an exponent, for a reader that takes only the
 * value's text (its span, copied byte for byte) and reads no number in it: there is no value
 * to match jansson's on, so nothing to decline for (a real too large for a double, which
 * jansson refuses, is stepped over). The journal's kept records hold tool arguments, whatever
 * numbers they have (trial J1 of session 36: a confidence of 0.8 made a run unreadable). */
int vg_jscan_skip_span(struct vg_jscan *s);
/* Nothing but white space after the top value. */
int vg_jscan_end(struct vg_jscan *s);
/* Whether the key (from vg_jscan_next) is this one. */
int vg_jscan_key_is(const char *key, size_t len, const char *want);

#endif
