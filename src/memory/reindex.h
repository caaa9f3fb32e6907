/*
 * reindex.h: the text index of an agent's memory blocks written again from the blocks
 * themselves, for blocks that came into this store as records (an agent moved from another
 * store: docs/storage.md). The index is the store's, not a record, so no export carries it.
 */
#ifndef VG_MEMORY_REINDEX_H
#define VG_MEMORY_REINDEX_H

#include "env/env.h"

/* Index one memory block's body (JSON text) as block.c indexes a block it writes: its label,
 * a newline, its content. A store without a text index (EUNSUPPORTED) is not an error. */
vigil_code vg_memory_index_block_body(struct vg_env *env, const char *block_id,
                                      const char *agent_id, const char *body, vigil_error *err);

#endif
