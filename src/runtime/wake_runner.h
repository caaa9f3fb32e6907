/*
 * wake_runner.h: what the runtime gives the wake layer: the runner that runs a claimed wake
 * through the agent loop, with the runtime's model, tools and memory (the runner the daemon and
 * `vigil wake` use by default), the kill-switch query, and the daemon's host port.
 */
#ifndef VG_WAKE_RUNNER_LOOP_H
#define VG_WAKE_RUNNER_LOOP_H

struct vg_env;
struct vg_wake;
struct vg_wake_config;
struct vg_wake_host;
struct vg_wake_runner;

/* The "loop" runner (a static instance; free is a no-op). */
struct vg_wake_runner *vg_wake_runner_loop(void);
/* The kill-switch query for the wake system (tool layer's kill switches). */
vigil_code vg_wake_kill_query(void *user, struct vg_env *env, const char *agent_id, int *on,
                              vigil_error *err);
/* The daemon's host port filled in by the runtime (a static instance). */
const struct vg_wake_host *vg_runtime_wake_host(void);
/* vg_wake_init on env with the runtime's kill switches plugged in. */
vigil_code vg_runtime_wake_init(struct vg_wake *w, struct vg_env *env,
                                const struct vg_wake_config *cfg, vigil_error *err);

#endif
