/*
 * agent_int.h: private to src/agent: helpers the spine's files share.
 */
#ifndef VG_AGENT_INT_H
#define VG_AGENT_INT_H

#include "agent/agent.h"

/* Append an agent_change record holding `snapshot` (borrowed) as target's revision rev. */
vigil_code vg_spine_record_change(struct vg_env *env, const char *agent_id, const char *target_kind,
                                  const char *target_id, int64_t rev, json_t *snapshot,
                                  vigil_error *err);

/*
 * Pointer links ("agent_state", "agent_head_message", "agent_report_head") are records of kind
 * link with id "<type>:<key>" whose target sits in the k2 column ("<type>:<to>") and whose
 * counter (messages in a thread, the agent's message number, reports in a scope) sits in seq.
 * Reading one therefore parses no JSON, which matters on every message append.
 */
struct vg_pointer {
    int exists;                /* 0: never set */
    char to[VG_RECORD_ID_MAX]; /* target id */
    int64_t seq;               /* counter kept with the pointer */
    int64_t rev;               /* record revision, for the checked update */
};

vigil_code vg_pointer_read(struct vg_env *env, const char *type, const char *key,
                           struct vg_pointer *out, vigil_error *err);
/* Move (or create) the pointer to `to` with counter seq. `seen` is what vg_pointer_read returned:
 * the update is revision-checked against it, so two writers cannot both move one pointer from
 * the same place (the loser gets ECONFLICT). */
vigil_code vg_pointer_write(struct vg_env *env, const char *agent_id, const char *type,
                            const char *key, const char *to, int64_t seq,
                            const struct vg_pointer *seen, vigil_error *err);
/* Read then write: for callers that do not keep what they read. */
vigil_code vg_pointer_set(struct vg_env *env, const char *agent_id, const char *type,
                          const char *key, const char *to, int64_t seq, vigil_error *err);

/* Append an immutable link record built without jansson; meta_json may be NULL. */
vigil_code vg_link_add_text(struct vg_env *env, const char *agent_id, const char *type,
                            const char *from, const char *to, const char *meta_json,
                            vigil_error *err);

/* Parse a list cursor "<seq>.<id>". */
vigil_code vg_cursor_parse(const char *cursor, int64_t *seq, char *id, size_t id_size,
                           vigil_error *err);

#endif
