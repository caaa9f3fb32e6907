/*
 * watch_model.c: the watching model (watch_model.h).
 */
#include "loop/watch_model.h"

#include "helpers/test.h"

static void watch(struct watch_model *w, const struct vg_model_request *req)
{
    w->n_requests++;
    if (w->check)
        w->check(w->user, req);
    if (!w->keep)
        return;
    char *text = NULL;
    vigil_error err = {0};
    if (vg_model_request_to_json(req, &text, &err) != VIGIL_OK)
        TEST_FAIL_("cannot encode a request: %s", err.message);
    json_t *v = json_loads(text, 0, NULL);
    vg_free(text);
    if (!v || json_array_append_new(w->requests, v))
        TEST_FAIL_("cannot keep a request");
}

static vigil_code watch_complete(struct vg_model *m, const struct vg_model_request *req,
                                 struct vg_model_response **out, struct vg_model_attempt *att,
                                 vigil_error *err)
{
    struct watch_model *w = (struct watch_model *)m;
    watch(w, req);
    return vg_model_attempt(w->inner, req, NULL, out, att, err);
}

static vigil_code watch_stream(struct vg_model *m, const struct vg_model_request *req,
                               const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                               struct vg_model_attempt *att, vigil_error *err)
{
    struct watch_model *w = (struct watch_model *)m;
    watch(w, req);
    return vg_model_attempt(w->inner, req, cb, out, att, err);
}

static void watch_destroy(struct vg_model *m)
{
    (void)m;
}

void watch_model_init(struct watch_model *w, struct vg_model *inner)
{
    memset(w, 0, sizeof *w);
    w->methods = *inner->methods;
    w->methods.complete = watch_complete;
    w->methods.stream = watch_stream;
    w->methods.destroy = watch_destroy;
    w->base = *inner;
    w->base.methods = &w->methods;
    w->inner = inner;
    w->requests = json_array();
    if (!w->requests)
        TEST_FAIL_("out of memory");
}

void watch_model_release(struct watch_model *w)
{
    json_decref(w->requests);
    w->requests = NULL;
}

json_t *watch_model_messages(struct watch_model *w, size_t i)
{
    json_t *m = json_object_get(json_array_get(w->requests, i), "messages");
    if (!m)
        TEST_FAIL_("no request %zu (of %zu kept)", i, json_array_size(w->requests));
    return m;
}
