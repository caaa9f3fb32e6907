/*
 * tool_provider.h: the memory tools (memory_read, memory_write, memory_append, memory_list,
 * memory_load, memory_unload) as a provider for the tool executor.
 */
#ifndef VG_MEMORY_TOOL_PROVIDER_H
#define VG_MEMORY_TOOL_PROVIDER_H

#include "memory/memory.h"

struct vg_tool_provider;

/* A provider over env with embedder (borrowed; NULL: the offline embedder, owned). The
 * executor owns the provider once added (vg_tool_executor_add). */
vigil_code vg_memory_tool_provider(struct vg_env *env, struct vg_embedder *embedder,
                                   struct vg_tool_provider **out, vigil_error *err);
/* The same, owning embedder from this call on (closed with the provider, or at once when the
 * call fails): the runtime gives its configured one (vg_runtime_embedder). */
vigil_code vg_memory_tool_provider_own(struct vg_env *env, struct vg_embedder *embedder,
                                       struct vg_tool_provider **out, vigil_error *err);
/* The memory tools' contracts (new array). */
json_t *vg_memory_tool_contracts(void);

#endif
