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
#include "tool/tool.h"

static const char *const source_keys[] = {"mcp_servers", "command_tools"};

struct served_by {
    vigil_runtime *rt;
    struct vg_tool_executor *x;
};

/* Whether a command tool called name would take a tool the runtime serves itself. */
static int builtin_taken(void *user, const char *name)
{
    struct served_by *s = user;
    return vg_tool_executor_find(s->x, name) && !vg_manifest_tools_has(s->rt->command_tools, name);
}

/* The declarations served now, and those left out for a clash, read from the store. */
static vigil_code read_declared(vigil_runtime *rt, struct vg_tool_executor *x, json_t **commands,
                                json_t **servers, json_t *clashes, vigil_error *err)
{
    struct served_by by = {rt, x};
    json_t *cc = json_object(), *sc = json_object();
    vigil_code rc = cc && sc && !json_object_set(clashes, source_keys[1], cc) &&
                            !json_object_set(clashes, source_keys[0], sc)
                        ? VIGIL_OK
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc)
        rc = vg_manifest_declared_tools(&rt->env, vg_config_get(rt->config, "command_tools"),
                                        builtin_taken, &by, commands, cc, err);
    if (!rc)
        rc = vg_runtime_mcp_servers(rt, servers, sc, err);
    json_decref(cc);
    json_decref(sc);
    return rc;
}

vigil_code vg_runtime_tool_sources_sync(vigil_runtime *rt, struct vg_tool_executor *x,
                                        vigil_error *err)
{
    json_t *commands = NULL, *servers = NULL, *clashes = json_object();
    vigil_code rc = rt->config ? VIGIL_OK : vg_config_load(rt->config_path, &rt->config, err);
    if (!rc && !rt->command_tools)
        rc = vg_manifest_tools_new(&rt->command_tools, err);
    if (!rc)
        rc = clashes ? read_declared(rt, x, &commands, &servers, clashes, err)
                     : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
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
        json_decref(rt->sources_clashes);
        rt->sources_clashes = json_incref(clashes);
    }
    json_decref(clashes);
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

/* A declaration served to no agent for a clash fails the agents it concerns: one declaring it,
 * or (unless it clashes with a built-in tool, which still serves) one whose allowlist reaches it.
 */
static vigil_code clash_for_agent(vigil_runtime *rt, const json_t *config, vigil_error *err)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(source_keys); i++) {
        json_t *c;
        const char *name;
        json_object_foreach (json_object_get(rt->sources_clashes, source_keys[i]), name, c) {
            int hit = json_object_get(json_object_get(config, source_keys[i]), name) != NULL;
            if (!hit && !json_is_true(json_object_get(c, "builtin")))
                hit = vg_manifest_allowlist_reaches(config, name, i == 0, NULL);
            if (hit)
                return VG_FAIL(err, VIGIL_EEXISTS, "%s",
                               json_string_value(json_object_get(c, "message")));
        }
    }
    return VIGIL_OK;
}

vigil_code vg_runtime_tool_sources_refresh(vigil_runtime *rt, const char *agent_id,
                                           vigil_error *err)
{
    json_t *agent = NULL;
    if (!rt->tools || !rt->sources_served || rt->sources_busy || !agent_id)
        return VIGIL_OK; /* not built yet (built as declared now), or being synced */
    if (!rt->sources_seen && !(rt->sources_seen = json_object()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    /* Read at every turn: the env's parsed value, not a copy of it (the agent is only read; what
     * is kept of it, copied). */
    vigil_code rc = vg_agent_get_shared(&rt->env, agent_id, &agent, err);
    if (rc)
        return rc;
    json_t *config = json_object_get(agent, "config");
    json_t *cur = json_object();
    for (size_t i = 0; cur && i < 2; i++) {
        const json_t *declared = json_object_get(config, source_keys[i]);
        json_t *copy = declared ? json_deep_copy(declared) : json_null();
        if (json_object_set_new(cur, source_keys[i], copy)) {
            json_decref(cur);
            cur = NULL;
        }
    }
    if (!cur) {
        json_decref(agent);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    }
    json_t *before = json_object_get(rt->sources_seen, agent_id);
    if (before ? !json_equal(before, cur) : !served_as_declared(rt, cur)) {
        rt->sources_busy = 1;
        rc = vg_runtime_tool_sources_sync(rt, rt->tools, err);
        rt->sources_busy = 0;
    }
    if (!rc && json_object_set(rt->sources_seen, agent_id, cur))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc && json_object_size(rt->sources_clashes))
        rc = clash_for_agent(rt, config, err);
    json_decref(cur);
    json_decref(agent);
    return rc;
}

void vg_runtime_tool_sources_free(vigil_runtime *rt)
{
    vg_mcp_set_free(rt->mcp_servers);
    vg_manifest_tools_free(rt->command_tools);
    json_decref(rt->sources_served);
    json_decref(rt->sources_seen);
    json_decref(rt->sources_clashes);
    json_decref(rt->sources_said);
    rt->sources_clashes = rt->sources_said = NULL;
    /* Forgotten too: after a failed build of the tools the runtime syncs from nothing again. */
    rt->mcp_servers = NULL;
    rt->command_tools = NULL;
    rt->sources_served = rt->sources_seen = NULL;
}
