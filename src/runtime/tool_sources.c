/*
 * tool_sources.c: the declared tool sources a runtime serves (command tools and MCP servers of
 * the config file and of agents' manifests), kept in step with the store. The runtime's
 * executor lives as long as the runtime, so `vigil serve` would otherwise serve only what was
 * declared when its workers started: an agent applied later (POST /v1/agents, `vigil agent
 * apply` against the same store) found none of its own tools. At the start of each of an
 * agent's runs its declarations are compared with what is served and with what they were at
 * its last run; only a difference reads every agent again and syncs. The sync adds what is new
 * and replaces what changed; MCP servers stay lazy, an unchanged one is left running, a
 * changed one is stopped (and starts again, as declared now, on first use).
 */
#include "base/common.h"

#include "agent/agent.h"
#include "config/config.h"
#include "manifest/manifest.h"
#include "mcp/mcp.h"
#include "runtime/runtime_int.h"

static const char *const source_keys[] = {"mcp_servers", "command_tools"};

vigil_code vg_runtime_tool_sources_sync(vigil_runtime *rt, struct vg_tool_executor *x,
                                        vigil_error *err)
{
    json_t *commands = NULL, *servers = NULL;
    vigil_code rc = rt->config ? VIGIL_OK : vg_config_load(rt->config_path, &rt->config, err);
    if (!rc)
        rc = vg_manifest_declared_tools(&rt->env, vg_config_get(rt->config, "command_tools"),
                                        &commands, err);
    if (!rc)
        rc = vg_runtime_mcp_servers(rt, &servers, err);
    if (!rc && !rt->command_tools)
        rc = vg_manifest_tools_new(&rt->command_tools, err);
    struct vg_mcp_options o = {.clock = rt->env.clock,
                               .log = rt->in_daemon ? vg_mcp_log_to_stderr : NULL};
    if (!rc && !rt->mcp_servers)
        rc = vg_mcp_set_new(&o, &rt->env, &rt->mcp_servers, err);
    if (!rc)
        rc = vg_manifest_tools_sync(rt->command_tools, x, commands, err);
    if (!rc)
        rc = vg_mcp_set_sync(rt->mcp_servers, x, servers, err);
    if (!rc) {
        json_decref(rt->sources_served);
        rt->sources_served =
            json_pack("{s:O, s:O}", "mcp_servers", servers, "command_tools", commands);
        if (!rt->sources_served)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    }
    json_decref(commands);
    json_decref(servers);
    return rc;
}

/* Whether every source the agent declares (cur) is served as declared. */
static int served_as_declared(vigil_runtime *rt, json_t *cur)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(source_keys); i++) {
        json_t *served = json_object_get(rt->sources_served, source_keys[i]), *decl;
        const char *name;
        json_object_foreach (json_object_get(cur, source_keys[i]), name, decl) {
            if (!json_equal(decl, json_object_get(served, name)))
                return 0;
        }
    }
    return 1;
}

vigil_code vg_runtime_tool_sources_refresh(vigil_runtime *rt, const char *agent_id,
                                           vigil_error *err)
{
    json_t *agent = NULL;
    if (!rt->tools || !rt->sources_served || rt->sources_busy || !agent_id)
        return VIGIL_OK; /* not built yet (built as declared now), or being synced */
    if (!rt->sources_seen && !(rt->sources_seen = json_object()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    vigil_code rc = vg_agent_get(&rt->env, agent_id, &agent, NULL, err);
    if (rc)
        return rc;
    json_t *config = json_object_get(agent, "config");
    json_t *cur = json_pack("{s:O?, s:O?}", source_keys[0], json_object_get(config, source_keys[0]),
                            source_keys[1], json_object_get(config, source_keys[1]));
    json_decref(agent);
    if (!cur)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_t *before = json_object_get(rt->sources_seen, agent_id);
    if (before ? !json_equal(before, cur) : !served_as_declared(rt, cur)) {
        rt->sources_busy = 1;
        rc = vg_runtime_tool_sources_sync(rt, rt->tools, err);
        rt->sources_busy = 0;
    }
    if (!rc && json_object_set(rt->sources_seen, agent_id, cur))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_decref(cur);
    return rc;
}

void vg_runtime_tool_sources_free(vigil_runtime *rt)
{
    vg_mcp_set_free(rt->mcp_servers);
    vg_manifest_tools_free(rt->command_tools);
    json_decref(rt->sources_served);
    json_decref(rt->sources_seen);
    /* Forgotten too: after a failed build of the tools the runtime syncs from nothing again. */
    rt->mcp_servers = NULL;
    rt->command_tools = NULL;
    rt->sources_served = rt->sources_seen = NULL;
}
