/*
 * schema_standin.h: TEMPORARY stand-in for tool/schema.h (branch `schema`), so the tool layer
 * compiles before the real validator is merged. Same API; the implementation in
 * schema_standin.c checks only type, required, properties, additionalProperties, enum,
 * minLength/maxLength, minItems/maxItems, items and minimum/maximum. Removed once
 * src/tool/schema.h lands in main.
 */
#ifndef VG_TOOL_SCHEMA_H
#define VG_TOOL_SCHEMA_H

#include <jansson.h>

struct vg_buf;
struct vg_schema;

vigil_code vg_schema_compile(const json_t *schema, struct vg_schema **out, vigil_error *err);
vigil_code vg_schema_validate(const struct vg_schema *s, const json_t *instance,
                              struct vg_buf *errors_out, vigil_error *err);
vigil_code vg_schema_apply_defaults(const struct vg_schema *s, json_t *instance,
                                    vigil_error *err);
void vg_schema_free(struct vg_schema *s);

#endif
