/*
 * memory_int.h: private to src/memory: helpers the manager's files share.
 */
#ifndef VG_MEMORY_INT_H
#define VG_MEMORY_INT_H

#include "memory/memory.h"

#define VG_BLOCK_ID_LEN 68 /* "mb_" + 64 hex + NUL */

void vg_memory_block_id(const char *agent_id, const char *label, char out[VG_BLOCK_ID_LEN]);
/* A block's body (owned) and revision; ENOTFOUND names the label. */
vigil_code vg_memory_read_block(struct vg_memory *m, const char *agent_id, const char *label,
                                json_t **out, int64_t *rev, vigil_error *err);
/* A string field or "" (borrowed). */
const char *vg_memory_str(json_t *o, const char *k);
/* Write a block body back at revision rev (keeps its creation seq). */
vigil_code vg_memory_update_block(struct vg_memory *m, json_t *block, int64_t rev,
                                  vigil_error *err);
/* Replace content inside the caller's transaction (event, text index, vector). */
vigil_code vg_memory_apply(struct vg_memory *m, json_t *block, int64_t rev, const char *new_content,
                           const char *type, json_t *extra, const float *vec, vigil_error *err);
vigil_code vg_memory_event(struct vg_memory *m, const char *agent_id, const char *block_id,
                           const char *label, const char *type, const char *old_content,
                           const char *new_content, json_t *extra, vigil_error *err);
vigil_code vg_memory_put_vector(struct vg_memory *m, const char *agent_id, const char *block_id,
                                const char *label, const char *tier, const float *vec,
                                vigil_error *err);
/* The embedding of label + content, or NULL when there is no embedder, it failed, or it is
 * not to be called now (vg_memory_may_embed): the block then waits for the background pass. */
float *vg_memory_embed_text(struct vg_memory *m, const char *label, const char *content);
/* Whether the embedder may be called now: always when it is offline; a networked one never
 * while the store has a transaction open, which would hold the write lock (every other writer
 * of the store, and every other run of a worker) for a network round trip. */
int vg_memory_may_embed(struct vg_memory *m);
/* vg_memory_list for a caller that only reads what it gets (the context of each model call):
 * the blocks are the env memo's parsed values themselves, not copies. */
vigil_code vg_memory_list_shared(struct vg_memory *m, const char *agent_id, const char *tier,
                                 json_t **out, vigil_error *err);
/* Scan records into an array (into borrowed). */
vigil_code vg_memory_collect(struct vg_memory *m, const struct vg_query *q, json_t *into,
                             vigil_error *err);
/* Scan record ids into an array of strings (into borrowed). */
vigil_code vg_memory_collect_ids(struct vg_memory *m, const struct vg_query *q, json_t *into,
                                 vigil_error *err);
/* The rules every writer's label and content meet (EINVAL, ETOOBIG). */
vigil_code vg_memory_check_label(const char *label, vigil_error *err);
vigil_code vg_memory_check_content(const char *content, vigil_error *err);
/* Remove a block at revision rev (inside the caller's transaction): the block, its text index
 * and vector, and an event of `type` with the old content; ECONFLICT when it changed. */
vigil_code vg_memory_drop(struct vg_memory *m, json_t *block, int64_t rev, const char *type,
                          json_t *extra, vigil_error *err);
/* Free the kept system texts (vg_memory_free). */
void vg_memory_systems_free(struct vg_memory_systems *k);
/* a + "\n" + b (owned), without doubling a final newline of a. */
char *vg_memory_join(const char *a, const char *b);

#endif
