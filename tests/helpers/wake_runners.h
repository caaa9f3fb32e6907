/*
 * wake_runners.h: the tests' wake runners, "echo" and "test:steps=N[:block=PATH][:fail=1]"
 * (wake_runners.c), which libvigil does not ship.
 */
#ifndef VG_TEST_WAKE_RUNNERS_H
#define VG_TEST_WAKE_RUNNERS_H

#include "wake/wake.h"

/* Make vg_wake_runner_new (and so the daemon and vigil_wake_process) know them. */
void test_wake_runners_provide(void);

#endif
