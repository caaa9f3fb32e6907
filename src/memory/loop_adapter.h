/*
 * loop_adapter.h: memory behind the agent loop's memory interface (src/loop/loop.h): first-run
 * seeding, memory-approval outcomes as notes, the context prefix from vg_memory_assemble, and
 * compaction scheduled after each run.
 */
#ifndef VG_MEMORY_LOOP_ADAPTER_H
#define VG_MEMORY_LOOP_ADAPTER_H

#include "loop/loop.h"
#include "memory/compact.h"

struct vg_memory_loop;
struct vg_embedder;

/* A memory manager over env embedding with emb, which it owns from now on, also on failure
 * (vg_runtime_embedder gives the configured one). *out owned: vg_memory_loop_free. */
vigil_code vg_memory_loop_new(struct vg_env *env, struct vg_embedder *emb,
                              struct vg_memory_loop **out, vigil_error *err);
void vg_memory_loop_free(struct vg_memory_loop *ml);
/* Embed up to max blocks of any agent that were stored without a vector while the embedder
 * was down (after a run, like compaction; a service still down leaves them for the next).
 * *done (may be NULL): how many got their vector. */
vigil_code vg_memory_loop_embed_pending(struct vg_memory_loop *ml, int max, int *done,
                                        vigil_error *err);
/* Fill the loop's interface; ml must outlive its use. */
void vg_memory_loop_interface(struct vg_memory_loop *ml, struct vg_loop_memory *out);
/* Compaction's commits hold the agent's lease through hold (vg_compaction_policy.hold), with
 * the hold_user of each pass (vg_memory_loop_compact). */
void vg_memory_loop_hold(struct vg_memory_loop *ml, vg_compact_hold_fn hold);
/* Run ready compaction jobs (at most max), summarizing through model when not NULL (the
 * deterministic fallback otherwise). hold_user goes to the hold (vg_memory_loop_hold) of each
 * commit. *ran (may be NULL) gets how many ran. */
vigil_code vg_memory_loop_compact(struct vg_memory_loop *ml, struct vg_model *model, int max,
                                  void *hold_user, int *ran, vigil_error *err);
/* *waiting 1 when a pass (vg_memory_loop_compact, vg_memory_loop_embed_pending) has something
 * to do now: a compaction job ready to claim, or a block waiting for its vector. Reads only:
 * the runtime looks before it wakes a thread for the pass. */
vigil_code vg_memory_loop_work_waiting(struct vg_memory_loop *ml, int *waiting, vigil_error *err);

#endif
