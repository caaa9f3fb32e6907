/*
 * openai.h: the OpenAI-compatible adapter's request encoder and response parsers, exposed
 * inside src/model so tests and fuzz targets can drive them without HTTP.
 */
#ifndef VG_MODEL_OPENAI_H
#define VG_MODEL_OPENAI_H

#include "model/port.h"

struct vg_openai_stream;

/* The Chat Completions body for req (owned text, vg_free). model: the id to send. */
vigil_code vg_openai_build_body(const struct vg_model_request *req, const char *model, int stream,
                                int stream_usage, char **out, vigil_error *err);
/* Parse a non-streaming response body. */
vigil_code vg_openai_parse_response(const char *body, size_t len, struct vg_model_response **out,
                                    vigil_error *err);
/* The same through a jansson tree only: what vg_openai_parse_response does with any answer its
 * reader without a tree leaves (and the reference the fuzz target compares that reader with). */
vigil_code vg_openai_parse_response_tree(const char *body, size_t len,
                                         struct vg_model_response **out, vigil_error *err);

/* Incremental stream parsing: new, feed any chunks, finish (yields the response), free.
 * cb may be NULL. */
vigil_code vg_openai_stream_new(const struct vg_model_stream_cb *cb, struct vg_openai_stream **out,
                                vigil_error *err);
vigil_code vg_openai_stream_feed(struct vg_openai_stream *s, const char *data, size_t len,
                                 vigil_error *err);
vigil_code vg_openai_stream_finish(struct vg_openai_stream *s, struct vg_model_response **out,
                                   vigil_error *err);
void vg_openai_stream_free(struct vg_openai_stream *s);

#endif
