/*
 * tool_crash.h: crash points for the tool executor's tests: a step hook (tool/tool.h) that
 * stops a call at a chosen step as if the process died there (ECANCELED). Test code: it lives in
 * the test library, not in libvigil.
 */
#ifndef VG_TEST_TOOL_CRASH_H
#define VG_TEST_TOOL_CRASH_H

#include "tool/tool.h"

/* The step a call stops at (NONE: it goes through), in the order a call passes them. */
enum vg_tool_crash {
    VG_CRASH_NONE = 0,
    VG_CRASH_BEFORE_STARTED = VG_TOOL_STEP_BEFORE_STARTED,
    VG_CRASH_AFTER_STARTED = VG_TOOL_STEP_AFTER_STARTED,
    VG_CRASH_AFTER_EFFECT = VG_TOOL_STEP_AFTER_EFFECT,
    VG_CRASH_AFTER_JOURNAL = VG_TOOL_STEP_AFTER_JOURNAL,
    VG_CRASH_AFTER_FINISHED = VG_TOOL_STEP_AFTER_FINISHED
};

/* Every later call of x stops at `at` (VG_CRASH_NONE: the hook is taken away). */
void vg_tool_executor_test_crash(struct vg_tool_executor *x, enum vg_tool_crash at);

#endif
