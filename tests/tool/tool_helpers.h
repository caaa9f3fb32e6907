/*
 * tool_helpers.h: shared by the tool tests: agents with manifests, host tools whose side
 * effects are counted outside the store (so a repeated effect is visible), and readers of the
 * recorded action/toolResult messages.
 */
#ifndef VG_TEST_TOOL_HELPERS_H
#define VG_TEST_TOOL_HELPERS_H

#include "helpers/rt.h"
#include "helpers/tool_crash.h"

#include "agent/agent.h"
#include "tool/tool.h"

/* Side effects of the host tools, by operation id: survives runtime restarts (process memory
 * stands for the host's own database). */
struct host {
    char ops[64][65];
    int count[64];
    int n;
    int total;
};
extern struct host g_host;
void host_reset(void);
/* How often the effect of operation op ran. */
int host_applied(const char *op);

/* Register host_write (non-idempotent, scope rule argument "category"), host_sync
 * (reconcilable with lookup), host_read (not mutating), host_delete (high risk) and
 * host_target (scope rule target "task_id"). */
void register_host_tools(vigil_runtime *rt);

/* Create an agent with config JSON; returns id. */
void make_agent(struct test_rt *t, const char *config, char id[37]);
struct vg_tool_executor *executor(struct test_rt *t);

/* Call through the executor with wake reason "manual" (or given); asserts VIGIL_OK. */
void call_tool(struct test_rt *t, const char *agent, const char *run_key, const char *tool,
               const char *args_json, struct vg_tool_outcome *out);
/* Number of messages of a kind in the run's default thread. */
int count_msgs(struct test_rt *t, const char *agent, const char *run_key, const char *kind);
/* The message (owned) with the given id. */
json_t *message(struct test_rt *t, const char *id);
/* The outcome envelope (owned) a toolResult message holds as its content. */
json_t *result_envelope(struct test_rt *t, const char *result_id);

#endif
