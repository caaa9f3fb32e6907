/*
 * orch_api.c: the orchestrator's part of include/vigil.h (src/orch does the work).
 */
#include "base/common.h"

#include "orch/orch.h"
#include "runtime/runtime.h"

vigil_code vigil_agent_tree(vigil_runtime *rt, const char *agent_id, char **out_json,
                            vigil_error *err)
{
    json_t *v = NULL;
    if (!out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no place for the lineage");
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (!rc)
        rc = vg_orch_tree(&rt->env, agent_id, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}
