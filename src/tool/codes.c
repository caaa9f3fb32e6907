/*
 * codes.c: the one table of standard tool error codes (docs/tools.md) and the vigil_code each
 * maps to for public callers. Every refusal and failure anywhere in the tool layer uses it.
 */
#include "base/common.h"

#include "tool/tool.h"

static const struct {
    const char *name;
    vigil_code code;
} table[VG_TOOL_CODE_COUNT] = {
    [VG_TOOL_OK] = {"", VIGIL_OK},
    [VG_TOOL_INVALID_ARGUMENTS] = {"invalid_arguments", VIGIL_EINVAL},
    [VG_TOOL_OUT_OF_SCOPE] = {"out_of_scope", VIGIL_EDENIED},
    [VG_TOOL_CONFIRMATION_REQUIRED] = {"confirmation_required", VIGIL_ECONFIRM},
    [VG_TOOL_BUDGET_EXCEEDED] = {"budget_exceeded", VIGIL_EBUDGET},
    [VG_TOOL_UNSAFE_TARGET] = {"unsafe_target", VIGIL_EDENIED},
    [VG_TOOL_KILLED] = {"killed", VIGIL_EKILLED},
    [VG_TOOL_TIMEOUT] = {"timeout", VIGIL_ETIMEOUT},
    [VG_TOOL_FAILED] = {"tool_failed", VIGIL_ERROR},
    [VG_TOOL_NOT_ALLOWED] = {"not_allowed", VIGIL_EDENIED},
    [VG_TOOL_UNKNOWN_TOOL] = {"unknown_tool", VIGIL_ENOTFOUND},
    [VG_TOOL_IN_DOUBT] = {"in_doubt", VIGIL_ESTATE},
    [VG_TOOL_REJECTED] = {"rejected", VIGIL_EDENIED},
    [VG_TOOL_NOT_CONFIGURED] = {"not_configured", VIGIL_EINVAL},
    [VG_TOOL_CANCELED] = {"canceled", VIGIL_ECANCELED},
};

const char *vg_tool_code_name(enum vg_tool_code c)
{
    return (unsigned)c < VG_TOOL_CODE_COUNT ? table[c].name : "tool_failed";
}

vigil_code vg_tool_code_vigil(enum vg_tool_code c)
{
    return (unsigned)c < VG_TOOL_CODE_COUNT ? table[c].code : VIGIL_ERROR;
}

int vg_tool_code_parse(const char *name, enum vg_tool_code *out)
{
    for (int i = 1; name && i < VG_TOOL_CODE_COUNT; i++) {
        if (!strcmp(table[i].name, name)) {
            *out = (enum vg_tool_code)i;
            return 1;
        }
    }
    return 0;
}
