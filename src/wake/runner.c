/*
 * runner.c: the runner seam, plus the in-process drain loop (claim, run, finish) used by the
 * CLI without a daemon and by the daemon's workers. The product's one runner is the agent loop,
 * which the runtime gives (struct vg_wake_host); the tests' runners ("echo", "test:...") live
 * in tests/helpers/wake_runners.c and come in through vg_wake_runner_provide.
 */
#include "base/common.h"

#include "wake/wake_int.h"

#include <stdatomic.h>

void vg_wake_runner_free(struct vg_wake_runner *r)
{
    if (r && r->methods->destroy)
        r->methods->destroy(r);
}

/* ---- by description -------------------------------------------------------------------------- */

/* The runners this process has beyond the agent loop's: the tests' (tests/helpers). */
static _Atomic(vg_wake_runner_factory) extra_runners;

void vg_wake_runner_provide(vg_wake_runner_factory factory)
{
    atomic_store(&extra_runners, factory);
}

vigil_code vg_wake_runner_new(const char *desc, struct vg_wake_runner *loop,
                              struct vg_wake_runner **out, vigil_error *err)
{
    vg_wake_runner_factory extra = atomic_load(&extra_runners);
    vigil_code rc;
    if (!desc || !*desc || !strcmp(desc, "loop")) {
        if (!loop)
            return VG_FAIL(err, VIGIL_EINVAL, "no agent loop runner here");
        *out = loop;
        return VIGIL_OK;
    }
    if (extra && (rc = extra(desc, out, err)) != VIGIL_ENOTFOUND)
        return rc;
    return VG_FAIL(err, VIGIL_EINVAL, "unknown runner \"%.60s\": use loop", desc);
}

/* ---- drain ----------------------------------------------------------------------------------- */

struct watch_ctx {
    char **ids;
    size_t n, cap;
};

static int watch_cb(void *user, const struct vg_record *r)
{
    struct watch_ctx *c = user;
    if (strncmp(r->k1, "entity:", 7))
        return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        char **p = vg_realloc(c->ids, cap * sizeof *p);
        if (!p)
            return 1;
        c->ids = p;
        c->cap = cap;
    }
    if ((c->ids[c->n] = vg_strdup(r->k1 + 7)))
        c->n++;
    return 0;
}

/* Suppression layer 1: the entities an agent watches are treated as its own while it runs. */
static void preregister(struct vg_wake *w, const char *agent)
{
    struct watch_ctx c = {0};
    struct vg_query q = {.kind = "sub_token", .owner = agent};
    vigil_error err = {0};
    if (vg_store_scan(w->env->store, &q, watch_cb, &c, &err) == VIGIL_OK && c.n)
        vg_suppress_prereg(w, agent, (const char *const *)c.ids, c.n);
    for (size_t i = 0; i < c.n; i++)
        vg_free(c.ids[i]);
    vg_free(c.ids);
}

vigil_code vg_wake_run_one(struct vg_wake *w, struct vg_wake_runner *r, struct vg_wake_job *job,
                           const volatile int *stop, vigil_error *err)
{
    struct vg_buf etext;
    vg_buf_init(&etext, 4096);
    preregister(w, job->agent_id);
    enum vg_wake_outcome o = vg_wake_runner_run(r, w->env, job, stop, &etext);
    vg_suppress_end_run(w, job->agent_id);
    w->last_dormant = 0;
    vigil_code rc = VIGIL_OK;
    if (o == VG_WAKE_FINISHED)
        o = VG_WAKE_COMPLETED; /* finished with its end already */
    else
        rc = vg_wake_finish(w, job, o, etext.data, err);
    w->last_outcome = o;
    snprintf(w->last_error, sizeof w->last_error, "%s", etext.data);
    vg_buf_release(&etext);
    if (r->methods->after)
        r->methods->after(r, w->env);
    return rc;
}

vigil_code vg_wake_drain(struct vg_wake *w, struct vg_wake_runner *r, int max_runs, int *ran,
                         vigil_error *err)
{
    static const volatile int never = 0;
    int count = 0;
    vigil_code rc = VIGIL_OK;
    while (max_runs <= 0 || count < max_runs) {
        struct vg_wake_job job;
        int got = 0;
        if ((rc = vg_wake_claim(w, &job, &got, err)) || !got)
            break;
        rc = vg_wake_run_one(w, r, &job, &never, err);
        vg_wake_job_release(&job);
        count++;
        if (rc == VIGIL_ESTATE) /* superseded by recovery elsewhere: not ours to finish */
            rc = VIGIL_OK;
        if (rc)
            break;
    }
    if (ran)
        *ran = count;
    return rc;
}
