/*
 * echo_executor.h: a minimal loop executor with one tool, `echo` (returns its "text" argument),
 * for tests and benchmarks of the loop alone (no tool gate).
 */
#ifndef VG_TEST_ECHO_EXECUTOR_H
#define VG_TEST_ECHO_EXECUTOR_H

#include "loop/loop.h"

const struct vg_loop_executor *vg_loop_echo_executor(void);

#endif
