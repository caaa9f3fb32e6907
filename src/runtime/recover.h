/*
 * recover.h: settling what a crashed run left (see recover.c).
 */
#ifndef VG_RUNTIME_RECOVER_H
#define VG_RUNTIME_RECOVER_H

#include "vigil.h"

/*
 * The caller holds agent_id's lease (it took the agent over) and is about to start the run
 * with run key by_run_key: every operation of the agent left started is settled (replayed,
 * looked up, run again or raised in doubt) and every run of the agent still marked running is
 * closed crashed, naming by_run_key. Cheap when there is nothing to settle (two index reads).
 */
vigil_code vg_runtime_recover_agent(vigil_runtime *rt, const char *agent_id, const char *by_run_key,
                                    vigil_error *err);

/*
 * Every agent with a run marked running whose lease is free (expired, or its holder's process
 * gone) is taken over briefly and recovered as above; agents held by a live run are left
 * alone. *recovered (may be NULL): how many agents.
 */
vigil_code vg_runtime_recover_dead(vigil_runtime *rt, int *recovered, vigil_error *err);

/*
 * At a runtime's first run: every operation a crash left started is settled
 * (vg_tool_executor_recover), then every dead agent as vg_runtime_recover_dead does, under
 * group commit with one sync at the end.
 */
vigil_code vg_runtime_recover_start(vigil_runtime *rt, vigil_error *err);

#endif
