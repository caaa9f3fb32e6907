/*
 * manifest_int.h: private to src/manifest: an agent's state in a manifest's words (state.c),
 * shared by apply (what differs) and export (what it prints).
 */
#ifndef VG_MANIFEST_INT_H
#define VG_MANIFEST_INT_H

#include "manifest/manifest.h"

/* The agent's subscriptions as a manifest writes them, each with its "id" too (owned array). */
vigil_code vg_manifest_subs_of(struct vg_env *env, const char *agent_id, json_t **out,
                               vigil_error *err);
/* A manifest's subscription in the form vg_manifest_subs_of gives (owned): empty lists out. */
json_t *vg_manifest_sub_normal(const json_t *s);
/* The agent's timers as a manifest writes them: {"cron"|"rrule"|"at": spec, "tz"} (owned). */
vigil_code vg_manifest_timers_of(struct vg_env *env, const char *agent_id, json_t **out,
                                 vigil_error *err);
/* The blocks the seeds name, as they are now (label, content, tier, permission, pinned when
 * set); a label the agent has no block of is left out (owned array). */
vigil_code vg_manifest_blocks_of(struct vg_env *env, const char *agent_id, const json_t *seeds,
                                 json_t **out, vigil_error *err);

#endif
