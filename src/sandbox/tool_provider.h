/* tool_provider.h: the execute_code tool, a provider of the tool layer's port. */
#ifndef VG_SANDBOX_TOOL_PROVIDER_H
#define VG_SANDBOX_TOOL_PROVIDER_H

#include "tool/tool.h"

/*
 * The execute_code provider. x: the executor it is added to (borrowed: the program's tool
 * calls go through it). cfg: the config's "sandbox" section (borrowed, copied; NULL: {}):
 * root, uid, risk, accept_missing, limits (docs/sandbox.md). agent_cfg: the config's "agent"
 * section (borrowed; may be NULL), whose max_code_size, code_timeout and
 * max_tool_calls_per_exec are defaults under sandbox.limits. EINVAL names a bad key.
 */
vigil_code vg_sandbox_tool_provider(struct vg_tool_executor *x, const json_t *cfg,
                                    const json_t *agent_cfg, struct vg_tool_provider **out,
                                    vigil_error *err);
/* The layers a run requires: all but the cgroup, less cfg's accept_missing. EINVAL. */
vigil_code vg_sandbox_required_from_json(const json_t *cfg, unsigned *out, vigil_error *err);

/* The settings a call of provider p (made here) would use for a program of agent (a plain
 * name): its working directory into wd, and q's limits, required layers and uid; the limits
 * are the config's (agent-level ones are the executor's business). */
struct vg_code_request;
vigil_code vg_sandbox_provider_settings(struct vg_tool_provider *p, const char *agent, char *wd,
                                        size_t n, struct vg_code_request *q, vigil_error *err);

#endif
