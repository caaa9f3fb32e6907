/*
 * callback.c: tools an embedding program registers as C callbacks (vigil_tool_register). The
 * callback gets the validated arguments as JSON text and answers by the reply protocol; an
 * optional lookup callback makes the tool reconcilable after a crash.
 */
#include "base/common.h"
#include "base/json.h"

#include "tool/tool.h"

struct cb_provider {
    struct vg_tool_provider base; /* must stay first */
    json_t *contract;             /* owned */
    vigil_tool_fn fn;
    vigil_tool_lookup_fn lookup;
    void *user;
};

static vigil_code c_list(struct vg_tool_provider *p, json_t **out, vigil_error *err)
{
    struct cb_provider *c = (struct cb_provider *)p;
    if (!(*out = json_pack("[O]", c->contract)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing a callback tool");
    return VIGIL_OK;
}

static vigil_tool_call_info info_of(const struct vg_tool_request *q)
{
    return (vigil_tool_call_info){.agent_id = q->agent_id,
                                  .tool = q->tool,
                                  .operation_id = q->operation_id,
                                  .run_key = q->run_key,
                                  .preview_only = q->preview_only};
}

static vigil_code answer(vigil_code rc, const vigil_error *e, char *text,
                         struct vg_tool_response *r)
{
    if (rc) {
        vg_tool_response_fail(r, rc == VIGIL_ETIMEOUT ? VG_TOOL_TIMEOUT : VG_TOOL_FAILED, "%s",
                              e->message[0] ? e->message : vigil_strerror(rc));
    } else if (!text) {
        vg_tool_response_fail(r, VG_TOOL_FAILED, "the tool callback returned no reply");
    } else {
        vg_tool_reply_parse(text, strlen(text), r);
    }
    free(text); /* allocated by the embedding program with malloc() */
    return VIGIL_OK;
}

static vigil_code c_call(struct vg_tool_provider *p, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err)
{
    struct cb_provider *c = (struct cb_provider *)p;
    char *args = vg_json_dumps(q->args, JSON_COMPACT | JSON_SORT_KEYS);
    char *text = NULL;
    vigil_error e = {0};
    if (!args)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding tool arguments");
    vigil_tool_call_info info = info_of(q);
    vigil_code rc = c->fn(c->user, &info, args, &text, &e);
    vg_free(args);
    return answer(rc, &e, text, r);
}

static vigil_code c_lookup(struct vg_tool_provider *p, const struct vg_tool_request *q, int *found,
                           struct vg_tool_response *r, vigil_error *err)
{
    struct cb_provider *c = (struct cb_provider *)p;
    char *text = NULL;
    vigil_error e = {0};
    vigil_tool_call_info info = info_of(q);
    vigil_code rc = c->lookup(c->user, &info, found, &text, &e);
    if (rc) {
        free(text);
        vg_error_copy(err, &e);
        return rc ? rc : VIGIL_ERROR;
    }
    if (!*found) {
        free(text);
        return VIGIL_OK;
    }
    return answer(VIGIL_OK, &e, text, r);
}

static void c_destroy(struct vg_tool_provider *p)
{
    struct cb_provider *c = (struct cb_provider *)p;
    json_decref(c->contract);
    vg_free(c);
}

static const struct vg_tool_provider_methods cb_methods = {.version = 1,
                                                           .name = "callback",
                                                           .caps = 0,
                                                           .list = c_list,
                                                           .call = c_call,
                                                           .lookup = NULL,
                                                           .destroy = c_destroy};
static const struct vg_tool_provider_methods cb_lookup_methods = {.version = 1,
                                                                  .name = "callback",
                                                                  .caps = 0,
                                                                  .list = c_list,
                                                                  .call = c_call,
                                                                  .lookup = c_lookup,
                                                                  .destroy = c_destroy};

vigil_code vg_tool_callback_provider(const json_t *contract, vigil_tool_fn fn,
                                     vigil_tool_lookup_fn lookup, void *user,
                                     struct vg_tool_provider **out, vigil_error *err)
{
    if (!fn)
        return VG_FAIL(err, VIGIL_EINVAL, "a callback tool needs a function");
    struct cb_provider *c = vg_calloc(1, sizeof *c);
    if (!c || !(c->contract = json_deep_copy(contract))) {
        vg_free(c);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory registering a callback tool");
    }
    c->base.methods = lookup ? &cb_lookup_methods : &cb_methods;
    c->fn = fn;
    c->lookup = lookup;
    c->user = user;
    *out = &c->base;
    return VIGIL_OK;
}
