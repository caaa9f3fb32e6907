/*
 * mcp_servers.c: which MCP servers a runtime's tools include. The config file's `mcp_servers`
 * and those of every live agent's manifest are merged by name (src/manifest collects the
 * agents'); tool_sources.c hands them to src/mcp, where a declared server costs nothing
 * until one of its tools is needed.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/json.h"
#include "config/config.h"
#include "manifest/manifest.h"
#include "mcp/mcp.h"
#include "runtime/runtime_int.h"

/* Whether this runtime has not said why server name is left out yet: once is enough, not at
 * every sync of a daemon (trial E6). */
static int said_first_time(vigil_runtime *rt, const char *name, const char *why)
{
    char key[400];
    snprintf(key, sizeof key, "%s: %s", name, why);
    if (!rt->sources_said && !(rt->sources_said = json_object()))
        return 1;
    if (json_object_get(rt->sources_said, key))
        return 0;
    json_object_set_new(rt->sources_said, key, json_true());
    return 1;
}

/* A manifest's server that the client cannot take (a name from before manifests were held to
 * the client's rule) is left out with a note, so one stored agent cannot take every agent's
 * tools down; the config file's are checked whole by the client, and fail loudly. */
static int manifest_server_ok(vigil_runtime *rt, const char *name, const json_t *seen_entry)
{
    const char *from = json_string_value(json_object_get(seen_entry, "from"));
    struct vg_mcp_conf *c = NULL;
    vigil_error e = {0};
    if (!from || !strcmp(from, "the config file"))
        return 1;
    json_t *one = json_pack("{s:O}", name, json_object_get(seen_entry, "decl"));
    vigil_code rc = one ? vg_mcp_conf_parse(one, &c, &e) : VIGIL_ENOMEM;
    json_decref(one);
    vg_mcp_conf_free(c);
    if (rc && said_first_time(rt, name, e.message))
        fprintf(stderr, "vigil: mcp: the server \"%s\" of %s is left out: %s\n", name, from,
                e.message);
    return rc == VIGIL_OK;
}

/* The config file's servers into seen (name -> {"decl", "from"}). */
static vigil_code config_declared(vigil_runtime *rt, json_t *seen, vigil_error *err)
{
    json_t *v;
    const char *k;
    vigil_code rc = rt->config ? VIGIL_OK : vg_config_load(rt->config_path, &rt->config, err);
    json_t *config_servers = rc ? NULL : vg_config_get(rt->config, "mcp_servers");
    json_object_foreach (json_is_object(config_servers) ? config_servers : NULL, k, v) {
        if (!rc && json_object_set_new(
                       seen, k, json_pack("{s:O, s:s}", "decl", v, "from", "the config file")))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
    }
    return rc;
}

/* Every server declared, config file first: name -> {"decl", "from"} (owned). With agent_id,
 * the config file's and that agent's manifest's. */
static vigil_code declared(vigil_runtime *rt, const char *agent_id, json_t **out, vigil_error *err)
{
    json_t *seen = json_object(), *agent = NULL;
    vigil_code rc = seen ? config_declared(rt, seen, err) : VIGIL_ENOMEM;
    if (!seen)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc && !agent_id)
        rc = vg_manifest_collect_declared(&rt->env, "mcp_servers", "MCP server", seen, err);
    if (!rc && agent_id && !(rc = vg_agent_get(&rt->env, agent_id, &agent, NULL, err)))
        rc = vg_manifest_collect_one(agent, "mcp_servers", "MCP server", seen, err);
    json_decref(agent);
    if (rc) {
        json_decref(seen);
        return rc;
    }
    *out = seen;
    return VIGIL_OK;
}

vigil_code vigil_mcp_servers(vigil_runtime *rt, const char *agent_id, char **out_json,
                             vigil_error *err)
{
    json_t *seen = NULL, *v, *shown = json_object();
    const char *name;
    vigil_code rc =
        shown ? declared(rt, agent_id, &seen, err) : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_object_foreach (rc ? NULL : seen, name, v) {
        if (json_object_set_new(shown, name,
                                json_pack("{s:O, s:O, s:O?}", "declaration",
                                          json_object_get(v, "decl"), "declared_in",
                                          json_object_get(v, "from"), "clash",
                                          json_object_get(v, "clash"))))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    }
    if (!rc && !(*out_json = vg_json_dump(shown, JSON_SORT_KEYS)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_decref(seen);
    json_decref(shown);
    return rc;
}

vigil_code vigil_mcp_remember_tools(vigil_runtime *rt, const char *server, const char *tools_json,
                                    vigil_error *err)
{
    json_t *seen = NULL, *one = NULL, *tools = json_loads(tools_json ? tools_json : "", 0, NULL);
    struct vg_mcp_conf *c = NULL;
    vigil_code rc = json_is_array(tools)
                        ? declared(rt, NULL, &seen, err)
                        : VG_FAIL(err, VIGIL_EINVAL, "the tool list is not a JSON array");
    json_t *v = rc || !server ? NULL : json_object_get(seen, server);
    if (v && !json_object_get(v, "clash")) {
        one = json_pack("{s:O}", server, json_object_get(v, "decl"));
        rc = one ? vg_mcp_conf_parse(one, &c, err) : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
        if (!rc)
            rc = vg_mcp_cache_tools(&rt->env, &c->servers[0], tools, err);
    }
    vg_mcp_conf_free(c);
    json_decref(one);
    json_decref(seen);
    json_decref(tools);
    return rc;
}

vigil_code vg_runtime_mcp_servers(vigil_runtime *rt, json_t **out, json_t *clashes,
                                  vigil_error *err)
{
    json_t *seen = NULL, *merged = json_object(), *v;
    const char *name;
    vigil_code rc =
        merged ? declared(rt, NULL, &seen, err) : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_object_foreach (seen, name, v) {
        json_t *clash = json_object_get(v, "clash");
        if (!rc && clash &&
            json_object_set_new(clashes, name,
                                json_pack("{s:O, s:b}", "message", clash, "builtin", 0)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
        if (!rc && !clash && manifest_server_ok(rt, name, v) &&
            json_object_set(merged, name, json_object_get(v, "decl")))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
    }
    json_decref(seen);
    if (rc) {
        json_decref(merged);
        return rc;
    }
    *out = merged;
    return VIGIL_OK;
}
