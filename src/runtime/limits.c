/*
 * limits.c: the loop limits an agent's manifest sets (config.limits: max_steps,
 * max_tool_rounds, timeout_ms, context_tokens). Every runner (chat, the wake runner) takes its
 * struct vg_loop_limits from here, so a manifest's limits are what the loop enforces for that
 * agent. A limit the manifest leaves out stays 0: the loop's default; the tool rounds take the
 * config file's agent.max_tool_rounds first (docs/models.md), resolved here, where config and
 * agent meet, rather than in the loop.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "config/config.h"
#include "runtime/runtime_int.h"

static int64_t limit_of(const json_t *limits, const char *key, int64_t max)
{
    json_t *v = json_object_get(limits, key);
    int64_t n = json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
    return n > 0 && n <= max ? n : 0;
}

vigil_code vg_runtime_agent_limits(struct vg_env *env, const char *agent_id,
                                   struct vg_loop_limits *out, vigil_error *err)
{
    json_t *agent = NULL;
    vigil_code rc = vg_agent_get_shared(env, agent_id, &agent, err);
    if (rc)
        return rc;
    const json_t *l = json_object_get(json_object_get(agent, "config"), "limits");
    out->max_steps = (int)limit_of(l, "max_steps", 100000);
    out->max_tool_rounds = (int)limit_of(l, "max_tool_rounds", 100000);
    vigil_runtime *rt = vg_runtime_from_env(env);
    if (!out->max_tool_rounds && rt && rt->config) {
        int64_t rounds = vg_config_get_int(rt->config, "agent.max_tool_rounds", 0);
        out->max_tool_rounds = rounds > 0 && rounds <= 100000 ? (int)rounds : 0;
    }
    out->timeout_ms = limit_of(l, "timeout_ms", INT64_C(604800000));
    out->context_tokens = limit_of(l, "context_tokens", INT64_C(100000000));
    json_decref(agent);
    return VIGIL_OK;
}
