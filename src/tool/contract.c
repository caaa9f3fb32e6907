/*
 * contract.c: tool contracts. A contract entry (JSON, see docs/tools.md) is parsed into a
 * struct vg_tool_def with every optional field filled in, so the registry, the parity test and
 * the executor all read one normalized form. Schemas are compiled once here.
 */
#include "base/common.h"

#include "tool/schema.h"
#include "tool/tool.h"

static const char *const wake_reasons[] = {"subscription", "timer", "user_initiated",
                                           "recovery_catchup", "manual"};

static int name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 64 || !(s[0] >= 'a' && s[0] <= 'z'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '.'))
            return 0;
    return 1;
}

int vg_tool_class_name_ok(const char *s)
{
    return name_ok(s);
}

static int str_array_ok(json_t *a)
{
    size_t i;
    json_t *e;
    if (!json_is_array(a))
        return 0;
    json_array_foreach (a, i, e)
        if (!json_is_string(e))
            return 0;
    return 1;
}

static int pick(const char *v, const char *const *names, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        if (!strcmp(v, names[i]))
            return (int)i;
    return -1;
}

/* Set key to value (stolen) unless present. */
static int dflt(json_t *o, const char *key, json_t *value)
{
    if (json_object_get(o, key)) {
        json_decref(value);
        return 0;
    }
    return value ? json_object_set_new(o, key, value) : -1;
}

vigil_code vg_tool_def_parse(const json_t *entry, struct vg_tool_def **out, vigil_error *err)
{
    static const char *const risks[] = {"low", "medium", "high"};
    static const char *const idems[] = {"idempotent", "reconcilable", "non_idempotent"};
    static const char *const rules[] = {"agent", "unscoped", "argument", "target"};
    static const char *const known[] = {
        "name",          "version",           "description", "input_schema",
        "output_schema", "capabilities",      "risk",        "allowed_wake_reasons",
        "scope",         "idempotency",       "mutating",    "tool_class",
        "side_effects",  "requires_approval", "preview"};
    vigil_code rc = VIGIL_OK;
    struct vg_tool_def *d = NULL;
    json_t *c = NULL, *v;
    const char *k, *name;

    if (!json_is_object(entry))
        return VG_FAIL(err, VIGIL_EINVAL, "a tool contract must be a JSON object");
    name = json_string_value(json_object_get(entry, "name"));
    if (!name_ok(name))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "tool contract has no valid name (lowercase letters, digits, _ and .)");
    json_object_foreach ((json_t *)entry, k, v)
        if (pick(k, known, VG_ARRAY_LEN(known)) < 0)
            return VG_FAIL(err, VIGIL_EINVAL, "tool \"%s\": unknown contract field \"%s\"", name,
                           k);
    if (!(c = json_deep_copy(entry)) || !(d = vg_calloc(1, sizeof *d)))
        goto oom;
    json_t *wr = json_array();
    for (size_t i = 0; wr && i < VG_ARRAY_LEN(wake_reasons); i++)
        json_array_append_new(wr, json_string(wake_reasons[i]));
    if (dflt(c, "version", json_string("1.0.0")) ||
        dflt(c, "input_schema", json_pack("{s:s}", "type", "object")) ||
        dflt(c, "output_schema", json_null()) || dflt(c, "capabilities", json_array()) ||
        dflt(c, "risk", json_string("low")) || dflt(c, "allowed_wake_reasons", wr) ||
        dflt(c, "scope", json_pack("{s:s, s:[]}", "rule", "unscoped", "arguments")) ||
        dflt(c, "idempotency", json_string("non_idempotent")) || dflt(c, "mutating", json_true()) ||
        dflt(c, "tool_class", json_string("default")) ||
        dflt(c, "side_effects", json_pack("{s:[], s:[]}", "entity_types", "tokens")) ||
        dflt(c, "preview", json_false()))
        goto oom;
    d->contract = c;
    d->name = json_string_value(json_object_get(c, "name"));
    if (!json_is_string(json_object_get(c, "description")) ||
        !*json_string_value(json_object_get(c, "description"))) {
        rc = VG_FAIL(err, VIGIL_EINVAL, "tool \"%s\" needs a description", name);
        goto fail;
    }
    if (!json_is_string(json_object_get(c, "version"))) {
        rc = VG_FAIL(err, VIGIL_EINVAL, "tool \"%s\": version must be a string", name);
        goto fail;
    }
    int r = pick(json_string_value(json_object_get(c, "risk")), risks, 3);
    int id = pick(json_string_value(json_object_get(c, "idempotency")), idems, 3);
    json_t *scope = json_object_get(c, "scope");
    int sr = pick(json_string_value(json_object_get(scope, "rule")), rules, 4);
    if (r < 0 || id < 0 || sr < 0) {
        rc = VG_FAIL(err, VIGIL_EINVAL, "tool \"%s\": %s is not one of the allowed values", name,
                     r < 0    ? "risk"
                     : id < 0 ? "idempotency"
                              : "scope.rule");
        goto fail;
    }
    if (!json_object_get(scope, "arguments") &&
        json_object_set_new(scope, "arguments", json_array()))
        goto oom;
    d->risk = (enum vg_tool_risk)r;
    d->idem = (enum vg_tool_idem)id;
    d->scope_rule = (enum vg_tool_scope_rule)sr;
    d->scope_args = json_object_get(scope, "arguments");
    if (!str_array_ok(d->scope_args) ||
        ((sr == VG_SCOPE_ARGUMENT || sr == VG_SCOPE_TARGET) && !json_array_size(d->scope_args))) {
        rc = VG_FAIL(err, VIGIL_EINVAL,
                     "tool \"%s\": scope.arguments must list argument names for rule %s", name,
                     rules[sr]);
        goto fail;
    }
    if (dflt(c, "requires_approval", json_boolean(r == VG_RISK_HIGH)))
        goto oom;
    if (!json_is_boolean(json_object_get(c, "mutating")) ||
        !json_is_boolean(json_object_get(c, "requires_approval")) ||
        !json_is_boolean(json_object_get(c, "preview"))) {
        rc = VG_FAIL(err, VIGIL_EINVAL,
                     "tool \"%s\": mutating, requires_approval and preview are booleans", name);
        goto fail;
    }
    d->mutating = json_is_true(json_object_get(c, "mutating"));
    d->requires_approval = json_is_true(json_object_get(c, "requires_approval"));
    d->tool_class = json_string_value(json_object_get(c, "tool_class"));
    json_t *se = json_object_get(c, "side_effects");
    if (!d->tool_class || !name_ok(d->tool_class) ||
        !str_array_ok(json_object_get(c, "capabilities")) ||
        !str_array_ok(json_object_get(c, "allowed_wake_reasons")) || !json_is_object(se) ||
        !str_array_ok(json_object_get(se, "entity_types")) ||
        !str_array_ok(json_object_get(se, "tokens"))) {
        rc = VG_FAIL(err, VIGIL_EINVAL,
                     "tool \"%s\": tool_class, capabilities, allowed_wake_reasons or "
                     "side_effects has the wrong shape",
                     name);
        goto fail;
    }
    size_t i;
    json_array_foreach (json_object_get(c, "allowed_wake_reasons"), i, v) {
        if (pick(json_string_value(v), wake_reasons, VG_ARRAY_LEN(wake_reasons)) < 0) {
            rc = VG_FAIL(err, VIGIL_EINVAL, "tool \"%s\": unknown wake reason \"%s\"", name,
                         json_string_value(v));
            goto fail;
        }
    }
    if ((rc = vg_schema_compile(json_object_get(c, "input_schema"), &d->input, err)))
        goto fail;
    v = json_object_get(c, "output_schema");
    if (!json_is_null(v) && (rc = vg_schema_compile(v, &d->output, err)))
        goto fail;
    *out = d;
    return VIGIL_OK;
oom:
    rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a tool contract");
fail:
    if (d)
        vg_tool_def_free(d);
    else
        json_decref(c);
    return rc;
}

void vg_tool_def_free(struct vg_tool_def *d)
{
    if (!d)
        return;
    vg_schema_free(d->input);
    vg_schema_free(d->output);
    json_decref(d->contract);
    vg_free(d);
}

vigil_code vg_tool_contracts_check(const json_t *file, vigil_error *err)
{
    json_t *tools = json_object_get(file, "tools"), *e;
    size_t i, j;
    if (!json_is_array(tools))
        return VG_FAIL(err, VIGIL_EINVAL, "a contract file needs a \"tools\" array");
    json_array_foreach (tools, i, e) {
        struct vg_tool_def *d = NULL;
        vigil_code rc = vg_tool_def_parse(e, &d, err);
        if (rc)
            return rc;
        vg_tool_def_free(d);
        for (j = 0; j < i; j++)
            if (json_equal(json_object_get(json_array_get(tools, j), "name"),
                           json_object_get(e, "name")))
                return VG_FAIL(err, VIGIL_EEXISTS, "tool \"%s\" is listed twice",
                               json_string_value(json_object_get(e, "name")));
    }
    return VIGIL_OK;
}
