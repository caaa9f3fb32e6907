/*
 * fuzz_tool_reply.c: arbitrary bytes as a tool's reply (what a command tool prints on stdout or
 * a callback returns) through the reply parser, and as a contract entry through the contract
 * parser. Neither may crash or leak; a reply always ends as a result or a standard error code.
 */
#include "base/common.h"

#include "tool/tool.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct vg_tool_response r = {0};
    vg_alloc_install_json();
    vg_tool_reply_parse((const char *)data, size, &r);
    if (r.code == VG_TOOL_OK && r.message[0])
        __builtin_trap(); /* success carries no error text */
    if ((unsigned)r.code >= VG_TOOL_CODE_COUNT)
        __builtin_trap();
    vg_tool_response_release(&r);

    json_t *c = json_loadb((const char *)data, size, 0, NULL);
    if (c) {
        struct vg_tool_def *d = NULL;
        if (vg_tool_def_parse(c, &d, NULL) == VIGIL_OK)
            vg_tool_def_free(d);
        json_decref(c);
    }
    return 0;
}
