/*
 * wake_int.h: private to src/wake: helpers the wake files share.
 */
#ifndef VG_WAKE_INT_H
#define VG_WAKE_INT_H

#include "wake/wake.h"

/* 1 if the batch holds token (binary search over the sorted tokens). */
int vg_wake_batch_has(const struct vg_wake_batch *b, const char *token);
struct vg_suppress *vg_suppress_new(void);
void vg_suppress_free(struct vg_suppress *s);
/* 1 if every entity id of the batch is among the agent's recently mutated ids (within TTL). */
int vg_suppress_covers(struct vg_wake *w, const char *agent_id, const struct vg_wake_batch *b);

/* Begin a transaction; when it is the outermost one, tag its notifications as wake
 * bookkeeping. *tagged tells vg_wake_tx_end whether to restore the source. */
vigil_code vg_wake_tx_begin(struct vg_env *env, int *tagged, const char **saved, vigil_error *err);
vigil_code vg_wake_tx_end(struct vg_env *env, vigil_code rc, int tagged, const char *saved,
                          vigil_error *err);

/* JSON array of strings from a C array (owned), NULL on OOM. */
json_t *vg_wake_json_strings(const char *const *v, size_t n);

/* Pre-register an agent's watched entity ids for the duration of its run; end_run clears
 * them unless the run reported its actual mutations (vg_wake_note_mutations). */
void vg_suppress_prereg(struct vg_wake *w, const char *agent_id, const char *const *ids, size_t n);
void vg_suppress_end_run(struct vg_wake *w, const char *agent_id);

/* Run one claimed job through a runner and finish it (suppression pre-registered meanwhile). */
vigil_code vg_wake_run_one(struct vg_wake *w, struct vg_wake_runner *r, struct vg_wake_job *job,
                           const volatile int *stop, vigil_error *err);

/* All records of a kind (optionally of one owner) as a JSON array of bodies (owned). */
vigil_code vg_wake_list_kind(struct vg_env *env, const char *kind, const char *owner, json_t **out,
                             vigil_error *err);

#endif
