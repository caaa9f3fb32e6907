/*
 * wake_runner.h: the runner that runs a claimed wake through the agent loop, with the
 * runtime's model, tools and memory (the runner the daemon and `vigil wake` use by default).
 */
#ifndef VG_WAKE_RUNNER_LOOP_H
#define VG_WAKE_RUNNER_LOOP_H

#include "wake/wake.h"

/* The "loop" runner (a static instance; free is a no-op). */
struct vg_wake_runner *vg_wake_runner_loop(void);
/* The kill-switch query for the wake system (tool layer's kill switches). */
vigil_code vg_wake_kill_query(void *user, struct vg_env *env, const char *agent_id, int *on,
                              vigil_error *err);

#endif
