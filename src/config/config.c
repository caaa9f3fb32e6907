/*
 * config.c: the config file and its environment overrides. YAML goes through libfyaml and is
 * converted node by node into a jansson tree (plain scalars become numbers, booleans or null,
 * quoted ones stay strings); JSON goes straight to jansson. Either way the error names the file
 * and the line. Known keys are type-checked on load so a typo in a value fails early, and
 * secrets in the file are refused: keys come from the environment only.
 */
#include "base/common.h"

#include <errno.h>
#include <libfyaml.h>
#include <pthread.h>

#include "config/config.h"
#include "os/fs.h"

#define MAX_CONFIG_BYTES ((size_t)4 << 20)

struct vg_config {
    json_t *root; /* owned object */
    char *path;
    int shared; /* root's subtrees may be other configs' too (the last parse's): set_value
                 * copies the objects on its path before it writes */
};

/* The environment overrides: variable, key, integer-valued. */
static const struct {
    const char *env;
    const char *key;
    int is_int;
} env_map[] = {
    {"VIGIL_MODEL_PROVIDER", "model.provider", 0},
    {"VIGIL_MODEL_BASE_URL", "model.base_url", 0},
    {"VIGIL_MODEL", "model.name", 0},
    {"VIGIL_MODEL_CASSETTE", "model.cassette", 0},
    {"VIGIL_MODEL_RECORD", "model.record", 0},
    {"VIGIL_MODEL_MAX_RETRIES", "model.max_retries", 1},
    {"VIGIL_MODEL_TIMEOUT_MS", "model.timeout_ms", 1},
    {"VIGIL_EMBED_PROVIDER", "embed.provider", 0},
    {"VIGIL_EMBED_MODEL", "embed.model", 0},
    {"VIGIL_EMBED_BASE_URL", "embed.base_url", 0},
    {"VIGIL_DISPATCH_JUDGE_MODEL", "dispatch.judge_model", 0},
};

/* Known keys and their types, checked on load. 's' string, 'i' integer, 'n' number,
 * 'b' boolean, 'o' object, 'a' array, 'z' a size (an integer or a string: retention.c reads it).
 * Any other key at the top level, or inside one of the sections listed with their keys here (model,
 * embed, agent, sandbox, dispatch, retention, todo, slo), is refused: a misspelled key would
 * otherwise leave its setting at the default without a word. The insides of the other objects
 * (mcp_servers, command_tools, model.prices, sandbox.limits, sandbox.fetch) are checked by the
 * modules that read them. */
static const struct {
    const char *key;
    char type;
} known[] = {
    {"store", 's'}, /* the store path or postgres:// URI, after --store and $VIGIL_STORE */
    {"model", 'o'},
    {"model.provider", 's'},
    {"model.name", 's'},
    {"model.base_url", 's'},
    {"model.cassette", 's'},
    {"model.record", 's'},
    {"model.check_requests", 'b'},
    {"model.max_retries", 'i'},
    {"model.timeout_ms", 'i'},
    {"model.connect_timeout_ms", 'i'},
    {"model.backoff_base_ms", 'i'},
    {"model.backoff_max_ms", 'i'},
    {"model.retry_after_max_ms", 'i'},
    {"model.max_tokens", 'i'},
    {"model.context_window", 'i'},
    {"model.prompt_cache", 'b'},
    {"model.stream_usage", 'b'},
    {"model.anthropic_version", 's'},
    {"model.prices", 'o'},
    {"embed", 'o'},
    {"embed.provider", 's'},
    {"embed.model", 's'},
    {"embed.base_url", 's'},
    {"embed.dimensions", 'i'},
    {"embed.timeout_ms", 'i'},
    {"agent", 'o'},
    {"mcp_servers", 'o'},   /* read by src/mcp (conf.c) */
    {"command_tools", 'o'}, /* read by src/manifest (declared tools; docs/manifests.md) */
    {"agent.max_tool_rounds", 'i'},
    {"agent.max_code_size", 'i'},
    {"agent.code_timeout", 'i'},
    {"agent.max_tool_calls_per_exec", 'i'},
    {"agent.context_budget", 'n'},
    {"sandbox", 'o'}, /* read by src/sandbox (tool_provider.c; docs/sandbox.md) */
    {"sandbox.enabled", 'b'},
    {"sandbox.root", 's'},
    {"sandbox.uid", 'i'},
    {"sandbox.risk", 's'},
    {"sandbox.limits", 'o'},
    {"sandbox.fetch", 'o'},
    {"sandbox.language", 's'},
    {"sandbox.deno", 's'},
    {"sandbox.accept_missing", 'a'},
    {"dispatch", 'o'}, /* read by src/runtime/judge.c (docs/orchestration.md) */
    {"dispatch.judge_model", 's'},
    {"retention", 'o'}, /* read by src/runtime/retention.c (docs/storage.md) */
    {"retention.runtime", 's'},
    {"retention.trace", 's'},
    {"retention.action", 's'},
    {"retention.report", 's'},
    {"retention.summary", 's'},
    {"retention.budget", 'z'},
    {"retention.interval", 's'},
    {"todo", 'o'}, /* read by the command (cli/cmd-todo.c; docs/todo.md) */
    {"todo.path", 's'},
    {"slo", 'o'}, /* read by src/runtime/slo_api.c (docs/operations.md, "Service levels") */
    {"slo.success_rate", 'n'},
    {"slo.side_effect_correctness", 'n'},
    {"slo.latency_p95_ms", 'i'},
    {"slo.cost_per_run_usd", 'n'},
};

/* The sections whose every key is listed in known[]. */
static const char *const closed_sections[][2] = {{"model", "docs/models.md"},
                                                 {"embed", "docs/memory.md"},
                                                 {"agent", "docs/models.md"},
                                                 {"sandbox", "docs/sandbox.md"},
                                                 {"dispatch", "docs/orchestration.md"},
                                                 {"retention", "docs/storage.md"},
                                                 {"todo", "docs/todo.md"},
                                                 {"slo", "docs/operations.md"}};

/* Keys that would hold a secret: refused in the file. */
static const char *secret_keys[] = {"model.api_key", "model.key", "embed.api_key", "embed.key",
                                    "api_key"};

vigil_code vg_config_new(struct vg_config **out, vigil_error *err)
{
    struct vg_config *c = vg_calloc(1, sizeof(*c));
    if (!c || !(c->root = json_object())) {
        vg_free(c);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the config");
    }
    *out = c;
    return VIGIL_OK;
}

void vg_config_free(struct vg_config *cfg)
{
    if (!cfg)
        return;
    json_decref(cfg->root);
    vg_free(cfg->path);
    vg_free(cfg);
}

const char *vg_config_path(const struct vg_config *cfg)
{
    return cfg->path;
}

/* ---- YAML to JSON ---- */

static json_t *plain_scalar(const char *s, size_t n)
{
    char buf[64];
    char *end;
    if (n == 0 || (n == 1 && s[0] == '~') || (n == 4 && memcmp(s, "null", 4) == 0) ||
        (n == 4 && memcmp(s, "Null", 4) == 0) || (n == 4 && memcmp(s, "NULL", 4) == 0))
        return json_null();
    if ((n == 4 &&
         (memcmp(s, "true", 4) == 0 || memcmp(s, "True", 4) == 0 || memcmp(s, "TRUE", 4) == 0)))
        return json_true();
    if ((n == 5 &&
         (memcmp(s, "false", 5) == 0 || memcmp(s, "False", 5) == 0 || memcmp(s, "FALSE", 5) == 0)))
        return json_false();
    if (n < sizeof(buf) &&
        (s[0] == '-' || s[0] == '+' || s[0] == '.' || (s[0] >= '0' && s[0] <= '9'))) {
        memcpy(buf, s, n);
        buf[n] = '\0';
        errno = 0;
        long long ll = strtoll(buf, &end, 10);
        if (*end == '\0' && errno == 0)
            return json_integer(ll);
        double d = strtod(buf, &end);
        if (*end == '\0' && end != buf)
            return json_real(d);
    }
    return json_stringn_nocheck(s, n);
}

static json_t *convert(struct fy_node *n, int depth, const char **why)
{
    json_t *out = NULL;
    void *it = NULL;

    if (depth > 64) {
        *why = "nesting deeper than 64 levels";
        return NULL;
    }
    if (!n)
        return json_null();
    switch (fy_node_get_type(n)) {
    case FYNT_SCALAR: {
        size_t len = 0;
        const char *s = fy_node_get_scalar(n, &len);
        if (!s)
            s = "";
        if (fy_node_get_style(n) == FYNS_PLAIN)
            out = plain_scalar(s, len);
        else
            out = json_stringn_nocheck(s, len);
        if (out && json_is_string(out) && !json_string_value(out)) {
            json_decref(out);
            out = NULL;
        }
        break;
    }
    case FYNT_SEQUENCE: {
        struct fy_node *item;
        out = json_array();
        while (out && (item = fy_node_sequence_iterate(n, &it))) {
            json_t *v = convert(item, depth + 1, why);
            if (!v || json_array_append_new(out, v) != 0) {
                json_decref(out);
                return NULL;
            }
        }
        break;
    }
    case FYNT_MAPPING: {
        struct fy_node_pair *pair;
        out = json_object();
        while (out && (pair = fy_node_mapping_iterate(n, &it))) {
            struct fy_node *k = fy_node_pair_key(pair);
            size_t klen = 0;
            const char *ks = k && fy_node_is_scalar(k) ? fy_node_get_scalar(k, &klen) : NULL;
            if (!ks) {
                *why = "mapping keys must be plain text";
                json_decref(out);
                return NULL;
            }
            char *key = vg_strndup(ks, klen);
            json_t *v = key ? convert(fy_node_pair_value(pair), depth + 1, why) : NULL;
            if (!v || json_object_set_new(out, key, v) != 0) {
                vg_free(key);
                json_decref(out);
                return NULL;
            }
            vg_free(key);
        }
        break;
    }
    }
    return out;
}

/*
 * YAML config text must be UTF-8 without control characters other than LF and CR (YAML
 * forbids them too), and without tabs. Checked before libfyaml sees the text: libfyaml 0.7.12
 * can loop forever on some inputs with stray control bytes, and crashes on a tab in some
 * places ("? a:<tab>:"), all found by fuzz/fuzz_config.c. YAML never allows tabs for
 * indentation; elsewhere spaces do the same job, so a tab is refused with that advice.
 */
enum vg_yaml_text_fault vg_yaml_text_check(const char *text, size_t len, int *line, int *col,
                                           unsigned char *byte)
{
    const unsigned char *p = (const unsigned char *)text;
    *line = 1, *col = 1;
    for (size_t i = 0; i < len;) {
        unsigned char c = p[i];
        *byte = c;
        /* Strict UTF-8 (RFC 3629): no overlong forms, surrogates or leads past U+10FFFF;
         * libfyaml also hangs on some of those. */
        size_t n = c < 0x80                   ? 1
                   : (c >= 0xC2 && c <= 0xDF) ? 2
                   : (c >= 0xE0 && c <= 0xEF) ? 3
                   : (c >= 0xF0 && c <= 0xF4) ? 4
                                              : 0;
        if (n >= 3 && i + 1 < len) {
            unsigned char c1 = p[i + 1];
            if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
                (c == 0xF4 && c1 > 0x8F))
                n = 0;
        }
        if (c == '\t')
            return VG_YAML_TEXT_TAB;
        if ((c < 0x20 && c != '\n' && c != '\r') || c == 0x7F)
            return VG_YAML_TEXT_CONTROL;
        if (n == 0 || i + n > len)
            return VG_YAML_TEXT_UTF8;
        for (size_t k = 1; k < n; k++)
            if ((p[i + k] & 0xC0) != 0x80)
                return VG_YAML_TEXT_UTF8;
        if (c == '\n')
            (*line)++, *col = 1;
        else
            (*col)++;
        i += n;
    }
    return VG_YAML_TEXT_OK;
}

/* The 1-based line and column just after the last byte that is not white space (0, 0: none). */
static void last_text(const char *text, size_t len, int *line, int *col)
{
    int l = 1, c = 1;
    *line = 0, *col = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\n') {
            l++, c = 1;
            continue;
        }
        c++;
        if (text[i] != ' ' && text[i] != '\r')
            *line = l, *col = c;
    }
}

/* The 1-based place of the innermost flow collection (`[` or `{`) still open where libfyaml
 * stops reading the text; 0 when none is. */
static int open_flow_start(const char *text, size_t len, int *line, int *col)
{
    enum { MAX_DEPTH = 64 }; /* deeper nesting keeps the outer 64: still a `[` the user can find */
    struct fy_diag_cfg dcfg;
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.colorize = false;
    struct fy_diag *diag = fy_diag_create(&dcfg);
    struct fy_parse_cfg pcfg = {.flags = FYPCF_QUIET | FYPCF_DEFAULT_PARSE, .diag = diag};
    struct fy_parser *p = diag ? fy_parser_create(&pcfg) : NULL;
    struct fy_mark opened[MAX_DEPTH];
    int flow[MAX_DEPTH], depth = 0, found = 0;
    struct fy_event *e;
    if (p && !fy_parser_set_string(p, text, len))
        while ((e = fy_parser_parse(p))) {
            const struct fy_mark *m = fy_event_start_mark(e);
            if (e->type == FYET_SEQUENCE_START || e->type == FYET_MAPPING_START) {
                if (depth < MAX_DEPTH &&
                    (flow[depth] = m && fy_event_get_node_style(e) == FYNS_FLOW))
                    opened[depth] = *m;
                depth++;
            } else if (e->type == FYET_SEQUENCE_END || e->type == FYET_MAPPING_END)
                depth--;
            fy_parser_event_free(p, e);
        }
    for (int i = (depth < MAX_DEPTH ? depth : MAX_DEPTH) - 1; i >= 0 && !found; i--)
        if (flow[i])
            *line = opened[i].line + 1, *col = opened[i].column + 1, found = 1;
    fy_parser_destroy(p);
    fy_diag_destroy(diag);
    return found;
}

void vg_yaml_error_place(const char *text, size_t len, int *line, int *col)
{
    int last_line, last_col;
    last_text(text, len, &last_line, &last_col);
    if (*line < 1 || *col < 1)
        *line = 1, *col = 1;
    if (*line < last_line || (*line == last_line && *col < last_col))
        return; /* inside the text: libfyaml's place is the one to show */
    if (!open_flow_start(text, len, line, col) && last_line > 0)
        *line = last_line, *col = last_col;
}

static vigil_code check_text(const char *text, size_t len, const char *name, const char *what,
                             vigil_error *err)
{
    int line, col;
    unsigned char c;
    switch (vg_yaml_text_check(text, len, &line, &col, &c)) {
    case VG_YAML_TEXT_OK:
        return VIGIL_OK;
    case VG_YAML_TEXT_TAB:
        return VG_FAIL(err, VIGIL_EPARSE,
                       "malformed %s \"%s\" at line %d: a tab "
                       "character (indent and separate with spaces; write \\t inside a "
                       "double-quoted string)",
                       what, name, line);
    case VG_YAML_TEXT_CONTROL:
        return VG_FAIL(err, VIGIL_EPARSE,
                       "malformed %s \"%s\" at line %d: control "
                       "character 0x%02x",
                       what, name, line, c);
    default:
        return VG_FAIL(err, VIGIL_EPARSE,
                       "malformed %s \"%s\" at line %d: invalid "
                       "UTF-8",
                       what, name, line);
    }
}

/* Whether a YAML text holds nothing but blank lines, comments and document markers (an empty
 * file, or one whose every line is commented out). */
static int yaml_has_no_content(const char *text, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t end = i;
        while (end < len && text[end] != '\n')
            end++;
        size_t at = i;
        while (at < end && (text[at] == ' ' || text[at] == '\r'))
            at++;
        int marker =
            end - at >= 3 && (!strncmp(text + at, "---", 3) || !strncmp(text + at, "...", 3));
        if (at < end && text[at] != '#' && !marker)
            return 0;
        i = end + 1;
    }
    return 1;
}

static vigil_code parse_yaml(const char *text, size_t len, const char *name, const char *what,
                             json_t **out, vigil_error *err)
{
    struct fy_diag_cfg dcfg;
    struct fy_diag *diag;
    struct fy_document *doc;
    vigil_code rc = VIGIL_OK;
    const char *why = NULL;

    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.colorize = false;
    diag = fy_diag_create(&dcfg);
    if (!diag)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory parsing \"%s\"", name);
    fy_diag_set_collect_errors(diag, true);
    struct fy_parse_cfg pcfg = {.flags = FYPCF_QUIET | FYPCF_DEFAULT_PARSE, .diag = diag};

    doc = fy_document_build_from_string(&pcfg, text, len);
    if (!doc && yaml_has_no_content(text, len)) {
        /* libfyaml makes no document of a stream without one, and says nothing wrong: a file
         * with every key at its default, as a missing one (trial K10). */
        if (!(*out = json_object()))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory parsing \"%s\"", name);
        goto out;
    }
    if (!doc) {
        void *it = NULL;
        struct fy_diag_error *de = fy_diag_errors_iterate(diag, &it);
        int line = de ? de->line : 1, col = de ? de->column : 1;
        /* libfyaml 0.7.12's diagnostics count lines and columns from 1 already. */
        vg_yaml_error_place(text, len, &line, &col);
        if (de)
            rc = VG_FAIL(err, VIGIL_EPARSE, "malformed %s \"%s\" at line %d, column %d: %s", what,
                         name, line, col, de->msg ? de->msg : "syntax error");
        else
            rc = VG_FAIL(err, VIGIL_EPARSE, "malformed %s \"%s\"", what, name);
        goto out;
    }
    struct fy_node *root = fy_document_root(doc);
    json_t *j = root ? convert(root, 0, &why) : json_object();
    if (!j) {
        rc = why ? VG_FAIL(err, VIGIL_EPARSE, "malformed %s \"%s\": %s", what, name, why)
                 : VG_FAIL(err, VIGIL_ENOMEM, "out of memory parsing \"%s\"", name);
        goto out;
    }
    if (json_is_null(j)) { /* an empty file */
        json_decref(j);
        j = json_object();
    }
    *out = j;
out:
    fy_document_destroy(doc);
    fy_diag_destroy(diag);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static vigil_code check_types(struct vg_config *c, const char *name, vigil_error *err)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(secret_keys); i++)
        if (vg_config_get(c, secret_keys[i]))
            return VG_FAIL(err, VIGIL_EINVAL,
                           "config \"%s\" holds \"%s\": api keys are read only from the "
                           "environment (OPENAI_API_KEY, ANTHROPIC_API_KEY)",
                           name, secret_keys[i]);
    for (size_t i = 0; i < VG_ARRAY_LEN(known); i++) {
        json_t *v = vg_config_get(c, known[i].key);
        int ok = 1;
        const char *want = "";
        if (!v || json_is_null(v))
            continue;
        switch (known[i].type) {
        case 's':
            ok = json_is_string(v);
            want = "a string";
            break;
        case 'i':
            ok = json_is_integer(v);
            want = "an integer";
            break;
        case 'n':
            ok = json_is_number(v);
            want = "a number";
            break;
        case 'b':
            ok = json_is_boolean(v);
            want = "true or false";
            break;
        case 'o':
            ok = json_is_object(v);
            want = "a mapping";
            break;
        case 'a':
            ok = json_is_array(v);
            want = "a list";
            break;
        case 'z':
            ok = json_is_integer(v) || json_is_string(v);
            want = "a size (a byte count, or a number and KB, MB, GB or TB)";
            break;
        }
        if (!ok)
            return VG_FAIL(err, VIGIL_EINVAL, "config \"%s\": \"%s\" must be %s", name,
                           known[i].key, want);
    }
    return VIGIL_OK;
}

static int known_key(const char *key)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(known); i++)
        if (!strcmp(known[i].key, key))
            return 1;
    return 0;
}

/* Every top-level key of a config file, and every key of a closed section, must be a known
 * one (vg_config_parse, which tests and tools use on any text, does not ask). */
static vigil_code check_unknown(const json_t *root, const char *name, vigil_error *err)
{
    const char *k, *sub;
    json_t *v, *w;
    char path[300];
    json_object_foreach ((json_t *)root, k, v) {
        if (!known_key(k))
            return VG_FAIL(err, VIGIL_EINVAL,
                           "config \"%s\": unknown key \"%s\" at the top level (store, model, "
                           "embed, agent, sandbox, dispatch, retention, mcp_servers, "
                           "command_tools)",
                           name, k);
        for (size_t i = 0; i < VG_ARRAY_LEN(closed_sections) && json_is_object(v); i++) {
            if (strcmp(k, closed_sections[i][0]))
                continue;
            json_object_foreach (v, sub, w) {
                snprintf(path, sizeof path, "%s.%s", k, sub);
                if (!known_key(path))
                    return VG_FAIL(err, VIGIL_EINVAL,
                                   "config \"%s\": unknown key \"%s\" under %s (%s lists its keys)",
                                   name, sub, k, closed_sections[i][1]);
            }
        }
    }
    return VIGIL_OK;
}

/* A config holding root (taken), its known keys' types checked. */
static vigil_code config_of(json_t *root, const char *name, struct vg_config **out,
                            vigil_error *err)
{
    struct vg_config *c = NULL;
    vigil_code rc = vg_config_new(&c, err);
    if (rc != VIGIL_OK) {
        json_decref(root);
        return rc;
    }
    json_decref(c->root);
    c->root = root;
    rc = check_types(c, name, err);
    if (rc != VIGIL_OK) {
        vg_config_free(c);
        return rc;
    }
    *out = c;
    return VIGIL_OK;
}

vigil_code vg_config_parse(const char *text, size_t len, const char *name, struct vg_config **out,
                           vigil_error *err)
{
    json_t *root = NULL;
    vigil_code rc;

    vg_alloc_install_json();
    if (!name)
        name = "(text)";
    if (ends_with(name, ".json")) {
        json_error_t je;
        root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!root && json_error_code(&je) == json_error_out_of_memory)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory parsing \"%s\"", name);
        if (!root)
            return VG_FAIL(err, VIGIL_EPARSE, "malformed config \"%s\" at line %d, column %d: %s",
                           name, je.line, je.column, je.text);
    } else {
        rc = check_text(text, len, name, "config", err);
        if (rc == VIGIL_OK)
            rc = parse_yaml(text, len, name, "config", &root, err);
        if (rc != VIGIL_OK)
            return rc;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return VG_FAIL(err, VIGIL_EPARSE,
                       "malformed config \"%s\": the top level must be a "
                       "mapping",
                       name);
    }
    return config_of(root, name, out, err);
}

vigil_code vg_doc_parse(const char *text, size_t len, const char *name, const char *what,
                        json_t **out, vigil_error *err)
{
    vigil_code rc;
    vg_alloc_install_json();
    if (ends_with(name, ".json")) {
        json_error_t je;
        *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!*out && json_error_code(&je) == json_error_out_of_memory)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory parsing \"%s\"", name);
        if (!*out)
            return VG_FAIL(err, VIGIL_EPARSE, "malformed %s \"%s\" at line %d, column %d: %s", what,
                           name, je.line, je.column, je.text);
        return VIGIL_OK;
    }
    if ((rc = check_text(text, len, name, what, err)))
        return rc;
    return parse_yaml(text, len, name, what, out, err);
}

/*
 * The last config file this process parsed: its path, text and tree (before the environment's
 * overrides). A process loads the same file several times (a starting daemon: each runtime it
 * opens loads it), and libfyaml's parse is most of a load (docs/internals/PERF.md,
 * "Figures that code comments cite"); a load whose text is byte for byte
 * the last one's shares its tree instead (read-only: set_value copies what it writes on).
 * Comparing the text, not the file's time stamps, means an edited file is never served stale.
 */
static struct {
    pthread_mutex_t lock;
    char *path, *text;
    size_t len;
    json_t *root;
} last_parsed = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The last parsed tree (a reference) when path and text are the last parse's, else NULL. */
static json_t *reparsed(const char *path, const char *text, size_t len)
{
    json_t *root = NULL;
    pthread_mutex_lock(&last_parsed.lock);
    if (last_parsed.root && last_parsed.len == len && !strcmp(last_parsed.path, path) &&
        !memcmp(last_parsed.text, text, len))
        root = json_incref(last_parsed.root);
    pthread_mutex_unlock(&last_parsed.lock);
    return root;
}

/* Keep c's tree (shared from now on) as the last parse of path's text (nothing when out of
 * memory). */
static void keep_parsed(const char *path, const char *text, size_t len, struct vg_config *c)
{
    char *p = vg_strdup(path), *t = vg_malloc(len + 1);
    if (!p || !t) {
        vg_free(p), vg_free(t);
        return;
    }
    json_t *root = json_incref(c->root);
    c->shared = 1;
    memcpy(t, text, len);
    pthread_mutex_lock(&last_parsed.lock);
    vg_free(last_parsed.path), vg_free(last_parsed.text), json_decref(last_parsed.root);
    last_parsed.path = p, last_parsed.text = t, last_parsed.len = len, last_parsed.root = root;
    pthread_mutex_unlock(&last_parsed.lock);
}

/* vg_config_parse of a file's text, or a copy of the same text's last parse. */
static vigil_code parse_file_text(const char *text, size_t len, const char *path,
                                  struct vg_config **out, vigil_error *err)
{
    json_t *root = reparsed(path, text, len);
    if (root) {
        vigil_code rc = config_of(root, path, out, err);
        if (!rc)
            (*out)->shared = 1;
        return rc;
    }
    vigil_code rc = vg_config_parse(text, len, path, out, err);
    if (!rc)
        keep_parsed(path, text, len, *out);
    return rc;
}

vigil_code vg_config_default_path(char *out, size_t n, vigil_error *err)
{
    const char *v = vg_os_getenv("VIGIL_CONFIG");
    int w;
    if (v && v[0])
        w = snprintf(out, n, "%s", v);
    else if ((v = vg_os_getenv("XDG_CONFIG_HOME")) && v[0])
        w = snprintf(out, n, "%s/vigil/config.yaml", v);
    else if ((v = vg_os_getenv("HOME")) && v[0])
        w = snprintf(out, n, "%s/.config/vigil/config.yaml", v);
    else
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no config path: HOME is not set");
    if (w < 0 || (size_t)w >= n)
        return VG_FAIL(err, VIGIL_ETOOBIG, "config path is too long");
    return VIGIL_OK;
}

vigil_code vg_config_load(const char *path, struct vg_config **out, vigil_error *err)
{
    char def[4096];
    char *text = NULL;
    size_t len = 0;
    struct vg_config *c = NULL;
    vigil_code rc;
    int explicit_path = path != NULL;
    const char *env = vg_os_getenv("VIGIL_CONFIG");

    if (!path) {
        explicit_path = env && env[0];
        rc = vg_config_default_path(def, sizeof(def), err);
        if (rc != VIGIL_OK && explicit_path)
            return rc;
        path = rc == VIGIL_OK ? def : NULL;
    }
    if (path && vg_fs_exists(path)) {
        rc = vg_fs_read_file(path, MAX_CONFIG_BYTES, &text, &len, err);
        if (rc != VIGIL_OK)
            return rc;
        rc = parse_file_text(text, len, path, &c, err);
        vg_free(text);
        if (rc != VIGIL_OK)
            return rc;
        if ((rc = check_unknown(c->root, path, err))) {
            vg_config_free(c);
            return rc;
        }
        if (!(c->path = vg_strdup(path))) {
            vg_config_free(c);
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory loading the config");
        }
    } else if (path && explicit_path) {
        return VG_FAIL(err, VIGIL_ENOTFOUND, "config file \"%s\" not found", path);
    } else {
        rc = vg_config_new(&c, err);
        if (rc != VIGIL_OK)
            return rc;
    }
    rc = vg_config_apply_env(c, err);
    if (rc != VIGIL_OK) {
        vg_config_free(c);
        return rc;
    }
    *out = c;
    return VIGIL_OK;
}

/* ---- lookups ---- */

json_t *vg_config_get(const struct vg_config *cfg, const char *key)
{
    json_t *node = cfg ? cfg->root : NULL;
    const char *p = key;
    char part[128];

    while (node && p && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof(part) || !json_is_object(node))
            return NULL;
        memcpy(part, p, n);
        part[n] = '\0';
        node = json_object_get(node, part);
        p = dot ? dot + 1 : NULL;
    }
    return node;
}

const char *vg_config_get_string(const struct vg_config *cfg, const char *key, const char *def)
{
    json_t *v = vg_config_get(cfg, key);
    return json_is_string(v) ? json_string_value(v) : def;
}

int64_t vg_config_get_int(const struct vg_config *cfg, const char *key, int64_t def)
{
    json_t *v = vg_config_get(cfg, key);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == (double)(int64_t)d)
            return (int64_t)d;
    }
    return def;
}

double vg_config_get_double(const struct vg_config *cfg, const char *key, double def)
{
    json_t *v = vg_config_get(cfg, key);
    return json_is_number(v) ? json_number_value(v) : def;
}

int vg_config_get_bool(const struct vg_config *cfg, const char *key, int def)
{
    json_t *v = vg_config_get(cfg, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

vigil_code vg_config_string(const struct vg_config *cfg, const char *key, const char *def,
                            const char **out, vigil_error *err)
{
    json_t *v = vg_config_get(cfg, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return VIGIL_OK;
    }
    if (!json_is_string(v))
        return VG_FAIL(err, VIGIL_EINVAL, "config key \"%s\" must be a string", key);
    *out = json_string_value(v);
    return VIGIL_OK;
}

vigil_code vg_config_int(const struct vg_config *cfg, const char *key, int64_t def, int64_t *out,
                         vigil_error *err)
{
    json_t *v = vg_config_get(cfg, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return VIGIL_OK;
    }
    if (!json_is_integer(v))
        return VG_FAIL(err, VIGIL_EINVAL, "config key \"%s\" must be an integer", key);
    *out = (int64_t)json_integer_value(v);
    return VIGIL_OK;
}

/* ---- setting ---- */

/* *obj replaced by a shallow copy of it (its members shared), which it returns; NULL when out
 * of memory (*obj unchanged). */
static json_t *own_copy(json_t **obj)
{
    json_t *copy = json_copy(*obj);
    if (copy) {
        json_decref(*obj);
        *obj = copy;
    }
    return copy;
}

static vigil_code set_value(struct vg_config *cfg, const char *key, json_t *value, vigil_error *err)
{
    json_t *node = cfg->root;
    const char *p = key;
    char part[128];

    if (!value)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory setting \"%s\"", key);
    if (cfg->shared && !(node = own_copy(&cfg->root))) {
        json_decref(value);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory setting \"%s\"", key);
    }
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n == 0 || n >= sizeof(part)) {
            json_decref(value);
            return VG_FAIL(err, VIGIL_EINVAL, "bad config key \"%s\"", key);
        }
        memcpy(part, p, n);
        part[n] = '\0';
        if (!dot) {
            if (json_object_set_new(node, part, value) != 0)
                return VG_FAIL(err, VIGIL_ENOMEM, "out of memory setting \"%s\"", key);
            return VIGIL_OK;
        }
        json_t *next = json_object_get(node, part);
        if (cfg->shared && json_is_object(next)) { /* written below: this config's own copy */
            next = json_copy(next);
            if (next && json_object_set_new(node, part, next) != 0)
                next = NULL;
            if (!next) {
                json_decref(value);
                return VG_FAIL(err, VIGIL_ENOMEM, "out of memory setting \"%s\"", key);
            }
        }
        if (!json_is_object(next)) {
            next = json_object();
            if (!next || json_object_set_new(node, part, next) != 0) {
                json_decref(value);
                return VG_FAIL(err, VIGIL_ENOMEM, "out of memory setting \"%s\"", key);
            }
        }
        node = next;
        p = dot + 1;
    }
}

vigil_code vg_config_set_string(struct vg_config *cfg, const char *key, const char *value,
                                vigil_error *err)
{
    json_t *v = json_string(value);
    if (!v && value)
        return VG_FAIL(err, VIGIL_EINVAL, "value for \"%s\" is not valid UTF-8", key);
    return set_value(cfg, key, v, err);
}

vigil_code vg_config_set_int(struct vg_config *cfg, const char *key, int64_t value,
                             vigil_error *err)
{
    return set_value(cfg, key, json_integer((json_int_t)value), err);
}

vigil_code vg_config_apply_env(struct vg_config *cfg, vigil_error *err)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(env_map); i++) {
        const char *v = vg_os_getenv(env_map[i].env);
        vigil_code rc;
        if (!v || !v[0])
            continue;
        if (env_map[i].is_int) {
            char *end;
            errno = 0;
            long long n = strtoll(v, &end, 10);
            if (*end != '\0' || errno != 0 || n < 0)
                return VG_FAIL(err, VIGIL_EINVAL, "%s must be a non-negative integer, got \"%s\"",
                               env_map[i].env, v);
            rc = vg_config_set_int(cfg, env_map[i].key, n, err);
        } else {
            rc = vg_config_set_string(cfg, env_map[i].key, v, err);
        }
        if (rc != VIGIL_OK)
            return rc;
    }
    return VIGIL_OK;
}
