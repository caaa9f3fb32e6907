/*
 * bench_loop.c: a DIAGNOSTIC of the agent loop alone, not a figure of the user's path. It drives
 * vg_loop_run directly with the echo executor, which skips the tool gate (no manifest, schema,
 * budget, operation log or tool-call records), and with no memory assembly or compaction; a
 * user goes through vigil_chat (or `vigil serve`) with a registered tool, which costs several
 * times more per step. The user's path is measured by bench/bench_peer.c, side by side with
 * other runtimes (docs/internals/PERF.md, "The user's path").
 *
 * What it measures: the loop's own overhead per agent step. A loopback OpenAI-compatible model
 * server (a separate process, so its CPU is not counted) answers every request at once: with a
 * tool call until the conversation holds N tool results, then with a final answer. Every message
 * and journal record is durably committed, as in production. Prints figures; asserts nothing.
 *
 *   bench_loop [STEPS] [AGENTS] [AGENT_STEPS] [DIR]
 *     STEPS: tool steps of the single agent (default 20)
 *     AGENTS, AGENT_STEPS: concurrent agents and their tool steps (default 100 and 5)
 *
 * A "step" is one model call plus the tool call it asks for, with everything it writes.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "helpers/echo_executor.h"
#include "loop/loop.h"
#include "model/model.h"
#include "helpers/model_server.h"
#include "os/fiber.h"
#include "store/store.h"
#include "bench_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the runs ------------------------------------------------------------------------------ */

/* The process's resident memory now, split into anonymous (heap, stacks, SQLite caches) and
 * file-backed (shared libraries, the memory-mapped store) pages, in MB. */
static void print_rss(const char *when)
{
    char line[256];
    double anon = 0, file = 0, shmem = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        long kb;
        if (sscanf(line, "RssAnon: %ld", &kb) == 1)
            anon = kb / 1024.0;
        else if (sscanf(line, "RssFile: %ld", &kb) == 1)
            file = kb / 1024.0;
        else if (sscanf(line, "RssShmem: %ld", &kb) == 1)
            shmem = kb / 1024.0;
    }
    fclose(f);
    printf("RSS %s: %.1f MB (anonymous %.1f, files %.1f, shared memory %.1f)\n", when,
           anon + file + shmem, anon, file, shmem);
    /* VIGIL_BENCH_SMAPS=DIR keeps /proc/self/smaps at each point, for a breakdown by mapping. */
    const char *dir = getenv("VIGIL_BENCH_SMAPS");
    if (dir) {
        char path[4200], buf[8192];
        snprintf(path, sizeof path, "%s/smaps-%s.txt", dir, when);
        for (char *c = path + strlen(dir) + 1; *c; c++)
            if (*c == ' ')
                *c = '-';
        FILE *in = fopen("/proc/self/smaps", "r"), *out = fopen(path, "w");
        size_t n;
        while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
            fwrite(buf, 1, n, out);
        if (in)
            fclose(in);
        if (out)
            fclose(out);
    }
}

struct agent_job {
    const char *store;
    vigil_runtime *shared; /* fibers: the one runtime they share; NULL: open one's own */
    char url[128];
    int index;
    int steps_done;
    double run_wall, run_cpu, run_sys; /* the loop's run alone, without opening and closing */
    int durable;                       /* fibers: the run's share of the runtime while parked */
    const char *source;
    int read_batches;
    int failed;
    char error[256];
    /* create_only: create the agent into agent_id and stop; a later run_agent with agent_id
     * set runs it without creating (the concurrent agents are created first, apart). */
    int create_only;
    char agent_id[37];
};

static void run_agent(struct agent_job *j)
{
    vigil_error err = {0};
    vigil_runtime *rt = NULL;
    struct vg_model *m = NULL;
    char id[37], thread[128], key[64];
    vigil_runtime_options o = {
        .size = sizeof o, .store_uri = j->store, .create_if_missing = 1, .busy_timeout_ms = 60000};
    struct vg_model_options mo = {
        .provider = "openai", .base_url = j->url, .model = "bench", .api_key = "none"};
    char name[32]; /* agent names are unique in a store: one for each job */
    snprintf(name, sizeof name, "bench%d", j->index);
    vigil_agent_spec spec = {.name = name};
    if (j->shared)
        rt = j->shared;
    else if (vigil_runtime_open(&o, &rt, &err))
        goto fail;
    if (j->agent_id[0]) {
        memcpy(id, j->agent_id, sizeof id);
    } else if (vigil_agent_create(rt, &spec, id, &err)) {
        goto fail;
    } else if (j->create_only) {
        memcpy(j->agent_id, id, sizeof id);
        if (!j->shared)
            vigil_runtime_close(rt);
        return;
    }
    if (vg_model_new(&mo, &m, &err))
        goto fail;
    snprintf(thread, sizeof thread, "%s:run:bench", id);
    snprintf(key, sizeof key, "bench-%d", j->index);
    struct vg_loop_input in = {.agent_id = id,
                               .thread_id = thread,
                               .run_key = key,
                               .wake_reason = "manual",
                               .input = "go",
                               .model = m,
                               .executor = vg_loop_echo_executor()};
    in.limits.max_steps = 1000;
    in.limits.max_tool_rounds = 1000;
    in.limits.doom_warn = 1000; /* every call differs anyway */
    in.limits.doom_stop = 1000;
    struct vg_loop_result r;
    double w0 = bench_wall_s(), c0 = bench_cpu_s(), s0 = bench_sys_s();
    if (vg_loop_run(vg_runtime_env(rt), &in, &r, &err)) {
        vg_loop_result_release(&r);
        goto fail;
    }
    j->run_wall = bench_wall_s() - w0;
    j->run_cpu = bench_cpu_s() - c0;
    j->run_sys = bench_sys_s() - s0;
    j->steps_done = r.steps;
    vg_loop_result_release(&r);
    vg_model_free(m);
    if (!j->shared)
        vigil_runtime_close(rt);
    return;
fail:
    j->failed = 1;
    snprintf(j->error, sizeof j->error, "%s", err.message);
    vg_model_free(m);
    if (!j->shared)
        vigil_runtime_close(rt);
}

static void agent_fiber(void *arg)
{
    run_agent(arg);
}

/* Fibers park only between store transactions, and each keeps its own commit durability on
 * the shared connection (as the daemon's workers do, src/wake/daemon.c). */
static int store_idle(void *user)
{
    return !vg_store_in_tx(user);
}

static void save_context(void *user, void *arg)
{
    struct vg_env *env = user;
    struct agent_job *j = arg;
    j->durable = vg_store_durable(env->store);
    j->source = env->notify.source;
    j->read_batches = vg_store_read_batch_leave(env->store);
}

static void restore_context(void *user, void *arg)
{
    struct vg_env *env = user;
    struct agent_job *j = arg;
    env->notify.source = j->source;
    if (vg_store_durable(env->store) != j->durable)
        (void)vg_store_durable_commits(env->store, j->durable, NULL);
    vg_store_read_batch_rejoin(env->store, j->read_batches);
}

/* The fibers' commits share rounds and log syncs, as in vigil serve's workers. */
static unsigned long long rounds_ended; /* the fibers run on one thread */
static vigil_code store_sync(void *user, vigil_error *err)
{
    rounds_ended++;
    return vg_store_round_end(user, err);
}

static vigil_code store_sync_wait(void *user, vigil_error *err)
{
    return vg_fiber_batch_join(user, err);
}

static void *agent_thread(void *arg)
{
    run_agent(arg);
    return NULL;
}

/* Run `agents` agents of `agent_steps` tool steps at once, as fibers or as threads; prints the
 * figures and returns how many failed. */
static int concurrent(const char *store, int port, int agents, int agent_steps, int fibers)
{
    struct agent_job *jobs = calloc((size_t)agents, sizeof *jobs);
    pthread_t *th = calloc((size_t)agents, sizeof *th);
    char *started = calloc((size_t)agents, 1); /* this round's threads, to join */
    vigil_runtime *rt = NULL;
    struct vg_fiber_sched *sched = NULL;
    struct vg_fiber_batch *syncs = NULL;
    vigil_error err = {0};
    if (!jobs || !th || !started) {
        fprintf(stderr, "out of memory\n");
        free(jobs);
        free(th);
        free(started);
        return agents;
    }
    if (fibers) {
        vigil_runtime_options o = {.size = sizeof o, .store_uri = store, .busy_timeout_ms = 60000};
        struct vg_store *st = NULL;
        if (vigil_runtime_open(&o, &rt, &err) || vg_fiber_sched_new(&sched, &err) ||
            vg_fiber_batch_new(&syncs, store_sync, st = vg_runtime_env(rt)->store, &err) ||
            vg_store_share_syncs(st, store_sync_wait, syncs, &err) ||
            (!getenv("VG_NO_FOLD") && vg_store_fold_commits(st, 1, &err))) {
            fprintf(stderr, "cannot start the fibers: %s\n", err.message);
            vg_fiber_batch_free(syncs);
            vg_fiber_sched_free(sched);
            vigil_runtime_close(rt);
            free(jobs);
            free(th);
            free(started);
            return agents;
        }
        vg_fiber_sched_set_guard(sched, store_idle, vg_runtime_env(rt)->store);
        vg_fiber_sched_set_context(sched, save_context, restore_context, vg_runtime_env(rt));
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    /* Two rounds: the agents are created (all at once, the same way), then run. A step's
     * figures are the runs' (each a run start, its steps and its close); the creation, once in
     * an agent's life, is printed apart and then with them. */
    double times[2][3];
    for (int round = 0; round < 2; round++) {
        double w0 = bench_wall_s(), c0 = bench_cpu_s(), s0 = bench_sys_s();
        for (int i = 0; i < agents; i++) {
            jobs[i].store = store;
            jobs[i].shared = rt;
            jobs[i].index = i + 1 + (fibers ? 0 : agents);
            jobs[i].create_only = round == 0;
            snprintf(jobs[i].url, sizeof jobs[i].url, "http://127.0.0.1:%d/multi/v1", port);
            started[i] = 0;
            if (jobs[i].failed)
                continue; /* its creation failed: nothing to run */
            if (fibers ? vg_fiber_spawn(sched, agent_fiber, &jobs[i], &err) != VIGIL_OK
                       : pthread_create(&th[i], &attr, agent_thread, &jobs[i]) != 0) {
                jobs[i].failed = 1;
                snprintf(jobs[i].error, sizeof jobs[i].error, "could not start");
            } else {
                started[i] = 1;
            }
        }
        if (fibers)
            vg_fiber_sched_run(sched);
        for (int i = 0; !fibers && i < agents; i++)
            if (started[i])
                pthread_join(th[i], NULL);
        times[round][0] = bench_wall_s() - w0;
        times[round][1] = bench_cpu_s() - c0;
        times[round][2] = bench_sys_s() - s0;
    }
    int total = 0, failed = 0;
    for (int i = 0; i < agents; i++) {
        total += jobs[i].steps_done;
        if (jobs[i].failed && failed++ == 0)
            fprintf(stderr, "agent %d failed: %s\n", i, jobs[i].error);
    }
    double per = 1e3 / (total ? total : 1), w = times[1][0], c = times[1][1], sy = times[1][2];
    printf("%d agents concurrently as %s, %d tool steps each: %d model calls in %.2f s wall; "
           "%.3f ms wall/step, %.3f ms cpu/step (%.3f system); %d failed\n",
           agents, fibers ? "fibers of one thread" : "threads", agent_steps, total, w, w * per,
           c * per, sy * per, failed);
    printf("  creating the %d agents first: %.3f s wall, %.3f ms cpu an agent; with it: "
           "%.3f ms wall/step, %.3f ms cpu/step\n",
           agents, times[0][0], times[0][1] * 1e3 / (agents ? agents : 1), (w + times[0][0]) * per,
           (c + times[0][1]) * per);
    print_rss(fibers ? "after the fibers" : "after the threads");
    if (syncs)
        printf("  %llu log syncs for the fibers' durable commits\n", rounds_ended);
    vg_fiber_sched_free(sched);
    if (syncs)
        (void)vg_store_share_syncs(vg_runtime_env(rt)->store, NULL, NULL, NULL);
    vg_fiber_batch_free(syncs);
    vigil_runtime_close(rt);
    pthread_attr_destroy(&attr);
    free(jobs);
    free(th);
    free(started);
    return failed;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 20;
    int agents = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 100;
    int agent_steps = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 5;
    const char *dir = argc > 4 ? argv[4] : "/tmp";
    /* "fibers" or "threads" runs the concurrent agents only one way (for profilers). */
    const char *only = argc > 5 ? argv[5] : NULL;
    char store[4096];
    int port;
    snprintf(store, sizeof store, "%s/bench_loop.db", dir);
    bench_remove_store(store);
    pid_t server = vg_instant_model_start(steps, agent_steps, -1, &port);
    printf("vigil bench_loop: loopback OpenAI-compatible server answering at once, store %s\n",
           store);

    print_rss("at start");
    /* Warm up once (libcurl, SQLite schema), then measure. */
    struct agent_job warm = {.store = store, .index = -1};
    snprintf(warm.url, sizeof warm.url, "http://127.0.0.1:%d/v1", port);
    run_agent(&warm);

    struct agent_job one = {.store = store, .index = 0};
    snprintf(one.url, sizeof one.url, "http://127.0.0.1:%d/v1", port);
    double w0 = bench_wall_s(), c0 = bench_cpu_s();
    run_agent(&one);
    double w = bench_wall_s() - w0, c = bench_cpu_s() - c0;
    if (one.failed) {
        fprintf(stderr, "single agent failed: %s\n", one.error);
        kill(server, SIGKILL);
        return 1;
    }
    printf("1 agent, %d tool steps (%d model calls): %.3f ms wall/step, %.3f ms cpu/step "
           "(%.3f system)\n",
           steps, one.steps_done, one.run_wall * 1e3 / one.steps_done,
           one.run_cpu * 1e3 / one.steps_done, one.run_sys * 1e3 / one.steps_done);
    printf("  with opening the runtime, creating the agent and closing (once per process): "
           "%.3f ms wall/step, %.3f ms cpu/step\n",
           w * 1e3 / one.steps_done, c * 1e3 / one.steps_done);

    print_rss("after the single agent");
    /* The concurrent agents twice: first as vigil serve runs them, fibers of one thread sharing
     * one runtime and store connection; then with a thread and a runtime each. The fibers go
     * first so the process's peak memory after them is theirs alone. */
    int failed = 0;
    struct rusage ru;
    if (!only || !strcmp(only, "fibers")) {
        failed += concurrent(store, port, agents, agent_steps, 1);
        getrusage(RUSAGE_SELF, &ru);
        printf("peak RSS of the process after the fibers: %.1f MB\n", ru.ru_maxrss / 1024.0);
    }
    if (!only || !strcmp(only, "threads")) {
        failed += concurrent(store, port, agents, agent_steps, 0);
        getrusage(RUSAGE_SELF, &ru);
        printf("peak RSS of the process after the threads: %.1f MB\n", ru.ru_maxrss / 1024.0);
    }
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    return failed ? 1 : 0;
}
