/*
 * stats.h: process-wide counters for the daemon's /metrics (vigil_stats_read): step and
 * model-call latency histograms, the store's log syncs, and a count of committed writes that
 * a waiter can block on (vigil_stats_wait_commit). They live at the bottom layer so that the
 * loop and the store bump them without reaching up; each bump is one relaxed atomic add, and
 * they cover every runtime of the process (the daemon's workers and its HTTP side alike).
 */
#ifndef VG_BASE_STATS_H
#define VG_BASE_STATS_H

#include <stdint.h>

/* One step of the loop (its model call, the turn committed, its tool calls), in ns. */
void vg_stats_step(int64_t ns);
/* One answered model call, in ns. */
void vg_stats_model_call(int64_t ns);
/* One sync of the store's write-ahead log. */
void vg_stats_log_sync(void);
/* A transaction that wrote committed: wakes vigil_stats_wait_commit. */
void vg_stats_committed(void);

/* The daemon's own work while no run needs it (docs/http.md, /metrics): a tick of its loop
 * (its poll, a poke, a timer's deadline), and a worker thread woken from idle to look at the
 * wake queue. An idle daemon ticks and leaves its workers asleep. */
void vg_stats_daemon_tick(void);
void vg_stats_worker_woken(void);
struct vg_daemon_counts {
    uint64_t ticks, worker_wakeups;
};
void vg_stats_daemon_read(struct vg_daemon_counts *out);

/* The task dispatcher's work on runs' ends (vg_task_runs_ended, src/orch): every call's thread
 * CPU (not another fiber's while it waited), and the calls that committed ends with their
 * count (a run that is no task's, or a failed transaction, adds its CPU only). */
void vg_stats_dispatcher_call(int64_t cpu_ns, uint64_t ends);
struct vg_dispatcher_counts {
    uint64_t cpu_ns, calls, ends;
};
void vg_stats_dispatcher_read(struct vg_dispatcher_counts *out);

#endif
