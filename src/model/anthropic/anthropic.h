/*
 * anthropic.h: the Anthropic Messages adapter's request encoder and response parsers, exposed
 * inside src/model so tests and fuzz targets can drive them without HTTP.
 */
#ifndef VG_MODEL_ANTHROPIC_H
#define VG_MODEL_ANTHROPIC_H

#include "model/port.h"

struct vg_anthropic_stream;

/* The Messages API body for req (owned text, vg_free). */
vigil_code vg_anthropic_build_body(const struct vg_model_request *req, const char *model,
                                   int stream, char **out, vigil_error *err);
vigil_code vg_anthropic_parse_response(const char *body, size_t len, struct vg_model_response **out,
                                       vigil_error *err);

vigil_code vg_anthropic_stream_new(const struct vg_model_stream_cb *cb,
                                   struct vg_anthropic_stream **out, vigil_error *err);
vigil_code vg_anthropic_stream_feed(struct vg_anthropic_stream *s, const char *data, size_t len,
                                    vigil_error *err);
vigil_code vg_anthropic_stream_finish(struct vg_anthropic_stream *s, struct vg_model_response **out,
                                      vigil_error *err);
void vg_anthropic_stream_free(struct vg_anthropic_stream *s);

#endif
