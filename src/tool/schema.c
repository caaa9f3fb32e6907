/*
 * schema.c: vigil's JSON Schema (draft 7) validator. A schema is compiled once into a graph of
 * nodes (one per subschema, $ref edges resolved to their targets, patterns translated and
 * regcomp'd, keyword values checked), then any number of threads validate against it: the
 * compiled graph is never written after vg_schema_compile returns.
 *
 * Validation carries the instance location as a chain of stack segments, rendered into a JSON
 * pointer only when a violation is reported. Depth, $ref cycles that make no progress and total
 * work are bounded, so no instance or schema can overflow the stack or run forever.
 */
#include "base/common.h"

#include "base/buf.h"
#include "base/json.h"
#include "tool/schema.h"
#include "tool/schema_int.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>

/* Evaluations one validation may make before giving up (a $ref graph can fan out). */
#define MAX_STEPS 4000000L
/* Steps of vg_schema_apply_defaults. */
#define MAX_DEFAULT_STEPS 100000L

#define META_URI "http://json-schema.org/draft-07/schema"

/* The draft-07 meta-schema, so `{"$ref": "http://json-schema.org/draft-07/schema#"}` works. */
static const char meta_schema_text[] =
#include "tool/schema_meta.inc"

    enum {
        T_NULL = 1 << 0,
        T_BOOLEAN = 1 << 1,
        T_OBJECT = 1 << 2,
        T_ARRAY = 1 << 3,
        T_NUMBER = 1 << 4,
        T_STRING = 1 << 5,
        T_INTEGER = 1 << 6
    };

static const struct {
    const char *name;
    unsigned bit;
} type_names[] = {
    {"null", T_NULL},     {"boolean", T_BOOLEAN}, {"object", T_OBJECT},   {"array", T_ARRAY},
    {"number", T_NUMBER}, {"string", T_STRING},   {"integer", T_INTEGER},
};

enum kind { K_TRUE, K_FALSE, K_OBJECT };

struct node;

struct list {
    struct node **v;
    size_t n;
};

struct prop {
    const char *name; /* borrowed from the schema document */
    struct node *schema;
};

struct patprop {
    struct vg_schema_regex *rx;
    struct node *schema;
};

struct dep {
    const char *name;
    struct node *schema; /* schema form, or */
    const json_t *names; /* array-of-names form (borrowed) */
};

/* One compiled subschema. json_t pointers are borrowed from documents the schema owns. */
struct node {
    enum kind kind;
    const json_t *src;
    char *ref_uri;    /* absolute $ref, kept until resolved */
    struct node *ref; /* $ref target: every other keyword is then ignored (draft 7) */
    int ref_checked;  /* compile time: the $ref chain from here is known to end */
    unsigned types;   /* 0: any */
    const json_t *minimum, *maximum, *xminimum, *xmaximum, *multiple_of;
    long long min_length, max_length, min_items, max_items, min_props, max_props; /* -1: none */
    int unique_items;
    struct vg_schema_regex *pattern;
    const char *pattern_src;
    const json_t *enum_values, *const_value, *default_value;
    const json_t *props_obj; /* "properties", for the additionalProperties lookup */
    struct prop *props;
    size_t n_props;
    struct patprop *pprops;
    size_t n_pprops;
    struct node *addl_props;
    const json_t *required;
    struct node *prop_names;
    struct dep *deps;
    size_t n_deps;
    struct node *items; /* single-schema form */
    struct list tuple;  /* array form */
    int has_tuple;
    struct node *addl_items, *contains;
    struct list all_of, any_of, one_of;
    struct node *not_schema, *if_schema, *then_schema, *else_schema;
};

struct vg_schema {
    struct node *root;
    struct node **nodes;
    size_t n_nodes, cap_nodes;
    json_t **docs; /* owned: the copy of the caller's schema, the meta-schema, remote ones */
    size_t n_docs, cap_docs;
};

/* ---- locations -------------------------------------------------------------------------- */

/* One step of a location, living on the C stack of the walk that made it. */
struct seg {
    const struct seg *up;
    const char *key; /* property name; NULL for an array index */
    size_t index;
    int raw; /* key is a prefix printed as is (the fragment of a $ref target) */
};

static void path_put(struct vg_buf *b, const struct seg *p)
{
    if (!p)
        return;
    path_put(b, p->up);
    if (p->raw) {
        vg_buf_puts(b, p->key);
        return;
    }
    vg_buf_putc(b, '/');
    if (!p->key) {
        vg_buf_printf(b, "%zu", p->index);
        return;
    }
    for (const char *k = p->key; *k; k++) {
        if (*k == '~')
            vg_buf_puts(b, "~0");
        else if (*k == '/')
            vg_buf_puts(b, "~1");
        else
            vg_buf_putc(b, *k);
    }
}

/* Render a location as a JSON pointer ("(root)" when empty), truncated to fit. */
static void path_str(const struct seg *p, char *out, size_t cap)
{
    struct vg_buf b;
    vg_buf_init(&b, cap > 4 ? cap - 4 : 1);
    path_put(&b, p);
    if (b.len == 0 && b.fail == VIGIL_OK)
        snprintf(out, cap, "(root)");
    else
        snprintf(out, cap, "%s%s", b.data, b.fail == VIGIL_ETOOBIG ? "..." : "");
    vg_buf_release(&b);
}

/* Compact JSON text of a value, truncated with "..." to fit. */
static void json_str(const json_t *j, char *out, size_t cap)
{
    char *text =
        vg_json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY); /* 0.8, not 0.80000000000000004 */
    size_t n = text ? strlen(text) : 0;
    if (n)
        memcpy(out, text, VG_MIN(n, cap - 1));
    vg_free(text);
    if (n == 0) {
        snprintf(out, cap, "?");
    } else if (n >= cap - 1) {
        out[cap - 1] = '\0';
        if (cap > 4)
            memcpy(out + cap - 4, "...", 3);
    } else {
        out[n] = '\0';
    }
}

/* ---- compiling -------------------------------------------------------------------------- */

struct id_entry {
    char *uri;
    struct node *node;
};

struct cctx {
    struct vg_schema *s;
    const struct vg_schema_options *opts;
    vigil_error *err;
    const json_t **map_keys; /* open addressing: subschema json -> node */
    struct node **map_vals;
    size_t map_cap, map_n;
    struct id_entry *ids; /* $id (and the documents' own URIs) -> node */
    size_t n_ids, cap_ids;
    int depth;
};

static vigil_code cfail(struct cctx *c, vigil_code code, const struct seg *path, const char *key,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static vigil_code cfail(struct cctx *c, vigil_code code, const struct seg *path, const char *key,
                        const char *fmt, ...)
{
    char where[160], what[200];
    struct seg s = {path, key, 0, 0};
    va_list ap;
    path_str(key ? &s : path, where, sizeof where);
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return VG_FAIL(c->err, code, "invalid schema at %s: %s", where, what);
}

static vigil_code oom(struct cctx *c)
{
    return VG_FAIL(c->err, VIGIL_ENOMEM, "out of memory compiling a schema");
}

static size_t ptr_hash(const void *p, size_t cap)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 7) & (cap - 1);
}

static struct node *map_get(struct cctx *c, const json_t *j)
{
    if (!c->map_cap)
        return NULL;
    for (size_t i = ptr_hash(j, c->map_cap);; i = (i + 1) & (c->map_cap - 1)) {
        if (c->map_keys[i] == j)
            return c->map_vals[i];
        if (!c->map_keys[i])
            return NULL;
    }
}

static int map_put(struct cctx *c, const json_t *j, struct node *n)
{
    if ((c->map_n + 1) * 2 > c->map_cap) {
        size_t cap = c->map_cap ? c->map_cap * 2 : 64;
        const json_t **keys = vg_calloc(cap, sizeof *keys);
        struct node **vals = vg_calloc(cap, sizeof *vals);
        if (!keys || !vals) {
            vg_free(keys);
            vg_free(vals);
            return 0;
        }
        for (size_t k = 0; k < c->map_cap; k++) {
            if (!c->map_keys[k])
                continue;
            size_t i = ptr_hash(c->map_keys[k], cap);
            while (keys[i])
                i = (i + 1) & (cap - 1);
            keys[i] = c->map_keys[k];
            vals[i] = c->map_vals[k];
        }
        vg_free(c->map_keys);
        vg_free(c->map_vals);
        c->map_keys = keys;
        c->map_vals = vals;
        c->map_cap = cap;
    }
    size_t i = ptr_hash(j, c->map_cap);
    while (c->map_keys[i])
        i = (i + 1) & (c->map_cap - 1);
    c->map_keys[i] = j;
    c->map_vals[i] = n;
    c->map_n++;
    return 1;
}

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 1;
    size_t ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    void *nv = vg_realloc(*v, ncap * size);
    if (!nv)
        return 0;
    *v = nv;
    *cap = ncap;
    return 1;
}

static struct node *new_node(struct cctx *c, const json_t *j)
{
    struct vg_schema *s = c->s;
    if (!grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes + 1, sizeof *s->nodes))
        return NULL;
    struct node *n = vg_calloc(1, sizeof *n);
    if (!n)
        return NULL;
    s->nodes[s->n_nodes++] = n;
    n->src = j;
    n->min_length = n->max_length = n->min_items = n->max_items = -1;
    n->min_props = n->max_props = -1;
    if (!map_put(c, j, n))
        return NULL;
    return n;
}

static int add_doc(struct vg_schema *s, json_t *doc)
{
    if (!grow((void **)&s->docs, &s->cap_docs, s->n_docs + 1, sizeof *s->docs))
        return 0;
    s->docs[s->n_docs++] = doc;
    return 1;
}

/* ---- URIs: just enough of RFC 3986 reference resolution for $id and $ref ---------------- */

static size_t scheme_len(const char *s)
{
    size_t i = 0;
    if (!isalpha((unsigned char)s[0]))
        return 0;
    while (isalnum((unsigned char)s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.')
        i++;
    return s[i] == ':' ? i + 1 : 0;
}

/* Resolve ref against base; an owned string or NULL when out of memory. */
static char *uri_resolve(const char *base, const char *ref)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    if (scheme_len(ref)) {
        vg_buf_puts(&b, ref);
    } else if (ref[0] == '#' || ref[0] == '\0') {
        vg_buf_append(&b, base, strcspn(base, "#"));
        vg_buf_puts(&b, ref);
    } else {
        size_t sl = scheme_len(base);
        size_t auth_end = sl;
        if (base[sl] == '/' && base[sl + 1] == '/')
            auth_end = sl + 2 + strcspn(base + sl + 2, "/?#");
        if (ref[0] == '/' && ref[1] == '/') {
            vg_buf_append(&b, base, sl);
        } else if (ref[0] == '/') {
            vg_buf_append(&b, base, auth_end);
        } else {
            size_t end = strcspn(base, "?#"), cut = auth_end;
            for (size_t k = auth_end; k < end; k++)
                if (base[k] == '/')
                    cut = k + 1;
            vg_buf_append(&b, base, cut);
            if (cut == auth_end && auth_end > sl)
                vg_buf_putc(&b, '/');
        }
        vg_buf_puts(&b, ref);
    }
    return vg_buf_detach(&b, NULL);
}

/* Register a resource URI (an empty fragment is dropped). First registration wins. */
static vigil_code add_id(struct cctx *c, const char *uri, struct node *n)
{
    size_t len = strlen(uri);
    if (len && uri[len - 1] == '#')
        len--;
    for (size_t i = 0; i < c->n_ids; i++)
        if (strlen(c->ids[i].uri) == len && memcmp(c->ids[i].uri, uri, len) == 0)
            return VIGIL_OK;
    if (!grow((void **)&c->ids, &c->cap_ids, c->n_ids + 1, sizeof *c->ids))
        return oom(c);
    char *copy = vg_strndup(uri, len);
    if (!copy)
        return oom(c);
    c->ids[c->n_ids].uri = copy;
    c->ids[c->n_ids].node = n;
    c->n_ids++;
    return VIGIL_OK;
}

static struct node *find_id(struct cctx *c, const char *uri, size_t len)
{
    for (size_t i = 0; i < c->n_ids; i++)
        if (strlen(c->ids[i].uri) == len && memcmp(c->ids[i].uri, uri, len) == 0)
            return c->ids[i].node;
    return NULL;
}

/* ---- keywords --------------------------------------------------------------------------- */

static vigil_code compile(struct cctx *c, const json_t *j, const char *base, const struct seg *path,
                          struct node **out);

static vigil_code sub(struct cctx *c, const json_t *obj, const char *key, const char *base,
                      const struct seg *path, struct node **out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return VIGIL_OK;
    struct seg s = {path, key, 0, 0};
    return compile(c, v, base, &s, out);
}

static vigil_code sub_list(struct cctx *c, const json_t *obj, const char *key, const char *base,
                           const struct seg *path, struct list *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return VIGIL_OK;
    if (!json_is_array(v) || json_array_size(v) == 0)
        return cfail(c, VIGIL_EINVAL, path, key, "expected a non-empty array of schemas");
    out->v = vg_calloc(json_array_size(v), sizeof *out->v);
    if (!out->v)
        return oom(c);
    struct seg s = {path, key, 0, 0};
    for (size_t i = 0; i < json_array_size(v); i++) {
        struct seg e = {&s, NULL, i, 0};
        vigil_code rc = compile(c, json_array_get(v, i), base, &e, &out->v[i]);
        if (rc != VIGIL_OK)
            return rc;
        out->n = i + 1;
    }
    return VIGIL_OK;
}

static int is_integral(const json_t *j)
{
    if (json_is_integer(j))
        return 1;
    if (!json_is_real(j))
        return 0;
    double x = json_real_value(j);
    return isfinite(x) && floor(x) == x;
}

static vigil_code count_kw(struct cctx *c, const json_t *obj, const char *key,
                           const struct seg *path, long long *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return VIGIL_OK;
    if (!is_integral(v) || json_number_value(v) < 0)
        return cfail(c, VIGIL_EINVAL, path, key, "expected a non-negative integer");
    if (json_is_integer(v))
        *out = json_integer_value(v);
    else
        *out = json_real_value(v) >= 9e18 ? (long long)9e18 : (long long)json_real_value(v);
    return VIGIL_OK;
}

static vigil_code number_kw(struct cctx *c, const json_t *obj, const char *key,
                            const struct seg *path, const json_t **out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return VIGIL_OK;
    if (!json_is_number(v)) {
        if (json_is_boolean(v) && key[0] == 'e')
            return cfail(c, VIGIL_EINVAL, path, key,
                         "expected a number (the draft-4 boolean form is not supported)");
        return cfail(c, VIGIL_EINVAL, path, key, "expected a number");
    }
    *out = v;
    return VIGIL_OK;
}

static vigil_code regex_kw(struct cctx *c, const char *src, const struct seg *path, const char *key,
                           struct vg_schema_regex **out)
{
    char why[160];
    vigil_code rc = vg_schema_regex_compile(src, strlen(src), out, why, sizeof why);
    if (rc == VIGIL_ENOMEM)
        return oom(c);
    if (rc != VIGIL_OK)
        return cfail(c, rc, path, key, "pattern \"%.60s\": %s", src, why);
    return VIGIL_OK;
}

static vigil_code compile_type(struct cctx *c, const json_t *v, const struct seg *path,
                               unsigned *out)
{
    unsigned bits = 0;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (json_is_array(v) && n == 0)
        return cfail(c, VIGIL_EINVAL, path, "type", "expected a type name or a non-empty array");
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_is_array(v) ? json_array_get(v, i) : v;
        size_t k;
        if (!json_is_string(t))
            return cfail(c, VIGIL_EINVAL, path, "type", "expected a type name or an array of them");
        for (k = 0; k < VG_ARRAY_LEN(type_names); k++)
            if (strcmp(type_names[k].name, json_string_value(t)) == 0)
                break;
        if (k == VG_ARRAY_LEN(type_names))
            return cfail(c, VIGIL_EINVAL, path, "type", "unknown type \"%.40s\"",
                         json_string_value(t));
        bits |= type_names[k].bit;
    }
    *out = bits;
    return VIGIL_OK;
}

static vigil_code compile_object_kw(struct cctx *c, struct node *n, const json_t *j,
                                    const char *base, const struct seg *path)
{
    vigil_code rc;
    const json_t *v;
    const char *key;
    json_t *val;

    if ((v = json_object_get(j, "properties"))) {
        if (!json_is_object(v))
            return cfail(c, VIGIL_EINVAL, path, "properties", "expected an object of schemas");
        n->props_obj = v;
        n->props = vg_calloc(json_object_size(v) + 1, sizeof *n->props);
        if (!n->props)
            return oom(c);
        struct seg s = {path, "properties", 0, 0};
        json_object_foreach ((json_t *)v, key, val) {
            struct seg e = {&s, key, 0, 0};
            n->props[n->n_props].name = key;
            rc = compile(c, val, base, &e, &n->props[n->n_props].schema);
            if (rc != VIGIL_OK)
                return rc;
            n->n_props++;
        }
    }
    if ((v = json_object_get(j, "patternProperties"))) {
        if (!json_is_object(v))
            return cfail(c, VIGIL_EINVAL, path, "patternProperties",
                         "expected an object of schemas");
        n->pprops = vg_calloc(json_object_size(v) + 1, sizeof *n->pprops);
        if (!n->pprops)
            return oom(c);
        struct seg s = {path, "patternProperties", 0, 0};
        json_object_foreach ((json_t *)v, key, val) {
            struct seg e = {&s, key, 0, 0};
            struct patprop *pp = &n->pprops[n->n_pprops];
            rc = regex_kw(c, key, &s, key, &pp->rx);
            if (rc != VIGIL_OK)
                return rc;
            n->n_pprops++;
            rc = compile(c, val, base, &e, &pp->schema);
            if (rc != VIGIL_OK)
                return rc;
        }
    }
    if ((rc = sub(c, j, "additionalProperties", base, path, &n->addl_props)) != VIGIL_OK)
        return rc;
    if ((rc = sub(c, j, "propertyNames", base, path, &n->prop_names)) != VIGIL_OK)
        return rc;
    if ((v = json_object_get(j, "required"))) {
        if (!json_is_array(v))
            return cfail(c, VIGIL_EINVAL, path, "required", "expected an array of strings");
        for (size_t i = 0; i < json_array_size(v); i++)
            if (!json_is_string(json_array_get(v, i)))
                return cfail(c, VIGIL_EINVAL, path, "required", "expected an array of strings");
        n->required = v;
    }
    if ((v = json_object_get(j, "dependencies"))) {
        if (!json_is_object(v))
            return cfail(c, VIGIL_EINVAL, path, "dependencies", "expected an object");
        n->deps = vg_calloc(json_object_size(v) + 1, sizeof *n->deps);
        if (!n->deps)
            return oom(c);
        struct seg s = {path, "dependencies", 0, 0};
        json_object_foreach ((json_t *)v, key, val) {
            struct seg e = {&s, key, 0, 0};
            struct dep *d = &n->deps[n->n_deps];
            d->name = key;
            if (json_is_array(val)) {
                for (size_t i = 0; i < json_array_size(val); i++)
                    if (!json_is_string(json_array_get(val, i)))
                        return cfail(c, VIGIL_EINVAL, &s, key,
                                     "expected a schema or an array of strings");
                d->names = val;
            } else {
                rc = compile(c, val, base, &e, &d->schema);
                if (rc != VIGIL_OK)
                    return rc;
            }
            n->n_deps++;
        }
    }
    if ((rc = count_kw(c, j, "minProperties", path, &n->min_props)) != VIGIL_OK ||
        (rc = count_kw(c, j, "maxProperties", path, &n->max_props)) != VIGIL_OK)
        return rc;
    return VIGIL_OK;
}

static vigil_code compile_array_kw(struct cctx *c, struct node *n, const json_t *j,
                                   const char *base, const struct seg *path)
{
    vigil_code rc;
    const json_t *v = json_object_get(j, "items");
    if (v && json_is_array(v)) {
        n->has_tuple = 1;
        if (json_array_size(v) > 0) {
            n->tuple.v = vg_calloc(json_array_size(v), sizeof *n->tuple.v);
            if (!n->tuple.v)
                return oom(c);
        }
        struct seg s = {path, "items", 0, 0};
        for (size_t i = 0; i < json_array_size(v); i++) {
            struct seg e = {&s, NULL, i, 0};
            rc = compile(c, json_array_get(v, i), base, &e, &n->tuple.v[i]);
            if (rc != VIGIL_OK)
                return rc;
            n->tuple.n = i + 1;
        }
    } else if ((rc = sub(c, j, "items", base, path, &n->items)) != VIGIL_OK) {
        return rc;
    }
    if ((rc = sub(c, j, "additionalItems", base, path, &n->addl_items)) != VIGIL_OK ||
        (rc = sub(c, j, "contains", base, path, &n->contains)) != VIGIL_OK ||
        (rc = count_kw(c, j, "minItems", path, &n->min_items)) != VIGIL_OK ||
        (rc = count_kw(c, j, "maxItems", path, &n->max_items)) != VIGIL_OK)
        return rc;
    if ((v = json_object_get(j, "uniqueItems"))) {
        if (!json_is_boolean(v))
            return cfail(c, VIGIL_EINVAL, path, "uniqueItems", "expected a boolean");
        n->unique_items = json_is_true(v);
    }
    return VIGIL_OK;
}

static vigil_code compile_scalar_kw(struct cctx *c, struct node *n, const json_t *j,
                                    const struct seg *path)
{
    vigil_code rc;
    const json_t *v;
    if ((v = json_object_get(j, "type")) && (rc = compile_type(c, v, path, &n->types)) != VIGIL_OK)
        return rc;
    if ((rc = number_kw(c, j, "minimum", path, &n->minimum)) != VIGIL_OK ||
        (rc = number_kw(c, j, "maximum", path, &n->maximum)) != VIGIL_OK ||
        (rc = number_kw(c, j, "exclusiveMinimum", path, &n->xminimum)) != VIGIL_OK ||
        (rc = number_kw(c, j, "exclusiveMaximum", path, &n->xmaximum)) != VIGIL_OK ||
        (rc = number_kw(c, j, "multipleOf", path, &n->multiple_of)) != VIGIL_OK)
        return rc;
    if (n->multiple_of && json_number_value(n->multiple_of) <= 0)
        return cfail(c, VIGIL_EINVAL, path, "multipleOf", "expected a number greater than 0");
    if ((rc = count_kw(c, j, "minLength", path, &n->min_length)) != VIGIL_OK ||
        (rc = count_kw(c, j, "maxLength", path, &n->max_length)) != VIGIL_OK)
        return rc;
    if ((v = json_object_get(j, "pattern"))) {
        if (!json_is_string(v))
            return cfail(c, VIGIL_EINVAL, path, "pattern", "expected a string");
        n->pattern_src = json_string_value(v);
        if ((rc = regex_kw(c, n->pattern_src, path, "pattern", &n->pattern)) != VIGIL_OK)
            return rc;
    }
    if ((v = json_object_get(j, "enum"))) {
        if (!json_is_array(v))
            return cfail(c, VIGIL_EINVAL, path, "enum", "expected an array");
        n->enum_values = v;
    }
    n->const_value = json_object_get(j, "const");
    if ((v = json_object_get(j, "format")) && !json_is_string(v))
        return cfail(c, VIGIL_EINVAL, path, "format", "expected a string");
    return VIGIL_OK;
}

static vigil_code compile(struct cctx *c, const json_t *j, const char *base, const struct seg *path,
                          struct node **out)
{
    vigil_code rc = VIGIL_OK;
    char *own_base = NULL;
    struct node *n = map_get(c, j);
    if (n) {
        *out = n;
        return VIGIL_OK;
    }
    if (!json_is_object(j) && !json_is_boolean(j))
        return cfail(c, VIGIL_EINVAL, path, NULL, "expected a schema (an object or a boolean)");
    if (c->depth >= VG_SCHEMA_MAX_DOC_DEPTH)
        return cfail(c, VIGIL_EINVAL, path, NULL, "schema nested deeper than %d levels",
                     VG_SCHEMA_MAX_DOC_DEPTH);
    if (!(n = new_node(c, j)))
        return oom(c);
    *out = n;
    if (json_is_boolean(j)) {
        n->kind = json_is_true(j) ? K_TRUE : K_FALSE;
        return VIGIL_OK;
    }
    n->kind = K_OBJECT;
    n->default_value = json_object_get(j, "default");

    const json_t *v = json_object_get(j, "$ref");
    if (v) { /* draft 7: a $ref replaces every sibling keyword, $id included */
        if (!json_is_string(v))
            return cfail(c, VIGIL_EINVAL, path, "$ref", "expected a string");
        if (!(n->ref_uri = uri_resolve(base, json_string_value(v))))
            return oom(c);
        return VIGIL_OK;
    }
    if ((v = json_object_get(j, "$id"))) {
        if (!json_is_string(v))
            return cfail(c, VIGIL_EINVAL, path, "$id", "expected a string");
        if (!(own_base = uri_resolve(base, json_string_value(v))))
            return oom(c);
        if ((rc = add_id(c, own_base, n)) != VIGIL_OK)
            goto out;
        own_base[strcspn(own_base, "#")] = '\0'; /* a plain-name fragment does not move base */
        base = own_base;
    }

    c->depth++;
    if ((rc = compile_scalar_kw(c, n, j, path)) != VIGIL_OK ||
        (rc = compile_object_kw(c, n, j, base, path)) != VIGIL_OK ||
        (rc = compile_array_kw(c, n, j, base, path)) != VIGIL_OK ||
        (rc = sub_list(c, j, "allOf", base, path, &n->all_of)) != VIGIL_OK ||
        (rc = sub_list(c, j, "anyOf", base, path, &n->any_of)) != VIGIL_OK ||
        (rc = sub_list(c, j, "oneOf", base, path, &n->one_of)) != VIGIL_OK ||
        (rc = sub(c, j, "not", base, path, &n->not_schema)) != VIGIL_OK ||
        (rc = sub(c, j, "if", base, path, &n->if_schema)) != VIGIL_OK ||
        (rc = sub(c, j, "then", base, path, &n->then_schema)) != VIGIL_OK ||
        (rc = sub(c, j, "else", base, path, &n->else_schema)) != VIGIL_OK)
        goto out_depth;
    /* definitions: compiled so their errors surface now and their $ids are known. */
    if ((v = json_object_get(j, "definitions"))) {
        const char *key;
        json_t *val;
        struct node *ignored;
        if (!json_is_object(v)) {
            rc = cfail(c, VIGIL_EINVAL, path, "definitions", "expected an object of schemas");
            goto out_depth;
        }
        struct seg s = {path, "definitions", 0, 0};
        json_object_foreach ((json_t *)v, key, val) {
            struct seg e = {&s, key, 0, 0};
            if ((rc = compile(c, val, base, &e, &ignored)) != VIGIL_OK)
                goto out_depth;
        }
    }
out_depth:
    c->depth--;
out:
    vg_free(own_base);
    return rc;
}

/* ---- $ref resolution -------------------------------------------------------------------- */

static int depth_ok(const json_t *j, int left)
{
    if (left <= 0)
        return 0;
    if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++)
            if (!depth_ok(json_array_get(j, i), left - 1))
                return 0;
    } else if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach ((json_t *)j, k, v) {
            if (!depth_ok(v, left - 1))
                return 0;
        }
    }
    return 1;
}

/* Take ownership of a document, and compile it as the resource named uri. */
static vigil_code load_doc(struct cctx *c, json_t *doc, const char *uri, struct node **out)
{
    if (!add_doc(c->s, doc)) {
        json_decref(doc);
        return oom(c);
    }
    if (!depth_ok(doc, VG_SCHEMA_MAX_DOC_DEPTH))
        return VG_FAIL(c->err, VIGIL_EINVAL, "schema \"%.100s\" is nested deeper than %d levels",
                       uri, VG_SCHEMA_MAX_DOC_DEPTH);
    struct seg prefix = {NULL, uri, 0, 1};
    struct node *n;
    vigil_code rc = compile(c, doc, uri, &prefix, &n);
    if (rc != VIGIL_OK)
        return rc;
    if ((rc = add_id(c, uri, n)) != VIGIL_OK)
        return rc;
    *out = n;
    return VIGIL_OK;
}

static int unhex(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/*
 * Walk a JSON pointer (percent-encoded, from a URI fragment) from a resource. Tracks the base
 * URI through the $ids on the way, so relative $refs in the target resolve where they stand.
 */
static vigil_code walk_pointer(struct cctx *c, const struct node *from, const char *frag,
                               const char *ref, const json_t **target, char **base)
{
    const json_t *cur = from->src;
    struct vg_buf tok;
    vigil_code rc = VIGIL_OK;
    vg_buf_init(&tok, 0);
    while (*frag == '/') {
        frag++;
        vg_buf_reset(&tok);
        while (*frag && *frag != '/') {
            int ch = (unsigned char)*frag++;
            if (ch == '%' && unhex(frag[0]) >= 0 && unhex(frag[1]) >= 0) {
                ch = unhex(frag[0]) * 16 + unhex(frag[1]);
                frag += 2;
            }
            if (ch == '~' && (*frag == '0' || *frag == '1')) {
                ch = *frag++ == '0' ? '~' : '/';
            }
            vg_buf_putc(&tok, (char)ch);
        }
        if (tok.fail != VIGIL_OK) {
            rc = oom(c);
            goto out;
        }
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok.data);
        } else if (json_is_array(cur)) {
            char *end;
            unsigned long long i = strtoull(tok.data, &end, 10);
            int digits = tok.len > 0 && *end == '\0' && isdigit((unsigned char)tok.data[0]) &&
                         (tok.data[0] != '0' || tok.len == 1);
            cur = digits ? json_array_get(cur, (size_t)i) : NULL;
        } else {
            cur = NULL;
        }
        if (!cur) {
            rc = VG_FAIL(c->err, VIGIL_EINVAL, "invalid schema: $ref \"%.120s\" points nowhere",
                         ref);
            goto out;
        }
        const json_t *id = json_object_get(cur, "$id");
        if (json_is_string(id) && !json_object_get(cur, "$ref")) {
            char *nb = uri_resolve(*base, json_string_value(id));
            if (!nb) {
                rc = oom(c);
                goto out;
            }
            nb[strcspn(nb, "#")] = '\0';
            vg_free(*base);
            *base = nb;
        }
    }
    if (*frag) {
        rc = VG_FAIL(c->err, VIGIL_EINVAL,
                     "invalid schema: $ref \"%.120s\" has a malformed "
                     "fragment",
                     ref);
        goto out;
    }
    *target = cur;
out:
    vg_buf_release(&tok);
    return rc;
}

static vigil_code resolve_ref(struct cctx *c, struct node *n)
{
    const char *uri = n->ref_uri;
    size_t doc_len = strcspn(uri, "#");
    const char *frag = uri[doc_len] ? uri + doc_len + 1 : "";
    struct node *res = find_id(c, uri, doc_len);
    vigil_code rc;

    if (!res) { /* another document: the meta-schema, or one the caller resolves */
        char *doc_uri = vg_strndup(uri, doc_len);
        json_t *doc = NULL;
        if (!doc_uri)
            return oom(c);
        if (strcmp(doc_uri, META_URI) == 0) {
            doc = json_loads(meta_schema_text, 0, NULL);
            rc = doc ? VIGIL_OK : oom(c);
        } else if (c->opts && c->opts->resolve && doc_len > 0) {
            vigil_error e = {0};
            doc = c->opts->resolve(c->opts->user, doc_uri, &e);
            rc = doc ? VIGIL_OK
                     : VG_FAIL(c->err, e.code ? e.code : VIGIL_ENOTFOUND,
                               "invalid schema: cannot resolve $ref \"%.100s\": %s", uri,
                               e.message[0] ? e.message : "not found");
        } else {
            rc = VG_FAIL(c->err, VIGIL_EINVAL,
                         "invalid schema: $ref \"%.120s\" is not a local reference", uri);
        }
        if (rc == VIGIL_OK)
            rc = load_doc(c, doc, doc_uri, &res);
        vg_free(doc_uri);
        if (rc != VIGIL_OK)
            return rc;
    }
    if (*frag && *frag != '/') { /* a plain-name fragment: "$id": "#foo" */
        struct node *t = find_id(c, uri, strlen(uri));
        if (!t)
            return VG_FAIL(c->err, VIGIL_EINVAL, "invalid schema: $ref \"%.120s\" points nowhere",
                           uri);
        n->ref = t;
        return VIGIL_OK;
    }
    const json_t *target = NULL;
    char *base = vg_strndup(uri, doc_len);
    if (!base)
        return oom(c);
    rc = walk_pointer(c, res, frag, uri, &target, &base);
    if (rc == VIGIL_OK) {
        /* Messages about the target name it by its fragment. */
        char *where = vg_strdup(frag);
        struct seg prefix = {NULL, where ? where : "", 0, 1};
        if (!where)
            rc = oom(c);
        else
            rc = compile(c, target, base, &prefix, &n->ref);
        vg_free(where);
    }
    vg_free(base);
    return rc;
}

/* Every $ref must end at a real schema: a chain of $refs that loops is rejected. */
static vigil_code check_ref_chains(struct cctx *c)
{
    struct vg_schema *s = c->s;
    for (size_t i = 0; i < s->n_nodes; i++) {
        struct node *n = s->nodes[i];
        size_t steps = 0;
        while (n->ref && !n->ref_checked) {
            n = n->ref;
            if (++steps > s->n_nodes)
                return VG_FAIL(c->err, VIGIL_EINVAL,
                               "invalid schema: $ref \"%.120s\" is "
                               "circular",
                               s->nodes[i]->ref_uri);
        }
        for (n = s->nodes[i]; n->ref && !n->ref_checked; n = n->ref)
            n->ref_checked = 1;
    }
    return VIGIL_OK;
}

vigil_code vg_schema_compile_ex(const json_t *schema, const struct vg_schema_options *opts,
                                struct vg_schema **out, vigil_error *err)
{
    struct cctx c = {0};
    vigil_code rc;
    json_t *doc = NULL;
    c.opts = opts;
    c.err = err;
    if (!schema)
        return VG_FAIL(err, VIGIL_EINVAL, "invalid schema: no schema given");
    if (!depth_ok(schema, VG_SCHEMA_MAX_DOC_DEPTH))
        return VG_FAIL(err, VIGIL_EINVAL, "invalid schema: nested deeper than %d levels",
                       VG_SCHEMA_MAX_DOC_DEPTH);
    if (!(c.s = vg_calloc(1, sizeof *c.s)))
        return oom(&c);
    /* Our own copy: the caller may free or change theirs, and we never write to ours. */
    if (!(doc = json_deep_copy(schema)) || !add_doc(c.s, doc)) {
        json_decref(doc);
        rc = oom(&c);
        goto out;
    }
    rc = compile(&c, doc, "", NULL, &c.s->root);
    if (rc == VIGIL_OK && !find_id(&c, "", 0))
        rc = add_id(&c, "", c.s->root); /* "#..." without any $id means this document */
    /* Resolve $refs; resolving can compile more nodes, which the loop then visits. */
    for (size_t i = 0; rc == VIGIL_OK && i < c.s->n_nodes; i++) {
        struct node *n = c.s->nodes[i];
        if (n->ref_uri && !n->ref)
            rc = resolve_ref(&c, n);
    }
    if (rc == VIGIL_OK)
        rc = check_ref_chains(&c);
out:
    for (size_t i = 0; i < c.n_ids; i++)
        vg_free(c.ids[i].uri);
    vg_free(c.ids);
    vg_free(c.map_keys);
    vg_free(c.map_vals);
    if (rc != VIGIL_OK) {
        vg_schema_free(c.s);
        return rc;
    }
    *out = c.s;
    return VIGIL_OK;
}

vigil_code vg_schema_compile(const json_t *schema, struct vg_schema **out, vigil_error *err)
{
    return vg_schema_compile_ex(schema, NULL, out, err);
}

static void free_node(struct node *n)
{
    vg_free(n->ref_uri);
    vg_schema_regex_free(n->pattern);
    for (size_t i = 0; i < n->n_pprops; i++)
        vg_schema_regex_free(n->pprops[i].rx);
    vg_free(n->pprops);
    vg_free(n->props);
    vg_free(n->deps);
    vg_free(n->tuple.v);
    vg_free(n->all_of.v);
    vg_free(n->any_of.v);
    vg_free(n->one_of.v);
    vg_free(n);
}

void vg_schema_free(struct vg_schema *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_nodes; i++)
        free_node(s->nodes[i]);
    vg_free(s->nodes);
    for (size_t i = 0; i < s->n_docs; i++)
        json_decref(s->docs[i]);
    vg_free(s->docs);
    vg_free(s);
}

/* ---- validating ------------------------------------------------------------------------- */

struct frame {
    const struct node *node;
    const json_t *inst;
};

struct vctx {
    struct vg_buf *out; /* every violation, or NULL: stop at the first */
    int n_errors;
    int have_first;
    char first[400];
    int fatal; /* depth, a $ref cycle or the work limit: the instance is rejected */
    char fatal_msg[256];
    int oom;
    long steps;
    int depth;
    int n_stack;
    struct frame stack[VG_SCHEMA_MAX_DEPTH + 1]; /* the $ref targets being evaluated */
};

static void report(struct vctx *v, const struct seg *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(struct vctx *v, const struct seg *path, const char *fmt, ...)
{
    char where[160], what[224];
    va_list ap;
    path_str(path, where, sizeof where);
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!v->have_first) {
        snprintf(v->first, sizeof v->first, "at %s: %s", where, what);
        v->have_first = 1;
    }
    if (v->out) {
        if (v->n_errors < VG_SCHEMA_MAX_ERRORS)
            vg_buf_printf(v->out, "at %s: %s\n", where, what);
        else if (v->n_errors == VG_SCHEMA_MAX_ERRORS)
            vg_buf_printf(v->out, "(more violations not shown)\n");
    }
    v->n_errors++;
}

static void fatal(struct vctx *v, const struct seg *path, const char *what)
{
    char where[160];
    if (v->fatal)
        return;
    v->fatal = 1;
    path_str(path, where, sizeof where);
    snprintf(v->fatal_msg, sizeof v->fatal_msg, "at %.150s: %.100s", where, what);
}

/* Stop at the first violation: nobody records this branch, or nobody wants the others. */
static int quick(const struct vctx *v, int rec)
{
    return !rec || !v->out || v->n_errors > VG_SCHEMA_MAX_ERRORS;
}

static const char *type_of(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return is_integral(j) ? "integer" : "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

static int type_ok(unsigned types, const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return types & T_OBJECT;
    case JSON_ARRAY:
        return types & T_ARRAY;
    case JSON_STRING:
        return types & T_STRING;
    case JSON_INTEGER:
        return types & (T_INTEGER | T_NUMBER);
    case JSON_REAL:
        return (types & T_NUMBER) || ((types & T_INTEGER) && is_integral(j));
    case JSON_TRUE:
    case JSON_FALSE:
        return types & T_BOOLEAN;
    default:
        return types & T_NULL;
    }
}

static void types_str(unsigned types, char *out, size_t cap)
{
    size_t len = 0, count = 0;
    for (size_t k = 0; k < VG_ARRAY_LEN(type_names); k++)
        count += (types & type_names[k].bit) != 0;
    out[0] = '\0';
    for (size_t k = 0, i = 0; k < VG_ARRAY_LEN(type_names); k++) {
        if (!(types & type_names[k].bit))
            continue;
        int w = snprintf(out + len, cap - len, "%s%s",
                         i == 0 ? "" : (i + 1 == count ? " or " : ", "), type_names[k].name);
        if (w < 0 || (size_t)w >= cap - len)
            return;
        len += (size_t)w;
        i++;
    }
}

static int num_cmp(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return x < y ? -1 : x > y;
    }
    long double x = json_is_integer(a) ? (long double)json_integer_value(a) : json_real_value(a);
    long double y = json_is_integer(b) ? (long double)json_integer_value(b) : json_real_value(b);
    return x < y ? -1 : x > y;
}

static int is_multiple(const json_t *x, const json_t *m)
{
    if (json_is_integer(x) && json_is_integer(m))
        return json_integer_value(x) % json_integer_value(m) == 0;
    double q = json_number_value(x) / json_number_value(m);
    if (!isfinite(q))
        return 0;
    return fabs(q - nearbyint(q)) <= 8 * DBL_EPSILON * fmax(1.0, fabs(q));
}

/* Deep equality where numbers compare by value (1 == 1.0). */
static int equal(struct vctx *v, const json_t *a, const json_t *b, int depth)
{
    if (depth > VG_SCHEMA_MAX_DEPTH) {
        fatal(v, NULL, "value nested too deeply to compare");
        return 0;
    }
    if (json_is_number(a) && json_is_number(b))
        return num_cmp(a, b) == 0;
    if (json_typeof(a) != json_typeof(b))
        return 0;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!equal(v, json_array_get(a, i), json_array_get(b, i), depth + 1))
                return 0;
        return 1;
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        if (json_object_size(a) != json_object_size(b))
            return 0;
        json_object_foreach ((json_t *)a, k, x) {
            const json_t *y = json_object_get(b, k);
            if (!y || !equal(v, x, y, depth + 1))
                return 0;
        }
        return 1;
    }
    default:
        return 1;
    }
}

static size_t utf8_length(const char *s, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += ((unsigned char)s[i] & 0xc0) != 0x80;
    return count;
}

static const struct node *deref(const struct node *n)
{
    while (n && n->ref)
        n = n->ref;
    return n;
}

static int validate(struct vctx *v, const struct node *n, const json_t *inst,
                    const struct seg *path, int rec);

#define FAILED()                                                                                   \
    do {                                                                                           \
        ok = 0;                                                                                    \
        if (quick(v, rec))                                                                         \
            return 0;                                                                              \
    } while (0)

static int check_number(struct vctx *v, const struct node *n, const json_t *inst,
                        const struct seg *path, int rec)
{
    int ok = 1;
    char a[64], b[64];
    struct {
        const json_t *bound;
        int bad_sign; /* violation when num_cmp(inst, bound) has this sign... */
        int or_equal; /* ...or is 0 */
        const char *op;
    } checks[] = {
        {n->minimum, -1, 0, ">="},
        {n->maximum, 1, 0, "<="},
        {n->xminimum, -1, 1, ">"},
        {n->xmaximum, 1, 1, "<"},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(checks); i++) {
        if (!checks[i].bound)
            continue;
        int cmp = num_cmp(inst, checks[i].bound);
        if (cmp == checks[i].bad_sign || (checks[i].or_equal && cmp == 0)) {
            if (rec) {
                json_str(checks[i].bound, a, sizeof a);
                json_str(inst, b, sizeof b);
                report(v, path, "expected a number %s %s, got %s", checks[i].op, a, b);
            }
            FAILED();
        }
    }
    if (n->multiple_of && !is_multiple(inst, n->multiple_of)) {
        if (rec) {
            json_str(n->multiple_of, a, sizeof a);
            json_str(inst, b, sizeof b);
            report(v, path, "expected a multiple of %s, got %s", a, b);
        }
        FAILED();
    }
    return ok;
}

static int check_string(struct vctx *v, const struct node *n, const json_t *inst,
                        const struct seg *path, int rec)
{
    int ok = 1;
    const char *s = json_string_value(inst);
    size_t bytes = json_string_length(inst);
    if (n->min_length >= 0 || n->max_length >= 0) {
        size_t len = utf8_length(s, bytes);
        if (n->min_length >= 0 && (unsigned long long)len < (unsigned long long)n->min_length) {
            if (rec)
                report(v, path, "expected at least %lld characters, got %zu", n->min_length, len);
            FAILED();
        }
        if (n->max_length >= 0 && (unsigned long long)len > (unsigned long long)n->max_length) {
            if (rec)
                report(v, path, "expected at most %lld characters, got %zu", n->max_length, len);
            FAILED();
        }
    }
    if (n->pattern && !vg_schema_regex_search(n->pattern, s, bytes)) {
        if (rec)
            report(v, path, "expected a string matching \"%.80s\"", n->pattern_src);
        FAILED();
    }
    return ok;
}

static int check_array(struct vctx *v, const struct node *n, const json_t *inst,
                       const struct seg *path, int rec)
{
    int ok = 1;
    size_t size = json_array_size(inst);
    if (n->min_items >= 0 && (unsigned long long)size < (unsigned long long)n->min_items) {
        if (rec)
            report(v, path, "expected at least %lld items, got %zu", n->min_items, size);
        FAILED();
    }
    if (n->max_items >= 0 && (unsigned long long)size > (unsigned long long)n->max_items) {
        if (rec)
            report(v, path, "expected at most %lld items, got %zu", n->max_items, size);
        FAILED();
    }
    if (n->unique_items) {
        for (size_t i = 0; i < size && !v->fatal; i++) {
            size_t j;
            for (j = i + 1; j < size; j++)
                if (equal(v, json_array_get(inst, i), json_array_get(inst, j), 0))
                    break;
            if (j < size) {
                if (rec)
                    report(v, path, "expected unique items, items %zu and %zu are equal", i, j);
                FAILED();
                break;
            }
        }
    }
    size_t first_extra = 0;
    if (n->has_tuple) {
        for (size_t i = 0; i < size && i < n->tuple.n; i++) {
            struct seg e = {path, NULL, i, 0};
            if (!validate(v, n->tuple.v[i], json_array_get(inst, i), &e, rec))
                FAILED();
        }
        first_extra = n->tuple.n;
        const struct node *extra = deref(n->addl_items);
        if (extra && extra->kind == K_FALSE && size > n->tuple.n) {
            if (rec)
                report(v, path, "expected at most %zu items (additionalItems is false), got %zu",
                       n->tuple.n, size);
            FAILED();
        } else if (extra) {
            for (size_t i = first_extra; i < size; i++) {
                struct seg e = {path, NULL, i, 0};
                if (!validate(v, n->addl_items, json_array_get(inst, i), &e, rec))
                    FAILED();
            }
        }
    } else if (n->items) {
        for (size_t i = 0; i < size; i++) {
            struct seg e = {path, NULL, i, 0};
            if (!validate(v, n->items, json_array_get(inst, i), &e, rec))
                FAILED();
        }
    }
    if (n->contains) {
        size_t i;
        for (i = 0; i < size; i++) {
            struct seg e = {path, NULL, i, 0};
            if (validate(v, n->contains, json_array_get(inst, i), &e, 0))
                break;
        }
        if (i == size) {
            if (rec)
                report(v, path, "expected at least one item matching contains");
            FAILED();
        }
    }
    return ok;
}

static int check_object(struct vctx *v, const struct node *n, const json_t *inst,
                        const struct seg *path, int rec)
{
    int ok = 1;
    size_t size = json_object_size(inst);
    const char *key;
    json_t *val;
    if (n->min_props >= 0 && (unsigned long long)size < (unsigned long long)n->min_props) {
        if (rec)
            report(v, path, "expected at least %lld properties, got %zu", n->min_props, size);
        FAILED();
    }
    if (n->max_props >= 0 && (unsigned long long)size > (unsigned long long)n->max_props) {
        if (rec)
            report(v, path, "expected at most %lld properties, got %zu", n->max_props, size);
        FAILED();
    }
    for (size_t i = 0; n->required && i < json_array_size(n->required); i++) {
        const char *name = json_string_value(json_array_get(n->required, i));
        if (!json_object_get(inst, name)) {
            if (rec)
                report(v, path, "missing required property \"%.80s\"", name);
            FAILED();
        }
    }
    for (size_t i = 0; i < n->n_props; i++) {
        const json_t *pv = json_object_get(inst, n->props[i].name);
        struct seg e = {path, n->props[i].name, 0, 0};
        if (pv && !validate(v, n->props[i].schema, pv, &e, rec))
            FAILED();
    }
    if (n->n_pprops || n->addl_props) {
        const struct node *extra = deref(n->addl_props);
        json_object_foreach ((json_t *)inst, key, val) {
            struct seg e = {path, key, 0, 0};
            int matched = n->props_obj && json_object_get(n->props_obj, key);
            for (size_t i = 0; i < n->n_pprops; i++) {
                if (!vg_schema_regex_search(n->pprops[i].rx, key, strlen(key)))
                    continue;
                matched = 1;
                if (!validate(v, n->pprops[i].schema, val, &e, rec))
                    FAILED();
            }
            if (matched || !extra)
                continue;
            if (extra->kind == K_FALSE) {
                if (rec)
                    report(v, path, "unexpected property \"%.80s\"", key);
                FAILED();
            } else if (!validate(v, n->addl_props, val, &e, rec)) {
                FAILED();
            }
        }
    }
    if (n->prop_names) {
        json_object_foreach ((json_t *)inst, key, val) {
            json_t *name = json_string(key);
            struct seg e = {path, key, 0, 0};
            if (!name) {
                v->oom = 1;
                return 0;
            }
            int good = validate(v, n->prop_names, name, &e, 0);
            json_decref(name);
            if (!good) {
                if (rec)
                    report(v, path, "property name \"%.80s\" does not match propertyNames", key);
                FAILED();
            }
        }
    }
    for (size_t i = 0; i < n->n_deps; i++) {
        const struct dep *d = &n->deps[i];
        if (!json_object_get(inst, d->name))
            continue;
        if (d->schema) {
            if (!validate(v, d->schema, inst, path, rec))
                FAILED();
            continue;
        }
        for (size_t k = 0; k < json_array_size(d->names); k++) {
            const char *need = json_string_value(json_array_get(d->names, k));
            if (!json_object_get(inst, need)) {
                if (rec)
                    report(v, path, "property \"%.60s\" requires property \"%.60s\"", d->name,
                           need);
                FAILED();
            }
        }
    }
    return ok;
}

static int check_combinators(struct vctx *v, const struct node *n, const json_t *inst,
                             const struct seg *path, int rec)
{
    int ok = 1;
    for (size_t i = 0; i < n->all_of.n; i++)
        if (!validate(v, n->all_of.v[i], inst, path, rec))
            FAILED();
    if (n->any_of.n) {
        size_t i;
        for (i = 0; i < n->any_of.n; i++)
            if (validate(v, n->any_of.v[i], inst, path, 0))
                break;
        if (i == n->any_of.n) {
            if (rec)
                report(v, path, "expected to match at least one schema of anyOf");
            FAILED();
        }
    }
    if (n->one_of.n) {
        size_t matched = 0;
        for (size_t i = 0; i < n->one_of.n && matched < 2; i++)
            matched += (size_t)validate(v, n->one_of.v[i], inst, path, 0);
        if (matched != 1) {
            if (rec)
                report(v, path, "expected to match exactly one schema of oneOf, matched %s",
                       matched ? "more than one" : "none");
            FAILED();
        }
    }
    if (n->not_schema && validate(v, n->not_schema, inst, path, 0)) {
        if (rec)
            report(v, path, "expected not to match the schema of not");
        FAILED();
    }
    if (n->if_schema) {
        const struct node *branch =
            validate(v, n->if_schema, inst, path, 0) ? n->then_schema : n->else_schema;
        if (branch && !validate(v, branch, inst, path, rec))
            FAILED();
    }
    return ok;
}

static int evaluate(struct vctx *v, const struct node *n, const json_t *inst,
                    const struct seg *path, int rec)
{
    int ok = 1;
    if (n->kind == K_TRUE)
        return 1;
    if (n->kind == K_FALSE) {
        if (rec)
            report(v, path, "no value is allowed here");
        return 0;
    }
    if (n->types && !type_ok(n->types, inst)) {
        if (rec) {
            char want[96];
            types_str(n->types, want, sizeof want);
            report(v, path, "expected %s, got %s", want, type_of(inst));
        }
        FAILED();
    }
    if (n->enum_values) {
        size_t i;
        for (i = 0; i < json_array_size(n->enum_values); i++)
            if (equal(v, inst, json_array_get(n->enum_values, i), 0))
                break;
        if (i == json_array_size(n->enum_values)) {
            if (rec) {
                char want[128];
                json_str(n->enum_values, want, sizeof want);
                report(v, path, "expected one of %s", want);
            }
            FAILED();
        }
    }
    if (n->const_value && !equal(v, inst, n->const_value, 0)) {
        if (rec) {
            char want[128];
            json_str(n->const_value, want, sizeof want);
            report(v, path, "expected %s", want);
        }
        FAILED();
    }
    int sub_ok = 1;
    switch (json_typeof(inst)) {
    case JSON_INTEGER:
    case JSON_REAL:
        sub_ok = check_number(v, n, inst, path, rec);
        break;
    case JSON_STRING:
        sub_ok = check_string(v, n, inst, path, rec);
        break;
    case JSON_ARRAY:
        sub_ok = check_array(v, n, inst, path, rec);
        break;
    case JSON_OBJECT:
        sub_ok = check_object(v, n, inst, path, rec);
        break;
    default:
        break;
    }
    if (!sub_ok)
        FAILED();
    if (!check_combinators(v, n, inst, path, rec))
        FAILED();
    return ok;
}

static int validate(struct vctx *v, const struct node *n, const json_t *inst,
                    const struct seg *path, int rec)
{
    if (v->fatal || v->oom)
        return 0;
    if (++v->steps > MAX_STEPS) {
        fatal(v, path, "validation exceeded its work limit");
        return 0;
    }
    if (v->depth >= VG_SCHEMA_MAX_DEPTH) {
        char what[96];
        snprintf(what, sizeof what, "nested deeper than %d levels", VG_SCHEMA_MAX_DEPTH);
        fatal(v, path, what);
        return 0;
    }
    int pushed = 0;
    if (n->ref) {
        n = deref(n);
        /*
         * Entering a $ref target that is already being evaluated against this very value can
         * never finish. Frames for one value are contiguous at the top of the stack.
         */
        for (int i = v->n_stack - 1; i >= 0 && v->stack[i].inst == inst; i--) {
            if (v->stack[i].node == n) {
                fatal(v, path, "the schema's $refs loop without making progress");
                return 0;
            }
        }
        v->stack[v->n_stack].node = n;
        v->stack[v->n_stack].inst = inst;
        v->n_stack++;
        pushed = 1;
    }
    v->depth++;
    int ok = evaluate(v, n, inst, path, rec);
    v->depth--;
    if (pushed)
        v->n_stack--;
    return ok && !v->fatal && !v->oom;
}

vigil_code vg_schema_validate(const struct vg_schema *s, const json_t *instance,
                              struct vg_buf *errors_out, vigil_error *err)
{
    struct vctx *v;
    vigil_code rc = VIGIL_OK;
    if (!s || !instance)
        return VG_FAIL(err, VIGIL_EINVAL, "no schema or no instance to validate");
    /* The frame stack is only read below n_stack: zero just the fields before it. */
    if (!(v = vg_malloc(sizeof *v)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory validating");
    memset(v, 0, offsetof(struct vctx, stack));
    v->out = errors_out;
    int ok = validate(v, s->root, instance, NULL, 1);
    if (v->oom) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory validating");
    } else if (v->fatal) {
        if (errors_out)
            vg_buf_printf(errors_out, "%s\n", v->fatal_msg);
        rc = VG_FAIL(err, VIGIL_EINVAL, "%s", v->fatal_msg);
    } else if (!ok) {
        rc = VG_FAIL(err, VIGIL_EINVAL, "%s", v->have_first ? v->first : "at (root): invalid");
    }
    vg_free(v);
    return rc;
}

/* ---- defaults --------------------------------------------------------------------------- */

static const json_t *default_of(const struct node *n)
{
    for (int hops = 0; n && hops < 64; hops++, n = n->ref)
        if (n->kind == K_OBJECT && n->default_value)
            return n->default_value;
    return NULL;
}

static vigil_code defaults(const struct node *n, json_t *inst, int depth, long *steps,
                           vigil_error *err)
{
    vigil_code rc;
    if (depth > VG_SCHEMA_MAX_DEPTH / 8 || ++*steps > MAX_DEFAULT_STEPS)
        return VIGIL_OK;
    n = deref(n);
    if (n->kind != K_OBJECT)
        return VIGIL_OK;
    for (size_t i = 0; i < n->all_of.n; i++)
        if ((rc = defaults(n->all_of.v[i], inst, depth + 1, steps, err)) != VIGIL_OK)
            return rc;
    if (json_is_object(inst)) {
        for (size_t i = 0; i < n->n_props; i++) {
            json_t *pv = json_object_get(inst, n->props[i].name);
            const json_t *d;
            if (!pv && (d = default_of(n->props[i].schema))) {
                if (!(pv = json_deep_copy(d)) || json_object_set_new(inst, n->props[i].name, pv))
                    return VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying defaults");
            }
            if (pv && (rc = defaults(n->props[i].schema, pv, depth + 1, steps, err)) != VIGIL_OK)
                return rc;
        }
    } else if (json_is_array(inst)) {
        for (size_t i = 0; i < json_array_size(inst); i++) {
            const struct node *item =
                n->has_tuple ? (i < n->tuple.n ? n->tuple.v[i] : NULL) : n->items;
            if (item && (rc = defaults(item, json_array_get(inst, i), depth + 1, steps, err)))
                return rc;
        }
    }
    return VIGIL_OK;
}

vigil_code vg_schema_apply_defaults(const struct vg_schema *s, json_t *instance, vigil_error *err)
{
    long steps = 0;
    if (!s || !instance)
        return VG_FAIL(err, VIGIL_EINVAL, "no schema or no instance to fill");
    return defaults(s->root, instance, 0, &steps, err);
}
