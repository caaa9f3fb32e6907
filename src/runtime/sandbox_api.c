/*
 * sandbox_api.c: the code sandbox's part of include/vigil.h (docs/sandbox.md): what the
 * machine offers, and one execution as execute_code runs it — through the agent's gate when
 * an agent is named, else with the config's limits and no host tools.
 */
#include "base/common.h"
#include "base/json.h"

#include "config/config.h"
#include "os/fs.h"
#include "runtime/runtime_int.h"
#include "sandbox/sandbox.h"
#include "sandbox/tool_provider.h"
#include "tool/tool.h"

static vigil_code give_json(json_t *v, char **out_json, vigil_error *err)
{
    char *s = v ? vg_json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(v);
    if (!s)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing the sandbox's answer");
    *out_json = s;
    return VIGIL_OK;
}

static vigil_code load_config(vigil_runtime *rt, struct vg_config **own,
                              const struct vg_config **cfg, vigil_error *err)
{
    *own = NULL;
    if (rt && !rt->config) {
        vigil_code rc = vg_config_load(rt->config_path, &rt->config, err);
        if (rc)
            return rc;
    }
    if (rt) {
        *cfg = rt->config;
        return VIGIL_OK;
    }
    vigil_code rc = vg_config_load(NULL, own, err);
    *cfg = *own;
    return rc;
}

json_t *vg_runtime_sandbox_config(vigil_runtime *rt)
{
    json_t *sb = vg_config_get(rt->config, "sandbox");
    json_t *c = json_is_object(sb) ? json_deep_copy(sb) : json_object();
    if (c && rt->data_dir && !json_object_get(c, "root")) {
        char root[4200];
        snprintf(root, sizeof root, "%s/sandbox", rt->data_dir);
        json_object_set_new(c, "root", json_string(root));
    }
    return c;
}

/* Whether the TypeScript adapter can run: the deno binary sandbox.deno names, or the one found. */
static json_t *deno_json(const json_t *sandbox)
{
    char found[4096], version[512];
    const char *path = json_string_value(json_object_get(sandbox, "deno"));
    if (!path)
        path = vg_deno_find(found, sizeof found);
    if (!path)
        return json_pack("{s:b, s:s}", "available", 0, "why",
                         "no deno binary: set sandbox.deno or VIGIL_DENO, or put deno on PATH "
                         "(npm package deno)");
    int bad = vg_deno_version(path, version, sizeof version);
    return json_pack("{s:b, s:s, s:s}", "available", !bad, "path", path, bad ? "why" : "version",
                     version);
}

vigil_code vigil_sandbox_check(vigil_runtime *rt, char **out_json, vigil_error *err)
{
    struct vg_config *own = NULL;
    const struct vg_config *cfg = NULL;
    unsigned required = 0;
    if (!out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "no output given");
    vigil_code rc = load_config(rt, &own, &cfg, err);
    if (!rc)
        rc = vg_sandbox_required_from_json(vg_config_get(cfg, "sandbox"), &required, err);
    if (rc) {
        vg_config_free(own);
        return rc;
    }
    struct vg_sandbox_probe p;
    vg_sandbox_probe(&p);
    json_t *v = vg_sandbox_probe_json(&p, required);
    if (v)
        json_object_set_new(v, "required", vg_sandbox_layers_json(required));
    if (v)
        json_object_set_new(v, "deno", deno_json(vg_config_get(cfg, "sandbox")));
    vg_config_free(own);
    return give_json(v, out_json, err);
}

/* Through the gate: the agent's manifest, limits and journal; run_key NULL: a fresh one. */
static vigil_code run_as_agent(vigil_runtime *rt, const char *agent_id, const char *run_key,
                               json_t *args, json_t **out, vigil_error *err)
{
    struct vg_tool_executor *x = NULL;
    char fresh[64] = "sandbox-run:";
    const char *key = run_key;
    if (!key) {
        rt->env.ids->methods->new_id(rt->env.ids, fresh + strlen(fresh));
        key = fresh;
    }
    vigil_code rc = vg_runtime_tools(rt, &x, err);
    struct vg_tool_call_ctx ctx = {.agent_id = agent_id, .run_key = key};
    struct vg_tool_outcome o;
    memset(&o, 0, sizeof o);
    if (!rc)
        rc = vg_tool_executor_call(x, &ctx, "execute_code", args, &o, err);
    if (rc)
        return rc;
    if (json_is_object(o.result) && json_object_get(o.result, "ok")) {
        *out = json_incref(o.result);
    } else { /* refused before it ran (not allowed, killed, budget): the gate's code */
        *out = json_pack("{s:b, s:{s:s, s:s}}", "ok", 0, "error", "code", o.error_code, "message",
                         o.error_message);
        if (*out && o.approval_id[0]) { /* what a person approves and the key to repeat under */
            json_object_set_new(json_object_get(*out, "error"), "approval_id",
                                json_string(o.approval_id));
            json_object_set_new(*out, "run_key", json_string(key));
        }
        enum vg_tool_code code = VG_TOOL_FAILED;
        vg_tool_code_parse(o.error_code, &code);
        rc = vg_tool_code_vigil(code);
        if (rc)
            VG_FAIL(err, rc, "%s: %s", o.error_code, o.error_message);
    }
    vg_tool_outcome_release(&o);
    if (!*out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    return rc;
}

/* The adapter for language (NULL: sandbox.language, else lua); *own is one to destroy. */
static struct vg_code_runtime *plain_runtime(const json_t *sb, const char *language,
                                             struct vg_code_runtime **own)
{
    const char *lang = language ? language : json_string_value(json_object_get(sb, "language"));
    *own = NULL;
    if (!lang || !strcmp(lang, "lua"))
        return vg_code_runtime_lua();
    return *own = vg_code_runtime_deno(json_string_value(json_object_get(sb, "deno")));
}

/* No agent: the config's limits, no host tools, the root's "_cli" directory. */
static vigil_code run_plain(vigil_runtime *rt, const char *language, const char *code, size_t len,
                            json_t **out, vigil_error *err)
{
    struct vg_config *own = NULL;
    const struct vg_config *cfg = NULL;
    vigil_code rc = load_config(rt, &own, &cfg, err);
    json_t *sb = rc ? NULL : vg_runtime_sandbox_config(rt);
    struct vg_tool_provider *p = NULL;
    if (!rc) /* the provider reads root, uid and limits as execute_code does */
        rc = vg_sandbox_tool_provider(NULL, sb, vg_config_get(cfg, "agent"), &p, err);
    struct vg_code_request q = {.code = code, .code_len = len};
    char wd[4400];
    if (!rc)
        rc = vg_sandbox_provider_settings(p, "_cli", wd, sizeof wd, &q, err);
    if (!rc)
        rc = vg_fs_mkdir_p(wd, err);
    struct vg_code_result r;
    struct vg_code_runtime *own_rt = NULL, *crt = rc ? NULL : plain_runtime(sb, language, &own_rt);
    if (!rc && !crt)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    q.workdir = wd;
    if (!rc && !(rc = vg_code_run(crt, &q, &r, err))) {
        *out = vg_code_result_json(&r);
        vg_code_result_release(&r);
        if (!*out)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    }
    if (own_rt)
        own_rt->methods->destroy(own_rt);
    if (p)
        vg_tool_provider_destroy(p);
    json_decref(sb);
    vg_config_free(own);
    return rc;
}

vigil_code vigil_sandbox_run_language(vigil_runtime *rt, const char *agent_id, const char *language,
                                      const char *code, size_t code_len, char **out_json,
                                      vigil_error *err)
{
    return vigil_sandbox_run_keyed(rt, agent_id, NULL, language, code, code_len, out_json, err);
}

vigil_code vigil_sandbox_run_keyed(vigil_runtime *rt, const char *agent_id, const char *run_key,
                                   const char *language, const char *code, size_t code_len,
                                   char **out_json, vigil_error *err)
{
    json_t *out = NULL;
    if (!rt || !code || !out_json)
        return VG_FAIL(err, VIGIL_EINVAL, "sandbox run needs a runtime, code and an output");
    if (language && !vg_code_language_adapter(language))
        return VG_FAIL(err, VIGIL_EINVAL, "language \"%s\": use " VG_CODE_LANGUAGES, language);
    vigil_code rc;
    if (agent_id) {
        json_t *args = json_pack("{s:s%}", "code", code, code_len);
        if (!args)
            return VG_FAIL(err, VIGIL_EINVAL, "the program is not UTF-8 text");
        if (language)
            json_object_set_new(args, "language", json_string(language));
        rc = run_as_agent(rt, agent_id, run_key, args, &out, err);
        json_decref(args);
    } else {
        rc = run_plain(rt, language, code, code_len, &out, err);
    }
    if (rc && out) { /* a refusal still has its answer */
        vigil_error keep = err ? *err : (vigil_error){0};
        if (give_json(out, out_json, err) == VIGIL_OK && err)
            *err = keep;
        return rc;
    }
    return rc ? rc : give_json(out, out_json, err);
}

vigil_code vigil_sandbox_run(vigil_runtime *rt, const char *agent_id, const char *code,
                             size_t code_len, char **out_json, vigil_error *err)
{
    return vigil_sandbox_run_language(rt, agent_id, NULL, code, code_len, out_json, err);
}
