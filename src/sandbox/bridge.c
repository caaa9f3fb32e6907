/*
 * bridge.c: the child's side of the conversation as the host reads it: a byte stream cut into
 * lines of at most VG_BRIDGE_MAX_LINE (a longer one breaks the stream: the host stops the
 * child), each line one JSON object whose shape is checked here before anything acts on it.
 */
#include "base/common.h"

#include "sandbox/sandbox.h"

vigil_code vg_bridge_reader_feed(struct vg_bridge_reader *r, const char *p, size_t n,
                                 vigil_error *err)
{
    if (r->overflow)
        return VIGIL_OK;
    /* Never more than one line's cap without a newline: a flood stops here. */
    if (r->len - r->consumed + n > 2 * (size_t)VG_BRIDGE_MAX_LINE && !memchr(p, '\n', n)) {
        r->overflow = 1;
        return VIGIL_OK;
    }
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n)
            cap *= 2;
        char *b = vg_realloc(r->buf, cap);
        if (!b)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading the sandbox's messages");
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, p, n);
    r->len += n;
    return VIGIL_OK;
}

/* The line handed out last is dropped from the buffer at the next call. */
int vg_bridge_reader_next(struct vg_bridge_reader *r, const char **line, size_t *len)
{
    if (r->consumed) {
        memmove(r->buf, r->buf + r->consumed, r->len - r->consumed);
        r->len -= r->consumed;
        r->consumed = 0;
    }
    if (r->overflow || !r->len)
        return 0;
    char *nl = memchr(r->buf, '\n', r->len);
    size_t n = nl ? (size_t)(nl - r->buf) : r->len;
    if (n > VG_BRIDGE_MAX_LINE) {
        r->overflow = 1;
        return 0;
    }
    if (!nl)
        return 0;
    *line = r->buf;
    *len = n;
    r->consumed = n + 1;
    return 1;
}

void vg_bridge_reader_free(struct vg_bridge_reader *r)
{
    vg_free(r->buf);
    memset(r, 0, sizeof *r);
}

static enum vg_bridge_op bad(struct vg_bridge_msg *m, const char *why)
{
    snprintf(m->why, sizeof m->why, "%s", why);
    m->op = VG_BRIDGE_BAD;
    return VG_BRIDGE_BAD;
}

static const struct {
    const char *name;
    enum vg_bridge_op op;
} ops[] = {{"tool", VG_BRIDGE_TOOL},     {"read", VG_BRIDGE_READ},     {"write", VG_BRIDGE_WRITE},
           {"list", VG_BRIDGE_LIST},     {"remove", VG_BRIDGE_REMOVE}, {"fetch", VG_BRIDGE_FETCH},
           {"result", VG_BRIDGE_RESULT}, {"error", VG_BRIDGE_ERROR}};

static enum vg_bridge_op parse_request(struct vg_bridge_msg *m)
{
    json_t *id = json_object_get(m->root, "id");
    if (!json_is_integer(id) || json_integer_value(id) < 0)
        return bad(m, "a request needs a non-negative integer \"id\"");
    m->id = json_integer_value(id);
    if (m->op == VG_BRIDGE_TOOL) {
        m->name = json_string_value(json_object_get(m->root, "name"));
        m->value = json_object_get(m->root, "args");
        if (!m->name || !*m->name)
            return bad(m, "a tool call needs a \"name\"");
        if (m->value && !json_is_object(m->value))
            return bad(m, "a tool call's \"args\" must be an object");
        return m->op;
    }
    const char *key = m->op == VG_BRIDGE_FETCH ? "url" : "path";
    m->path = json_string_value(json_object_get(m->root, key));
    if (!m->path)
        return bad(m, m->op == VG_BRIDGE_FETCH ? "a fetch needs a \"url\" string"
                                               : "a file request needs a \"path\" string");
    if (strlen(m->path) != json_string_length(json_object_get(m->root, key)))
        return bad(m, "a path or URL may not hold a NUL byte");
    if (m->op == VG_BRIDGE_WRITE) {
        json_t *d = json_object_get(m->root, "data");
        if (!json_is_string(d))
            return bad(m, "a write needs a \"data\" string");
        m->data = json_string_value(d);
        m->data_len = json_string_length(d);
        m->append = json_is_true(json_object_get(m->root, "append"));
    }
    return m->op;
}

enum vg_bridge_op vg_bridge_msg_parse(const char *line, size_t len, struct vg_bridge_msg *m)
{
    memset(m, 0, sizeof *m);
    json_error_t je;
    if (len > VG_BRIDGE_MAX_LINE)
        return bad(m, "message too long");
    m->root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(m->root))
        return bad(m, m->root ? "a message must be a JSON object" : "a message must be JSON");
    const char *op = json_string_value(json_object_get(m->root, "op"));
    for (size_t i = 0; op && i < VG_ARRAY_LEN(ops); i++)
        if (!strcmp(op, ops[i].name))
            m->op = ops[i].op;
    switch (m->op) {
    case VG_BRIDGE_BAD:
        return bad(m, "unknown \"op\"");
    case VG_BRIDGE_RESULT:
        m->value = json_object_get(m->root, "value");
        return m->op;
    case VG_BRIDGE_ERROR:
        m->code = json_string_value(json_object_get(m->root, "code"));
        m->message = json_string_value(json_object_get(m->root, "message"));
        if (!m->code || !m->message)
            return bad(m, "an error needs \"code\" and \"message\" strings");
        return m->op;
    default:
        return parse_request(m);
    }
}

void vg_bridge_msg_release(struct vg_bridge_msg *m)
{
    json_decref(m->root);
    m->root = NULL;
}
