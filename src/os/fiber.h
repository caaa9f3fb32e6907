/*
 * fiber.h: cooperative fibers on one thread, so one worker thread runs many agents' loops at
 * once. An agent's loop spends nearly all its time waiting for the model; as a fiber it waits
 * parked (its HTTP request driven by the scheduler's I/O driver, its backoff sleeps as
 * deadlines) while the others run, and all of them share the worker's one runtime and store
 * connection. A thread per agent costs a stack, a connection and a page cache each.
 *
 * Rules:
 * - A scheduler and its fibers belong to the thread that created the scheduler; fibers never
 *   move between threads.
 * - A fiber parks only where nothing shared is half done: the guard (vg_fiber_sched_set_guard)
 *   says whether parking is allowed now (the runtime's: no store transaction open), and code
 *   that would wait checks vg_fiber_can_park() and blocks the thread instead when it says no.
 * - Fibers run in the order they became ready; a parked fiber resumes when woken or when its
 *   deadline (monotonic, from the real clock) passes.
 */
#ifndef VG_FIBER_H
#define VG_FIBER_H

#include <stdint.h>

struct vg_fiber;
struct vg_fiber_sched;

typedef void (*vg_fiber_fn)(void *arg);

struct pollfd;

/* The I/O driver of a scheduler: wait up to timeout_ms (0: just poll) for its I/O and for the
 * n_fds descriptors fibers wait on (vg_fiber_poll; their revents set on return), and wake the
 * fibers whose I/O finished. One per scheduler, installed by whoever does the I/O (http.c). */
struct vg_fiber_io {
    void (*wait)(void *user, int64_t timeout_ms, struct pollfd *fds, unsigned n_fds);
    void (*release)(void *user);
    void *user;
};

vigil_code vg_fiber_sched_new(struct vg_fiber_sched **out, vigil_error *err);
/* Frees the scheduler and its I/O driver. Every fiber must have finished. */
void vg_fiber_sched_free(struct vg_fiber_sched *s);
/* Start fn(arg) as a fiber; it first runs at the next vg_fiber_sched_step. */
vigil_code vg_fiber_spawn(struct vg_fiber_sched *s, vg_fiber_fn fn, void *arg, vigil_error *err);
/* Fibers started and not finished. */
int vg_fiber_sched_live(const struct vg_fiber_sched *s);
/* Run every ready fiber once; then, when none is ready, wait for I/O or the nearest deadline,
 * at most max_wait_ms (-1: as long as it takes; 0: do not wait). Returns the live count. */
int vg_fiber_sched_step(struct vg_fiber_sched *s, int64_t max_wait_ms);
/* Step until every fiber has finished. */
void vg_fiber_sched_run(struct vg_fiber_sched *s);

/* may_park(user) returns non-zero when the running fiber may park now. NULL: always. */
void vg_fiber_sched_set_guard(struct vg_fiber_sched *s, int (*may_park)(void *user), void *user);
/* Per-fiber state of things the fibers share (the store connection's commit durability, the
 * notifier's source tag): save(user, arg) is called as a fiber parks and restore(user, arg) as
 * it resumes, arg being the fiber's own argument (vg_fiber_spawn), where the state is kept; so
 * what another fiber changed meanwhile is put back. Either may be NULL. */
void vg_fiber_sched_set_context(struct vg_fiber_sched *s, void (*save)(void *user, void *arg),
                                void (*restore)(void *user, void *arg), void *user);
/* The I/O driver, or NULL; vg_fiber_sched_set_io installs one (the scheduler releases it). */
const struct vg_fiber_io *vg_fiber_sched_io(const struct vg_fiber_sched *s);
void vg_fiber_sched_set_io(struct vg_fiber_sched *s, const struct vg_fiber_io *io);

/* The running fiber and its scheduler, or NULL on a thread's own stack. */
struct vg_fiber *vg_fiber_current(void);
struct vg_fiber_sched *vg_fiber_current_sched(void);
/* A fiber is running and its scheduler's guard lets it park. */
int vg_fiber_can_park(void);
/* Park the running fiber until vg_fiber_wake or, when deadline_ns >= 0, until the real clock's
 * monotonic time reaches deadline_ns. Only when vg_fiber_can_park(). */
void vg_fiber_park(int64_t deadline_ns);
/* Make a parked fiber ready (on its scheduler's thread; a fiber not parked is left alone). */
void vg_fiber_wake(struct vg_fiber *f);
/*
 * The thread CPU a piece of code used, not counting what other fibers used while it was parked
 * or yielded in between (the daemon's dispatcher CPU in /metrics: a run's end may wait for its
 * commit's shared log sync while the worker's other runs go on). Off a fiber it is the thread's
 * CPU between the two calls. Meters nest; begin and end on the same fiber.
 */
struct vg_fiber_cpu {
    struct vg_fiber *fiber;
    int64_t start_ns, away_ns;
};
void vg_fiber_cpu_begin(struct vg_fiber_cpu *m);
int64_t vg_fiber_cpu_end(const struct vg_fiber_cpu *m); /* once a begin */

/*
 * poll(2) for a fiber: when some of fds are ready now, or timeout_ms is 0, it returns at once;
 * otherwise the running fiber parks until one is ready or timeout_ms (-1: no limit) has passed,
 * while the other fibers run and the scheduler watches the descriptors with its own I/O.
 * Where parking is not allowed (vg_fiber_can_park) it is poll(2) itself, blocking the thread.
 * Returns what poll returns (the ready count, 0 on timeout, -1 with errno).
 */
int vg_fiber_poll(struct pollfd *fds, unsigned n, int timeout_ms);
/* Let every other fiber ready now run once (and the scheduler poll I/O) before the running one
 * goes on. Only when vg_fiber_can_park(); elsewhere it returns at once. */
void vg_fiber_yield(void);

/*
 * A batch runs one operation once for every fiber that asks for it in the same round: the
 * first to join yields, so the fibers ready at that moment run and join too (they park), and
 * then runs the operation for all of them. The store's durable commits use it to make the
 * commits of a worker's runs durable with one log sync instead of one each. Off a fiber, or
 * where the guard forbids parking, join runs the operation at once.
 */
struct vg_fiber_batch;
typedef vigil_code (*vg_fiber_batch_fn)(void *user, vigil_error *err);
vigil_code vg_fiber_batch_new(struct vg_fiber_batch **out, vg_fiber_batch_fn run, void *user,
                              vigil_error *err);
/* Frees the batch; no fiber may be waiting in it. */
void vg_fiber_batch_free(struct vg_fiber_batch *b);
/* Returns once the operation has run after this call began, with that run's result. */
vigil_code vg_fiber_batch_join(struct vg_fiber_batch *b, vigil_error *err);

#endif
