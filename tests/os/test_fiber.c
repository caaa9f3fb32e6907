/*
 * test_fiber.c: fibers on one thread (src/os/fiber.h). They run in the order they became
 * ready, each on its own stack; a parked fiber resumes when woken or when its deadline has
 * passed, and not before; the guard decides whether parking is allowed; the real clock's sleep
 * parks a fiber instead of blocking the thread. No test waits for time to pass: deadlines are
 * in the past or checked without waiting.
 */
#include "helpers/test.h"

#include "os/clock.h"
#include "os/fiber.h"

#include <poll.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct trace {
    char log[256];
    struct vg_fiber *parked[4];
};

static void note(struct trace *t, const char *what)
{
    size_t n = strlen(t->log);
    snprintf(t->log + n, sizeof t->log - n, "%s ", what);
}

struct step_arg {
    struct trace *t;
    const char *name;
    int slot; /* parks itself into t->parked[slot] */
};

static void parks_once(void *arg)
{
    struct step_arg *a = arg;
    char buf[32];
    snprintf(buf, sizeof buf, "%s1", a->name);
    note(a->t, buf);
    a->t->parked[a->slot] = vg_fiber_current();
    vg_fiber_park(-1);
    snprintf(buf, sizeof buf, "%s2", a->name);
    note(a->t, buf);
}

TEST(fibers_run_in_turn_and_resume_when_woken)
{
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    struct trace t = {0};
    struct step_arg a = {&t, "a", 0}, b = {&t, "b", 1};
    ASSERT_OK(vg_fiber_spawn(s, parks_once, &a, E));
    ASSERT_OK(vg_fiber_spawn(s, parks_once, &b, E));
    ASSERT_EQ(vg_fiber_sched_live(s), 2);
    ASSERT(vg_fiber_current() == NULL); /* the thread's own stack */
    ASSERT_EQ(vg_fiber_sched_step(s, 0), 2);
    ASSERT_STREQ(t.log, "a1 b1 ");
    ASSERT_EQ(vg_fiber_sched_step(s, 0), 2); /* parked without a deadline: nothing happens */
    ASSERT_STREQ(t.log, "a1 b1 ");
    vg_fiber_wake(t.parked[1]); /* b first */
    ASSERT_EQ(vg_fiber_sched_step(s, 0), 1);
    ASSERT_STREQ(t.log, "a1 b1 b2 ");
    vg_fiber_wake(t.parked[0]);
    vg_fiber_sched_run(s);
    ASSERT_STREQ(t.log, "a1 b1 b2 a2 ");
    ASSERT_EQ(vg_fiber_sched_live(s), 0);
    vg_fiber_sched_free(s);
}

static void parks_until(void *arg)
{
    int64_t *deadline = arg;
    vg_fiber_park(*deadline);
    *deadline = -2; /* resumed */
}

TEST(a_deadline_resumes_a_fiber_only_once_it_has_passed)
{
    struct vg_clock *clock = vg_clock_real();
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    int64_t past = vg_clock_mono_ns(clock) - 1, future = vg_clock_mono_ns(clock) + 3600e9;
    ASSERT_OK(vg_fiber_spawn(s, parks_until, &past, E));
    ASSERT_OK(vg_fiber_spawn(s, parks_until, &future, E));
    vg_fiber_sched_step(s, 0); /* both park; the past deadline has expired by the end */
    vg_fiber_sched_step(s, 0);
    ASSERT_EQ(past, -2);
    ASSERT(future > 0); /* an hour ahead: still parked */
    ASSERT_EQ(vg_fiber_sched_live(s), 1);
    vg_fiber_sched_free(s); /* a fiber that never finished is freed with its scheduler */
}

static int guard_answer;
static int guard(void *user)
{
    VG_UNUSED(user);
    return guard_answer;
}

static void checks_guard(void *arg)
{
    int *seen = arg;
    *seen = vg_fiber_can_park();
}

TEST(the_guard_decides_whether_a_fiber_may_park)
{
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    int seen_no = -1, seen_yes = -1;
    vg_fiber_sched_set_guard(s, guard, NULL);
    guard_answer = 0;
    ASSERT_OK(vg_fiber_spawn(s, checks_guard, &seen_no, E));
    vg_fiber_sched_run(s);
    guard_answer = 1;
    ASSERT_OK(vg_fiber_spawn(s, checks_guard, &seen_yes, E));
    vg_fiber_sched_run(s);
    ASSERT_EQ(seen_no, 0);
    ASSERT_EQ(seen_yes, 1);
    ASSERT_EQ(vg_fiber_can_park(), 0); /* not on a fiber */
    vg_fiber_sched_free(s);
}

/* The real clock's sleep on a fiber parks it: the other fiber runs meanwhile. A zero-length
 * sleep returns at once on any stack. */
static void sleeps(void *arg)
{
    struct trace *t = arg;
    note(t, "sleep");
    vg_clock_sleep_ms(vg_clock_real(), 1);
    note(t, "woke");
}

static void works(void *arg)
{
    note(arg, "work");
}

TEST(the_real_clock_parks_a_sleeping_fiber)
{
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    struct trace t = {0};
    ASSERT_OK(vg_fiber_spawn(s, sleeps, &t, E));
    ASSERT_OK(vg_fiber_spawn(s, works, &t, E));
    vg_fiber_sched_step(s, 0);
    ASSERT_STREQ(t.log, "sleep work ");
    vg_fiber_sched_run(s);
    ASSERT_STREQ(t.log, "sleep work woke ");
    vg_clock_sleep_ms(vg_clock_real(), 0);
    vg_fiber_sched_free(s);
}

/* Shared state with a per-fiber value (the store connection's commit durability in the
 * daemon): a fiber that parks gets its value back when it resumes. */
static int shared_mode;
struct mode_fiber {
    int saved;
    int seen_after;
};

static void save_mode(void *user, void *arg)
{
    VG_UNUSED(user);
    ((struct mode_fiber *)arg)->saved = shared_mode;
}
static void restore_mode(void *user, void *arg)
{
    VG_UNUSED(user);
    shared_mode = ((struct mode_fiber *)arg)->saved;
}

static void sets_mode_and_parks(void *arg)
{
    struct mode_fiber *m = arg;
    shared_mode = 1;
    vg_fiber_park(vg_clock_mono_ns(vg_clock_real()) - 1);
    m->seen_after = shared_mode;
}

static void clears_mode(void *arg)
{
    VG_UNUSED(arg);
    shared_mode = 0;
}

TEST(a_parked_fiber_gets_its_context_back)
{
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    vg_fiber_sched_set_context(s, save_mode, restore_mode, NULL);
    struct mode_fiber m = {.seen_after = -1}, other = {0};
    ASSERT_OK(vg_fiber_spawn(s, sets_mode_and_parks, &m, E));
    ASSERT_OK(vg_fiber_spawn(s, clears_mode, &other, E));
    vg_fiber_sched_run(s);
    ASSERT_EQ(m.seen_after, 1);
    vg_fiber_sched_free(s);
}

/* Each fiber has its own stack: deep frames on two fibers that interleave stay intact. */
static int deep(int depth, int parks_at)
{
    volatile char frame[1024];
    frame[0] = (char)depth;
    if (depth == parks_at)
        vg_fiber_park(vg_clock_mono_ns(vg_clock_real()) - 1);
    int below = depth > 0 ? deep(depth - 1, parks_at) : 0;
    return below + (frame[0] == (char)depth);
}

static void recurses(void *arg)
{
    int *out = arg;
    *out = deep(100, 50);
}

TEST(each_fiber_keeps_its_own_stack)
{
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    int a = 0, b = 0;
    ASSERT_OK(vg_fiber_spawn(s, recurses, &a, E));
    ASSERT_OK(vg_fiber_spawn(s, recurses, &b, E));
    vg_fiber_sched_run(s);
    ASSERT_EQ(a, 101);
    ASSERT_EQ(b, 101);
    vg_fiber_sched_free(s);
}

/* A batch: the fibers that join in one round share one run of the operation, and each gets
 * its result. */
struct batch_op {
    int runs;
    vigil_code answer;
};

static vigil_code batch_op_run(void *user, vigil_error *err)
{
    struct batch_op *op = user;
    op->runs++;
    return op->answer ? VG_FAIL(err, op->answer, "the operation failed (run %d)", op->runs)
                      : VIGIL_OK;
}

struct joiner {
    struct vg_fiber_batch *b;
    int runs_before; /* the operation's runs when this fiber joined */
    int runs_after;
    struct batch_op *op;
    vigil_code rc;
    vigil_error err;
};

static void joins(void *arg)
{
    struct joiner *j = arg;
    j->runs_before = j->op->runs;
    j->rc = vg_fiber_batch_join(j->b, &j->err);
    j->runs_after = j->op->runs;
}

TEST(a_batch_runs_once_for_the_fibers_that_join_in_one_round)
{
    struct vg_fiber_sched *s = NULL;
    struct vg_fiber_batch *b = NULL;
    struct batch_op op = {0};
    struct joiner j[5];
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    ASSERT_OK(vg_fiber_batch_new(&b, batch_op_run, &op, E));
    for (int i = 0; i < 5; i++) {
        j[i] = (struct joiner){.b = b, .op = &op, .rc = -1};
        ASSERT_OK(vg_fiber_spawn(s, joins, &j[i], E));
    }
    vg_fiber_sched_run(s);
    ASSERT_EQ(op.runs, 1);
    for (int i = 0; i < 5; i++) {
        ASSERT_OK(j[i].rc);
        ASSERT_EQ(j[i].runs_before, 0); /* each joined before the run ... */
        ASSERT_EQ(j[i].runs_after, 1);  /* ... and returned after it */
    }
    /* A later round runs it again: a join never returns on a run that began before it. */
    ASSERT_OK(vg_fiber_spawn(s, joins, &j[0], E));
    vg_fiber_sched_run(s);
    ASSERT_EQ(op.runs, 2);
    ASSERT_EQ(j[0].runs_before, 1);
    ASSERT_EQ(j[0].runs_after, 2);
    vg_fiber_batch_free(b);
    vg_fiber_sched_free(s);
}

TEST(a_failed_batch_run_fails_every_fiber_that_waited_for_it)
{
    struct vg_fiber_sched *s = NULL;
    struct vg_fiber_batch *b = NULL;
    struct batch_op op = {.answer = VIGIL_EIO};
    struct joiner j[3];
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    ASSERT_OK(vg_fiber_batch_new(&b, batch_op_run, &op, E));
    for (int i = 0; i < 3; i++) {
        j[i] = (struct joiner){.b = b, .op = &op, .rc = -1};
        ASSERT_OK(vg_fiber_spawn(s, joins, &j[i], E));
    }
    vg_fiber_sched_run(s);
    ASSERT_EQ(op.runs, 1);
    for (int i = 0; i < 3; i++) {
        ASSERT_CODE(VIGIL_EIO, j[i].rc);
        ASSERT_STREQ(j[i].err.message, "the operation failed (run 1)");
    }
    vg_fiber_batch_free(b);
    vg_fiber_sched_free(s);
}

TEST(a_batch_runs_at_once_where_no_fiber_may_park)
{
    struct vg_fiber_sched *s = NULL;
    struct vg_fiber_batch *b = NULL;
    struct batch_op op = {0};
    ASSERT_OK(vg_fiber_batch_new(&b, batch_op_run, &op, E));
    ASSERT_OK(vg_fiber_batch_join(b, E)); /* the thread's own stack */
    ASSERT_EQ(op.runs, 1);
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    vg_fiber_sched_set_guard(s, guard, NULL);
    guard_answer = 0; /* parking forbidden: each fiber runs the operation itself */
    struct joiner j[2];
    for (int i = 0; i < 2; i++) {
        j[i] = (struct joiner){.b = b, .op = &op, .rc = -1};
        ASSERT_OK(vg_fiber_spawn(s, joins, &j[i], E));
    }
    vg_fiber_sched_run(s);
    guard_answer = 1;
    ASSERT_EQ(op.runs, 3);
    ASSERT_EQ(j[0].runs_after, 2);
    ASSERT_EQ(j[1].runs_after, 3);
    vg_fiber_batch_free(b);
    vg_fiber_sched_free(s);
}

/* vg_fiber_poll parks the fiber until its descriptor is ready; the thread runs the others
 * meanwhile, and the scheduler's own poll wakes it. */
struct fd_arg {
    struct trace *t;
    int fd;
    int got;
};

static void waits_for_input(void *arg)
{
    struct fd_arg *a = arg;
    struct pollfd p = {.fd = a->fd, .events = POLLIN};
    note(a->t, "wait");
    int n = vg_fiber_poll(&p, 1, -1);
    char c = 0;
    if (n == 1 && (p.revents & POLLIN) && read(a->fd, &c, 1) == 1)
        a->got = c;
    note(a->t, "ready");
}

static void writes_input(void *arg)
{
    struct fd_arg *a = arg;
    note(a->t, "write");
    ASSERT_EQ(write(a->fd, "x", 1), 1);
}

static void waits_in_vain(void *arg)
{
    struct fd_arg *a = arg;
    struct pollfd p = {.fd = a->fd, .events = POLLIN};
    a->got = vg_fiber_poll(&p, 1, 1) == 0 && p.revents == 0 ? 'T' : '?';
}

TEST(a_fiber_polling_a_descriptor_lets_the_others_run)
{
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    struct trace t = {0};
    struct fd_arg reader = {&t, pipe_fds[0], 0}, writer = {&t, pipe_fds[1], 0};
    ASSERT_OK(vg_fiber_spawn(s, waits_for_input, &reader, E));
    ASSERT_OK(vg_fiber_spawn(s, writes_input, &writer, E));
    ASSERT_EQ(vg_fiber_sched_step(s, 0), 1); /* the reader parked; the writer ran and ended */
    ASSERT_STREQ(t.log, "wait write ");
    vg_fiber_sched_run(s);
    ASSERT_STREQ(t.log, "wait write ready ");
    ASSERT_EQ(reader.got, 'x');

    /* Nothing to read: the timeout ends the wait with 0. */
    struct fd_arg idle = {&t, pipe_fds[0], 0};
    ASSERT_OK(vg_fiber_spawn(s, waits_in_vain, &idle, E));
    vg_fiber_sched_run(s);
    ASSERT_EQ(idle.got, 'T');

    /* Off a fiber it is poll(2). */
    struct pollfd p = {.fd = pipe_fds[1], .events = POLLOUT};
    ASSERT_EQ(vg_fiber_poll(&p, 1, 0), 1);
    ASSERT(p.revents & POLLOUT);
    vg_fiber_sched_free(s);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
}

/* A fiber that once went deep and then parked keeps only the pages it parks in: what it
 * touched below goes back to the system (a hundred parked agents' stacks, docs/internals/PERF.md
 * session 33), while its frames above the park keep their contents. */
#define DEEP_BYTES (64 * 1024)

struct deep_arg {
    struct vg_fiber *self;
    uintptr_t deep;    /* the lowest bytes the fiber's deep call touched */
    unsigned kept_sum; /* its own frame's contents, summed after it resumed */
};

static __attribute__((noinline)) void go_deep(struct deep_arg *a)
{
    volatile char buf[DEEP_BYTES];
    for (size_t i = 0; i < sizeof buf; i += 512)
        buf[i] = 1;
    a->deep = (uintptr_t)buf; /* an address to look at, never read through */
}

static void goes_deep_then_parks(void *arg)
{
    struct deep_arg *a = arg;
    volatile unsigned char mine[256];
    for (unsigned i = 0; i < sizeof mine; i++)
        mine[i] = (unsigned char)i;
    go_deep(a);
    a->self = vg_fiber_current();
    vg_fiber_park(-1);
    a->kept_sum = 0;
    for (unsigned i = 0; i < sizeof mine; i++)
        a->kept_sum += mine[i];
}

/* How many of the pages in [p, p + len) are resident. */
static int resident_pages(char *p, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *start = (char *)((uintptr_t)p & ~(uintptr_t)(page - 1));
    unsigned char vec[DEEP_BYTES / 1024];
    size_t n = (size_t)(p + len - start + page - 1) / page;
    if (n > sizeof vec || mincore(start, n * page, vec) != 0)
        return -1;
    int resident = 0;
    for (size_t i = 0; i < n; i++)
        resident += vec[i] & 1;
    return resident;
}

TEST(a_parked_fiber_keeps_only_the_stack_it_parks_in)
{
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    struct deep_arg a = {0};
    ASSERT_OK(vg_fiber_spawn(s, goes_deep_then_parks, &a, E));
    ASSERT_EQ(vg_fiber_sched_step(s, 0), 1); /* parked */
    ASSERT(a.deep != 0);
    /* The deep call's lower half lies well under the park's frame: none of it stays. */
    ASSERT_EQ(resident_pages((char *)a.deep, DEEP_BYTES / 2), 0);
    /* Woken, it finds its own frame as it left it. */
    vg_fiber_wake(a.self);
    vg_fiber_sched_run(s);
    ASSERT_EQ(a.kept_sum, 255u * 256u / 2u);
    vg_fiber_sched_free(s);
}

/* A fiber that parks with its frame in the middle of a page, having touched the page under it,
 * gives that page back too: under vg_fiber_park's frame only the switch's few bytes are read
 * again, so the page holding the frame is all a park keeps at its bottom (PERF.md session 35:
 * a hundred parked agents' stacks, 16 KiB each, became 12 KiB). */
struct mid_arg {
    struct vg_fiber *self;
    int levels;        /* how deep it parks (park_under) */
    uintptr_t frame;   /* the parking function's frame */
    unsigned kept_sum; /* its own frame's contents, summed after it resumed */
};

static __attribute__((noinline)) void park_here(struct mid_arg *a)
{
    volatile unsigned char mine[64];
    for (unsigned i = 0; i < sizeof mine; i++)
        mine[i] = (unsigned char)i;
    struct deep_arg deeper = {0};
    go_deep(&deeper); /* the pages under this frame touched, as a deeper call would */
    a->frame = (uintptr_t)__builtin_frame_address(0);
    a->self = vg_fiber_current();
    vg_fiber_park(-1);
    a->kept_sum = 0;
    for (unsigned i = 0; i < sizeof mine; i++)
        a->kept_sum += mine[i];
}

/* park_here under `levels` frames of some 300 bytes each: sixteen depths cover a page. */
static __attribute__((noinline)) void park_under(struct mid_arg *a, int levels)
{
    volatile char pad[256];
    pad[0] = (char)levels;
    if (levels > 0)
        park_under(a, levels - 1);
    else
        park_here(a);
    pad[255] = pad[0];
}

static void parks_at_depth(void *arg)
{
    struct mid_arg *a = arg;
    park_under(a, a->levels);
}

TEST(a_parked_fiber_keeps_no_page_under_the_one_it_parks_in)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int checked = 0;
    for (int levels = 0; levels < 16 && !checked; levels++) {
        struct vg_fiber_sched *s = NULL;
        ASSERT_OK(vg_fiber_sched_new(&s, E));
        struct mid_arg a = {.levels = levels};
        ASSERT_OK(vg_fiber_spawn(s, parks_at_depth, &a, E));
        ASSERT_EQ(vg_fiber_sched_step(s, 0), 1); /* parked */
        ASSERT(a.frame != 0);
        size_t into = a.frame & (page - 1);
        /* A depth whose frame lies well past the switch's bytes into its page. */
        if (into >= page / 3 && into <= page - page / 8) {
            char *frame_page = (char *)(a.frame & ~(uintptr_t)(page - 1));
            ASSERT_EQ(resident_pages(frame_page - page, page), 0);
            ASSERT_EQ(resident_pages(frame_page, page), 1);
            checked = 1;
        }
        vg_fiber_wake(a.self);
        vg_fiber_sched_run(s);
        ASSERT_EQ(a.kept_sum, 63u * 64u / 2u);
        vg_fiber_sched_free(s);
    }
    ASSERT(checked);
}

static volatile uint64_t burnt; /* kept, so the spin is not optimized away */

/* Spins until the thread has used ms more milliseconds of CPU (work, not a wait). */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void burn_cpu_ms(int64_t ms)
{
    int64_t until = thread_cpu_ns() + ms * 1000000;
    while (thread_cpu_ns() < until)
        for (int i = 0; i < 10000; i++)
            burnt += (uint64_t)i;
}

struct metered {
    int64_t used_ns;
};

static void metered_yielder(void *arg)
{
    struct metered *m = arg;
    struct vg_fiber_cpu meter;
    vg_fiber_cpu_begin(&meter);
    vg_fiber_yield(); /* the burner runs now, on this thread */
    m->used_ns = vg_fiber_cpu_end(&meter);
}

static void burner(void *arg)
{
    (void)arg;
    burn_cpu_ms(50);
}

TEST(a_fibers_cpu_meter_leaves_out_what_others_used_while_it_was_away)
{
    struct vg_fiber_sched *s = NULL;
    struct metered m = {-1};
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    ASSERT_OK(vg_fiber_spawn(s, metered_yielder, &m, E));
    ASSERT_OK(vg_fiber_spawn(s, burner, NULL, E));
    struct vg_fiber_cpu whole;
    vg_fiber_cpu_begin(&whole); /* off a fiber: the thread's CPU */
    vg_fiber_sched_run(s);
    int64_t thread_ns = vg_fiber_cpu_end(&whole);
    vg_fiber_sched_free(s);
    ASSERT(thread_ns >= 50 * 1000000); /* the burner's 50 ms are the thread's */
    ASSERT(m.used_ns >= 0);
    ASSERT(m.used_ns < 25 * 1000000); /* and not the yielder's */
}

int main(void)
{
    RUN(a_fiber_polling_a_descriptor_lets_the_others_run);
    RUN(fibers_run_in_turn_and_resume_when_woken);
    RUN(a_deadline_resumes_a_fiber_only_once_it_has_passed);
    RUN(the_guard_decides_whether_a_fiber_may_park);
    RUN(the_real_clock_parks_a_sleeping_fiber);
    RUN(a_parked_fiber_gets_its_context_back);
    RUN(each_fiber_keeps_its_own_stack);
    RUN(a_batch_runs_once_for_the_fibers_that_join_in_one_round);
    RUN(a_failed_batch_run_fails_every_fiber_that_waited_for_it);
    RUN(a_batch_runs_at_once_where_no_fiber_may_park);
    RUN(a_parked_fiber_keeps_only_the_stack_it_parks_in);
    RUN(a_parked_fiber_keeps_no_page_under_the_one_it_parks_in);
    RUN(a_fibers_cpu_meter_leaves_out_what_others_used_while_it_was_away);
    return 0;
}
