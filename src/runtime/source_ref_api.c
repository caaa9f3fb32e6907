/*
 * source_ref_api.c: the source references of include/vigil.h (S0-116; docs/storage.md, "Source
 * references"): which host entities an agent relies on, and which agents rely on an entity.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "runtime/runtime_int.h"

vigil_code vigil_source_ref_add(vigil_runtime *rt, const char *agent_id, const char *source_type,
                                const char *source_id, vigil_error *err)
{
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    return rc ? rc : vg_source_ref_add(&rt->env, agent_id, source_type, source_id, err);
}

vigil_code vigil_source_ref_remove(vigil_runtime *rt, const char *agent_id, const char *source_type,
                                   const char *source_id, vigil_error *err)
{
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    return rc ? rc : vg_source_ref_remove(&rt->env, agent_id, source_type, source_id, err);
}

vigil_code vigil_source_refs(vigil_runtime *rt, const char *agent_id, const char *source_type,
                             char **out_json, vigil_error *err)
{
    json_t *v = NULL;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (!rc)
        rc = vg_source_refs(&rt->env, agent_id, source_type, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_source_ref_agents(vigil_runtime *rt, const char *source_type,
                                   const char *source_id, char **out_json, vigil_error *err)
{
    json_t *v = NULL;
    if (!rt)
        return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");
    vigil_code rc = vg_source_ref_agents(&rt->env, source_type, source_id, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}
