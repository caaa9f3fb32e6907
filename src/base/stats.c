/*
 * stats.c: the process-wide counters of stats.h. Histogram buckets are counted one by one
 * (not cumulative) with relaxed atomics: a scrape may see a bucket and the count a few events
 * apart, which Prometheus tolerates; no lock is ever taken on the hot path. Only the commit
 * signal takes a mutex, and only to broadcast to waiters that are actually waiting.
 */
#include "base/common.h"

#include "base/stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

const double vigil_latency_bounds[VIGIL_LATENCY_BUCKETS - 1] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

struct histogram {
    _Atomic uint64_t buckets[VIGIL_LATENCY_BUCKETS];
    _Atomic uint64_t count;
    _Atomic uint64_t sum_ns;
};

static struct histogram steps, model_calls;
static _Atomic uint64_t log_syncs, commits, daemon_ticks, worker_wakeups;
static _Atomic uint64_t dispatcher_cpu_ns, dispatcher_calls, dispatcher_ends;
static _Atomic int commit_waiters;
static pthread_mutex_t commit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t commit_cv; /* on CLOCK_MONOTONIC: see init_commit_cv */
static pthread_once_t commit_cv_once = PTHREAD_ONCE_INIT;

/* The commit wait's deadline is on the monotonic clock, so a wall-clock step (NTP, a suspend)
 * neither stretches nor cuts it; PTHREAD_COND_INITIALIZER would give CLOCK_REALTIME. */
static void init_commit_cv(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&commit_cv, &a);
    pthread_condattr_destroy(&a);
}

static void observe(struct histogram *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    double secs = (double)ns / 1e9;
    size_t b = 0;
    while (b < VG_ARRAY_LEN(vigil_latency_bounds) && secs > vigil_latency_bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

void vg_stats_step(int64_t ns)
{
    observe(&steps, ns);
}

void vg_stats_model_call(int64_t ns)
{
    observe(&model_calls, ns);
}

void vg_stats_log_sync(void)
{
    atomic_fetch_add_explicit(&log_syncs, 1, memory_order_relaxed);
}

void vg_stats_daemon_tick(void)
{
    atomic_fetch_add_explicit(&daemon_ticks, 1, memory_order_relaxed);
}

void vg_stats_worker_woken(void)
{
    atomic_fetch_add_explicit(&worker_wakeups, 1, memory_order_relaxed);
}

void vg_stats_daemon_read(struct vg_daemon_counts *out)
{
    out->ticks = atomic_load_explicit(&daemon_ticks, memory_order_relaxed);
    out->worker_wakeups = atomic_load_explicit(&worker_wakeups, memory_order_relaxed);
}

void vg_stats_dispatcher_call(int64_t cpu_ns, uint64_t ends)
{
    atomic_fetch_add_explicit(&dispatcher_cpu_ns, (uint64_t)(cpu_ns > 0 ? cpu_ns : 0),
                              memory_order_relaxed);
    if (!ends)
        return; /* not a task's run, or its transaction failed: its CPU only */
    atomic_fetch_add_explicit(&dispatcher_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&dispatcher_ends, ends, memory_order_relaxed);
}

void vg_stats_dispatcher_read(struct vg_dispatcher_counts *out)
{
    out->cpu_ns = atomic_load_explicit(&dispatcher_cpu_ns, memory_order_relaxed);
    out->calls = atomic_load_explicit(&dispatcher_calls, memory_order_relaxed);
    out->ends = atomic_load_explicit(&dispatcher_ends, memory_order_relaxed);
}

void vg_stats_committed(void)
{
    atomic_fetch_add_explicit(&commits, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&commit_waiters, memory_order_seq_cst) == 0)
        return;
    pthread_once(&commit_cv_once, init_commit_cv);
    pthread_mutex_lock(&commit_mu);
    pthread_cond_broadcast(&commit_cv);
    pthread_mutex_unlock(&commit_mu);
}

static void read_histogram(struct histogram *h, vigil_latency_histogram *out)
{
    for (size_t i = 0; i < VIGIL_LATENCY_BUCKETS; i++)
        out->buckets[i] = atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
    out->count = atomic_load_explicit(&h->count, memory_order_relaxed);
    out->sum_seconds = (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9;
}

void vigil_stats_read(vigil_stats *out)
{
    memset(out, 0, sizeof *out);
    read_histogram(&steps, &out->steps);
    read_histogram(&model_calls, &out->model_calls);
    out->log_syncs = atomic_load_explicit(&log_syncs, memory_order_relaxed);
    out->commits = atomic_load_explicit(&commits, memory_order_seq_cst);
}

uint64_t vigil_stats_wait_commit(uint64_t seen, int timeout_ms)
{
    uint64_t now = atomic_load_explicit(&commits, memory_order_seq_cst);
    if (now != seen || timeout_ms <= 0)
        return now;
    struct timespec until;
    pthread_once(&commit_cv_once, init_commit_cv);
    clock_gettime(CLOCK_MONOTONIC, &until);
    int64_t ns = until.tv_nsec + (int64_t)timeout_ms * 1000000;
    until.tv_sec += ns / 1000000000;
    until.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&commit_mu);
    atomic_fetch_add_explicit(&commit_waiters, 1, memory_order_seq_cst);
    /* Checked again under the mutex after announcing the wait: a commit that bumped the count
     * before this saw it is not waited for, and one after it broadcasts under this mutex. */
    while ((now = atomic_load_explicit(&commits, memory_order_seq_cst)) == seen)
        if (pthread_cond_timedwait(&commit_cv, &commit_mu, &until) != 0)
            break;
    atomic_fetch_sub_explicit(&commit_waiters, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&commit_mu);
    return atomic_load_explicit(&commits, memory_order_seq_cst);
}
