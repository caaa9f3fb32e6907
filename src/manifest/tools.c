/*
 * tools.c: declared command tools. A `command_tools` entry, from the config file or from an
 * agent's manifest, becomes a command tool provider (src/tool/command.c) in the runtime's
 * executor, so `vigil chat`, `vigil serve` and `vigil tool call` have it with no C. The
 * declaration is stored as written: ${NAME} references stay references, and command.c expands
 * them from the environment only when a call runs.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "manifest/manifest.h"
#include "tool/tool.h"

json_t *vg_manifest_tool_contract(const char *name, const json_t *decl)
{
    static const char *const fields[] = {
        "version",      "description", "input_schema",         "output_schema",
        "capabilities", "risk",        "allowed_wake_reasons", "scope",
        "idempotency",  "mutating",    "tool_class",           "requires_approval"};
    json_t *c = json_pack("{s:s}", "name", name);
    for (size_t i = 0; c && i < VG_ARRAY_LEN(fields); i++) {
        json_t *v = json_object_get(decl, fields[i]);
        if (v && json_object_set(c, fields[i], v)) {
            json_decref(c);
            return NULL;
        }
    }
    return c;
}

/* A NULL-terminated array of the strings of a JSON array (borrowed from it). */
static const char **strv(const json_t *a)
{
    const char **v = vg_calloc(json_array_size(a) + 1, sizeof *v);
    for (size_t i = 0; v && i < json_array_size(a); i++)
        v[i] = json_string_value(json_array_get(a, i));
    return v;
}

/* "NAME=template" for each env entry, NULL-terminated; every string owned. */
static char **env_templates(const json_t *env)
{
    const char *k;
    json_t *v;
    size_t i = 0;
    char **out = vg_calloc(json_object_size(env) + 1, sizeof *out);
    json_object_foreach ((json_t *)env, k, v) {
        if (!out)
            break;
        size_t n = strlen(k) + json_string_length(v) + 2;
        if (!(out[i] = vg_malloc(n)))
            break;
        snprintf(out[i++], n, "%s=%s", k, json_string_value(v));
    }
    return out;
}

static void free_templates(char **t)
{
    for (size_t i = 0; t && t[i]; i++)
        vg_free(t[i]);
    vg_free(t);
}

static vigil_code add_one(struct vg_tool_executor *x, const char *name, const json_t *decl,
                          vigil_error *err)
{
    struct vg_tool_provider *p = NULL;
    json_t *contract = vg_manifest_tool_contract(name, decl);
    const char **argv = strv(json_object_get(decl, "command"));
    const char **allow = strv(json_object_get(decl, "env_allow"));
    char **set = env_templates(json_object_get(decl, "env"));
    vigil_code rc;
    if (!contract || !argv || !allow || !set) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory registering command tool \"%s\"", name);
        goto out;
    }
    struct vg_tool_command_options o = {
        .argv = argv,
        .cwd = json_string_value(json_object_get(decl, "cwd")),
        .minimal_env = 1,
        .env_allow = allow,
        .env_set = (const char *const *)set,
        .timeout_ms = (int)json_integer_value(json_object_get(decl, "timeout_ms")),
        .max_output = (size_t)json_integer_value(json_object_get(decl, "max_output"))};
    if (!(rc = vg_tool_command_provider(contract, &o, &p, err)))
        rc = vg_tool_executor_add(x, p, err);
out:
    json_decref(contract);
    vg_free(argv);
    vg_free(allow);
    free_templates(set);
    return rc;
}

/* Declarations seen so far: name -> {"decl": ..., "from": source}. what: "command tool"... */
static vigil_code collect(json_t *seen, const json_t *decls, const char *from, const char *what,
                          vigil_error *err)
{
    const char *name;
    json_t *decl;
    json_object_foreach ((json_t *)decls, name, decl) {
        json_t *had = json_object_get(seen, name);
        if (had && json_equal(json_object_get(had, "decl"), decl))
            continue; /* the same one declared twice: one */
        if (had)
            return VG_FAIL(err, VIGIL_EEXISTS,
                           "%s \"%s\" is declared differently by %s and by %s: rename "
                           "one of them",
                           what, name, json_string_value(json_object_get(had, "from")), from);
        if (json_object_set_new(seen, name, json_pack("{s:O, s:s}", "decl", decl, "from", from)))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %ss", what);
    }
    return VIGIL_OK;
}

vigil_code vg_manifest_collect_declared(struct vg_env *env, const char *key, const char *what,
                                        json_t *seen, vigil_error *err)
{
    char cursor[256] = "";
    vigil_code rc = VIGIL_OK;
    do {
        json_t *page = NULL, *a;
        size_t i;
        if ((rc = vg_agent_list(env, cursor[0] ? cursor : NULL, 200, &page, err)))
            return rc;
        json_array_foreach (json_object_get(page, "items"), i, a) {
            const char *lc = json_string_value(json_object_get(a, "lifecycle"));
            json_t *decls = json_object_get(json_object_get(a, "config"), key);
            char from[300];
            if (rc || !json_is_object(decls) || (lc && !strcmp(lc, "destroyed")))
                continue;
            snprintf(from, sizeof from, "agent \"%s\"",
                     json_string_value(json_object_get(a, "name")));
            rc = collect(seen, decls, from, what, err);
        }
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        snprintf(cursor, sizeof cursor, "%s", next ? next : "");
        json_decref(page);
    } while (!rc && cursor[0]);
    return rc;
}

vigil_code vg_manifest_register_tools(struct vg_env *env, const json_t *config_tools,
                                      struct vg_tool_executor *x, vigil_error *err)
{
    json_t *seen = json_object(), *t;
    const char *name;
    vigil_code rc = seen ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc && config_tools &&
        !(rc = vg_manifest_check_command_tools(config_tools, "the config's command_tools", err)))
        rc = collect(seen, config_tools, "the config file", "command tool", err);
    if (!rc)
        rc = vg_manifest_collect_declared(env, "command_tools", "command tool", seen, err);
    json_object_foreach (seen, name, t) {
        if (rc)
            break;
        rc = add_one(x, name, json_object_get(t, "decl"), err);
    }
    json_decref(seen);
    return rc;
}
