/*
 * provider.c: the wrappers every caller of the tool-provider port goes through, and the
 * response helpers providers share.
 */
#include "base/common.h"

#include "tool/tool.h"

#include <stdarg.h>

void vg_tool_response_release(struct vg_tool_response *r)
{
    json_decref(r->result);
    json_decref(r->changed_entity_ids);
    json_decref(r->changed_tokens);
    json_decref(r->decisions);
    vg_free(r->result_text);
    memset(r, 0, sizeof *r);
}

void vg_tool_response_fail(struct vg_tool_response *r, enum vg_tool_code code, const char *fmt, ...)
{
    va_list ap;
    r->code = code;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

vigil_code vg_tool_provider_list(struct vg_tool_provider *p, json_t **out, vigil_error *err)
{
    return p->methods->list(p, out, err);
}

vigil_code vg_tool_provider_call(struct vg_tool_provider *p, const struct vg_tool_request *req,
                                 struct vg_tool_response *resp, vigil_error *err)
{
    return p->methods->call(p, req, resp, err);
}

int vg_tool_provider_can_lookup(const struct vg_tool_provider *p)
{
    return p->methods->lookup != NULL;
}

vigil_code vg_tool_provider_lookup(struct vg_tool_provider *p, const struct vg_tool_request *req,
                                   int *found, struct vg_tool_response *resp, vigil_error *err)
{
    *found = 0;
    if (!p->methods->lookup)
        return VG_FAIL(err, VIGIL_EUNSUPPORTED, "provider \"%s\" cannot look up operations",
                       p->methods->name);
    return p->methods->lookup(p, req, found, resp, err);
}

void vg_tool_provider_after_commit(struct vg_tool_provider *p, const struct vg_tool_request *req)
{
    if (p->methods->version >= 2 && p->methods->after_commit)
        p->methods->after_commit(p, req);
}

void vg_tool_provider_destroy(struct vg_tool_provider *p)
{
    if (p && p->methods->destroy)
        p->methods->destroy(p);
}

const char *vg_tool_provider_deferred_prefix(struct vg_tool_provider *p)
{
    return p->methods->version >= 3 && p->methods->deferred_prefix ? p->methods->deferred_prefix(p)
                                                                   : NULL;
}

int vg_tool_provider_stale(struct vg_tool_provider *p)
{
    return p->methods->version >= 3 && p->methods->stale ? p->methods->stale(p) : 0;
}

int vg_tool_provider_may_serve(struct vg_tool_provider *p, const char *name)
{
    return p->methods->version >= 4 && p->methods->may_serve ? p->methods->may_serve(p, name) : 0;
}

const char *vg_tool_provider_source(struct vg_tool_provider *p)
{
    const char *n = p->methods->name;
    if (p->methods->version >= 3 && p->methods->source)
        return p->methods->source(p);
    if (!strcmp(n, "builtin") || !strcmp(n, "memory"))
        return "built-in";
    if (!strcmp(n, "callback"))
        return "registered";
    return n;
}

static int str_array(json_t *a)
{
    size_t i;
    json_t *v;
    if (!json_is_array(a))
        return 0;
    json_array_foreach (a, i, v)
        if (!json_is_string(v))
            return 0;
    return 1;
}

void vg_tool_reply_parse(const char *text, size_t len, struct vg_tool_response *r)
{
    json_error_t je;
    json_t *v = json_loadb(text, len, JSON_DECODE_ANY, &je), *e;
    if (!v) {
        vg_tool_response_fail(r, VG_TOOL_FAILED, "tool answered invalid JSON: %s", je.text);
        return;
    }
    if (json_is_object(v) && (e = json_object_get(v, "error")) && !json_is_null(e)) {
        enum vg_tool_code c = VG_TOOL_FAILED;
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_is_string(e) ? json_string_value(e)
                                            : json_string_value(json_object_get(e, "message"));
        if (code && !vg_tool_code_parse(code, &c))
            c = VG_TOOL_FAILED;
        vg_tool_response_fail(r, c, "%s", msg ? msg : "the tool reported an error");
        json_decref(v);
        return;
    }
    if (json_is_object(v) && json_object_get(v, "result")) {
        json_t *ids = json_object_get(v, "changed_entity_ids");
        json_t *tok = json_object_get(v, "changed_tokens");
        if ((ids && !str_array(ids)) || (tok && !str_array(tok))) {
            vg_tool_response_fail(r, VG_TOOL_FAILED,
                                  "changed_entity_ids and changed_tokens must be string arrays");
            json_decref(v);
            return;
        }
        r->result = json_incref(json_object_get(v, "result"));
        r->changed_entity_ids = json_incref(ids);
        r->changed_tokens = json_incref(tok);
        const char *st = json_string_value(json_object_get(v, "status"));
        r->partial = st && !strcmp(st, "partial");
        json_decref(v);
        return;
    }
    r->result = v;
}
