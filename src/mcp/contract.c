/*
 * contract.c: MCP tools seen as vigil tools. The contract comes from the tool definition and
 * its annotations (hints, so a person can override them per tool in config); the result the
 * model reads is the tool's content flattened to text.
 *
 * Schemas: an MCP input schema is JSON Schema 2020-12 unless it declares another "$schema".
 * vigil's validator is draft 7, so a schema is accepted only when draft 7 reads it the same
 * way: no 2020-12-only keyword anywhere a subschema can be, no "$ref" with siblings (2020-12
 * applies them, draft 7 ignores them), no array-valued "items" in a 2020-12 schema.
 */
#include "mcp/mcp.h"

#include "base/buf.h"
#include "base/json.h"

int vg_mcp_tool_name(const char *server, const char *tool, char *out, size_t n)
{
    size_t k = 0, sl = strlen(server), tl = strlen(tool);
    if (sl + 2 + tl >= n || sl + 2 + tl > 64 || tl == 0)
        return -1;
    memcpy(out, server, sl);
    k = sl;
    out[k++] = '_';
    out[k++] = '_';
    for (size_t i = 0; i < tl; i++) {
        char ch = tool[i];
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch - 'A' + 'a');
        else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.'))
            ch = '_';
        out[k++] = ch;
    }
    out[k] = '\0';
    return 0;
}

/* ---- schema dialect ------------------------------------------------------------------------- */

static const char *const only_2020[] = {"$defs",
                                        "prefixItems",
                                        "dependentRequired",
                                        "dependentSchemas",
                                        "unevaluatedProperties",
                                        "unevaluatedItems",
                                        "$dynamicRef",
                                        "$dynamicAnchor",
                                        "$anchor",
                                        "$recursiveRef",
                                        "$recursiveAnchor",
                                        "$vocabulary",
                                        "minContains",
                                        "maxContains"};
static const char *const schema_valued[] = {
    "items", "additionalItems", "additionalProperties", "not", "if", "then",
    "else",  "contains",        "propertyNames"};
static const char *const map_valued[] = {"properties", "patternProperties", "definitions",
                                         "dependencies"};
static const char *const list_valued[] = {"allOf", "anyOf", "oneOf"};

static int in(const char *k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i]))
            return 1;
    return 0;
}

static int walk(const json_t *s, int modern, char *why, size_t n, int depth)
{
    const char *k;
    json_t *v;
    if (!json_is_object(s))
        return 0; /* true/false schemas, or something the validator itself refuses */
    if (depth > 64) {
        snprintf(why, n, "the schema nests deeper than 64 levels");
        return -1;
    }
    if (modern && json_object_get(s, "$ref") && json_object_size(s) > 1) {
        snprintf(why, n,
                 "\"$ref\" with sibling keywords (2020-12 applies them, draft 7 does "
                 "not)");
        return -1;
    }
    json_object_foreach ((json_t *)s, k, v) {
        if (modern && in(k, only_2020, VG_ARRAY_LEN(only_2020))) {
            snprintf(why, n, "the JSON Schema 2020-12 keyword \"%s\"", k);
            return -1;
        }
        if (modern && !strcmp(k, "items") && json_is_array(v)) {
            snprintf(why, n, "\"items\" as an array (its 2020-12 meaning differs)");
            return -1;
        }
        if (in(k, schema_valued, VG_ARRAY_LEN(schema_valued)) || !strcmp(k, "items")) {
            size_t i;
            json_t *e;
            if (json_is_array(v)) {
                json_array_foreach (v, i, e)
                    if (walk(e, modern, why, n, depth + 1))
                        return -1;
            } else if (walk(v, modern, why, n, depth + 1)) {
                return -1;
            }
        } else if (in(k, map_valued, VG_ARRAY_LEN(map_valued)) && json_is_object(v)) {
            const char *pk;
            json_t *e;
            json_object_foreach (v, pk, e)
                if (walk(e, modern, why, n, depth + 1))
                    return -1;
        } else if (in(k, list_valued, VG_ARRAY_LEN(list_valued)) && json_is_array(v)) {
            size_t i;
            json_t *e;
            json_array_foreach (v, i, e)
                if (walk(e, modern, why, n, depth + 1))
                    return -1;
        }
    }
    return 0;
}

int vg_mcp_schema_dialect_ok(const json_t *schema, char *why, size_t n)
{
    const char *d = json_string_value(json_object_get(schema, "$schema"));
    int modern = 1;
    if (d) {
        if (strstr(d, "json-schema.org/draft-07/") || strstr(d, "json-schema.org/draft-06/") ||
            strstr(d, "json-schema.org/draft-04/"))
            modern = 0;
        else if (!strstr(d, "json-schema.org/draft/2020-12/") &&
                 !strstr(d, "json-schema.org/draft/2019-09/")) {
            snprintf(why, n, "the unknown dialect \"%.80s\"", d);
            return -1;
        }
    }
    return walk(schema, modern, why, n, 0);
}

/* ---- the contract --------------------------------------------------------------------------- */

static int hint(const json_t *ann, const char *name)
{
    return json_is_true(json_object_get(ann, name));
}

/* Risk, mutating and idempotency from the annotations, then the config's overrides. */
static void contract_effects(json_t *c, const json_t *ann, const json_t *ov)
{
    int ro = hint(ann, "readOnlyHint");
    int destructive = !ro && hint(ann, "destructiveHint");
    int idem = hint(ann, "idempotentHint");
    json_t *v;
    json_object_set_new(c, "mutating", json_boolean(!ro));
    json_object_set_new(c, "risk", json_string(destructive ? "high" : ro ? "low" : "medium"));
    json_object_set_new(c, "idempotency", json_string(idem ? "idempotent" : "non_idempotent"));
    if ((v = json_object_get(ov, "mutating")))
        json_object_set_new(c, "mutating", json_boolean(json_is_true(v)));
    if ((v = json_object_get(ov, "risk")))
        json_object_set(c, "risk", v);
    if ((v = json_object_get(ov, "idempotent")))
        json_object_set_new(c, "idempotency",
                            json_string(json_is_true(v) ? "idempotent" : "non_idempotent"));
}

vigil_code vg_mcp_tool_contract(const char *server, const json_t *tool, const json_t *ov,
                                json_t **contract, vigil_error *err)
{
    char name[80], why[160];
    const char *tname = json_string_value(json_object_get(tool, "name"));
    if (!tname || vg_mcp_tool_name(server, tname, name, sizeof name))
        return VG_FAIL(err, VIGIL_EUNSUPPORTED,
                       "MCP server \"%s\": tool \"%.64s\" has no name that fits a vigil tool name "
                       "(server__tool, at most 64 characters)",
                       server, tname ? tname : "");
    const char *task =
        json_string_value(json_object_get(json_object_get(tool, "execution"), "taskSupport"));
    if (task && !strcmp(task, "required"))
        return VG_FAIL(err, VIGIL_EUNSUPPORTED,
                       "MCP tool %s can only run as a task, which vigil does not call", name);
    json_t *in = json_object_get(tool, "inputSchema");
    json_t *out = json_object_get(tool, "outputSchema");
    if (!json_is_object(in))
        return VG_FAIL(err, VIGIL_EUNSUPPORTED, "MCP tool %s has no input schema object", name);
    if (vg_mcp_schema_dialect_ok(in, why, sizeof why) ||
        (out && vg_mcp_schema_dialect_ok(out, why, sizeof why)))
        return VG_FAIL(err, VIGIL_EUNSUPPORTED,
                       "MCP tool %s is refused: its schema uses %s, which vigil's draft-7 "
                       "validator cannot honour",
                       name, why);
    const char *desc = json_string_value(json_object_get(tool, "description"));
    const char *title = json_string_value(json_object_get(tool, "title"));
    json_t *schema = json_deep_copy(in);
    json_t *c = json_object();
    if (!schema || !c) {
        json_decref(schema);
        json_decref(c);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading MCP tools");
    }
    json_object_del(schema, "$schema"); /* what the model sees (MCP-30); the dialect is checked */
    json_object_set_new(c, "name", json_string(name));
    json_object_set_new(c, "description",
                        json_string(desc && *desc     ? desc
                                    : title && *title ? title
                                                      : tname));
    json_object_set_new(c, "input_schema", schema);
    json_object_set_new(c, "tool_class", json_string("mcp"));
    contract_effects(c, json_object_get(tool, "annotations"), ov);
    *contract = c;
    return VIGIL_OK;
}

/* ---- results -------------------------------------------------------------------------------- */

static void describe_block(struct vg_buf *b, const json_t *blk)
{
    const char *type = json_string_value(json_object_get(blk, "type"));
    const char *mime = json_string_value(json_object_get(blk, "mimeType"));
    const char *s;
    if (!type)
        return;
    if (!strcmp(type, "text") && (s = json_string_value(json_object_get(blk, "text")))) {
        vg_buf_puts(b, s);
    } else if (!strcmp(type, "image") || !strcmp(type, "audio")) {
        size_t n = strlen(json_string_value(json_object_get(blk, "data"))
                              ? json_string_value(json_object_get(blk, "data"))
                              : "");
        vg_buf_printf(b, "[%s: %s, %zu bytes]", type, mime ? mime : "unknown type", n / 4 * 3);
    } else if (!strcmp(type, "resource_link")) {
        const char *desc = json_string_value(json_object_get(blk, "description"));
        vg_buf_printf(b, "[resource link: %s <%s>%s%s%s%s]",
                      json_string_value(json_object_get(blk, "name"))
                          ? json_string_value(json_object_get(blk, "name"))
                          : "",
                      json_string_value(json_object_get(blk, "uri"))
                          ? json_string_value(json_object_get(blk, "uri"))
                          : "",
                      mime ? " " : "", mime ? mime : "", desc ? ": " : "", desc ? desc : "");
    } else if (!strcmp(type, "resource")) {
        json_t *r = json_object_get(blk, "resource");
        const char *uri = json_string_value(json_object_get(r, "uri"));
        const char *rm = json_string_value(json_object_get(r, "mimeType"));
        if ((s = json_string_value(json_object_get(r, "text"))))
            vg_buf_printf(b, "[resource <%s>]\n%s", uri ? uri : "", s);
        else
            vg_buf_printf(b, "[resource <%s>: %s, %zu bytes]", uri ? uri : "", rm ? rm : "binary",
                          strlen(json_string_value(json_object_get(r, "blob"))
                                     ? json_string_value(json_object_get(r, "blob"))
                                     : "") /
                              4 * 3);
    } /* unknown content types are ignored (MCP-31) */
}

json_t *vg_mcp_result_for_model(const json_t *result, size_t max_text)
{
    struct vg_buf b;
    size_t i;
    json_t *blk, *out;
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    json_array_foreach (json_object_get(result, "content"), i, blk) {
        size_t before = b.len;
        if (before)
            vg_buf_putc(&b, '\n');
        describe_block(&b, blk);
        if (b.len == before + 1)
            b.len = before, b.data[before] = '\0';
    }
    if (b.fail) {
        vg_buf_release(&b);
        return NULL;
    }
    if (b.len > max_text) {
        size_t cut = vg_utf8_cut(b.data, b.len, max_text); /* never split a UTF-8 sequence */
        size_t dropped = b.len - cut;
        b.len = cut;
        b.data[cut] = '\0';
        vg_buf_printf(&b, "\n[... %zu more bytes cut]", dropped);
    }
    out = json_object();
    if (out) {
        json_object_set_new(out, "text", json_stringn(b.data, b.len));
        json_t *sc = json_object_get(result, "structuredContent");
        if (sc)
            json_object_set(out, "structured", sc);
    }
    vg_buf_release(&b);
    return out;
}
