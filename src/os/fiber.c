/*
 * fiber.c: fibers on ucontext (see fiber.h). Each fiber has its own mmap'd stack with a guard
 * page below it; only the pages it touches become resident. Under AddressSanitizer every switch
 * is announced (__sanitizer_start/finish_switch_fiber), so ASan knows which stack is live, and
 * under ThreadSanitizer too (__tsan_switch_to_fiber), so TSan keeps each fiber's own history.
 *
 * Sections: sanitizer hooks; fibers; the scheduler; parking; batches.
 */
#include "base/common.h"

#include "os/clock.h"
#include "os/fiber.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* ---- sanitizer hooks ----------------------------------------------------------------------- */

/* ThreadSanitizer follows each fiber's stack and its happens-before as a thread of its own
 * only when told of every switch (VIGIL_TSAN=ON in CMakeLists.txt builds with it). */
#if defined(__SANITIZE_THREAD__)
#define VG_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VG_TSAN 1
#endif
#endif
#ifdef VG_TSAN
#include <sanitizer/tsan_interface.h>
#else
#define __tsan_create_fiber(flags) NULL
#define __tsan_destroy_fiber(fiber) ((void)(fiber))
#define __tsan_get_current_fiber() NULL
#define __tsan_switch_to_fiber(fiber, flags) ((void)(fiber))
#endif

/*
 * A fiber's stack: deep enough for the deepest JSON jansson accepts (2047 levels) to go
 * through json_dumps, whose frames are the largest (tests/os/test_fiber_deep_json.c; 512 KiB
 * overflowed, 1 MiB was enough). Only the pages a fiber touches become resident, so the size
 * costs address space, not memory.
 */
#if defined(VG_ASAN) || defined(VG_TSAN)
/* The sanitizers' instrumentation makes frames several times larger. */
#define STACK_SIZE (8u << 20)
#else
#define STACK_SIZE (2u << 20)
#endif
#ifdef VG_ASAN
#include <sanitizer/common_interface_defs.h>
#else
#define __sanitizer_start_switch_fiber(save, bottom, size)                                         \
    ((void)(save), (void)(bottom), (void)(size))
#define __sanitizer_finish_switch_fiber(save, bottom, size)                                        \
    ((void)(save), (void)(bottom), (void)(size))
#endif

/* ---- fibers -------------------------------------------------------------------------------- */

enum fiber_state { FIBER_READY, FIBER_RUNNING, FIBER_PARKED, FIBER_DONE };

struct vg_fiber {
    struct vg_fiber_sched *sched;
    struct vg_fiber *next_live; /* every live fiber */
    struct vg_fiber *next_ready;
    enum fiber_state state;
    int64_t deadline_ns; /* parked until then (-1: until woken) */
    vg_fiber_fn fn;
    void *arg;
    ucontext_t ctx;
    void *map; /* guard page + stack */
    size_t map_size;
    char *park_frame; /* vg_fiber_park's frame while parked: the stack in use lies above it */
    int metered;      /* vg_fiber_cpu_begin's open meters: count the thread CPU spent away */
    int64_t away_ns;  /* the thread's CPU spent on other fibers while this one was switched out */
    void *fake_stack; /* ASan's bookkeeping while switched away */
    void *tsan_fiber; /* TSan's name for it */
};

/* A fiber parked in vg_fiber_poll; lives on that fiber's stack. */
struct fd_wait {
    struct pollfd *fds;
    unsigned n;
    struct vg_fiber *fiber;
    int ready;
    struct fd_wait *next;
};

struct vg_fiber_sched {
    ucontext_t main_ctx;
    const void *main_bottom; /* the thread's stack, for ASan */
    size_t main_size;
    void *tsan_main; /* TSan's name for what runs the scheduler (a thread, or a fiber) */
    struct vg_fiber *live;
    struct vg_fiber *ready_head, *ready_tail;
    struct vg_fiber *current;
    int n_live;
    int (*may_park)(void *user);
    void *may_park_user;
    void (*ctx_save)(void *user, void *arg);
    void (*ctx_restore)(void *user, void *arg);
    void *ctx_user;
    struct vg_fiber_io io;
    int has_io;
    struct fd_wait *fd_waits;
    struct pollfd *pfds; /* every waiting descriptor, gathered for one poll */
    unsigned pfds_cap;
};

static _Thread_local struct vg_fiber_sched *running_sched; /* while a fiber of it runs */

static void make_ready(struct vg_fiber_sched *s, struct vg_fiber *f)
{
    f->state = FIBER_READY;
    f->next_ready = NULL;
    if (s->ready_tail)
        s->ready_tail->next_ready = f;
    else
        s->ready_head = f;
    s->ready_tail = f;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Back from a fiber to the scheduler (the fiber's side of the switch). A metered fiber reads
 * the thread's CPU on both sides, so what the others used meanwhile is not charged to it. */
static void to_scheduler(struct vg_fiber *f, int finished)
{
    struct vg_fiber_sched *s = f->sched;
    int64_t left = f->metered ? thread_cpu_ns() : 0;
    __sanitizer_start_switch_fiber(finished ? NULL : &f->fake_stack, s->main_bottom, s->main_size);
    __tsan_switch_to_fiber(s->tsan_main, 0);
    swapcontext(&f->ctx, &s->main_ctx);
    __sanitizer_finish_switch_fiber(f->fake_stack, &s->main_bottom, &s->main_size);
    if (f->metered)
        f->away_ns += thread_cpu_ns() - left;
}

static void trampoline(void)
{
    struct vg_fiber_sched *s = running_sched;
    struct vg_fiber *f = s->current;
    __sanitizer_finish_switch_fiber(NULL, &s->main_bottom, &s->main_size);
    f->fn(f->arg);
    f->state = FIBER_DONE;
    to_scheduler(f, 1);
}

static void fiber_free(struct vg_fiber *f)
{
    if (f->tsan_fiber)
        __tsan_destroy_fiber(f->tsan_fiber);
    if (f->map)
        munmap(f->map, f->map_size);
    vg_free(f);
}

vigil_code vg_fiber_spawn(struct vg_fiber_sched *s, vg_fiber_fn fn, void *arg, vigil_error *err)
{
    struct vg_fiber *f = vg_calloc(1, sizeof *f);
    if (!f)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting a fiber");
    long page = sysconf(_SC_PAGESIZE);
    f->map_size = STACK_SIZE + (size_t)page;
    f->map = mmap(NULL, f->map_size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        fiber_free(f);
        return VG_FAIL(err, VIGIL_ENOMEM, "cannot map a fiber stack: %s", strerror(errno));
    }
    /* The lowest page stays inaccessible: an overflow faults instead of corrupting memory. */
    if (mprotect(f->map, (size_t)page, PROT_NONE) != 0 || getcontext(&f->ctx) != 0) {
        fiber_free(f);
        return VG_FAIL(err, VIGIL_ERROR, "cannot prepare a fiber: %s", strerror(errno));
    }
    f->ctx.uc_stack.ss_sp = (char *)f->map + page;
    f->ctx.uc_stack.ss_size = STACK_SIZE;
    f->ctx.uc_link = NULL;
    makecontext(&f->ctx, trampoline, 0);
    f->tsan_fiber = __tsan_create_fiber(0);
    f->sched = s;
    f->fn = fn;
    f->arg = arg;
    f->deadline_ns = -1;
    f->next_live = s->live;
    s->live = f;
    s->n_live++;
    make_ready(s, f);
    return VIGIL_OK;
}

/* ---- the scheduler ------------------------------------------------------------------------- */

vigil_code vg_fiber_sched_new(struct vg_fiber_sched **out, vigil_error *err)
{
    *out = vg_calloc(1, sizeof **out);
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory making a scheduler");
}

void vg_fiber_sched_free(struct vg_fiber_sched *s)
{
    if (!s)
        return;
    if (s->has_io && s->io.release)
        s->io.release(s->io.user);
    while (s->live) { /* only fibers that never finished (a caller that gave up) */
        struct vg_fiber *f = s->live;
        s->live = f->next_live;
        fiber_free(f);
    }
    vg_free(s->pfds);
    vg_free(s);
}

int vg_fiber_sched_live(const struct vg_fiber_sched *s)
{
    return s->n_live;
}

void vg_fiber_sched_set_guard(struct vg_fiber_sched *s, int (*may_park)(void *user), void *user)
{
    s->may_park = may_park;
    s->may_park_user = user;
}

void vg_fiber_sched_set_context(struct vg_fiber_sched *s, void (*save)(void *user, void *arg),
                                void (*restore)(void *user, void *arg), void *user)
{
    s->ctx_save = save;
    s->ctx_restore = restore;
    s->ctx_user = user;
}

const struct vg_fiber_io *vg_fiber_sched_io(const struct vg_fiber_sched *s)
{
    return s->has_io ? &s->io : NULL;
}

void vg_fiber_sched_set_io(struct vg_fiber_sched *s, const struct vg_fiber_io *io)
{
    if (s->has_io && s->io.release)
        s->io.release(s->io.user);
    s->has_io = io != NULL;
    if (io)
        s->io = *io;
}

/*
 * A parked fiber holds nothing it will read again below the frame it parked in: those pages go
 * back to the system, so a hundred parked fibers keep only the frames they park in (8-12 KiB
 * each), not each the deepest call it ever made (a commit in SQLite, libcurl, a tool call:
 * 20-28 KiB). The pages come back zeroed at the next touch, as an untouched stack's do. The
 * cost, a madvise(2) a park and the faults of going deep again, is in docs/internals/PERF.md
 * (session 33).
 *
 * Under vg_fiber_park's frame, the switch leaves only the registers it saved and the return
 * address of swapcontext (40 bytes in the optimized build, objdump); PARK_BELOW_BYTES keeps
 * room to spare for other compilers and the sanitizers. Keeping a whole page under the frame
 * instead kept one page more a parked fiber where the frame lies past those bytes into its page
 * (most parks: a hundred agents' 16 KiB became 12 KiB, PERF.md session 35).
 */
#define PARK_BELOW_BYTES 512

static void release_unused_stack(struct vg_fiber *f)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *low = (char *)f->map + page;
    char *keep = (char *)((uintptr_t)(f->park_frame - PARK_BELOW_BYTES) & ~(uintptr_t)(page - 1));
    if (keep > low)
        (void)madvise(low, (size_t)(keep - low), MADV_DONTNEED);
}

static void run_fiber(struct vg_fiber_sched *s, struct vg_fiber *f)
{
    void *fake = NULL;
    struct vg_fiber_sched *outer = running_sched;
    f->state = FIBER_RUNNING;
    s->current = f;
    running_sched = s;
    void *outer_main = s->tsan_main;
    s->tsan_main = __tsan_get_current_fiber();
    __sanitizer_start_switch_fiber(&fake, (char *)f->map + (f->map_size - STACK_SIZE), STACK_SIZE);
    __tsan_switch_to_fiber(f->tsan_fiber, 0);
    swapcontext(&s->main_ctx, &f->ctx);
    s->tsan_main = outer_main;
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
    running_sched = outer;
    s->current = NULL;
    if (f->state == FIBER_PARKED)
        release_unused_stack(f);
    if (f->state == FIBER_DONE) {
        struct vg_fiber **p = &s->live;
        while (*p != f)
            p = &(*p)->next_live;
        *p = f->next_live;
        s->n_live--;
        fiber_free(f);
    }
}

/* Make ready every parked fiber whose deadline has passed; the nearest deadline still ahead
 * (-1: none). */
static int64_t expire(struct vg_fiber_sched *s, int64_t now)
{
    int64_t nearest = -1;
    for (struct vg_fiber *f = s->live; f; f = f->next_live) {
        if (f->state != FIBER_PARKED || f->deadline_ns < 0)
            continue;
        if (f->deadline_ns <= now)
            make_ready(s, f);
        else if (nearest < 0 || f->deadline_ns < nearest)
            nearest = f->deadline_ns;
    }
    return nearest;
}

/* Gather the descriptors of every fiber in vg_fiber_poll into s->pfds; how many. When memory
 * runs out they are left out of this step, and their fibers wait for their deadline or the
 * next step. */
static unsigned gather_fds(struct vg_fiber_sched *s)
{
    unsigned n = 0;
    for (struct fd_wait *w = s->fd_waits; w; w = w->next)
        n += w->n;
    if (n > s->pfds_cap) {
        struct pollfd *p = vg_realloc(s->pfds, n * sizeof *p);
        if (!p)
            return 0;
        s->pfds = p;
        s->pfds_cap = n;
    }
    unsigned i = 0;
    for (struct fd_wait *w = s->fd_waits; w; w = w->next)
        for (unsigned k = 0; k < w->n; k++, i++)
            s->pfds[i] = (struct pollfd){.fd = w->fds[k].fd, .events = w->fds[k].events};
    return n;
}

/* Give each waiter its descriptors' revents back; those with any become ready. */
static void scatter_fds(struct vg_fiber_sched *s)
{
    unsigned i = 0;
    for (struct fd_wait *w = s->fd_waits; w; w = w->next) {
        for (unsigned k = 0; k < w->n; k++, i++) {
            w->fds[k].revents = s->pfds[i].revents;
            if (s->pfds[i].revents)
                w->ready = 1;
        }
        if (w->ready)
            vg_fiber_wake(w->fiber);
    }
}

int vg_fiber_sched_step(struct vg_fiber_sched *s, int64_t max_wait_ms)
{
    struct vg_clock *clock = vg_clock_real();
    /* Run the fibers ready now; those made ready meanwhile wait for the next step, so I/O is
     * polled between rounds even when fibers keep each other busy. */
    struct vg_fiber *tail = s->ready_tail;
    while (s->ready_head) {
        struct vg_fiber *f = s->ready_head;
        int last = f == tail; /* decided before f runs: a finished fiber is freed */
        s->ready_head = f->next_ready;
        if (!s->ready_head)
            s->ready_tail = NULL;
        run_fiber(s, f);
        if (last)
            break;
    }
    if (!s->n_live)
        return 0;
    int64_t now = vg_clock_mono_ns(clock);
    int64_t nearest = expire(s, now);
    int64_t wait_ms = s->ready_head ? 0 : max_wait_ms;
    if (!s->ready_head && nearest >= 0) {
        int64_t until = (nearest - now + 999999) / 1000000;
        if (wait_ms < 0 || until < wait_ms)
            wait_ms = until;
    }
    unsigned n_fds = gather_fds(s);
    if (s->has_io) {
        s->io.wait(s->io.user, wait_ms, s->pfds, n_fds);
    } else if (n_fds) {
        int ms = wait_ms < 0 || wait_ms > INT_MAX ? -1 : (int)wait_ms;
        if (poll(s->pfds, n_fds, ms) < 0)
            n_fds = 0; /* EINTR: the waiters look again at the next step */
    } else if (wait_ms > 0) {
        struct timespec ts = {.tv_sec = wait_ms / 1000, .tv_nsec = (wait_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    if (n_fds)
        scatter_fds(s);
    expire(s, vg_clock_mono_ns(clock));
    return s->n_live;
}

void vg_fiber_sched_run(struct vg_fiber_sched *s)
{
    while (vg_fiber_sched_step(s, -1) > 0)
        ;
}

/* ---- parking ------------------------------------------------------------------------------- */

struct vg_fiber *vg_fiber_current(void)
{
    return running_sched ? running_sched->current : NULL;
}

struct vg_fiber_sched *vg_fiber_current_sched(void)
{
    return running_sched;
}

int vg_fiber_can_park(void)
{
    struct vg_fiber_sched *s = running_sched;
    return s && s->current && (!s->may_park || s->may_park(s->may_park_user));
}

void vg_fiber_cpu_begin(struct vg_fiber_cpu *m)
{
    m->fiber = vg_fiber_current();
    if (m->fiber) {
        m->fiber->metered++;
        m->away_ns = m->fiber->away_ns;
    }
    m->start_ns = thread_cpu_ns();
}

int64_t vg_fiber_cpu_end(const struct vg_fiber_cpu *m)
{
    int64_t used = thread_cpu_ns() - m->start_ns;
    if (m->fiber) {
        used -= m->fiber->away_ns - m->away_ns;
        m->fiber->metered--;
    }
    return used > 0 ? used : 0;
}

void vg_fiber_park(int64_t deadline_ns)
{
    struct vg_fiber *f = vg_fiber_current();
    if (!f)
        return;
    struct vg_fiber_sched *s = f->sched;
    if (s->ctx_save)
        s->ctx_save(s->ctx_user, f->arg);
    f->state = FIBER_PARKED;
    f->deadline_ns = deadline_ns;
    f->park_frame = __builtin_frame_address(0);
    to_scheduler(f, 0);
    f->deadline_ns = -1;
    if (s->ctx_restore)
        s->ctx_restore(s->ctx_user, f->arg);
}

void vg_fiber_wake(struct vg_fiber *f)
{
    if (f && f->state == FIBER_PARKED)
        make_ready(f->sched, f);
}

void vg_fiber_yield(void)
{
    struct vg_fiber *f = vg_fiber_current();
    if (!f || !vg_fiber_can_park())
        return;
    struct vg_fiber_sched *s = f->sched;
    if (s->ctx_save)
        s->ctx_save(s->ctx_user, f->arg);
    make_ready(s, f); /* behind every fiber ready now: they run first */
    to_scheduler(f, 0);
    if (s->ctx_restore)
        s->ctx_restore(s->ctx_user, f->arg);
}

int vg_fiber_poll(struct pollfd *fds, unsigned n, int timeout_ms)
{
    if (!vg_fiber_can_park())
        return poll(fds, n, timeout_ms);
    int ready = poll(fds, n, 0);
    if (ready != 0 || timeout_ms == 0)
        return ready;
    struct vg_fiber_sched *s = running_sched;
    struct fd_wait w = {.fds = fds, .n = n, .fiber = s->current, .next = s->fd_waits};
    s->fd_waits = &w;
    struct vg_clock *clock = vg_clock_real();
    int64_t deadline =
        timeout_ms < 0 ? -1 : vg_clock_mono_ns(clock) + (int64_t)timeout_ms * 1000000;
    while (!w.ready && (deadline < 0 || vg_clock_mono_ns(clock) < deadline))
        vg_fiber_park(deadline);
    struct fd_wait **p = &s->fd_waits;
    while (*p != &w)
        p = &(*p)->next;
    *p = w.next;
    ready = 0;
    for (unsigned k = 0; k < n; k++)
        ready += fds[k].revents != 0;
    return ready;
}

/* ---- batches ------------------------------------------------------------------------------- */

/* A fiber waiting for the leader's run; lives on the waiting fiber's stack. */
struct batch_waiter {
    struct vg_fiber *fiber;
    struct batch_waiter *next;
    vigil_code rc;
    vigil_error err;
    int done;
};

struct vg_fiber_batch {
    vg_fiber_batch_fn run;
    void *user;
    int gathering; /* a leader has yielded and will run the operation */
    struct batch_waiter *waiters;
};

vigil_code vg_fiber_batch_new(struct vg_fiber_batch **out, vg_fiber_batch_fn run, void *user,
                              vigil_error *err)
{
    *out = vg_calloc(1, sizeof **out);
    if (!*out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory making a fiber batch");
    (*out)->run = run;
    (*out)->user = user;
    return VIGIL_OK;
}

void vg_fiber_batch_free(struct vg_fiber_batch *b)
{
    if (!b)
        return;
    if (b->waiters || b->gathering)
        VG_BUG("fiber batch freed with fibers waiting in it");
    vg_free(b);
}

vigil_code vg_fiber_batch_join(struct vg_fiber_batch *b, vigil_error *err)
{
    if (!vg_fiber_can_park())
        return b->run(b->user, err);
    if (b->gathering) {
        /* A leader will run the operation after this call began: wait for it. */
        struct batch_waiter w = {.fiber = vg_fiber_current(), .next = b->waiters};
        b->waiters = &w;
        while (!w.done)
            vg_fiber_park(-1);
        vg_error_copy(err, &w.err);
        return w.rc;
    }
    b->gathering = 1;
    vg_fiber_yield();
    /* Run the operation without parking: no fiber joins while it runs, so every waiter's
     * request began before it. */
    b->gathering = 0;
    struct batch_waiter *list = b->waiters;
    b->waiters = NULL;
    vigil_error run_err = {0};
    vigil_code rc = b->run(b->user, &run_err);
    for (struct batch_waiter *w = list, *next; w; w = next) {
        next = w->next; /* w lives on a stack that may run again once woken */
        w->rc = rc;
        vg_error_copy(&w->err, &run_err);
        w->done = 1;
        vg_fiber_wake(w->fiber);
    }
    vg_error_copy(err, &run_err);
    return rc;
}
