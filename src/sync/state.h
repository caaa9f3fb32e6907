/*
 * state.h: an agent's shared state as devices sync it, and its merge (DESIGN 3.11; seed 000,
 * "AgentState merge semantics"). docs/internals/SYNC.md has the design this is the first part of.
 *
 * Two devices may change the same agent at once and exchange their states in any order, any
 * number of times; both must end with the same state, decided without wall-clock time. So each
 * shared field is a multi-value register: the writes to it that no other write it knows of has
 * superseded, each with its dot (the host that wrote it and that host's counter in the state's
 * vector clock). A local write supersedes every write the device has seen; two writes on
 * different devices that did not see each other are both kept, and the field's value is chosen
 * from them by the field's rule:
 *   lifecycle                   destroyed > dormant > active > created
 *   next_wake_at                the earliest wake (a null one yields to a time)
 *   sleep_until                 the latest barrier (likewise)
 *   recent_head_message_id,
 *   latest_summary_message_id   the pointer to the latest record: the highest rank (the vector
 *                               clock's sum when the record was made: a descendant always ranks
 *                               above its ancestors), then host id, then record id
 *   slot:NAME                   the highest rank (the state clock's sum at the write), then host
 * processed_counter_by_host merges by per-host maximum, and the clock by per-host maximum. A
 * state whose clock dominates another's therefore wins whole, as the seed's first rule says:
 * every write of the other is one it has seen.
 *
 * The form (JSON, the sync payload's body for an agent's state):
 *   {"clock": {"HOST": N, ...},
 *    "fields": {"FIELD": [{"v": VALUE, "dot": ["HOST", N], "rank": R}, ...], ...},
 *    "processed_counter_by_host": {"HOST": N, ...}}
 * Host ids are 1 to 64 printable ASCII bytes; counters and ranks are 1 to 2^53; a field's writes
 * are kept sorted by dot, so two equal states dump to the same text.
 */
#ifndef VG_SYNC_STATE_H
#define VG_SYNC_STATE_H

#include "base/common.h"

#include <stdint.h>

struct json_t;

/* A new, empty state (nothing written, an empty clock); NULL when out of memory. */
struct json_t *vg_sync_state_new(void);

/* Whether v is a well-formed state (outside input: another device's payload). EINVAL names the
 * first problem; a state that passes can be merged and read without further checks. */
vigil_code vg_sync_state_check(const struct json_t *v, vigil_error *err);

/* A write on this device (host): field takes value (the caller's reference is kept), superseding
 * every write of it the state holds; the host's counter moves one on. rank orders concurrent
 * pointer writes (the referenced record's rank); 0 takes the clock's sum after the move, which
 * is what every other field uses. EINVAL for an unknown field or a value of the wrong type. */
vigil_code vg_sync_state_set(struct json_t *state, const char *host, const char *field,
                             struct json_t *value, int64_t rank, vigil_error *err);

/* Raises host's processed counter to n (a counter never goes back). */
vigil_code vg_sync_state_count(struct json_t *state, const char *host, int64_t n, vigil_error *err);

/* Merges other (checked) into state: afterwards state holds every write either held that the
 * other had not superseded. Commutative, associative and idempotent. ECONFLICT when both hold a
 * write of one dot with different contents (two devices with one host id, or a store restored
 * from a backup and written again), ETOOBIG past 64 concurrent writes of a field; on any error
 * state is left as it was. */
vigil_code vg_sync_state_merge(struct json_t *state, const struct json_t *other, vigil_error *err);

/* The field's value under its rule (borrowed from state), or NULL when it was never written. */
const struct json_t *vg_sync_state_value(const struct json_t *state, const char *field);

/* The clock's sum: how many writes the state has seen, on every device together. */
int64_t vg_sync_clock_sum(const struct json_t *clock);

/* How two vector clocks relate. */
enum vg_clock_order { VG_CLOCK_EQUAL, VG_CLOCK_BEFORE, VG_CLOCK_AFTER, VG_CLOCK_CONCURRENT };
enum vg_clock_order vg_sync_clock_compare(const struct json_t *a, const struct json_t *b);

#endif
