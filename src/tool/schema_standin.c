/*
 * schema_standin.c: TEMPORARY minimal JSON Schema checks behind the tool/schema.h API until
 * the real validator (branch `schema`) is merged; see schema_standin.h. Deleted at that merge.
 */
#include "base/common.h"

#include "tool/schema_standin.h"

struct vg_schema {
    json_t *doc; /* owned copy */
};

vigil_code vg_schema_compile(const json_t *schema, struct vg_schema **out, vigil_error *err)
{
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid schema at : expected an object or a boolean");
    struct vg_schema *s = vg_calloc(1, sizeof *s);
    if (!s || !(s->doc = json_deep_copy(schema))) {
        vg_free(s);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory compiling a schema");
    }
    *out = s;
    return VIGIL_OK;
}

static int type_ok(const char *t, const json_t *v)
{
    if (!strcmp(t, "object"))
        return json_is_object(v);
    if (!strcmp(t, "array"))
        return json_is_array(v);
    if (!strcmp(t, "string"))
        return json_is_string(v);
    if (!strcmp(t, "integer"))
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v));
    if (!strcmp(t, "number"))
        return json_is_number(v);
    if (!strcmp(t, "boolean"))
        return json_is_boolean(v);
    if (!strcmp(t, "null"))
        return json_is_null(v);
    return 0;
}

static const json_t *root; /* stand-in only: the document $ref points into */

static vigil_code check(const json_t *s, const json_t *v, const char *ptr, vigil_error *err)
{
    const char *ref = json_string_value(json_object_get(s, "$ref"));
    if (ref && !strncmp(ref, "#/definitions/", 14))
        s = json_object_get(json_object_get(root, "definitions"), ref + 14);
    if (json_is_false(s))
        return VG_FAIL(err, VIGIL_EINVAL, "at %s: no value is allowed here", ptr);
    if (!json_is_object(s))
        return VIGIL_OK;
    json_t *t = json_object_get(s, "type");
    if (json_is_string(t) && !type_ok(json_string_value(t), v))
        return VG_FAIL(err, VIGIL_EINVAL, "at %s: expected type %s", ptr, json_string_value(t));
    if (json_is_array(t)) {
        size_t i;
        json_t *e;
        int any = 0;
        json_array_foreach(t, i, e) any |= json_is_string(e) && type_ok(json_string_value(e), v);
        if (!any)
            return VG_FAIL(err, VIGIL_EINVAL, "at %s: wrong type", ptr);
    }
    json_t *cst = json_object_get(s, "const");
    if (cst && !json_equal(cst, v))
        return VG_FAIL(err, VIGIL_EINVAL, "at %s: expected the const value", ptr);
    json_t *en = json_object_get(s, "enum");
    if (json_is_array(en)) {
        size_t i;
        json_t *e;
        int found = 0;
        json_array_foreach(en, i, e) found |= json_equal(e, v);
        if (!found)
            return VG_FAIL(err, VIGIL_EINVAL, "at %s: expected one of the enum values", ptr);
    }
    if (json_is_string(v)) {
        size_t n = strlen(json_string_value(v));
        json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
        if (json_is_integer(mn) && (json_int_t)n < json_integer_value(mn))
            return VG_FAIL(err, VIGIL_EINVAL, "at %s: shorter than minLength", ptr);
        if (json_is_integer(mx) && (json_int_t)n > json_integer_value(mx))
            return VG_FAIL(err, VIGIL_EINVAL, "at %s: longer than maxLength", ptr);
    }
    if (json_is_number(v)) {
        json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
        if (json_is_number(mn) && json_number_value(v) < json_number_value(mn))
            return VG_FAIL(err, VIGIL_EINVAL, "at %s: below minimum", ptr);
        if (json_is_number(mx) && json_number_value(v) > json_number_value(mx))
            return VG_FAIL(err, VIGIL_EINVAL, "at %s: above maximum", ptr);
    }
    char sub[512];
    vigil_code rc;
    if (json_is_array(v)) {
        json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
        json_int_t n = (json_int_t)json_array_size(v);
        if (json_is_integer(mn) && n < json_integer_value(mn))
            return VG_FAIL(err, VIGIL_EINVAL, "at %s: fewer than minItems", ptr);
        if (json_is_integer(mx) && n > json_integer_value(mx))
            return VG_FAIL(err, VIGIL_EINVAL, "at %s: more than maxItems", ptr);
        json_t *items = json_object_get(s, "items");
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            snprintf(sub, sizeof sub, "%s/%zu", ptr, i);
            if ((rc = check(items, e, sub, err)))
                return rc;
        }
    }
    if (json_is_object(v)) {
        json_t *req = json_object_get(s, "required"), *props = json_object_get(s, "properties");
        json_t *ap = json_object_get(s, "additionalProperties"), *e;
        size_t i;
        const char *k;
        json_array_foreach(req, i, e) if (json_is_string(e) &&
                                          !json_object_get(v, json_string_value(e))) return
            VG_FAIL(err, VIGIL_EINVAL, "at %s: missing required property \"%s\"", ptr,
                    json_string_value(e));
        json_object_foreach((json_t *)v, k, e)
        {
            json_t *ps = json_object_get(props, k);
            snprintf(sub, sizeof sub, "%s/%s", ptr, k);
            if (ps) {
                if ((rc = check(ps, e, sub, err)))
                    return rc;
            } else if (json_is_false(ap)) {
                return VG_FAIL(err, VIGIL_EINVAL, "at %s: additional property not allowed", sub);
            }
        }
    }
    return VIGIL_OK;
}

vigil_code vg_schema_validate(const struct vg_schema *s, const json_t *instance,
                              struct vg_buf *errors_out, vigil_error *err)
{
    VG_UNUSED(errors_out);
    root = s->doc;
    return check(s->doc, instance, "", err);
}

vigil_code vg_schema_apply_defaults(const struct vg_schema *s, json_t *instance,
                                    vigil_error *err)
{
    json_t *props = json_object_get(s->doc, "properties"), *ps;
    const char *k;
    if (!json_is_object(instance))
        return VIGIL_OK;
    json_object_foreach(props, k, ps)
    {
        json_t *d = json_object_get(ps, "default");
        if (d && !json_object_get(instance, k) &&
            json_object_set_new(instance, k, json_deep_copy(d)))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying defaults");
    }
    return VIGIL_OK;
}

void vg_schema_free(struct vg_schema *s)
{
    if (!s)
        return;
    json_decref(s->doc);
    vg_free(s);
}
