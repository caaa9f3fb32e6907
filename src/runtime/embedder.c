/*
 * embedder.c: which embedder a runtime's memory managers get. Every memory manager of a runtime
 * (the public memory calls, the memory tools, the agent loop) uses the embedder the runtime's
 * config names, so the vectors they write and the ones they search are of the same model.
 */
#include "base/common.h"

#include "config/config.h"
#include "embed/embed.h"
#include "runtime/runtime_int.h"

vigil_code vg_runtime_embedder(vigil_runtime *rt, struct vg_embedder **out, vigil_error *err)
{
    vigil_code rc;
    if (!rt->config && (rc = vg_config_load(rt->config_path, &rt->config, err)))
        return rc;
    return vg_embed_from_config(rt->config, rt->env.clock, out, err);
}
