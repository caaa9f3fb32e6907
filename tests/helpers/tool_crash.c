/*
 * tool_crash.c: the crash points of tool_crash.h, as the executor's step hook.
 */
#include "base/common.h"

#include "helpers/tool_crash.h"

static vigil_code crash_at(void *user, enum vg_tool_step step, vigil_error *err)
{
    int at = (int)(intptr_t)user;
    return (int)step == at ? VG_FAIL(err, VIGIL_ECANCELED, "simulated crash at point %d", at)
                           : VIGIL_OK;
}

void vg_tool_executor_test_crash(struct vg_tool_executor *x, enum vg_tool_crash at)
{
    if (at == VG_CRASH_NONE)
        vg_tool_executor_set_step_hook(x, NULL, NULL);
    else
        vg_tool_executor_set_step_hook(x, crash_at, (void *)(intptr_t)at);
}
