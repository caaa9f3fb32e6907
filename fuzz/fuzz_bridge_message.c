/*
 * fuzz_bridge_message.c: arbitrary bytes as what a sandboxed program writes on its bridge: the
 * line reader cuts them (fed in pieces whose size the first byte picks) and the checker
 * classifies every line without crashing, keeping its promises: a request has an id >= 0, a
 * tool call a non-empty name and object-or-absent args, a file request a path without NUL
 * bytes, a write its data, an error its code and message. Seeds: fuzz/corpus/bridge_message/.
 */
#include "base/common.h"

#include "sandbox/sandbox.h"

static void check(const struct vg_bridge_msg *m)
{
    switch (m->op) {
    case VG_BRIDGE_BAD:
        if (!m->why[0])
            abort();
        break;
    case VG_BRIDGE_TOOL:
        if (m->id < 0 || !m->name || !*m->name || (m->value && !json_is_object(m->value)))
            abort();
        break;
    case VG_BRIDGE_RESULT:
        break;
    case VG_BRIDGE_ERROR:
        if (!m->code || !m->message)
            abort();
        break;
    default:
        if (m->id < 0 || !m->path || (m->op == VG_BRIDGE_WRITE && !m->data))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    size_t piece = (size_t)data[0] + 1;
    struct vg_bridge_reader r = {0};
    vigil_error err = {0};
    for (size_t off = 1; off < size && !r.overflow; off += piece) {
        size_t n = VG_MIN(piece, size - off);
        if (vg_bridge_reader_feed(&r, (const char *)data + off, n, &err))
            break;
        const char *line;
        size_t len;
        while (vg_bridge_reader_next(&r, &line, &len)) {
            if (len > VG_BRIDGE_MAX_LINE || memchr(line, '\n', len))
                abort();
            struct vg_bridge_msg m;
            vg_bridge_msg_parse(line, len, &m);
            check(&m);
            vg_bridge_msg_release(&m);
        }
    }
    vg_bridge_reader_free(&r);
    return 0;
}
