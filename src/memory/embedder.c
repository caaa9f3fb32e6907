/*
 * embedder.c: which embedder a memory manager gets. Every memory manager of a runtime (the
 * public memory calls, the memory tools, the agent loop) uses the embedder the runtime's config
 * names, so the vectors they write and the ones they search are of the same model. An env that
 * is not a runtime's (tests, tools) gets the offline embedder.
 */
#include "base/common.h"

#include "config/config.h"
#include "memory/memory.h"
#include "runtime/runtime.h"

vigil_code vg_memory_embedder(struct vg_env *env, struct vg_embedder **out, vigil_error *err)
{
    vigil_runtime *rt = env ? vg_runtime_from_env(env) : NULL;
    vigil_code rc;
    if (!rt)
        return vg_embed_hash_new(0, out, err);
    if (!rt->config && (rc = vg_config_load(rt->config_path, &rt->config, err)))
        return rc;
    return vg_embed_from_config(rt->config, env->clock, out, err);
}
