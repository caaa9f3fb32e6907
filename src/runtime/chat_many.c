/*
 * chat_many.c: vigil_chat_many, many chat turns at once on the caller's thread. Each turn is a
 * fiber (os/fiber.h) running vigil_chat on the one runtime, as a `vigil serve` worker runs its
 * wakes (src/wake/daemon.c): a turn parks while its model call is in flight, only between store
 * transactions, and the turns' commits fold into rounds whose durable commits share one log
 * sync. A thread and a runtime per turn would cost a connection, a page cache and a stack each.
 */
#include "base/common.h"

#include "model/model.h"
#include "os/fiber.h"
#include "runtime/runtime_int.h"

struct many {
    vigil_runtime *rt;
    struct vg_fiber_sched *sched;
    struct vg_fiber_batch *syncs; /* NULL: the store syncs each durable commit itself */
};

/* A turn's fiber argument, with the shared connection's state it had when it parked. */
struct turn_slot {
    struct many *m;
    vigil_chat_turn *turn;
    int durable;
    const char *source;
    int read_batches;
};

static void turn_fiber(void *arg)
{
    struct turn_slot *sl = arg;
    vigil_chat_turn *t = sl->turn;
    t->code =
        vigil_chat(sl->m->rt, t->agent_id, t->session, t->text, t->cb, &t->out_json, &t->error);
    if (t->code == VIGIL_OK) /* what a recovered step wrote there on the way is no error */
        vigil_error_clear(&t->error);
}

/* Turns park only between store transactions: they share one connection. And never with a
 * serial model (the scripted one: its cassette is one conversation replayed in order). */
static int may_park(void *user)
{
    struct many *m = user;
    if (m->rt->model && (vg_model_caps(m->rt->model) & VG_MODEL_CAP_SERIAL))
        return 0;
    return !vg_store_in_tx(m->rt->env.store);
}

/* Whether commits are durable, the notifications' source tag and the read batches open belong
 * to the turn that set them: a parked turn gets back what it had, whatever the others set
 * meanwhile. */
static void save_context(void *user, void *arg)
{
    struct many *m = user;
    struct turn_slot *sl = arg;
    sl->durable = vg_store_durable(m->rt->env.store);
    sl->source = m->rt->env.notify.source;
    sl->read_batches = vg_store_read_batch_leave(m->rt->env.store);
}

static void restore_context(void *user, void *arg)
{
    struct many *m = user;
    struct turn_slot *sl = arg;
    m->rt->env.notify.source = sl->source;
    if (vg_store_durable(m->rt->env.store) != sl->durable)
        (void)vg_store_durable_commits(m->rt->env.store, sl->durable, NULL);
    vg_store_read_batch_rejoin(m->rt->env.store, sl->read_batches);
}

static vigil_code round_end(void *user, vigil_error *err)
{
    return vg_store_round_end(user, err);
}

static vigil_code sync_wait(void *user, vigil_error *err)
{
    return vg_fiber_batch_join(user, err);
}

/* The turns' durable commits share log syncs and their commits fold into rounds. A store that
 * cannot sync apart (PostgreSQL: the server syncs) keeps a sync per durable commit. */
static vigil_code share_syncs(struct many *m, vigil_error *err)
{
    struct vg_store *st = m->rt->env.store;
    vigil_error e = {0};
    vigil_code rc = vg_fiber_batch_new(&m->syncs, round_end, st, err);
    if (rc)
        return rc;
    rc = vg_store_share_syncs(st, sync_wait, m->syncs, &e);
    if (rc == VIGIL_EUNSUPPORTED) {
        vg_fiber_batch_free(m->syncs);
        m->syncs = NULL;
        return VIGIL_OK;
    }
    if (rc == VIGIL_OK)
        rc = vg_store_fold_commits(st, 1, &e);
    if (rc)
        vg_error_copy(err, &e);
    return rc;
}

static void many_release(struct many *m)
{
    vg_fiber_sched_free(m->sched);
    if (m->syncs) /* folding ends with it, its open round committed and synced */
        (void)vg_store_share_syncs(m->rt->env.store, NULL, NULL, NULL);
    vg_fiber_batch_free(m->syncs);
}

vigil_code vigil_chat_many(vigil_runtime *rt, vigil_chat_turn *turns, size_t n, vigil_error *err)
{
    struct many m = {rt, NULL, NULL};
    struct turn_slot *slots = NULL;
    vigil_code rc;
    if (!rt || (n && !turns))
        return VG_FAIL(err, VIGIL_EINVAL, "chat_many needs a runtime and its turns");
    /* From a turn's callback (a fiber, or a transaction of this runtime open): the turns would
     * nest in the one running. */
    if (vg_fiber_current() || vg_store_in_tx(rt->env.store))
        return VG_FAIL(err, VIGIL_ESTATE, "chat_many cannot run inside a chat turn");
    for (size_t i = 0; i < n; i++) {
        turns[i].code = VIGIL_ERROR;
        turns[i].out_json = NULL;
        vigil_error_clear(&turns[i].error);
    }
    if (!n)
        return VIGIL_OK;
    /* Built once before the fibers start, so no turn builds them while another waits. */
    if ((rc = vg_runtime_prepare(rt, err)))
        return rc;
    if (!(slots = vg_calloc(n, sizeof *slots)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting %zu chat turns", n);
    if ((rc = vg_fiber_sched_new(&m.sched, err)) || (rc = share_syncs(&m, err)))
        goto out;
    vg_fiber_sched_set_guard(m.sched, may_park, &m);
    vg_fiber_sched_set_context(m.sched, save_context, restore_context, &m);
    for (size_t i = 0; i < n && !rc; i++) {
        slots[i] = (struct turn_slot){.m = &m, .turn = &turns[i], .durable = 1};
        if ((rc = vg_fiber_spawn(m.sched, turn_fiber, &slots[i], &turns[i].error))) {
            for (size_t k = i; k < n; k++) { /* not started: each says why */
                turns[k].code = rc;
                turns[k].error = turns[i].error;
            }
            vg_error_copy(err, &turns[i].error);
        }
    }
    /* The turns already started run to their end even when a later one could not start: they
     * may have written, and their outcomes are theirs. */
    vg_fiber_sched_run(m.sched);
out:
    many_release(&m);
    vg_free(slots);
    return rc;
}
