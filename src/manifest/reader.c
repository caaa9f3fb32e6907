/*
 * reader.c: manifest text to validated JSON. YAML and JSON both go through libfyaml, which
 * keeps where each scalar starts, so every problem names its line and column; JSON is first
 * read by jansson too, whose error position is the one a JSON user expects for a syntax error.
 * The schema check is vigil's own validator (src/tool/schema.c) against the embedded copy of
 * share/schema/manifest.schema.json; rules the schema cannot say (globs, timer schedules, tool
 * contracts, secrets) are checked after it.
 *
 * Sections: text checks; YAML to JSON with marks; problems; schema; rules; parse.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/buf.h"
#include "config/config.h"
#include "manifest/manifest.h"
#include "tool/schema.h"
#include "tool/tool.h"
#include "wake/wake.h"

#include <errno.h>
#include <libfyaml.h>
#include <stdarg.h>

/* share/schema/manifest.schema.json, written as bytes at build time (cmake/embed_text.cmake). */
static const unsigned char schema_text[] =
#include "manifest/schema.inc"
    ;

json_t *vg_manifest_schema(void)
{
    json_error_t je;
    return json_loads((const char *)schema_text, 0, &je);
}

/* ---- text checks ------------------------------------------------------------------------- */

/* The text checks of the config file (vg_yaml_text_check), before libfyaml sees the text. */
static int text_fault(const char *text, size_t len, int *line, int *col, const char **why)
{
    unsigned char byte;
    switch (vg_yaml_text_check(text, len, line, col, &byte)) {
    case VG_YAML_TEXT_OK:
        return 0;
    case VG_YAML_TEXT_TAB:
        return *why = "a tab character (indent and separate with spaces)", 1;
    case VG_YAML_TEXT_CONTROL:
        return *why = "a control character", 1;
    default:
        return *why = "invalid UTF-8", 1;
    }
}

/* ---- YAML to JSON with marks --------------------------------------------------------------- */

struct reader {
    json_t *marks;   /* JSON pointer -> [line, column] where its value starts; a mapping
                      * member's adds [key line, key column] */
    json_t *dups;    /* pointers of keys written twice in one mapping (array) */
    const char *why; /* set when conversion fails for a reason other than memory */
    char ptr[1024];  /* the pointer of the node being converted */
    size_t ptr_len;
    size_t values; /* converted so far: aliases may repeat a subtree many times over */
    size_t text;   /* bytes of scalar text converted so far, aliases repeating it counted */
};

/* The most values a manifest converts to: far above any real one, and a bound on what aliases
 * of aliases (each repeating the one before) could expand to. */
#define MANIFEST_MAX_VALUES 100000
/* The most scalar text it converts to: aliases of a few long strings expand to gigabytes within
 * the value count (a 200 KB file took 1.5 GB: trial H11); 16 files' worth is far above a real
 * manifest's reuse of its anchors. */
#define MANIFEST_MAX_TEXT (16 * VG_MANIFEST_MAX_BYTES)

static json_t *plain_scalar(const char *s, size_t n)
{
    char buf[64], *end;
    if (n == 0 || (n == 1 && s[0] == '~') || (n == 4 && !memcmp(s, "null", 4)))
        return json_null();
    if (n == 4 && !memcmp(s, "true", 4))
        return json_true();
    if (n == 5 && !memcmp(s, "false", 5))
        return json_false();
    if (n < sizeof buf) {
        memcpy(buf, s, n);
        buf[n] = '\0';
    }
    /* A number is digits, sign, point and exponent only: "inf", "nan" and "0x10" stay text. */
    if (n < sizeof buf && strspn(buf, "0123456789+-.eE") == n && strpbrk(buf, "0123456789")) {
        errno = 0;
        long long ll = strtoll(buf, &end, 10);
        if (*end == '\0' && errno == 0)
            return json_integer(ll);
        double d = strtod(buf, &end);
        if (*end == '\0' && end != buf)
            return json_real(d);
    }
    return json_stringn(s, n);
}

/* Where a node starts: its own token for a scalar, else its first scalar inside. */
static int node_mark(struct fy_node *n, int *line, int *col, int depth)
{
    void *it = NULL;
    if (!n || depth > 64)
        return 0;
    if (fy_node_is_scalar(n)) {
        struct fy_token *t = fy_node_get_scalar_token(n);
        const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
        if (!m)
            return 0;
        /* A quoted scalar's token starts after its quote; the quote is where a reader looks. */
        int quoted = fy_node_get_style(n) == FYNS_DOUBLE_QUOTED ||
                     fy_node_get_style(n) == FYNS_SINGLE_QUOTED;
        *line = m->line + 1, *col = m->column + 1 - (quoted && m->column > 0);
        return 1;
    }
    if (fy_node_is_sequence(n))
        return node_mark(fy_node_sequence_iterate(n, &it), line, col, depth + 1);
    struct fy_node_pair *pair = fy_node_mapping_iterate(n, &it);
    return pair && node_mark(fy_node_pair_key(pair), line, col, depth + 1);
}

/* A mapping member's marks: its value's place (what a bad value points at), then its key's
 * (what an unknown or repeated key points at). A value with no text of its own (`key:` alone)
 * takes its key's place. */
static void remember_member(struct reader *r, struct fy_node *k, struct fy_node *v)
{
    int kline = 0, kcol = 0, vline, vcol;
    if (!node_mark(k, &kline, &kcol, 0))
        return;
    if (!node_mark(v, &vline, &vcol, 0))
        vline = kline, vcol = kcol;
    json_object_set_new(r->marks, r->ptr, json_pack("[i, i, i, i]", vline, vcol, kline, kcol));
}

static void remember(struct reader *r, struct fy_node *n)
{
    int line = 0, col = 0;
    if (node_mark(n, &line, &col, 0))
        json_object_set_new(r->marks, r->ptr, json_pack("[i, i]", line, col));
}

/* Push one pointer segment (escaped as RFC 6901 says); returns the old length. */
static size_t push(struct reader *r, const char *key, size_t klen, size_t index)
{
    size_t old = r->ptr_len;
    struct vg_buf b;
    vg_buf_init(&b, sizeof r->ptr - 1);
    vg_buf_append(&b, r->ptr, r->ptr_len);
    vg_buf_putc(&b, '/');
    if (!key)
        vg_buf_printf(&b, "%zu", index);
    for (size_t i = 0; key && i < klen; i++) {
        if (key[i] == '~')
            vg_buf_puts(&b, "~0");
        else if (key[i] == '/')
            vg_buf_puts(&b, "~1");
        else
            vg_buf_putc(&b, key[i]);
    }
    if (!b.fail) {
        memcpy(r->ptr, b.data, b.len);
        r->ptr_len = b.len;
    }
    r->ptr[r->ptr_len] = '\0';
    vg_buf_release(&b);
    return old;
}

static void pop(struct reader *r, size_t old)
{
    r->ptr_len = old;
    r->ptr[old] = '\0';
}

static json_t *convert(struct reader *r, struct fy_node *n, int depth);

static json_t *convert_sequence(struct reader *r, struct fy_node *n, int depth)
{
    void *it = NULL;
    struct fy_node *item;
    json_t *out = json_array();
    for (size_t i = 0; out && (item = fy_node_sequence_iterate(n, &it)); i++) {
        size_t old = push(r, NULL, 0, i);
        remember(r, item);
        json_t *v = convert(r, item, depth + 1);
        pop(r, old);
        if (!v || json_array_append_new(out, v)) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static json_t *convert_mapping(struct reader *r, struct fy_node *n, int depth)
{
    void *it = NULL;
    struct fy_node_pair *pair;
    json_t *out = json_object();
    while (out && (pair = fy_node_mapping_iterate(n, &it))) {
        struct fy_node *k = fy_node_pair_key(pair);
        size_t klen = 0;
        const char *ks = k && fy_node_is_scalar(k) ? fy_node_get_scalar(k, &klen) : NULL;
        char *key = ks ? vg_strndup(ks, klen) : NULL;
        if (!ks || (key && strlen(key) != klen)) {
            r->why = "mapping keys must be plain text";
            vg_free(key);
            json_decref(out);
            return NULL;
        }
        size_t old = push(r, ks, klen, 0);
        if (key && json_object_get(out, key)) {
            int line = 0, col = 0;
            node_mark(k, &line, &col, 0);
            json_array_append_new(r->dups, json_pack("[s, i, i]", r->ptr, line, col));
        } else {
            remember_member(r, k, fy_node_pair_value(pair));
        }
        json_t *v = key ? convert(r, fy_node_pair_value(pair), depth + 1) : NULL;
        pop(r, old);
        if (!v || json_object_set_new(out, key, v)) {
            vg_free(key);
            json_decref(out);
            return NULL;
        }
        vg_free(key);
    }
    return out;
}

static json_t *convert(struct reader *r, struct fy_node *n, int depth)
{
    if (depth > 64) {
        r->why = "nesting deeper than 64 levels";
        return NULL;
    }
    if (!n)
        return json_null();
    if (++r->values > MANIFEST_MAX_VALUES) {
        r->why = "more than 100000 values (aliases repeating aliases?)";
        return NULL;
    }
    if (fy_node_is_alias(n)) { /* the anchored value itself: a list, a mapping or a scalar */
        struct fy_node *to = fy_node_resolve_alias(n);
        if (!to) {
            r->why = "an alias of no anchor";
            return NULL;
        }
        n = to;
    }
    if (fy_node_is_sequence(n))
        return convert_sequence(r, n, depth);
    if (fy_node_is_mapping(n))
        return convert_mapping(r, n, depth);
    size_t len = 0;
    const char *s = fy_node_get_scalar(n, &len);
    if ((r->text += len) > MANIFEST_MAX_TEXT) {
        r->why = "more than 16 MiB of text once aliases are expanded (aliases repeating long "
                 "strings?)";
        return NULL;
    }
    if (s && memchr(s, '\0', len)) {
        r->why = "a string holding a NUL character";
        return NULL;
    }
    json_t *v = fy_node_get_style(n) == FYNS_PLAIN ? plain_scalar(s ? s : "", len)
                                                   : json_stringn(s ? s : "", len);
    if (!v)
        r->why = "a string that is not valid UTF-8";
    return v;
}

/* ---- problems ------------------------------------------------------------------------------ */

static void problem_at(json_t *problems, const char *file, int line, int col, const char *ptr,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void problem_at(json_t *problems, const char *file, int line, int col, const char *ptr,
                       const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_array_append_new(problems, json_pack("{s:s, s:i, s:i, s:s, s:s}", "file", file, "line",
                                              line, "column", col, "pointer", ptr, "message", msg));
}

/* The mark of ptr (its key's when key and it has one), or of the nearest enclosing value that
 * has one. */
static void find_mark(const json_t *marks, const char *ptr, int key, int *line, int *col)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", ptr);
    for (;;) {
        json_t *m = json_object_get(marks, p);
        if (m) {
            size_t at = key && json_array_size(m) == 4 ? 2 : 0;
            *line = (int)json_integer_value(json_array_get(m, at));
            *col = (int)json_integer_value(json_array_get(m, at + 1));
            return;
        }
        char *slash = strrchr(p, '/');
        if (!slash) {
            *line = 1, *col = 1;
            return;
        }
        *slash = '\0';
    }
}

static void vproblem(json_t *problems, const char *file, const json_t *marks, const char *ptr,
                     int key, const char *fmt, va_list ap)
{
    char msg[512];
    int line, col;
    vsnprintf(msg, sizeof msg, fmt, ap);
    find_mark(marks, ptr, key, &line, &col);
    problem_at(problems, file, line, col, ptr, "%s", msg);
}

/* A problem with the value at ptr, placed where the value starts. */
static void problem(json_t *problems, const char *file, const json_t *marks, const char *ptr,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void problem(json_t *problems, const char *file, const json_t *marks, const char *ptr,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vproblem(problems, file, marks, ptr, 0, fmt, ap);
    va_end(ap);
}

/* A problem with the key of the member at ptr (unknown, or a name not allowed): placed at the key.
 */
static void key_problem(json_t *problems, const char *file, const json_t *marks, const char *ptr,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void key_problem(json_t *problems, const char *file, const json_t *marks, const char *ptr,
                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vproblem(problems, file, marks, ptr, 1, fmt, ap);
    va_end(ap);
}

/* ---- schema -------------------------------------------------------------------------------- */

/* at = ptr "/" key (klen bytes of it), cut to fit n (n >= 2): the place a key's problem names. */
static void pointer_join(char *at, size_t n, const char *ptr, const char *key, size_t klen)
{
    size_t pl = VG_MIN(strlen(ptr), n - 2);
    memcpy(at, ptr, pl);
    at[pl++] = '/';
    klen = VG_MIN(klen, n - 1 - pl);
    memcpy(at + pl, key, klen);
    at[pl + klen] = '\0';
}

/* One validator line "at /a/b: what": an unexpected property is placed at the property itself. */
static void schema_problem(json_t *problems, const char *file, const json_t *marks,
                           const char *line)
{
    char ptr[1024];
    const char *colon = strstr(line, ": ");
    if (strncmp(line, "at ", 3) || !colon) {
        problem(problems, file, marks, "", "%s", line);
        return;
    }
    snprintf(ptr, sizeof ptr, "%.*s", (int)(colon - line - 3), line + 3);
    if (!strcmp(ptr, "(root)"))
        ptr[0] = '\0';
    const char *what = colon + 2;
    const char *q = strstr(what, "unexpected property \"");
    if (q == what) {
        const char *k = what + strlen("unexpected property \"");
        const char *end = strrchr(k, '"');
        char at[1024];
        pointer_join(at, sizeof at, ptr, k, end ? (size_t)(end - k) : 0);
        key_problem(problems, file, marks, at, "unknown key \"%.*s\" (not in the manifest schema)",
                    end ? (int)(end - k) : 0, k);
        return;
    }
    const char *pn = strstr(what, "property name \"");
    if (pn == what) {
        const char *k = what + strlen("property name \"");
        const char *end = strchr(k, '"');
        char at[1024];
        pointer_join(at, sizeof at, ptr, k, end ? (size_t)(end - k) : 0);
        key_problem(
            problems, file, marks, at, "%s: name not allowed: expected %s", at,
            !strcmp(ptr, "/mcp_servers")     ? "a server name: a lowercase letter, then a-z, 0-9 "
                                               "and single _ (not last), at most 32"
            : !strcmp(ptr, "/command_tools") ? "a tool name: a lowercase letter, then up to "
                                               "63 of a-z, 0-9, _ and ."
                                             : "a variable name: letters, digits and _");
        return;
    }
    if (strstr(what, "oneOf") && !strncmp(ptr, "/mcp_servers/", 13)) {
        problem(problems, file, marks, ptr,
                "%s: expected exactly one of command (a stdio server: command: [argv...]) "
                "and url (an HTTP server: url: URL)",
                ptr);
        return;
    }
    if (strstr(what, "oneOf") && !strncmp(ptr, "/timers/", 8)) {
        problem(problems, file, marks, ptr,
                "%s: expected exactly one of cron, rrule or at "
                "(and optionally tz)",
                ptr);
        return;
    }
    problem(problems, file, marks, ptr, "%s%s%s", ptr[0] ? ptr : "", ptr[0] ? ": " : "", what);
}

static vigil_code check_schema(const json_t *doc, const char *file, const json_t *marks,
                               json_t *problems, vigil_error *err)
{
    static struct vg_schema *compiled; /* immutable once built: shared by every caller */
    struct vg_buf lines;
    vigil_code rc = VIGIL_OK;
    if (!__atomic_load_n(&compiled, __ATOMIC_ACQUIRE)) {
        struct vg_schema *s = NULL;
        json_t *j = vg_manifest_schema();
        rc = j ? vg_schema_compile(j, &s, err)
               : VG_FAIL(err, VIGIL_ENOMEM, "out of memory loading the manifest schema");
        json_decref(j);
        if (rc)
            return rc;
        struct vg_schema *none = NULL;
        if (!__atomic_compare_exchange_n(&compiled, &none, s, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            vg_schema_free(s); /* another thread won */
    }
    vg_buf_init(&lines, VG_BUF_DEFAULT_MAX);
    vigil_error verr = {0};
    rc = vg_schema_validate(compiled, doc, &lines, &verr);
    if (rc == VIGIL_EINVAL) {
        for (char *p = lines.data, *nl; p && *p; p = nl + 1) {
            if (!(nl = strchr(p, '\n')))
                break;
            *nl = '\0';
            schema_problem(problems, file, marks, p);
        }
        rc = VIGIL_OK;
    } else if (rc) {
        *err = verr;
    }
    vg_buf_release(&lines);
    return rc;
}

/* ---- rules the schema cannot say ----------------------------------------------------------- */

/* A glob's brackets close: fnmatch would read "[a" as a literal, never what was meant. */
static int glob_ok(const char *g)
{
    for (const char *p = g; *p; p++) {
        if (*p != '[')
            continue;
        const char *q = p + 1;
        if (*q == '!')
            q++;
        if (*q == ']')
            q++;
        while (*q && *q != ']')
            q++;
        if (!*q || q == p + 1)
            return 0;
        p = q;
    }
    return 1;
}

static void check_globs(const json_t *doc, const char *key, const char *file, const json_t *marks,
                        json_t *problems)
{
    size_t i;
    json_t *v;
    char ptr[128];
    json_array_foreach (json_object_get(doc, key), i, v) {
        if (json_is_string(v) && !glob_ok(json_string_value(v))) {
            snprintf(ptr, sizeof ptr, "/%s/%zu", key, i);
            problem(problems, file, marks, ptr,
                    "%s: bad glob \"%s\": expected a tool name or a shell glob whose [ ] "
                    "brackets close",
                    ptr, json_string_value(v));
        }
    }
}

static void check_timers(const json_t *doc, const char *file, const json_t *marks, json_t *problems)
{
    static const struct {
        const char *key;
        enum vg_timer_kind kind;
    } kinds[] = {{"cron", VG_TIMER_CRON}, {"rrule", VG_TIMER_RRULE}, {"at", VG_TIMER_AT}};
    size_t i;
    json_t *t;
    json_array_foreach (json_object_get(doc, "timers"), i, t) {
        const char *tz = json_string_value(json_object_get(t, "tz"));
        for (size_t k = 0; k < VG_ARRAY_LEN(kinds); k++) {
            const char *text = json_string_value(json_object_get(t, kinds[k].key));
            struct vg_timer_spec spec;
            vigil_error terr = {0};
            char ptr[128];
            if (!text)
                continue;
            snprintf(ptr, sizeof ptr, "/timers/%zu/%s", i, kinds[k].key);
            if (tz && !vg_timer_zone_valid(tz)) {
                snprintf(ptr, sizeof ptr, "/timers/%zu/tz", i);
                problem(problems, file, marks, ptr,
                        "%s: unknown time zone \"%s\": expected an "
                        "IANA zone such as \"Europe/Paris\"",
                        ptr, tz);
            } else if (vg_timer_spec_parse(&spec, kinds[k].kind, text, tz, 0, &terr)) {
                problem(problems, file, marks, ptr, "%s: bad %s schedule: %s", ptr, kinds[k].key,
                        terr.message);
            }
        }
    }
}

/* A value that may carry a secret only by reference: "${NAME}" references are well formed
 * ("$${" writes a literal "${", for a shell script's own variables). */
static int refs_ok(const char *s)
{
    for (const char *p = strstr(s, "${"); p; p = strstr(p, "${")) {
        if (p > s && p[-1] == '$') { /* "$${" is a literal "${" */
            p += 2;
            continue;
        }
        const char *q = p + 2;
        if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || *q == '_'))
            return 0;
        while ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') ||
               *q == '_')
            q++;
        if (*q != '}')
            return 0;
        p = q + 1;
    }
    return 1;
}

static void check_refs(const json_t *v, const char *ptr, const char *file, const json_t *marks,
                       json_t *problems)
{
    const char *key;
    json_t *e;
    size_t i;
    char sub[1024];
    if (json_is_string(v) && !refs_ok(json_string_value(v)))
        problem(problems, file, marks, ptr,
                "%s: bad reference in \"%s\": expected ${NAME} with "
                "NAME of letters, digits and _",
                ptr, json_string_value(v));
    json_array_foreach (json_is_array(v) ? v : NULL, i, e) {
        snprintf(sub, sizeof sub, "%s/%zu", ptr, i);
        check_refs(e, sub, file, marks, problems);
    }
    json_object_foreach (json_is_object(v) ? (json_t *)v : NULL, key, e) {
        snprintf(sub, sizeof sub, "%s/%s", ptr, key);
        check_refs(e, sub, file, marks, problems);
    }
}

/* Was a problem already found at or under ptr in this file (say it once)? */
static int reported_under(const json_t *problems, const char *file, const char *ptr)
{
    size_t i, n = strlen(ptr);
    json_t *p;
    json_array_foreach (problems, i, p) {
        const char *pp = json_string_value(json_object_get(p, "pointer"));
        if (!strcmp(json_string_value(json_object_get(p, "file")), file) && pp &&
            !strncmp(pp, ptr, n) && (pp[n] == '\0' || pp[n] == '/'))
            return 1;
    }
    return 0;
}

/* A command tool's input and output schemas, each said at its own line whatever else is
 * wrong with the tool (trial E2); 1 when one is bad. */
static int check_tool_schemas(const json_t *decl, const char *tool_ptr, const char *file,
                              const json_t *marks, json_t *problems)
{
    static const char *const keys[] = {"input_schema", "output_schema"};
    char ptr[600];
    int bad = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(keys); i++) {
        json_t *schema = json_object_get(decl, keys[i]);
        struct vg_schema *compiled = NULL;
        vigil_error e = {0};
        snprintf(ptr, sizeof ptr, "%s/%s", tool_ptr, keys[i]);
        if (!schema || json_is_null(schema) || reported_under(problems, file, ptr)) {
            bad |= schema && reported_under(problems, file, ptr);
            continue;
        }
        if (vg_schema_compile(schema, &compiled, &e)) {
            problem(problems, file, marks, ptr, "%s: %s", ptr, e.message);
            bad = 1;
        }
        vg_schema_free(compiled);
    }
    return bad;
}

static void check_command_tools(const json_t *tools, const char *base, const char *file,
                                const json_t *marks, json_t *problems)
{
    const char *name;
    json_t *decl;
    char ptr[512];
    json_object_foreach ((json_t *)tools, name, decl) {
        snprintf(ptr, sizeof ptr, "%s/%s", base, name);
        /* An MCP tool is SERVER__TOOL: a command tool of that name would replace the server's
         * tool for every agent that uses the server, another agent's manifest deciding. */
        if (strstr(name, "__"))
            key_problem(problems, file, marks, ptr,
                        "%s: name not allowed: \"__\" is reserved for MCP tools (SERVER__TOOL); "
                        "use a single _",
                        ptr);
        json_t *c = vg_manifest_tool_contract(name, decl);
        struct vg_tool_def *d = NULL;
        vigil_error cerr = {0};
        int schema_bad = check_tool_schemas(decl, ptr, file, marks, problems);
        if (c && !schema_bad && !reported_under(problems, file, ptr) &&
            vg_tool_def_parse(c, &d, &cerr))
            problem(problems, file, marks, ptr, "%s: %s", ptr, cerr.message);
        vg_tool_def_free(d);
        json_decref(c);
        snprintf(ptr, sizeof ptr, "%s/%s/command", base, name);
        check_refs(json_object_get(decl, "command"), ptr, file, marks, problems);
        snprintf(ptr, sizeof ptr, "%s/%s/env", base, name);
        check_refs(json_object_get(decl, "env"), ptr, file, marks, problems);
    }
}

/* A budget in dollars and in micros at once: one would win without a word (trial E32). */
static void check_budgets(const json_t *doc, const char *file, const json_t *marks,
                          json_t *problems)
{
    const json_t *b = json_object_get(doc, "budgets");
    if (json_object_get(b, "cost_usd") && json_object_get(b, "cost_micros"))
        problem(problems, file, marks, "/budgets/cost_micros",
                "give budgets.cost_usd or budgets.cost_micros, not both");
}

/* A seed's label, by the rule an agent's own writes follow (src/memory/block.c): no "/" or
 * control character, not "." or ".." (a manifest's rule was stricter than the agent's and
 * refused memory.md's own "user:alice": trial E29). */
static void check_labels(const json_t *doc, const char *file, const json_t *marks, json_t *problems)
{
    size_t i;
    json_t *seed;
    char ptr[64];
    json_array_foreach (json_object_get(doc, "memory"), i, seed) {
        const char *l = json_string_value(json_object_get(seed, "label"));
        int bad = l && (strchr(l, '/') || !strcmp(l, ".") || !strcmp(l, ".."));
        for (const char *p = l; p && *p && !bad; p++)
            bad = (unsigned char)*p < 0x20 || *p == 0x7f;
        snprintf(ptr, sizeof ptr, "/memory/%zu/label", i);
        if (bad)
            problem(problems, file, marks, ptr,
                    "a memory label may not hold \"/\" or a control character, or be \".\" or "
                    "\"..\"");
    }
}

static void check_rules(const json_t *doc, const char *file, const json_t *marks, json_t *problems)
{
    if (vg_agent_name_has_control(json_string_value(json_object_get(doc, "name"))))
        problem(problems, file, marks, "/name", VG_AGENT_NAME_CONTROL_MESSAGE);
    check_budgets(doc, file, marks, problems);
    check_labels(doc, file, marks, problems);
    check_globs(doc, "tools", file, marks, problems);
    check_globs(doc, "require_approval", file, marks, problems);
    check_timers(doc, file, marks, problems);
    check_command_tools(json_object_get(doc, "command_tools"), "/command_tools", file, marks,
                        problems);
    check_refs(json_object_get(doc, "mcp_servers"), "/mcp_servers", file, marks, problems);
}

vigil_code vg_manifest_check_command_tools(const json_t *tools, const char *where, vigil_error *err)
{
    json_t *doc = json_pack("{s:s, s:O}", "name", "config", "command_tools", tools);
    json_t *problems = json_array(), *marks = json_object();
    vigil_code rc = doc && problems && marks
                        ? check_schema(doc, where, marks, problems, err)
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory checking command tools");
    if (!rc)
        check_command_tools(tools, "/command_tools", where, marks, problems);
    if (!rc && json_array_size(problems)) {
        json_t *p = json_array_get(problems, 0);
        rc = VG_FAIL(err, VIGIL_EINVAL, "%s: %s", where,
                     json_string_value(json_object_get(p, "message")));
    }
    json_decref(doc);
    json_decref(problems);
    json_decref(marks);
    return rc;
}

/* A key of an agent's config that no manifest field sets: "" when there is none. */
static const char *unknown_config_key(const json_t *config)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)config, k, v) {
        size_t i = 0;
        while (vg_manifest_config_keys[i] && strcmp(vg_manifest_config_keys[i], k))
            i++;
        if (!vg_manifest_config_keys[i])
            return k;
    }
    return "";
}

vigil_code vg_manifest_check_config(const json_t *config, vigil_error *err)
{
    if (!json_is_object(config))
        return VG_FAIL(err, VIGIL_EINVAL, "config: expected a JSON object of manifest fields");
    const char *unknown = unknown_config_key(config);
    if (*unknown)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "config: unknown key \"%s\" (the keys are a manifest's: tools, "
                       "require_approval, capabilities, limits, budgets, memory, command_tools, "
                       "mcp_servers, ...; docs/manifests.md)",
                       unknown);
    json_t *doc = json_deep_copy(config), *problems = json_array(), *marks = json_object();
    vigil_code rc =
        doc && problems && marks && !json_object_set_new(doc, "name", json_string("config"))
            ? check_schema(doc, "config", marks, problems, err)
            : VG_FAIL(err, VIGIL_ENOMEM, "out of memory checking a config");
    if (!rc)
        check_rules(doc, "config", marks, problems);
    if (!rc && json_array_size(problems)) {
        json_t *p = json_array_get(problems, 0);
        rc = VG_FAIL(err, VIGIL_EINVAL, "config: %s",
                     json_string_value(json_object_get(p, "message")));
    }
    json_decref(doc);
    json_decref(problems);
    json_decref(marks);
    return rc;
}

/* ---- parse --------------------------------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* The YAML (or JSON) document as JSON with marks; syntax problems go to problems. */
static vigil_code read_document(const char *text, size_t len, const char *file, int json,
                                json_t **out, json_t *marks, json_t *problems, vigil_error *err)
{
    struct fy_diag_cfg dcfg;
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.colorize = false;
    struct fy_diag *diag = fy_diag_create(&dcfg);
    if (!diag)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading \"%s\"", file);
    fy_diag_set_collect_errors(diag, true);
    /* Duplicate keys are found while converting, where the second key's place is known. */
    struct fy_parse_cfg pcfg = {.flags = FYPCF_QUIET | FYPCF_DEFAULT_PARSE |
                                         FYPCF_ALLOW_DUPLICATE_KEYS |
                                         (json ? FYPCF_JSON_FORCE : FYPCF_JSON_NONE),
                                .diag = diag};
    struct fy_document *doc = fy_document_build_from_string(&pcfg, text, len);
    vigil_code rc = VIGIL_OK;
    if (!doc) {
        void *it = NULL;
        struct fy_diag_error *de = fy_diag_errors_iterate(diag, &it);
        /* libfyaml 0.7.12's diagnostics count lines and columns from 1 already. */
        int line = de ? de->line : 1, col = de ? de->column : 1;
        vg_yaml_error_place(text, len, &line, &col);
        problem_at(problems, file, line, col, "", "malformed %s: %s", json ? "JSON" : "YAML",
                   de && de->msg ? de->msg : "syntax error");
    } else {
        struct reader r = {.marks = marks, .dups = json_array()};
        struct fy_node *root = fy_document_root(doc);
        json_t *v = root && r.dups ? convert(&r, root, 0) : json_null(), *d;
        size_t i;
        json_array_foreach (r.dups, i, d) {
            problem_at(problems, file, (int)json_integer_value(json_array_get(d, 1)),
                       (int)json_integer_value(json_array_get(d, 2)),
                       json_string_value(json_array_get(d, 0)),
                       "malformed %s: duplicate key %s (each key once per mapping)",
                       json ? "JSON" : "YAML", json_string_value(json_array_get(d, 0)));
        }
        int dup = json_array_size(r.dups) > 0;
        json_decref(r.dups);
        if (dup) {
            json_decref(v);
            v = NULL;
        } else if (!v && r.why)
            problem(problems, file, marks, r.ptr, "malformed %s at %s: %s", json ? "JSON" : "YAML",
                    r.ptr[0] ? r.ptr : "the top", r.why);
        else if (!v)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading \"%s\"", file);
        *out = v;
    }
    fy_document_destroy(doc);
    fy_diag_destroy(diag);
    return rc;
}

static vigil_code first_problem(const json_t *problems, vigil_code code, vigil_error *err)
{
    json_t *p = json_array_get(problems, 0);
    return VG_FAIL(err, code, "%s:%d:%d: %s", json_string_value(json_object_get(p, "file")),
                   (int)json_integer_value(json_object_get(p, "line")),
                   (int)json_integer_value(json_object_get(p, "column")),
                   json_string_value(json_object_get(p, "message")));
}

/* The line where a second YAML document starts (0: none). A manifest file holds one agent:
 * building the document reads the first only, and the others would vanish unsaid. */
static int second_document_line(const char *text, size_t len)
{
    struct fy_diag_cfg dcfg;
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL; /* a syntax error is said where the document is read */
    dcfg.colorize = false;
    struct fy_diag *diag = fy_diag_create(&dcfg);
    if (diag)
        fy_diag_set_collect_errors(diag, true);
    struct fy_parse_cfg cfg = {.flags = FYPCF_QUIET | FYPCF_DEFAULT_PARSE, .diag = diag};
    struct fy_parser *p = diag ? fy_parser_create(&cfg) : NULL;
    struct fy_event *ev;
    int docs = 0, line = 0;
    if (!p || fy_parser_set_string(p, text, len)) {
        fy_parser_destroy(p);
        fy_diag_destroy(diag);
        return 0;
    }
    while (!line && (ev = fy_parser_parse(p))) {
        if (ev->type == FYET_DOCUMENT_START && ++docs == 2) {
            const struct fy_mark *m = fy_event_start_mark(ev);
            line = m ? m->line + 1 : 1;
        }
        fy_parser_event_free(p, ev);
    }
    fy_parser_destroy(p);
    fy_diag_destroy(diag);
    return line;
}

vigil_code vg_manifest_parse(const char *text, size_t len, const char *name, json_t **out,
                             json_t **marks_out, json_t *problems, vigil_error *err)
{
    json_t *doc = NULL, *marks = json_object();
    const char *why = NULL;
    int line, col, json = ends_with(name, ".json");
    size_t before = json_array_size(problems);
    vigil_code rc = VIGIL_OK;
    if (!marks)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading \"%s\"", name);
    if (len > VG_MANIFEST_MAX_BYTES) {
        problem_at(problems, name, 1, 1, "", "a manifest is at most %zu bytes",
                   VG_MANIFEST_MAX_BYTES);
    } else if (text_fault(text, len, &line, &col, &why)) {
        problem_at(problems, name, line, col, "", "malformed %s: %s", json ? "JSON" : "YAML", why);
    } else if (json) {
        json_error_t je;
        json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!j)
            problem_at(problems, name, je.line > 0 ? je.line : 1, je.column > 0 ? je.column : 1, "",
                       "malformed JSON: %s", je.text);
        json_decref(j);
    }
    if (json_array_size(problems) == before &&
        !(rc = read_document(text, len, name, json, &doc, marks, problems, err)) &&
        json_array_size(problems) == before) {
        if (!json && (line = second_document_line(text, len)) > 0)
            problem_at(problems, name, line, 1, "",
                       "one manifest a file: a second YAML document starts here (put each agent "
                       "in a file of its own; a directory applies them all)");
        else if (!json_is_object(doc))
            problem_at(problems, name, 1, 1, "",
                       "expected a mapping of manifest fields (name, "
                       "prompt, tools, ...) at the top");
        else if (!(rc = check_schema(doc, name, marks, problems, err)))
            check_rules(doc, name, marks, problems);
    }
    if (!rc && json_array_size(problems) > before) {
        json_t *sub = json_array();
        for (size_t i = before; sub && i < json_array_size(problems); i++)
            json_array_append(sub, json_array_get(problems, i));
        int syntax = doc == NULL;
        rc = first_problem(sub, syntax ? VIGIL_EPARSE : VIGIL_EINVAL, err);
        json_decref(sub);
    }
    if (rc) {
        json_decref(doc);
        json_decref(marks);
        return rc;
    }
    *out = doc;
    if (marks_out)
        *marks_out = marks;
    else
        json_decref(marks);
    return VIGIL_OK;
}

void vg_manifest_problem(json_t *problems, const char *file, const json_t *marks, const char *ptr,
                         const char *message)
{
    problem(problems, file, marks, ptr, "%s", message);
}
