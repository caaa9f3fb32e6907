/*
 * compactor.c: compaction off the caller's thread. A run that takes its thread past its budget
 * leaves a compaction job (the loop's after_run persists it at the run's close); running the
 * job means a summarizer's model call, which is best-effort work that must never delay a
 * foreground run (DESIGN 3.4, seed 000 §3 "Compaction producer"). So neither vigil_chat nor a
 * wake's run does it: each asks the runtime's compactor for a pass once it has ended
 * (vg_runtime_compact_soon), and returns. The compactor is a thread of the runtime's own, with
 * a runtime of its own on the same store (its own connection, model and memory): a runtime is
 * used by one thread at a time, and the caller goes on using its own. A job's commit holds its
 * agent's lease for its transaction (chat.c, compaction_hold), so a run of the agent that
 * began meanwhile puts the job off to a later pass, and the run never waits for it.
 *
 * A store a second connection cannot open (SQLite's ":memory:"), or a runtime on a program's
 * own clock, keeps the old way: the pass runs in the caller's thread after its turn. Closing the
 * runtime finishes the pass asked for (vg_runtime_compact_settle), so a one-shot `vigil chat` still
 * summarizes what its turn made due, after it printed the answer.
 */
#include "base/common.h"

#include "memory/loop_adapter.h"
#include "runtime/runtime_int.h"

#include <pthread.h>

struct vg_compactor {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* broadcast: a pass was asked for, one ended, or closing */
    int due;            /* under mu: a pass was asked for and has not begun */
    int busy;           /* under mu: a pass is under way */
    int closing;        /* under mu: finish what is due, then end */
    vigil_runtime *of;  /* the runtime it serves: its store, config and clock */
    vigil_runtime *own; /* the thread's own runtime (opened by the thread, on its first pass) */
};

/* One pass on the thread's own runtime, opened on first use; a runtime that cannot be opened
 * now is tried again next pass (compaction is best-effort: nothing reports it). */
static void compactor_pass(struct vg_compactor *c)
{
    vigil_error ignore = {0};
    if (!c->own) {
        vigil_runtime_options ro = {
            .size = sizeof ro, .store_uri = c->of->store_uri, .config_path = c->of->config_path};
        if (vg_runtime_open_with(&ro, c->of->env.clock, NULL, &c->own, &ignore) != VIGIL_OK) {
            c->own = NULL;
            return;
        }
        c->own->in_daemon = c->of->in_daemon;
    }
    if (vg_runtime_prepare_memory(c->own, &ignore) == VIGIL_OK)
        vg_runtime_after_run(c->own);
}

static void *compactor_main(void *arg)
{
    struct vg_compactor *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->due && !c->closing)
            pthread_cond_wait(&c->cv, &c->mu);
        if (!c->due)
            break; /* closing, nothing asked for */
        c->due = 0;
        c->busy = 1;
        pthread_mutex_unlock(&c->mu);
        compactor_pass(c);
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* A second connection sees the same store (a file, or a server's), and the time is vigil's to
 * read from any thread: a program's own clock (vigil_runtime_options.clock, as `vigil eval`'s
 * scenario time) was promised to the runtime's callers' thread alone, and a scenario's summaries
 * must come at the same point of its turns each time it runs. */
static int compactor_fits(const vigil_runtime *rt)
{
    return !rt->own_clock && rt->store_uri && (rt->data_dir || strstr(rt->store_uri, "://"));
}

static struct vg_compactor *compactor_start(vigil_runtime *rt)
{
    struct vg_compactor *c = vg_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->of = rt;
    if (pthread_mutex_init(&c->mu, NULL)) {
        vg_free(c);
        return NULL;
    }
    if (pthread_cond_init(&c->cv, NULL)) {
        pthread_mutex_destroy(&c->mu);
        vg_free(c);
        return NULL;
    }
    if (pthread_create(&c->thread, NULL, compactor_main, c)) {
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        vg_free(c);
        return NULL;
    }
    return c;
}

void vg_runtime_compact_soon(vigil_runtime *rt)
{
    /* Most runs leave nothing to do: a look (the reads the pass would begin with) spares them
     * a thread, and a one-shot command a second runtime. */
    int waiting = 1;
    vigil_error ignore = {0};
    if (!rt->memory || !rt->model ||
        (vg_memory_loop_work_waiting(rt->memory, &waiting, &ignore) == VIGIL_OK && !waiting))
        return;
    if (!rt->compactor && compactor_fits(rt))
        rt->compactor = compactor_start(rt);
    struct vg_compactor *c = rt->compactor;
    if (!c) { /* no thread for it: in the caller's, after its run as before */
        vg_runtime_after_run(rt);
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->due = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void vg_runtime_compact_settle(vigil_runtime *rt)
{
    struct vg_compactor *c = rt->compactor;
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    while (c->due || c->busy)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

void vg_runtime_compactor_stop(vigil_runtime *rt)
{
    struct vg_compactor *c = rt->compactor;
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->closing = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL); /* after the pass asked for, if any */
    vigil_runtime_close(c->own);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    vg_free(c);
    rt->compactor = NULL;
}
