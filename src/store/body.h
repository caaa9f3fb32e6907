/*
 * body.h: the stored form of the bodies of the records an agent step writes most (messages,
 * journal records, tool calls), without the values their own row already holds.
 *
 * A message body says its agent, id, thread, kind and sequence, which are the row's owner, id,
 * k1, k2 and seq columns; a journal record its owner, record id, run and sequence the same way;
 * a tool call's row its id, run and status. Stored twice, those ids were about a quarter of a
 * step's store (docs/internals/STORE.md, "Column values out of bodies"). The store keeps each
 * such value once, in its column: a top-level member whose value is exactly what the column
 * (or the row's `at`, or a constant of the kind) would write is left out of the stored text,
 * and a first member `"":N` says which (bit i: field i of the kind's table). Reading puts them
 * back where canonical key order has them, so every reader gets the bytes that were written.
 * The same marker names the members stored as the holes of a shape their kind's records share
 * (a run's telemetry totals, a model call, a tool call's start and end, a tool result's envelope
 * naming the action its prev_id names): `"telemetry":[0,0,1820,13,145,12,1965]` for the object
 * with those seven keys, read back as that object. A shape's id holes keep the UUIDs and SHA-256s
 * the step's messages name (a message's prev_id and run_id, a tool call's operation id) as the
 * base64url text of their bytes, 22 and 43 characters for 36 and 64: `"prev_id":"AZCqqg..."`.
 *
 * Lossless for any text: a body that is not a flat sequence of members with ascending keys
 * and no white space between them is stored as it is, and one that already begins with the
 * marker's key is stored behind `"":0,` (read back by taking that prefix off). Bodies written
 * before this form (no marker) are read as they are: old stores need no migration.
 */
#ifndef VG_STORE_BODY_H
#define VG_STORE_BODY_H

#include "base/buf.h"
#include "store/port.h"

/* The stored form of r's body into out: 1 when it differs from r->body (out holds it), 0 when
 * the body is stored as it is (out untouched). Out of memory leaves out failed (sticky). */
int vg_body_pack(const struct vg_record *r, struct vg_buf *out);

/* The body as written, from r's stored body and columns, into out: 1 when it differs from
 * r->body (out holds it), 0 when r->body is the body as written. */
int vg_body_unpack(const struct vg_record *r, struct vg_buf *out);

/* vg_body_pack and vg_body_unpack of a body that has no prev_id of its own (a journal record
 * kept in a message, src/journal/ends.c): prev (plain text, optional) is the prev_id its shapes'
 * PREV holes stand for, the message's. Pack returns 2 when the stored form has such a hole (it
 * reads back only with that prev), else as vg_body_pack; unpack must then be given the prev
 * that pack was. */
int vg_body_pack_prev(const struct vg_record *r, const char *prev, struct vg_buf *out);
int vg_body_unpack_prev(const struct vg_record *r, const char *prev, struct vg_buf *out);

/* For the rows of a step's messages (store/rows.c). The end of the JSON value at p (before end),
 * or NULL. */
const char *vg_body_value_end(const char *p, const char *end);
/* r's body (a flat object, keys ascending) as stored with prev standing for its PREV holes
 * (vg_body_pack_prev), less its top-level members "keys[j]":"vals[j]" (j < n_keys, at most 8;
 * vals[j] plain text, no escapes; NULL or "" drops nothing), into out, its members parsed once:
 * bit j set for each member dropped, or -1 when the body is not a flat object whose members
 * parse (nothing written). */
int vg_body_pack_less(const struct vg_record *r, const char *prev, const char *const *keys,
                      const char *const *vals, int n_keys, struct vg_buf *out);
/* body with "key":"val" put back at its place in key order into out: 1, or 0 when body is not a
 * flat object (out untouched). */
int vg_body_add_string(const char *body, const char *key, const char *val, struct vg_buf *out);
/* The text of body's top-level string member key (no escapes) into out (cap bytes): its length,
 * 0 when there is none that fits. */
size_t vg_body_string_of(const char *body, const char *key, char *out, size_t cap);
/* The text a shape's UUID hole stores for uuid (its bytes' base64url) into out: 1, or 0 when uuid
 * is not a canonical UUID. */
int vg_body_uuid_stored(const char *uuid, struct vg_buf *out);
/* The UUID whose hole's stored text (its bytes' base64url) is stored, into out: 1, or 0 when
 * stored is not one. */
int vg_body_uuid_text(const char *stored, char out[37]);
/* Whether a message body's stored text keeps its run_id as its UUID's hole (else as written). */
int vg_body_message_run_hole(const char *stored);

#endif
