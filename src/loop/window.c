/*
 * window.c: the hot window (window.h). A message is one block: the struct, its tool calls,
 * then every string it points to.
 */
#include "base/common.h"

#include "base/alloc.h"
#include "loop/window.h"

void vg_window_init(struct vg_window *w, size_t max)
{
    memset(w, 0, sizeof *w);
    w->max = max ? max : 1;
}

void vg_window_release(struct vg_window *w)
{
    for (size_t i = 0; i < w->n; i++)
        vg_free(w->msgs[i]);
    vg_free(w->msgs);
    memset(w, 0, sizeof *w);
}

static size_t len0(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

/* Copies s into the block at *at and returns the copy (NULL stays NULL). */
static const char *put(char **at, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *copy = memcpy(*at, s, n);
    *at += n;
    return copy;
}

vigil_code vg_window_push(struct vg_window *w, const char *kind, const char *content,
                          const char *tool_call_id, int is_error,
                          const struct vg_model_tool_call *calls, size_t n_calls,
                          vigil_error *err)
{
    if (!content)
        content = "";
    /* Context assembly compares these: a NULL would be a caller's bug, refused here. */
    int incomplete = !kind;
    for (size_t i = 0; i < n_calls; i++)
        incomplete |= !calls[i].id || !calls[i].name || !calls[i].arguments;
    if (incomplete)
        return VG_FAIL(err, VIGIL_EINVAL, "a window message needs a kind, and its tool calls an "
                                          "id, a name and arguments");
    size_t size = sizeof(struct vg_window_msg) + n_calls * sizeof *calls + len0(kind) +
                  len0(content) + len0(tool_call_id);
    for (size_t i = 0; i < n_calls; i++)
        size += len0(calls[i].id) + len0(calls[i].name) + len0(calls[i].arguments);
    if (w->n == w->cap && w->n < w->max) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        cap = VG_MIN(cap, w->max);
        struct vg_window_msg **p = vg_realloc(w->msgs, cap * sizeof *p);
        if (!p)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the context window");
        w->msgs = p;
        w->cap = cap;
    }
    struct vg_window_msg *m = vg_malloc(size);
    if (!m)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the context window");
    memset(m, 0, sizeof *m);
    char *at = (char *)(m + 1) + n_calls * sizeof *calls;
    if (n_calls) {
        m->calls = (struct vg_model_tool_call *)(m + 1);
        m->n_calls = n_calls;
        for (size_t i = 0; i < n_calls; i++) {
            m->calls[i].id = put(&at, calls[i].id);
            m->calls[i].name = put(&at, calls[i].name);
            m->calls[i].arguments = put(&at, calls[i].arguments);
        }
    }
    m->kind = put(&at, kind);
    m->content = put(&at, content);
    m->tool_call_id = put(&at, tool_call_id);
    m->is_error = is_error;
    if (w->n == w->max) {
        vg_free(w->msgs[0]);
        memmove(w->msgs, w->msgs + 1, (w->n - 1) * sizeof *w->msgs);
        w->n--;
    }
    w->msgs[w->n++] = m;
    return VIGIL_OK;
}

vigil_code vg_window_push_body(struct vg_window *w, json_t *body, vigil_error *err)
{
    const char *kind = json_string_value(json_object_get(body, "kind"));
    if (!kind)
        return VIGIL_OK;
    json_t *meta = json_object_get(body, "metadata");
    json_t *calls = json_object_get(meta, "tool_calls");
    size_t n = json_array_size(calls), kept = 0;
    struct vg_model_tool_call *tc = n ? vg_calloc(n, sizeof *tc) : NULL;
    if (n && !tc)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory keeping the context window");
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(calls, i);
        tc[kept].id = json_string_value(json_object_get(c, "id"));
        tc[kept].name = json_string_value(json_object_get(c, "name"));
        tc[kept].arguments = json_string_value(json_object_get(c, "arguments"));
        if (tc[kept].id && tc[kept].name && tc[kept].arguments)
            kept++;
    }
    vigil_code rc = vg_window_push(
        w, kind, json_string_value(json_object_get(body, "content")),
        json_string_value(json_object_get(meta, "tool_call_id")),
        json_is_true(json_object_get(meta, "is_error")), tc, kept, err);
    vg_free(tc);
    return rc;
}
