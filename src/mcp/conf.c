/*
 * conf.c: the `mcp_servers` section of the config file:
 *   mcp_servers: {NAME: {command: [argv...], env: {K: V}, cwd, timeout_ms, max_message_bytes,
 *                        tools: {TOOL: {risk, mutating, idempotent}}}
 *                 | {url: URL, headers: {K: V}, ...}}
 * Values of env and headers are kept as written: their ${NAME}s are interpolated from vigil's
 * environment only when the server starts, so a secret is never held longer than that.
 */
#include "mcp/mcp.h"

#include "base/buf.h"
#include "base/hash.h"
#include "base/json.h"
#include "os/fs.h"

#define DEFAULT_TIMEOUT_MS 60000
#define DEFAULT_MAX_MESSAGE ((size_t)8 << 20)

static int server_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 32 || !(s[0] >= 'a' && s[0] <= 'z') || strstr(s, "__") || s[n - 1] == '_')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

static void server_free(struct vg_mcp_server_conf *s)
{
    for (size_t i = 0; s->argv && s->argv[i]; i++)
        vg_free(s->argv[i]);
    for (size_t i = 0; s->env && s->env[i]; i++)
        vg_free(s->env[i]);
    vg_free(s->argv);
    vg_free(s->env);
    vg_free(s->name);
    vg_free(s->cwd);
    vg_free(s->url);
    json_decref(s->headers);
    json_decref(s->tools);
}

void vg_mcp_conf_free(struct vg_mcp_conf *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        server_free(&c->servers[i]);
    vg_free(c->servers);
    vg_free(c);
}

static vigil_code read_argv(const char *name, json_t *cmd, struct vg_mcp_server_conf *s,
                            vigil_error *err)
{
    size_t i, n = json_array_size(cmd);
    json_t *v;
    if (!json_is_array(cmd) || n == 0)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "mcp_servers.%s.command must be a non-empty list (program and arguments)",
                       name);
    if (!(s->argv = vg_calloc(n + 1, sizeof *s->argv)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
    json_array_foreach (cmd, i, v) {
        if (!json_is_string(v) || (i == 0 && !*json_string_value(v)))
            return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s.command[%zu] must be a %sstring",
                           name, i, i == 0 ? "non-empty " : "");
        if (!(s->argv[i] = vg_strdup(json_string_value(v))))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
    }
    return VIGIL_OK;
}

static vigil_code read_env(const char *name, json_t *env, struct vg_mcp_server_conf *s,
                           vigil_error *err)
{
    const char *k;
    json_t *v;
    size_t i = 0;
    if (!env)
        return VIGIL_OK;
    if (!json_is_object(env))
        return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s.env must be a mapping", name);
    if (!(s->env = vg_calloc(json_object_size(env) + 1, sizeof *s->env)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
    json_object_foreach (env, k, v) {
        if (!json_is_string(v) || !*k || strchr(k, '='))
            return VG_FAIL(err, VIGIL_EINVAL,
                           "mcp_servers.%s.env.%s must be a string (and the name have no '=')",
                           name, k);
        size_t len = strlen(k) + strlen(json_string_value(v)) + 2;
        if (!(s->env[i] = vg_malloc(len)))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
        snprintf(s->env[i++], len, "%s=%s", k, json_string_value(v));
    }
    return VIGIL_OK;
}

static vigil_code check_overrides(const char *name, json_t *tools, vigil_error *err)
{
    static const char *const risks[] = {"low", "medium", "high"};
    const char *k, *f;
    json_t *t, *v;
    if (!json_is_object(tools))
        return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s.tools must be a mapping", name);
    json_object_foreach (tools, k, t) {
        if (!json_is_object(t))
            return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s.tools.%s must be a mapping", name, k);
        json_object_foreach (t, f, v) {
            int ok = 0;
            if (!strcmp(f, "risk"))
                for (size_t i = 0; i < 3 && json_is_string(v); i++)
                    ok |= !strcmp(json_string_value(v), risks[i]);
            else if (!strcmp(f, "mutating") || !strcmp(f, "idempotent"))
                ok = json_is_boolean(v);
            else
                return VG_FAIL(err, VIGIL_EINVAL,
                               "mcp_servers.%s.tools.%s: unknown key \"%s\" (risk, mutating, "
                               "idempotent)",
                               name, k, f);
            if (!ok)
                return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s.tools.%s.%s must be %s", name, k,
                               f, !strcmp(f, "risk") ? "low, medium or high" : "true or false");
        }
    }
    return VIGIL_OK;
}

static vigil_code read_server(const char *name, json_t *e, struct vg_mcp_server_conf *s,
                              vigil_error *err)
{
    static const char *const known[] = {"command", "env",     "cwd",   "timeout_ms",
                                        "url",     "headers", "tools", "max_message_bytes"};
    const char *k;
    json_t *v;
    vigil_code rc;
    if (!server_name_ok(name))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "mcp_servers: \"%s\" is not a valid server name (lowercase letters, "
                       "digits and single _, starting with a letter, at most 32)",
                       name);
    if (!json_is_object(e))
        return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s must be a mapping", name);
    json_object_foreach (e, k, v) {
        size_t i = 0;
        while (i < VG_ARRAY_LEN(known) && strcmp(k, known[i]))
            i++;
        if (i == VG_ARRAY_LEN(known))
            return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s: unknown key \"%s\"", name, k);
    }
    json_t *cmd = json_object_get(e, "command"), *url = json_object_get(e, "url");
    if (!cmd == !url)
        return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s needs exactly one of command and url",
                       name);
    if (!(s->name = vg_strdup(name)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
    if (cmd && (rc = read_argv(name, cmd, s, err)))
        return rc;
    if (url && (!json_is_string(url) || !(s->url = vg_strdup(json_string_value(url)))))
        return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s.url must be a string", name);
    if ((rc = read_env(name, json_object_get(e, "env"), s, err)))
        return rc;
    v = json_object_get(e, "cwd");
    if (v && (!json_is_string(v) || !(s->cwd = vg_strdup(json_string_value(v)))))
        return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s.cwd must be a string", name);
    v = json_object_get(e, "timeout_ms");
    if (v && (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 3600000))
        return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s.timeout_ms must be 1..3600000", name);
    s->timeout_ms = v ? (int)json_integer_value(v) : DEFAULT_TIMEOUT_MS;
    v = json_object_get(e, "max_message_bytes");
    if (v && (!json_is_integer(v) || json_integer_value(v) < 1024))
        return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s.max_message_bytes must be >= 1024", name);
    s->max_message = v ? (size_t)json_integer_value(v) : DEFAULT_MAX_MESSAGE;
    v = json_object_get(e, "headers");
    if (v && !json_is_object(v))
        return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers.%s.headers must be a mapping", name);
    s->headers = json_incref(v);
    v = json_object_get(e, "tools");
    if (v && (rc = check_overrides(name, v, err)))
        return rc;
    s->tools = json_incref(v);
    return VIGIL_OK;
}

vigil_code vg_mcp_conf_parse(const json_t *mcp_servers, struct vg_mcp_conf **out, vigil_error *err)
{
    const char *k;
    json_t *v;
    vigil_code rc = VIGIL_OK;
    struct vg_mcp_conf *c = vg_calloc(1, sizeof *c);
    if (!c)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
    if (mcp_servers && !json_is_null(mcp_servers) && !json_is_object(mcp_servers)) {
        vg_free(c);
        return VG_FAIL(err, VIGIL_EINVAL, "mcp_servers must be a mapping of server names");
    }
    size_t n = json_object_size(mcp_servers);
    if (n && !(c->servers = vg_calloc(n, sizeof *c->servers))) {
        vg_free(c);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
    }
    json_object_foreach ((json_t *)mcp_servers, k, v) {
        rc = read_server(k, v, &c->servers[c->n++], err);
        if (rc)
            break;
    }
    if (rc) {
        vg_mcp_conf_free(c);
        return rc;
    }
    *out = c;
    return VIGIL_OK;
}

vigil_code vg_mcp_conf_take(struct vg_mcp_conf *c, size_t i, struct vg_mcp_conf **out,
                            vigil_error *err)
{
    struct vg_mcp_conf *one = vg_calloc(1, sizeof *one);
    struct vg_mcp_server_conf *s = one ? vg_calloc(1, sizeof *s) : NULL;
    char *name = s ? vg_strdup(c->servers[i].name) : NULL;
    if (!name) {
        vg_free(s);
        vg_free(one);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading mcp_servers");
    }
    *s = c->servers[i];
    c->servers[i] = (struct vg_mcp_server_conf){.name = name};
    one->servers = s;
    one->n = 1;
    *out = one;
    return VIGIL_OK;
}

const struct vg_mcp_server_conf *vg_mcp_conf_find(const struct vg_mcp_conf *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->n; i++)
        if (!strcmp(c->servers[i].name, name))
            return &c->servers[i];
    return NULL;
}

char *vg_mcp_interpolate(const char *t, char missing[130])
{
    struct vg_buf b;
    if (missing)
        missing[0] = '\0';
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    while (*t) {
        const char *end;
        if (t[0] == '$' && t[1] == '$' && t[2] == '{') { /* "$${" is a literal "${" */
            vg_buf_puts(&b, "${");
            t += 3;
        } else if (t[0] == '$' && t[1] == '{' && (end = strchr(t + 2, '}')) && end - t - 2 < 128) {
            char var[130];
            memcpy(var, t + 2, (size_t)(end - t - 2));
            var[end - t - 2] = '\0';
            const char *val = vg_os_getenv(var);
            if (!val && missing) { /* as a command tool's: refused, naming it (trial E25) */
                snprintf(missing, 130, "%s", var);
                vg_buf_release(&b);
                return NULL;
            }
            vg_buf_puts(&b, val ? val : "");
            t = end + 1;
        } else {
            vg_buf_putc(&b, *t++);
        }
    }
    if (b.fail) {
        vg_buf_release(&b);
        return NULL;
    }
    char *s = vg_buf_detach(&b, NULL);
    return s ? s : vg_strdup(""); /* an empty buffer detaches to NULL on some paths */
}

void vg_mcp_conf_hash(const struct vg_mcp_server_conf *s, char out[65])
{
    json_t *argv = json_array(), *env = json_array();
    for (size_t i = 0; s->argv && s->argv[i]; i++)
        json_array_append_new(argv, json_string(s->argv[i]));
    for (size_t i = 0; s->env && s->env[i]; i++)
        json_array_append_new(env, json_string(s->env[i])); /* templates, never values */
    json_t *all =
        json_pack("{s:o, s:o, s:s?, s:s?, s:O?, s:O?, s:i, s:I}", "argv", argv, "env", env, "cwd",
                  s->cwd, "url", s->url, "headers", s->headers, "tools", s->tools, "timeout_ms",
                  s->timeout_ms, "max_message", (json_int_t)s->max_message);
    char *text = all ? vg_json_hash_text(all) : NULL; /* reals as hashed before session 37 */
    vg_sha256_hex(out, text ? text : "", text ? strlen(text) : 0);
    vg_free(text);
    json_decref(all);
}
