/*
 * scripted.h: cassette encoding shared by the scripted provider (replay) and the record
 * wrapper (which writes what a real provider answered).
 */
#ifndef VG_MODEL_SCRIPTED_H
#define VG_MODEL_SCRIPTED_H

#include <jansson.h>

#include "model/port.h"

#define VG_CASSETTE_VERSION 1

/* A response as a cassette "response" object (new reference, NULL on out of memory). */
json_t *vg_cassette_response_to_json(const struct vg_model_response *r);
/* Read a cassette "response" object back; step is used in messages. */
vigil_code vg_cassette_response_from_json(json_t *obj, size_t step, struct vg_model_response **out,
                                          vigil_error *err);

#endif
