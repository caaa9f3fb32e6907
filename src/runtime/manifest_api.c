/*
 * manifest_api.c: the manifests section of include/vigil.h.
 */
#include "base/common.h"

#include "config/config.h"
#include "manifest/manifest.h"
#include "runtime/runtime_int.h"
#include "tool/tool.h"

/* The runtime's own tools, built only when a manifest declares a command tool to compare. */
struct own_tools {
    vigil_runtime *rt;
    struct vg_tool_executor *x;
    int failed;
};

static int own_tool_named(void *user, const char *name)
{
    struct own_tools *o = user;
    if (!o->x && !o->failed)
        o->failed = vg_runtime_own_tools(o->rt, &o->x, NULL) != VIGIL_OK;
    return o->x && vg_tool_executor_find(o->x, name);
}

vigil_code vigil_agent_apply(vigil_runtime *rt, const char *path, unsigned flags, char **out_json,
                             vigil_error *err)
{
    if (!path || !*path)
        return VG_FAIL(err, VIGIL_EINVAL, "apply needs a runtime and a manifest path");
    return vigil_agent_apply_paths(rt, &path, 1, flags, out_json, err);
}

vigil_code vigil_agent_apply_paths(vigil_runtime *rt, const char *const *paths, size_t n_paths,
                                   unsigned flags, char **out_json, vigil_error *err)
{
    json_t *report = NULL, *problems = json_array();
    if (!rt || !paths || !n_paths) {
        json_decref(problems);
        return VG_FAIL(err, VIGIL_EINVAL, "apply needs a runtime and a manifest path");
    }
    if (!problems)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying manifests");
    struct own_tools own = {.rt = rt};
    vigil_code rc = rt->config ? VIGIL_OK : vg_config_load(rt->config_path, &rt->config, err);
    json_t *config =
        rc ? NULL
           : json_pack("{s:O?, s:O?}", "command_tools", vg_config_get(rt->config, "command_tools"),
                       "mcp_servers", vg_config_get(rt->config, "mcp_servers"));
    if (!rc && !config)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying manifests");
    if (!rc)
        rc = vg_manifest_apply_checked(&rt->env, paths, n_paths, (flags & VIGIL_APPLY_DRY_RUN) != 0,
                                       own_tool_named, &own, config, &report, problems, err);
    json_decref(config);
    vg_tool_executor_free(own.x);
    if (rc && json_array_size(problems) && out_json) {
        vigil_error saved = *err;
        json_t *v = json_pack("{s:O}", "errors", problems);
        if (v && vg_runtime_json_out(v, out_json, err) == VIGIL_OK)
            *err = saved;
    }
    json_decref(problems);
    if (rc)
        return rc;
    if (out_json)
        return vg_runtime_json_out(report, out_json, err);
    json_decref(report);
    return VIGIL_OK;
}

vigil_code vigil_agent_config_check(const char *config_json, vigil_error *err)
{
    json_error_t je;
    if (!config_json)
        return VIGIL_OK;
    json_t *config = json_loads(config_json, 0, &je);
    if (!config)
        return VG_FAIL(err, VIGIL_EPARSE, "config is not JSON: %s", je.text);
    vigil_code rc = vg_manifest_check_config(config, err);
    json_decref(config);
    return rc;
}

vigil_code vigil_agent_export(vigil_runtime *rt, const char *agent_id, char **out_yaml,
                              vigil_error *err)
{
    json_t *m = NULL;
    if (!rt || !out_yaml)
        return VG_FAIL(err, VIGIL_EINVAL, "export needs a runtime and an output");
    vigil_code rc = vg_manifest_export(&rt->env, agent_id, &m, err);
    if (rc)
        return rc;
    char *yaml = vg_manifest_to_yaml(m);
    json_decref(m);
    if (!yaml)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory exporting an agent");
    *out_yaml = yaml;
    return VIGIL_OK;
}
