/*
 * schema.h: vigil's own JSON Schema (draft 7) validator. The tool executor validates the
 * arguments a model produced against each tool's input schema before anything runs.
 *
 * Compile a schema once, validate many instances against it. A compiled schema is immutable:
 * any number of threads may validate against one compiled schema at the same time. Supported
 * keywords, the regex translation and the results on the official test suite are described in
 * docs/internals/SCHEMA.md.
 */
#ifndef VG_TOOL_SCHEMA_H
#define VG_TOOL_SCHEMA_H

#include <jansson.h>

struct vg_buf;
struct vg_schema;

/* Nesting limit of one validation (schema evaluation depth, also bounds instance depth). */
#define VG_SCHEMA_MAX_DEPTH 512
/* Nesting limit of a schema document (JSON levels). */
#define VG_SCHEMA_MAX_DOC_DEPTH 128
/* At most this many violations are written to the errors buffer of vg_schema_validate. */
#define VG_SCHEMA_MAX_ERRORS 100

/*
 * Resolves a $ref to a document other than the schema itself and the built-in draft-07
 * meta-schema. uri is absolute and has no fragment. Returns a new reference that the compiled
 * schema keeps (stolen), or NULL with err set (the compiler adds the $ref to the message).
 */
typedef json_t *(*vg_schema_resolve_cb)(void *user, const char *uri, vigil_error *err);

struct vg_schema_options {
    vg_schema_resolve_cb resolve; /* NULL: only local references and the meta-schema */
    void *user;                   /* passed to resolve */
};

/*
 * Compile a schema (an object or a boolean). schema is borrowed: the compiled schema keeps its
 * own copy, so the caller may free or change it afterwards. Errors: EINVAL for an invalid
 * schema, with the JSON pointer of the bad keyword in the message
 * ("invalid schema at /properties/n/minLength: expected a non-negative integer"),
 * EUNSUPPORTED for a pattern that cannot be translated, ENOMEM.
 */
vigil_code vg_schema_compile(const json_t *schema, struct vg_schema **out, vigil_error *err);
vigil_code vg_schema_compile_ex(const json_t *schema, const struct vg_schema_options *opts,
                                struct vg_schema **out, vigil_error *err);

/*
 * Validate an instance (borrowed). VIGIL_OK when it is valid; VIGIL_EINVAL when not, with the
 * first violation as the message: `at /items/2/priority: expected one of ["low","high"]`.
 * errors_out (may be NULL) receives every violation, one per line, at most
 * VG_SCHEMA_MAX_ERRORS lines; without it validation stops at the first violation.
 * ENOMEM when memory ran out.
 */
vigil_code vg_schema_validate(const struct vg_schema *s, const json_t *instance,
                              struct vg_buf *errors_out, vigil_error *err);

/*
 * Fill in missing object properties whose schema has a `default` (a deep copy of it), then
 * recurse into the properties, through $ref, allOf and array items. Stops silently at
 * VG_SCHEMA_MAX_DEPTH / 8 levels (a default that contains itself through a $ref). ENOMEM.
 */
vigil_code vg_schema_apply_defaults(const struct vg_schema *s, json_t *instance, vigil_error *err);

/* Free a compiled schema. NULL is a no-op. */
void vg_schema_free(struct vg_schema *s);

#endif
