/*
 * admit.c: the admission policy (docs/orchestration.md, "Admission"): deny by default, every rule a
 * reason. It reads only the facts its caller gathered, so it decides the same way every time
 * and can be measured alone (bench/bench_orch.c). Order matters only for which reason is
 * given: the hard limits (switches, depth) first, then what the parent is owed, then a
 * person's approval for a high-risk child, then slots.
 */
#include "base/common.h"

#include "orch/orch.h"

const char *vg_orch_verdict_name(enum vg_orch_verdict v)
{
    switch (v) {
    case VG_ORCH_ADMITTED:
        return "admitted";
    case VG_ORCH_QUEUED:
        return "queued";
    case VG_ORCH_AWAITING_APPROVAL:
        return "awaiting_approval";
    default:
        return "denied";
    }
}

static enum vg_orch_verdict deny(const char **reason, const char *why)
{
    *reason = why;
    return VG_ORCH_DENIED;
}

enum vg_orch_verdict vg_orch_admit(const struct vg_orch_facts *f, const char **reason)
{
    if (!f->spawn_enabled)
        return deny(reason, "spawning is not enabled for this agent (manifest spawn.enabled)");
    if (f->kill_switch)
        return deny(reason, "a kill switch is on (global, the parent's or the child's)");
    if (f->parent_depth + 1 > VG_ORCH_MAX_DEPTH)
        return deny(reason, "depth limit: a spawned run may be at most 2 levels deep");
    if (f->parent_depth > 0 && !f->granted)
        return deny(reason, "a sub-agent may spawn only when its own spawn granted spawn_agents");
    if (!f->child_found)
        return deny(reason, "no live agent of the requested kind or name");
    if (f->child_is_parent)
        return deny(reason, "an agent may not spawn itself");
    if (f->child_not_listed)
        return deny(reason, "the parent's manifest does not list this agent in spawn.agents");
    if (f->budget_out)
        return deny(reason, "the parent's daily budget is exhausted");
    if (f->cost_left >= 0 && (f->cost_left == 0 || f->cost_asked > f->cost_left))
        return deny(reason, "the child's cost budget exceeds what the parent has left today");
    if (f->tokens_asked > 0 && f->tokens_left >= 0 && f->tokens_asked > f->tokens_left)
        return deny(reason, "the child's token budget exceeds what the parent has left today");
    if (f->cooldown_ms > 0 && f->since_last_ms >= 0 && f->since_last_ms < f->cooldown_ms)
        return deny(reason, "cooldown: the parent spawned too recently");
    /* Last of the rules: a person is asked only about a request nothing else denies. */
    if ((f->high_risk || f->approval_required) && !f->approved) {
        *reason = f->high_risk ? "a high-risk child: waits for a person's approval"
                               : "the request requires a person's approval: waits for it";
        return VG_ORCH_AWAITING_APPROVAL;
    }
    if (f->running_parent >= f->cap_parent || f->running_global >= f->cap_global) {
        *reason = "admitted; waits for a free slot (concurrency cap)";
        return VG_ORCH_QUEUED;
    }
    *reason = "admitted";
    return VG_ORCH_ADMITTED;
}
