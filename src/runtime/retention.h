/*
 * retention.h: what of an agent's data is kept and for how long (docs/storage.md, "Growth and
 * retention"): five classes, each with a time to live, pruned in one fixed order; holds that
 * keep an agent or a run whole; a storage budget. The config file's `retention` block gives
 * the defaults, an agent's config (its manifest's `retention:` block) its own.
 */
#ifndef VG_RUNTIME_RETENTION_H
#define VG_RUNTIME_RETENTION_H

#include "runtime/runtime.h"

#include <jansson.h>

/* The classes, in the order a storage budget prunes them (the cheapest to lose first). */
enum vg_retention_class {
    VG_RET_RUNTIME, /* finished wake-log entries, taken notifications, matched batches */
    VG_RET_TRACE,   /* a finished run's journal trace (vg_journal_prune_trace) */
    VG_RET_ACTION,  /* finished tool operations: their arguments and recorded results */
    VG_RET_REPORT,  /* reports superseded by a newer one of their scope */
    VG_RET_SUMMARY, /* finished compaction jobs (the summaries themselves are messages: kept) */
    VG_RET_NCLASS
};

#define VG_RET_NEVER (-1) /* a time to live: kept until erased */

struct vg_retention_policy {
    int64_t ttl_ms[VG_RET_NCLASS]; /* VG_RET_NEVER or >= 0 */
    int hold;                      /* the agent is on hold: nothing of it is pruned */
};

/* The class's name in config, manifests and reports ("runtime", "trace", "action", ...). */
const char *vg_retention_class_name(enum vg_retention_class c);
/* "30d", "12h", "90m", "45s", "2w" or "never" into ms (VG_RET_NEVER); EINVAL naming `what`. */
vigil_code vg_retention_duration(const char *text, const char *what, int64_t *out_ms,
                                 vigil_error *err);
/* "500MB", "2GB", "750KB" or a byte count into bytes; EINVAL naming `what`. */
vigil_code vg_retention_size(const json_t *v, const char *what, int64_t *out, vigil_error *err);
/* The built-in defaults, then the `retention` object over them (NULL: none); EINVAL names the
 * bad key. Used for the config file's block, then for an agent's over the result. */
vigil_code vg_retention_policy_apply(struct vg_retention_policy *p, const json_t *block,
                                     const char *where, vigil_error *err);
void vg_retention_policy_defaults(struct vg_retention_policy *p);

/* The daemon's upkeep: prunes when `retention.interval` has passed since its last prune. */
vigil_code vg_runtime_retention_tick(struct vg_env *env, vigil_error *err);

#endif
