/*
 * watch_model.h: a model for tests that shows every request to a check, keeps it as JSON when
 * asked (vg_model_request_to_json), then lets another model (the scripted provider) answer.
 * So a test sees exactly what each model call of a run was sent.
 */
#ifndef VG_TEST_WATCH_MODEL_H
#define VG_TEST_WATCH_MODEL_H

#include "base/common.h"
#include "model/port.h"

#include <jansson.h>

struct watch_model {
    struct vg_model base; /* a copy of the inner model's with other methods: must stay first */
    struct vg_model_methods methods;
    struct vg_model *inner;                                        /* borrowed */
    void (*check)(void *user, const struct vg_model_request *req); /* optional */
    void *user;
    int keep;         /* non-zero: keep every request's JSON in requests */
    json_t *requests; /* the requests kept, in order */
    int n_requests;
};

/* Watch inner (borrowed: free it after the watcher, which is never passed to vg_model_free). */
void watch_model_init(struct watch_model *w, struct vg_model *inner);
void watch_model_release(struct watch_model *w);

/* The messages of request i (borrowed), failing the test when there is none. */
json_t *watch_model_messages(struct watch_model *w, size_t i);

#endif
