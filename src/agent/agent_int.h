/*
 * agent_int.h: private to src/agent: helpers the spine's files share.
 */
#ifndef VG_AGENT_INT_H
#define VG_AGENT_INT_H

#include "agent/agent.h"

/* Append an agent_change record holding `snapshot` (borrowed) as target's revision rev. */
vigil_code vg_spine_record_change(struct vg_env *env, const char *agent_id,
                                  const char *target_kind, const char *target_id, int64_t rev,
                                  json_t *snapshot, vigil_error *err);

/*
 * Point the pointer link (type, key) at `to`, creating it on first use. extra (borrowed,
 * optional) fields are merged into the link body (counters kept with the pointer). The update
 * is a revision-checked write, so two writers cannot both move one pointer from the same place.
 */
vigil_code vg_pointer_set(struct vg_env *env, const char *agent_id, const char *type,
                          const char *key, const char *to, json_t *extra, vigil_error *err);
/* The pointer's body (owned) or ENOTFOUND. */
vigil_code vg_pointer_get_json(struct vg_env *env, const char *type, const char *key,
                               json_t **out, vigil_error *err);

/* Parse a list cursor "<seq>.<id>". */
vigil_code vg_cursor_parse(const char *cursor, int64_t *seq, char *id, size_t id_size,
                           vigil_error *err);

#endif
