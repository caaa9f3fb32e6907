/*
 * daemon.c: `vigil serve`. One libuv loop thread owns notification intake and its debounce
 * windows, timers, signals and child processes; a pool of worker threads, each with its own
 * runtime (its own store connection), claims queued wakes and runs them through the runner.
 * A worker keeps up to runs_per_worker runs going at once, each a fiber (os/fiber.h) that
 * parks while its model call is in flight, so one thread and one connection serve many agents.
 *
 * The loop thread learns about work from three places: the store's durable queue, polled every
 * poll_ms (notification records and wake_run records other processes wrote: `vigil notify`,
 * `vigil wake`), the workers' own commits (their notifier hands tokens, with the source tag,
 * to the loop through a uv_async), and the next timer deadline (a uv timer armed to the earliest
 * `seq` of the store's timer index, which is the persistent min-heap: memory holds one deadline,
 * not one per timer, so a million dormant agents cost disk, not memory).
 *
 * The runtime above comes in through the host port the caller fills in (struct vg_wake_host,
 * runtime/wake_runner.c): it opens each thread's runtime, says whether runs may take turns on
 * a worker, gives the kill switches and the default (agent loop) runner.
 *
 * One daemon per SQLite store: an exclusive flock on "<store>.lock" held for the daemon's life.
 * Any number of daemons on one PostgreSQL store (docs/scale-out.md): they share the queue
 * (claims pass over what another daemon is taking, FOR UPDATE SKIP LOCKED), each run writes
 * under its lease's fencing epoch, every daemon re-queues the runs of holders gone, and a
 * listener thread waits on the store's work signal (LISTEN/NOTIFY) so an idle daemon looks at
 * once when any process queues work; the poll stays as the fallback. Each daemon keeps a
 * `daemon` record (id: its holder name, k1: host, seq: its last beat) that says it is alive.
 * SIGINT/SIGTERM, or vg_daemon_stop from a thread of the embedding program (the daemons of the
 * process are listed by store, so a stop finds its daemon without a signal to the whole
 * process): stop taking wakes, let running ones finish for grace_ms, then ask them to stop
 * (they are checkpointed as interrupted and re-queued under their run keys), end child
 * processes, checkpoint and close the store, and return VIGIL_OK.
 *
 * Sections: lock file; inbox; running daemons; workers; shared stores; loop; stop; run.
 */
#include "base/common.h"

#include "base/stats.h"
#include "os/fiber.h"
#include "os/fs.h"
#include "os/proc.h"
#include "wake/wake_int.h"
#include "os/say.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

/* ---- lock file ------------------------------------------------------------------------------- */

/* The lock file's path for a store ("<store>.lock"). */
static void lock_path(const char *store, char *out, size_t n)
{
    const char *p = !strncmp(store, "sqlite:", 7) ? store + 7 : store;
    snprintf(out, n, "%s.lock", p);
}

/* A store many daemons may serve at once (PostgreSQL). */
static int store_shared(const char *store)
{
    return !strncmp(store, "postgres://", 11) || !strncmp(store, "postgresql://", 13);
}

static int shared_running(const char *store, long *pid);

/* The control socket's path ("<store>.sock"); 0 if it does not fit a sockaddr_un. */
static int sock_path(const char *store, char *out, size_t n)
{
    const char *p = !strncmp(store, "sqlite:", 7) ? store + 7 : store;
    struct sockaddr_un sa;
    int len = snprintf(out, n, "%s.sock", p);
    return len > 0 && (size_t)len < sizeof sa.sun_path && (size_t)len < n;
}

void vg_daemon_poke(const char *store_path)
{
    char path[4200];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (store_shared(store_path))
        return; /* the commit itself signalled every daemon (the store's work signal) */
    if (!sock_path(store_path, path, sizeof path))
        return; /* the daemon's poll finds the work instead */
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    /* Connecting is the message: the daemon looks at the store's queue at once. */
    (void)connect(fd, (struct sockaddr *)&sa, sizeof sa);
    close(fd);
}

int vg_daemon_running(const char *store_path, long *pid)
{
    char path[4200], buf[32] = {0};
    if (store_shared(store_path))
        return shared_running(store_path, pid);
    lock_path(store_path, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    if (held && pid) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        *pid = n > 0 ? strtol(buf, NULL, 10) : 0;
    }
    close(fd);
    return held;
}

static int fresh_daemon_cb(void *user, const struct vg_record *r)
{
    long *pid = user;
    json_t *b = json_loads(r->body, 0, NULL);
    if (*pid == 0)
        *pid = (long)json_integer_value(json_object_get(b, "pid"));
    json_decref(b);
    return 0;
}

/* A shared store: is a daemon's beat recent (its `daemon` record, within three beats)? */
static int shared_running(const char *store, long *pid)
{
    struct vg_store *s = NULL;
    struct vg_store_options so = {.read_only = 1};
    long first = 0;
    int64_t n = 0;
    struct vg_wake_config cfg;
    vg_wake_config_defaults(&cfg);
    if (vg_store_open(store, &so, &s, NULL) != VIGIL_OK) {
        vg_store_close(s);
        return 0;
    }
    struct vg_query q = {.kind = "daemon",
                         .has_seq_min = 1,
                         .seq_min = vg_clock_now_ms(vg_clock_real()) -
                                    VG_WAKE_BEATS_MISSED * vg_wake_heartbeat_ms(cfg.lease_ms)};
    if (vg_store_count(s, &q, &n, NULL) == VIGIL_OK && n > 0)
        (void)vg_store_scan(
            s,
            &(struct vg_query){
                .kind = "daemon", .has_seq_min = 1, .seq_min = q.seq_min, .limit = 1},
            fresh_daemon_cb, &first, NULL);
    vg_store_close(s);
    if (pid)
        *pid = first;
    return n > 0;
}

static vigil_code lock_take(const char *store, int *fd_out, vigil_error *err)
{
    char path[4200], pid[32];
    lock_path(store, path, sizeof path);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return VG_FAIL(err, VIGIL_EIO, "could not open lock file \"%s\": %s", path,
                       strerror(errno));
    (void)fchmod(fd, 0600); /* private whatever the umask, like the store beside it */
    /* A few tries: `vigil wake` probing for a daemon holds a shared lock for an instant. */
    int locked = 0;
    for (int i = 0; i < 5 && !(locked = flock(fd, LOCK_EX | LOCK_NB) == 0); i++)
        vg_clock_sleep_ms(vg_clock_real(), 20);
    if (!locked) {
        long other = 0;
        char buf[32] = {0};
        if (read(fd, buf, sizeof buf - 1) > 0)
            other = strtol(buf, NULL, 10);
        close(fd);
        return VG_FAIL(err, VIGIL_EBUSY,
                       "another daemon (pid %ld) already serves store \"%s\": stop it first", other,
                       store);
    }
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || write(fd, pid, (size_t)n) != n) {
        close(fd);
        return VG_FAIL(err, VIGIL_EIO, "could not write lock file \"%s\"", path);
    }
    *fd_out = fd;
    return VIGIL_OK;
}

/* ---- inbox: tokens the workers' commits raised, handed to the loop thread ---------------------
 */

struct note {
    struct note *next;
    char *source;  /* owned or NULL */
    char **tokens; /* owned */
    size_t n;
};

struct daemon;
struct worker;

/* One run in flight on a worker: its job, and what the loop thread needs to renew its lease. */
struct slot {
    struct worker *wk;
    struct vg_wake_job job;
    int busy;       /* under d->mu: a job is running */
    char agent[37]; /* under d->mu: the running job's agent and epoch, for renewal */
    int64_t epoch;
    int64_t renewed_mono; /* ns */
    /* The run's share of its worker's runtime while it is parked (worker_save_context). */
    int durable;
    const char *source;
    int read_batches;
};

struct worker {
    struct daemon *d;
    pthread_t thread;
    int started;
    vigil_runtime *rt;  /* the worker's own connection, shared by its runs */
    struct vg_env *env; /* its ports */
    struct vg_wake w;
    struct vg_fiber_sched *sched; /* the worker's runs, one fiber each */
    struct vg_fiber_batch *syncs; /* its runs' durable commits share log syncs (SQLite) */
    struct slot *slots;
    int n_slots;
    int64_t finished; /* runs ended (the worker's thread only): a slot came free */
};

struct daemon {
    const struct vg_daemon_options *o;
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    uv_timer_t poll, deadline, grace, reap;
    uv_prepare_t prepare;
    uv_async_t async;
    uv_pipe_t control; /* "<store>.sock": a connection means "look at the queue now" */
    int control_on;    /* the control socket is bound */
    char control_path[4200];
    vigil_runtime *rt;  /* the loop thread's connection */
    struct vg_env *env; /* its ports */
    struct vg_wake w;
    struct vg_wake_runner *runner;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct note *inbox;     /* under mu */
    uint64_t work_seq;      /* under mu: bumped when there may be work */
    int stopping;           /* under mu: no new claims */
    volatile int stop_runs; /* past the grace period: runners stop */
    struct worker *workers;
    int n_workers;
    int64_t last_wall, last_mono;
    int64_t last_prune_mono; /* ms */
    int64_t last_sweep_mono; /* ms: the host's sweep */
    /* The last attempt to fire due timers failed (a store error, libical missing): their
     * deadline is in the past, so waiting for it would retry at once, forever; the poll tick
     * retries instead. */
    int timers_failing;
    char holder[80];
    /* A shared store (store_shared): its listener thread, on its own connection, waits on the
     * work signal and hands it to the loop (signalled, under mu, then async). */
    int shared;
    struct vg_store *listen_store;
    pthread_t listener;
    int listener_on;
    int listener_stop;                                     /* under mu */
    int signalled;                                         /* under mu */
    int64_t last_recover_mono, last_beat_mono, started_ms; /* ms */
    /* The process's list of running daemons (under running_mu): vg_daemon_stop finds its
     * daemon there, sets stop_asked, and sends async while async_on says it is open. */
    struct daemon *next_running;
    int stop_asked, async_on;
    /* Under running_mu: threads inside vg_daemon_on_runtime with this daemon (running_remove
     * waits for none), and whether its service may ask (set as the service starts). */
    int hook_users, hook_open;
    pthread_mutex_t hook_mu; /* the embedding program's on_runtime calls take turns */
};

/* Forward: the loop's signal handler and the stop share it. */
static void begin_stop(struct daemon *d, const char *why);

/* ---- running daemons ------------------------------------------------------------------------- */

static pthread_mutex_t running_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t running_cv = PTHREAD_COND_INITIALIZER; /* a hook user left */
static struct daemon *running; /* under running_mu: this process's daemons */

static void running_add(struct daemon *d)
{
    pthread_mutex_lock(&running_mu);
    d->next_running = running;
    running = d;
    pthread_mutex_unlock(&running_mu);
}

static void running_remove(struct daemon *d)
{
    pthread_mutex_lock(&running_mu);
    for (struct daemon **p = &running; *p; p = &(*p)->next_running)
        if (*p == d) {
            *p = d->next_running;
            break;
        }
    d->async_on = 0;
    d->hook_open = 0;
    while (d->hook_users) /* a service thread still in the program's hook: d is in use */
        pthread_cond_wait(&running_cv, &running_mu);
    pthread_mutex_unlock(&running_mu);
}

/* The loop's async handle opened (1) or is about to close (0): a stop asked before it opened
 * is sent once it is; none is sent to a closing one. */
static void running_async(struct daemon *d, int on)
{
    pthread_mutex_lock(&running_mu);
    d->async_on = on;
    if (on && d->stop_asked)
        uv_async_send(&d->async);
    pthread_mutex_unlock(&running_mu);
}

/* From here on vg_daemon_on_runtime finds d: its own runtimes are open and hooked. */
static void running_hook_open(struct daemon *d)
{
    pthread_mutex_lock(&running_mu);
    d->hook_open = 1;
    pthread_mutex_unlock(&running_mu);
}

static int stop_was_asked(struct daemon *d)
{
    pthread_mutex_lock(&running_mu);
    int asked = d->stop_asked;
    pthread_mutex_unlock(&running_mu);
    return asked;
}

static void worker_notify(void *user, const char *const *tokens, size_t n)
{
    struct worker *wk = user;
    struct daemon *d = wk->d;
    const char *source = wk->env->notify.source;
    struct note *nt = vg_calloc(1, sizeof *nt);
    if (!nt)
        return;
    if (!(nt->tokens = vg_calloc(n ? n : 1, sizeof *nt->tokens)) ||
        (source && !(nt->source = vg_strdup(source))))
        goto fail;
    for (; nt->n < n; nt->n++)
        if (!(nt->tokens[nt->n] = vg_strdup(tokens[nt->n])))
            goto fail;
    pthread_mutex_lock(&d->mu);
    nt->next = d->inbox;
    d->inbox = nt;
    pthread_mutex_unlock(&d->mu);
    uv_async_send(&d->async);
    return;
fail:
    for (size_t i = 0; i < nt->n; i++)
        vg_free(nt->tokens[i]);
    vg_free(nt->tokens);
    vg_free(nt->source);
    vg_free(nt);
}

/* A call cut short (a crash, a timeout, a stop) that may have taken effect waits in doubt for a
 * person; the operator watching the daemon hears of it (trial G1), not only `indoubt list`. */
static void say_in_doubt(const struct note *nt)
{
    for (size_t i = 0; i < nt->n; i++) {
        if (strcmp(nt->tokens[i], "TOOL_IN_DOUBT") != 0)
            continue;
        const char *agent =
            i + 1 < nt->n && strlen(nt->tokens[i + 1]) == 36 ? nt->tokens[i + 1] : "?";
        vg_say("vigil serve: a tool call of agent %s is in doubt (cut short, it may have taken "
               "effect): see `vigil indoubt list`, settle it with `vigil indoubt resolve`\n",
               agent);
    }
}

static void inbox_drain(struct daemon *d)
{
    pthread_mutex_lock(&d->mu);
    struct note *list = d->inbox;
    d->inbox = NULL;
    pthread_mutex_unlock(&d->mu);
    while (list) {
        struct note *nt = list;
        vigil_error err = {0};
        list = nt->next;
        say_in_doubt(nt);
        if (vg_wake_intake(&d->w, (const char *const *)nt->tokens, nt->n, nt->source,
                           VG_ORIGIN_LOCAL, &err))
            vg_say("vigil serve: %s\n", err.message);
        for (size_t i = 0; i < nt->n; i++)
            vg_free(nt->tokens[i]);
        vg_free(nt->tokens);
        vg_free(nt->source);
        vg_free(nt);
    }
}

/* ---- workers --------------------------------------------------------------------------------- */

static void kick(struct daemon *d)
{
    pthread_mutex_lock(&d->mu);
    d->work_seq++;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

/* The operator watching `vigil serve` hears of a failed run and of an agent it turned dormant
 * (trial F22): the wake log has the same, but nobody reads it while a key is wrong. */
static void log_run_end(const struct vg_wake *w, const struct vg_wake_job *job)
{
    if (w->last_outcome != VG_WAKE_FAILED && w->last_outcome != VG_WAKE_FAILED_FINAL)
        return;
    vg_say("vigil serve: run %.16s of agent %s failed%s: %s\n", job->run_key, job->agent_id,
           w->last_outcome == VG_WAKE_FAILED_FINAL ? " (not retried: waiting does not mend it)"
                                                   : "",
           w->last_error[0] ? w->last_error : "run failed");
    if (w->last_dormant)
        vg_say("vigil serve: agent %s turned dormant after %d consecutive failed runs; fix the "
               "cause, then `vigil agent resume %s`\n",
               job->agent_id, w->cfg.max_failures, job->agent_id);
}

/* A worker's run, as a fiber: it parks while its model call is in flight, so the worker's
 * other runs go on meanwhile. */
static void run_slot(void *arg)
{
    struct slot *sl = arg;
    struct worker *wk = sl->wk;
    struct daemon *d = wk->d;
    vigil_error err = {0};
    vigil_code rc = vg_wake_run_one(&wk->w, d->runner, &sl->job, &d->stop_runs, &err);
    if (rc)
        vg_say("vigil serve: run %s of agent %s: %s\n", sl->job.run_key, sl->job.agent_id,
               err.message);
    else
        log_run_end(&wk->w, &sl->job);
    vg_wake_job_release(&sl->job);
    pthread_mutex_lock(&d->mu);
    sl->busy = 0;
    pthread_mutex_unlock(&d->mu);
    wk->finished++;
}

/* A worker's runs share its runtime, and with it whether commits are durable and the source
 * tag its commits' notifications carry (the running agent, so its own writes never wake it): a
 * run that parks gets back what it had, whatever the others set meanwhile. */
static void worker_save_context(void *user, void *arg)
{
    struct worker *wk = user;
    struct slot *sl = arg;
    sl->durable = vg_store_durable(wk->env->store);
    sl->source = wk->env->notify.source;
    sl->read_batches = vg_store_read_batch_leave(wk->env->store);
}

static void worker_restore_context(void *user, void *arg)
{
    struct worker *wk = user;
    struct slot *sl = arg;
    vigil_error err = {0};
    wk->env->notify.source = sl->source;
    if (vg_store_durable(wk->env->store) != sl->durable &&
        vg_store_durable_commits(wk->env->store, sl->durable, &err) != VIGIL_OK)
        vg_say("vigil serve: could not restore commit durability: %s\n", err.message);
    vg_store_read_batch_rejoin(wk->env->store, sl->read_batches);
}

/* Runs park only between store transactions: the worker's runs share one connection. And
 * never with the scripted model: its cassette is one conversation replayed in order, which
 * runs taking turns would split between them (the runs then go one after another, as before
 * fibers). The runner builds the model before a run's first model call, so it is known by
 * the first place a run could park. */
static int worker_may_park(void *user)
{
    struct worker *wk = user;
    if (!wk->d->o->host->runs_may_interleave(wk->rt))
        return 0;
    return !vg_store_in_tx(wk->env->store);
}

/* Claim queued wakes into free slots and start them; the number started. */
static int claim_into_slots(struct worker *wk)
{
    struct daemon *d = wk->d;
    int started = 0;
    for (int i = 0; i < wk->n_slots; i++) {
        struct slot *sl = &wk->slots[i];
        vigil_error err = {0};
        int got = 0, stop;
        pthread_mutex_lock(&d->mu);
        stop = d->stopping;
        int busy = sl->busy;
        pthread_mutex_unlock(&d->mu);
        if (stop)
            break;
        if (busy)
            continue;
        if (vg_wake_claim(&wk->w, &sl->job, &got, &err)) {
            vg_say("vigil serve: could not claim a wake: %s\n", err.message);
            break;
        }
        if (!got)
            break;
        pthread_mutex_lock(&d->mu);
        sl->busy = 1;
        snprintf(sl->agent, sizeof sl->agent, "%s", sl->job.agent_id);
        sl->epoch = sl->job.epoch;
        sl->renewed_mono = vg_clock_mono_ns(wk->env->clock);
        pthread_mutex_unlock(&d->mu);
        if (vg_fiber_spawn(wk->sched, run_slot, sl, &err) != VIGIL_OK) {
            /* Not started: the claim's lease runs out and recovery re-queues the wake. */
            vg_say("vigil serve: could not start run %s: %s\n", sl->job.run_key, err.message);
            vg_wake_job_release(&sl->job);
            pthread_mutex_lock(&d->mu);
            sl->busy = 0;
            pthread_mutex_unlock(&d->mu);
            break;
        }
        started++;
    }
    return started;
}

static void *worker_main(void *arg)
{
    struct worker *wk = arg;
    struct daemon *d = wk->d;
    uint64_t seen = 0;
    int64_t finished_seen = 0;
    for (;;) {
        int live = vg_fiber_sched_live(wk->sched), slept = 0;
        pthread_mutex_lock(&d->mu);
        /* Idle: sleep until there may be work. */
        while (!live && !d->stopping && d->work_seq == seen) {
            pthread_cond_wait(&d->cv, &d->mu);
            slept = 1;
        }
        if (slept)
            vg_stats_worker_woken();
        int fresh = d->work_seq != seen;
        seen = d->work_seq;
        int stop = d->stopping;
        pthread_mutex_unlock(&d->mu);
        if (stop && !live)
            break;
        /* New work, or a run of ours ended and freed a slot: claim until nothing is runnable
         * or every slot is taken. (The loop thread kicks at each poll_ms tick that finds the
         * queue holding a run, so wakes queued by other processes are seen too.) */
        if (!stop && (fresh || wk->finished != finished_seen)) {
            finished_seen = wk->finished;
            claim_into_slots(wk);
        }
        if (!vg_fiber_sched_live(wk->sched))
            continue;
        /* Move the runs on. While they wait on their models, look for new work now and then:
         * a kick cannot interrupt the I/O wait. */
        vg_fiber_sched_step(wk->sched, 20);
    }
    return NULL;
}

static vigil_code worker_sync(void *user, vigil_error *err)
{
    struct worker *wk = user;
    return vg_store_round_end(wk->env->store, err);
}

static vigil_code worker_sync_wait(void *user, vigil_error *err)
{
    return vg_fiber_batch_join(user, err);
}

/* A worker with several runs at once makes their durable commits durable together: each
 * commits, then waits for one log sync that covers every commit of the round (fiber.h,
 * batches). A store that cannot sync apart (PostgreSQL: the server does it) keeps a sync per
 * durable commit. */
static vigil_code worker_share_syncs(struct worker *wk, int runs, vigil_error *err)
{
    if (runs < 2)
        return VIGIL_OK;
    vigil_error e = {0};
    vigil_code rc = vg_fiber_batch_new(&wk->syncs, worker_sync, wk, err);
    if (rc)
        return rc;
    rc = vg_store_share_syncs(wk->env->store, worker_sync_wait, wk->syncs, &e);
    if (rc == VIGIL_EUNSUPPORTED) {
        vg_fiber_batch_free(wk->syncs);
        wk->syncs = NULL;
        return VIGIL_OK;
    }
    /* And their commits share rounds: one transaction of SQLite's for all of a round's commits
     * (STORE.md, "Folded commits"). The runs park only between transactions (the guard). */
    if (rc == VIGIL_OK)
        rc = vg_store_fold_commits(wk->env->store, 1, &e);
    vg_error_copy(err, &e);
    return rc;
}

/* rt to the embedding program's hook, one call at a time (the program's tools are registered
 * from whichever thread opened the runtime: the daemon's, or a service's). */
static vigil_code runtime_hook(struct daemon *d, vigil_runtime *rt, vigil_error *err)
{
    if (!d->o->on_runtime)
        return VIGIL_OK;
    pthread_mutex_lock(&d->hook_mu);
    vigil_code rc = d->o->on_runtime(d->o->on_runtime_user, rt, err);
    pthread_mutex_unlock(&d->hook_mu);
    return rc;
}

/* A runtime of the daemon's (the loop thread's or a worker's), handed to the embedding
 * program's hook before anything runs on it; *out is set even when the hook fails, so the
 * caller's cleanup closes it. */
static vigil_code runtime_open(struct daemon *d, vigil_runtime **out, struct vg_env **env,
                               vigil_error *err)
{
    vigil_code rc = d->o->host->open(d->o->store_path, out, env, err);
    return rc ? rc : runtime_hook(d, *out, err);
}

vigil_code vg_daemon_on_runtime(const char *store_path, vigil_runtime *rt, vigil_error *err)
{
    struct daemon *d = NULL;
    if (!store_path || !rt)
        return VG_FAIL(err, VIGIL_EINVAL, "the daemon's hook needs a store and a runtime");
    pthread_mutex_lock(&running_mu);
    for (d = running; d && !(d->hook_open && !strcmp(d->o->store_path, store_path));)
        d = d->next_running;
    if (d)
        d->hook_users++;
    pthread_mutex_unlock(&running_mu);
    if (!d)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no daemon of this process serves store \"%s\"",
                       store_path);
    vigil_code rc = runtime_hook(d, rt, err);
    pthread_mutex_lock(&running_mu);
    if (!--d->hook_users)
        pthread_cond_broadcast(&running_cv);
    pthread_mutex_unlock(&running_mu);
    return rc;
}

static vigil_code workers_start(struct daemon *d, vigil_error *err)
{
    int n = d->o->workers > 0 ? d->o->workers : 2;
    int runs = d->o->runs_per_worker > 0 ? d->o->runs_per_worker : 16;
    if (!(d->workers = vg_calloc((size_t)n, sizeof *d->workers)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting workers");
    d->n_workers = n;
    for (int i = 0; i < n; i++) {
        struct worker *wk = &d->workers[i];
        vigil_code rc;
        wk->d = d;
        if ((rc = runtime_open(d, &wk->rt, &wk->env, err)) ||
            (rc = vg_wake_init(&wk->w, wk->env, &d->o->cfg, err)) ||
            (rc = vg_fiber_sched_new(&wk->sched, err)))
            return rc;
        wk->w.cfg.heartbeat_ms = d->w.cfg.heartbeat_ms; /* the loop thread beats for its runs */
        wk->w.kill = d->o->host->kill;
        if (!(wk->slots = vg_calloc((size_t)runs, sizeof *wk->slots)))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting workers");
        wk->n_slots = runs;
        for (int k = 0; k < runs; k++)
            wk->slots[k].wk = wk;
        vg_fiber_sched_set_guard(wk->sched, worker_may_park, wk);
        vg_fiber_sched_set_context(wk->sched, worker_save_context, worker_restore_context, wk);
        if ((rc = worker_share_syncs(wk, runs, err)))
            return rc;
        snprintf(wk->w.holder, sizeof wk->w.holder, "%s:w%d", d->holder, i);
        wk->env->notify.fn = worker_notify;
        wk->env->notify.fn_user = wk;
        if (pthread_create(&wk->thread, NULL, worker_main, wk) != 0)
            return VG_FAIL(err, VIGIL_ERROR, "could not start worker thread %d", i);
        wk->started = 1;
    }
    return VIGIL_OK;
}

static void workers_stop(struct daemon *d)
{
    pthread_mutex_lock(&d->mu);
    d->stopping = 1;
    /* A run a worker claimed while shutdown began (after the busy check) must not keep the
     * join waiting for a whole run: it stops at its next model call and is re-queued. */
    d->stop_runs = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    for (int i = 0; i < d->n_workers; i++) {
        struct worker *wk = &d->workers[i];
        if (wk->started)
            pthread_join(wk->thread, NULL);
        vg_fiber_sched_free(wk->sched);
        if (wk->syncs && wk->rt)
            (void)vg_store_share_syncs(wk->env->store, NULL, NULL, NULL);
        vg_fiber_batch_free(wk->syncs);
        vg_free(wk->slots);
        vg_wake_release(&wk->w);
        if (wk->rt)
            (void)vg_store_control(wk->env->store, VG_STORE_CTRL_CHECKPOINT, NULL, NULL);
        vigil_runtime_close(wk->rt);
    }
    vg_free(d->workers);
    d->workers = NULL;
    d->n_workers = 0;
}

static int workers_busy(struct daemon *d)
{
    int busy = 0;
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->n_workers; i++)
        for (int k = 0; k < d->workers[i].n_slots; k++)
            busy += d->workers[i].slots[k].busy;
    pthread_mutex_unlock(&d->mu);
    return busy;
}

/* Renew the lease of every running job at each heartbeat (a thirtieth of the lease): another
 * host tells a daemon that stopped beating from a live one long before the lease expires. */
static void renew_leases(struct daemon *d)
{
    int64_t now = vg_clock_mono_ns(d->env->clock);
    int64_t every = d->w.cfg.heartbeat_ms * 1000000;
    for (int i = 0; i < d->n_workers; i++) {
        struct worker *wk = &d->workers[i];
        for (int k = 0; k < wk->n_slots; k++) {
            struct slot *sl = &wk->slots[k];
            char agent[37];
            int64_t epoch;
            pthread_mutex_lock(&d->mu);
            int due = sl->busy && now - sl->renewed_mono >= every;
            memcpy(agent, sl->agent, sizeof agent);
            epoch = sl->epoch;
            if (due)
                sl->renewed_mono = now;
            pthread_mutex_unlock(&d->mu);
            vigil_error err = {0};
            if (due && vg_wake_lease_renew(d->env, agent, epoch, d->o->cfg.lease_ms, &err))
                vg_say("vigil serve: could not renew the lease of agent %s: %s\n", agent,
                       err.message);
        }
    }
}

/* ---- shared stores: the listener, recovery of other daemons' runs, the daemon record ------- */

static void *listener_main(void *arg)
{
    struct daemon *d = arg;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        int stop = d->listener_stop;
        pthread_mutex_unlock(&d->mu);
        if (stop)
            break;
        /* A short wait, so a stop is seen soon; the signal itself ends it at once. */
        struct vg_store_await a = {.timeout_ms = 250};
        vigil_error err = {0};
        if (vg_store_control(d->listen_store, VG_STORE_CTRL_AWAIT_WORK, &a, &err)) {
            /* The connection could not be made again for a while: the poll still finds work. */
            vg_say("vigil serve: work signal: %s\n", err.message);
            vg_clock_sleep_ms(vg_clock_real(), 1000);
            continue;
        }
        if (a.signalled) {
            pthread_mutex_lock(&d->mu);
            d->signalled = 1;
            pthread_mutex_unlock(&d->mu);
            uv_async_send(&d->async);
        }
    }
    return NULL;
}

static vigil_code listener_start(struct daemon *d, vigil_error *err)
{
    struct vg_store_options so = {0};
    vigil_code rc = vg_store_open(d->o->store_path, &so, &d->listen_store, err);
    if (rc)
        return rc;
    if (pthread_create(&d->listener, NULL, listener_main, d) != 0)
        return VG_FAIL(err, VIGIL_ERROR, "could not start the work signal's listener thread");
    d->listener_on = 1;
    return VIGIL_OK;
}

static void listener_end(struct daemon *d)
{
    pthread_mutex_lock(&d->mu);
    d->listener_stop = 1;
    pthread_mutex_unlock(&d->mu);
    if (d->listener_on)
        pthread_join(d->listener, NULL);
    d->listener_on = 0;
    vg_store_close(d->listen_store);
    d->listen_store = NULL;
}

/* This daemon's `daemon` record: alive as of its last beat (vg_daemon_running reads it; an
 * operator lists them to watch the fleet, docs/scale-out.md). */
static void daemon_beat(struct daemon *d, int remove)
{
    struct vg_env *env = d->env;
    struct vg_proc_id me;
    vigil_error err = {0};
    int64_t rev = 0, now = vg_env_now(env);
    json_t *old = NULL;
    vigil_code rc = vg_env_get_json(env, "daemon", d->holder, &old, &rev, &err);
    json_decref(old);
    if (remove) {
        if (rc == VIGIL_OK)
            (void)vg_store_remove(env->store, "daemon", d->holder, NULL);
        return;
    }
    vg_proc_self(&me);
    json_t *b =
        json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:i}", "holder", d->holder, "host", me.host,
                  "pid", (json_int_t)me.pid, "pid_start", me.start, "started_ms",
                  (json_int_t)d->started_ms, "beat_ms", (json_int_t)now, "runs", workers_busy(d));
    if (!b)
        return;
    if (rc == VIGIL_OK)
        rc = vg_env_update_json(env, "daemon", d->holder, "", me.host, "", now, b, rev, &err);
    else if (rc == VIGIL_ENOTFOUND)
        rc = vg_env_put_json(env, "daemon", d->holder, "", me.host, "", now, b, 0, &err);
    if (rc)
        vg_say("vigil serve: could not record this daemon's beat: %s\n", err.message);
    json_decref(b);
}

/* On a shared store, now and then: re-queue the runs whose holders are gone (killed daemons
 * on this host, other hosts' once their beats stop), and beat. */
static void shared_tick(struct daemon *d, int64_t mono)
{
    vigil_error err = {0};
    int n = 0;
    if (!d->shared)
        return;
    /* A killed daemon's runs on this host are free at once (its pid is gone): peers take
     * them over within five polls (at most a second). */
    if (mono - d->last_recover_mono >= VG_MIN(VG_MAX(d->o->poll_ms * 5, 100), 1000)) {
        d->last_recover_mono = mono;
        if (vg_wake_recover(&d->w, NULL, &n, &err) ||
            vg_wake_untake_stale(d->env, vg_env_now(d->env) - 60000, NULL, &err))
            vg_say("vigil serve: recovery: %s\n", err.message);
        else if (n)
            vg_say("vigil serve: re-queued %d run(s) of gone holders under their run "
                   "keys\n",
                   n);
    }
    if (mono - d->last_beat_mono >= d->w.cfg.heartbeat_ms) {
        d->last_beat_mono = mono;
        daemon_beat(d, 0);
        /* A killed daemon's record: shown stale by `vigil status` for a day, then removed. */
        if (vg_daemon_records_prune(d->env, vg_env_now(d->env) - VG_DAEMON_RECORD_KEEP_MS, &n,
                                    &err))
            vg_say("vigil serve: could not remove old daemon records: %s\n", err.message);
        else if (n)
            vg_say("vigil serve: removed %d record(s) of daemons silent for a day\n", n);
    }
}

/* ---- loop ------------------------------------------------------------------------------------ */

static void arm_deadline(struct daemon *d);

static void close_cb(uv_handle_t *h)
{
    VG_UNUSED(h);
}

static void free_handle(uv_handle_t *h)
{
    vg_free(h);
}

/* Whether a worker may find a wake to claim: the loop thread's one read, where every poll
 * tick woke each idle worker onto d->mu to read the same and find nothing (docs/internals/
 * PERF.md, session 37). A failed read says yes: the workers' own claim reports it. */
static int queue_holds_runs(struct daemon *d)
{
    struct vg_query peek = {.kind = "wake_run", .k1 = "queued", .limit = 1};
    int64_t n = 0;
    vigil_error err = {0};
    return vg_store_count(d->env->store, &peek, &n, &err) != VIGIL_OK || n > 0;
}

/* Everything the loop does on a tick: notifications in, timers due, work handed out. */
static void tick(struct daemon *d)
{
    struct vg_env *env = d->env;
    vigil_error err = {0};
    int n = 0, fired = 0, flushed = 0;
    int64_t wall = vg_env_now(env), mono = vg_clock_mono_ns(env->clock) / 1000000;
    if (d->stopping)
        return;
    vg_stats_daemon_tick();
    /* A wall clock that moved differently from the monotonic clock jumped: recompute timers
     * from their intent. */
    int64_t drift = (wall - d->last_wall) - (mono - d->last_mono);
    if (drift > 2000 || drift < -2000) {
        if (vg_timer_recompute_all(env, &n, &err))
            vg_say("vigil serve: %s\n", err.message);
        else
            vg_say("vigil serve: wall clock jumped %+llds: %d timer(s) recomputed\n",
                   (long long)(drift / 1000), n);
    }
    d->last_wall = wall;
    d->last_mono = mono;
    inbox_drain(d);
    if (vg_wake_intake_durable(&d->w, 1000, &n, &err))
        vg_say("vigil serve: %s\n", err.message);
    if (vg_wake_intake_flush(&d->w, 0, &flushed, &err))
        vg_say("vigil serve: %s\n", err.message);
    d->timers_failing = vg_timer_fire_due(&d->w, 10000, &fired, &err) != VIGIL_OK;
    if (d->timers_failing)
        vg_say("vigil serve: %s\n", err.message);
    renew_leases(d);
    shared_tick(d, mono);
    if (mono - d->last_prune_mono >= 60000) { /* once a minute: forget week-old batches */
        d->last_prune_mono = mono;
        if (vg_wake_prune_batches(env, wall - 7 * 24 * 3600000LL, 1000, &n, &err))
            vg_say("vigil serve: %s\n", err.message);
    }
    if (d->o->host->sweep && mono - d->last_sweep_mono >= 1000) { /* expired approvals */
        d->last_sweep_mono = mono;
        if (d->o->host->sweep(env, &d->w, &err))
            vg_say("vigil serve: %s\n", err.message);
    }
    /* Queued wakes may come from other processes too (and from this tick's flushes, timers
     * and recovery): the workers look when the queue holds one. */
    if (queue_holds_runs(d))
        kick(d);
    arm_deadline(d);
}

static void on_poll(uv_timer_t *t)
{
    tick(t->data);
}

static void on_deadline(uv_timer_t *t)
{
    tick(t->data);
}

static void on_async(uv_async_t *a)
{
    struct daemon *d = a->data;
    if (stop_was_asked(d)) {
        begin_stop(d, "stop requested");
        return;
    }
    pthread_mutex_lock(&d->mu);
    int signalled = d->signalled;
    d->signalled = 0;
    pthread_mutex_unlock(&d->mu);
    if (signalled) { /* another process queued work: look now, as a poll tick would */
        tick(d);
        return;
    }
    inbox_drain(d);
    arm_deadline(d);
}

static void on_control(uv_stream_t *server, int status)
{
    struct daemon *d = server->data;
    uv_pipe_t *client = vg_calloc(1, sizeof *client);
    if (status == 0 && client && uv_pipe_init(&d->loop, client, 0) == 0) {
        if (uv_accept(server, (uv_stream_t *)client) == 0) {
            /* nothing to read: the connection itself is the request */
        }
        uv_close((uv_handle_t *)client, free_handle);
    } else {
        vg_free(client);
    }
    tick(d);
}

/* Before the loop sleeps: flush the debounce windows that have closed (Redis beforeSleep). */
static void on_prepare(uv_prepare_t *p)
{
    struct daemon *d = p->data;
    vigil_error err = {0};
    int flushed = 0;
    if (d->stopping)
        return;
    if (d->w.pending && vg_wake_intake_deadline(&d->w) <= vg_env_now(d->env)) {
        if (vg_wake_intake_flush(&d->w, 0, &flushed, &err))
            vg_say("vigil serve: %s\n", err.message);
        if (flushed)
            kick(d);
    }
}

/* Arm the one-shot timer for the nearest debounce window or timer deadline. */
static void arm_deadline(struct daemon *d)
{
    vigil_error err = {0};
    int64_t now = vg_env_now(d->env), next = -1, t = -1;
    if (d->stopping)
        return;
    next = vg_wake_intake_deadline(&d->w);
    if (!d->timers_failing && vg_timer_next_deadline(d->env, &t, &err) == VIGIL_OK && t >= 0 &&
        (next < 0 || t < next))
        next = t;
    if (next < 0 || next - now >= d->o->poll_ms)
        return; /* the poll tick comes first anyway */
    uv_timer_start(&d->deadline, on_deadline, (uint64_t)VG_MAX(next - now, 0), 0);
}

static void walk_kill_children(uv_handle_t *h, void *arg)
{
    VG_UNUSED(arg);
    if (h->type == UV_PROCESS && !uv_is_closing(h))
        uv_process_kill((uv_process_t *)h, SIGTERM);
}

static void walk_close(uv_handle_t *h, void *arg)
{
    VG_UNUSED(arg);
    if (!uv_is_closing(h))
        uv_close(h, close_cb);
}

/* Shutdown step 2: once no run is busy (or the grace period forced them to stop), finish. */
static void on_reap(uv_timer_t *t)
{
    struct daemon *d = t->data;
    if (workers_busy(d))
        return;
    uv_timer_stop(t);
    running_async(d, 0);
    uv_walk(&d->loop, walk_kill_children, NULL);
    uv_walk(&d->loop, walk_close, NULL);
}

static void on_grace(uv_timer_t *t)
{
    struct daemon *d = t->data;
    if (workers_busy(d))
        vg_say("vigil serve: grace period over: interrupting running wakes\n");
    d->stop_runs = 1;
}

/* Shutdown step 1 (a signal, or vg_daemon_stop): take no more wakes, make what is pending
 * durable, and let the running ones finish within the grace period. */
static void begin_stop(struct daemon *d, const char *why)
{
    vigil_error err = {0};
    int n = 0;
    if (d->stopping)
        return;
    vg_say("vigil serve: %s: stopping (grace %lld ms)\n", why, (long long)d->o->grace_ms);
    /* Notifications still in a debounce window become durable wakes before we go. */
    inbox_drain(d);
    if (vg_wake_intake_flush(&d->w, 1, &n, &err))
        vg_say("vigil serve: %s\n", err.message);
    pthread_mutex_lock(&d->mu);
    d->stopping = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    uv_timer_stop(&d->poll);
    uv_timer_stop(&d->deadline);
    listener_end(d);
    uv_timer_start(&d->grace, on_grace, (uint64_t)VG_MAX(d->o->grace_ms, 0), 0);
    uv_timer_start(&d->reap, on_reap, 0, 20);
}

static void on_signal(uv_signal_t *s, int signum)
{
    begin_stop(s->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

/* ---- stop ------------------------------------------------------------------------------------ */

vigil_code vg_daemon_stop(const char *store_path, vigil_error *err)
{
    int found = 0;
    if (!store_path || !*store_path)
        return VG_FAIL(err, VIGIL_EINVAL, "stopping a daemon needs its store");
    pthread_mutex_lock(&running_mu);
    for (struct daemon *d = running; d; d = d->next_running)
        if (strcmp(d->o->store_path, store_path) == 0) {
            found = 1;
            d->stop_asked = 1;
            if (d->async_on)
                uv_async_send(&d->async);
        }
    pthread_mutex_unlock(&running_mu);
    if (!found)
        return VG_FAIL(err, VIGIL_ENOTFOUND,
                       "no daemon of this process serves store \"%s\" (a daemon of another "
                       "process stops on SIGTERM)",
                       store_path);
    return VIGIL_OK;
}

/* ---- run ------------------------------------------------------------------------------------- */

/* The service's poke: through the control socket, as another process would (thread-safe). */
static void service_poke(void *user)
{
    struct daemon *d = user;
    vg_daemon_poke(d->o->store_path);
}

vigil_code vg_daemon_run(const struct vg_daemon_options *o, vigil_error *err)
{
    struct daemon *d = NULL;
    int lock_fd = -1, loop_ok = 0, n = 0, service_on = 0;
    vigil_code rc;
    if (!o || !o->host)
        return VG_FAIL(err, VIGIL_EINVAL, "the daemon needs its options and its runtime host");
    if (!(d = vg_calloc(1, sizeof *d)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory starting the daemon");
    d->o = o;
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->hook_mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    running_add(d);
    d->shared = store_shared(o->store_path);
    /* The runner named first: a bad name is the caller's mistake (EINVAL), also while another
     * daemon holds the lock. */
    if ((rc = vg_wake_runner_new(o->runner, o->host->loop_runner, &d->runner, err)) ||
        (!d->shared && (rc = lock_take(o->store_path, &lock_fd, err))))
        goto out;
    if ((rc = runtime_open(d, &d->rt, &d->env, err)) ||
        (rc = vg_wake_init(&d->w, d->env, &o->cfg, err)) ||
        (d->runner->methods->check && (rc = d->runner->methods->check(d->runner, d->env, err))))
        goto out;
    d->w.kill = o->host->kill;
    if (d->w.cfg.heartbeat_ms <= 0)
        d->w.cfg.heartbeat_ms = vg_wake_heartbeat_ms(d->w.cfg.lease_ms);
    snprintf(d->holder, sizeof d->holder, "daemon:%ld:%s", (long)getpid(), d->w.instance);
    snprintf(d->w.holder, sizeof d->w.holder, "%s", d->holder);
    /* Recovery: we hold the store's daemon lock, so runs held by any other daemon are dead.
     * A shared store's other daemons may be alive: only holders gone (lease_held) count. */
    if ((rc = vg_wake_recover(&d->w, d->shared ? NULL : "daemon:", &n, err)))
        goto out;
    d->started_ms = vg_env_now(d->env);
    if (n)
        vg_say("vigil serve: re-queued %d interrupted run(s) under their run keys\n", n);
    if (uv_loop_init(&d->loop) != 0) {
        rc = VG_FAIL(err, VIGIL_ERROR, "could not start the event loop");
        goto out;
    }
    loop_ok = 1;
    uv_signal_init(&d->loop, &d->sigint);
    uv_signal_init(&d->loop, &d->sigterm);
    uv_timer_init(&d->loop, &d->poll);
    uv_timer_init(&d->loop, &d->deadline);
    uv_timer_init(&d->loop, &d->grace);
    uv_timer_init(&d->loop, &d->reap);
    uv_prepare_init(&d->loop, &d->prepare);
    uv_async_init(&d->loop, &d->async, on_async);
    running_async(d, 1);
    d->sigint.data = d->sigterm.data = d->poll.data = d->deadline.data = d;
    d->grace.data = d->reap.data = d->prepare.data = d->async.data = d;
    uv_signal_start(&d->sigint, on_signal, SIGINT);
    uv_signal_start(&d->sigterm, on_signal, SIGTERM);
    uv_prepare_start(&d->prepare, on_prepare);
    /* The control socket makes `vigil wake` and `vigil notify` event-driven; without it (a
     * path too long for a socket) the poll tick finds their work. We hold the daemon lock, so
     * a socket file left behind is stale. */
    if (!d->shared && sock_path(o->store_path, d->control_path, sizeof d->control_path)) {
        unlink(d->control_path);
        if (uv_pipe_init(&d->loop, &d->control, 0) == 0) {
            d->control.data = d;
            /* bind makes the socket 0777 less the umask: 0600, like the store beside it. */
            if (uv_pipe_bind(&d->control, d->control_path) == 0 &&
                chmod(d->control_path, 0600) == 0 &&
                uv_listen((uv_stream_t *)&d->control, 16, on_control) == 0)
                d->control_on = 1;
            else
                vg_say("vigil serve: no control socket \"%s\": polling only\n", d->control_path);
        }
    }
    d->last_wall = vg_env_now(d->env);
    d->last_mono = vg_clock_mono_ns(d->env->clock) / 1000000;
    if ((rc = workers_start(d, err)) || (d->shared && (rc = listener_start(d, err))))
        goto out;
    if (d->shared)
        daemon_beat(d, 0);
    running_hook_open(d); /* the service's runtimes get the program's hook too */
    if (o->service && (rc = o->service->start(o->service->user, service_poke, d, err)))
        goto out;
    service_on = o->service != NULL;
    uv_timer_start(&d->poll, on_poll, 0, (uint64_t)(o->poll_ms > 0 ? o->poll_ms : 200));
    vg_say("vigil serve: serving \"%s\" with %d worker(s) of up to %d run(s) each, runner %s "
           "(pid %ld)\n",
           o->store_path, d->n_workers, d->n_workers ? d->workers[0].n_slots : 0,
           d->runner->methods->name, (long)getpid());
    uv_run(&d->loop, UV_RUN_DEFAULT);
    vg_say("vigil serve: stopped\n");
out:
    if (service_on)
        o->service->stop(o->service->user);
    listener_end(d);
    workers_stop(d);
    if (d->shared && d->rt)
        daemon_beat(d, 1);
    running_remove(d);
    if (loop_ok) {
        uv_walk(&d->loop, walk_close, NULL);
        uv_run(&d->loop, UV_RUN_DEFAULT);
        if (uv_loop_close(&d->loop) == UV_EBUSY)
            vg_say("vigil serve: event loop closed with handles open\n");
    }
    while (d->inbox) {
        struct note *nt = d->inbox;
        d->inbox = nt->next;
        say_in_doubt(nt); /* a call the stop cut short */
        for (size_t i = 0; i < nt->n; i++)
            vg_free(nt->tokens[i]);
        vg_free(nt->tokens);
        vg_free(nt->source);
        vg_free(nt);
    }
    if (d->control_on)
        unlink(d->control_path);
    vg_wake_release(&d->w);
    vg_wake_runner_free(d->runner);
    if (d->rt)
        (void)vg_store_control(d->env->store, VG_STORE_CTRL_CHECKPOINT, NULL, NULL);
    vigil_runtime_close(d->rt);
    if (lock_fd >= 0)
        close(lock_fd); /* releases the flock */
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->hook_mu);
    pthread_mutex_destroy(&d->mu);
    vg_free(d);
    return rc;
}
