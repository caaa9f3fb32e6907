/*
 * bench_recovery.c: how fast an agent is usable again after the process running it died, on the
 * same host, and how long a start takes to recover a store full of crashed runs. Prints figures;
 * asserts nothing.
 *
 * 1. Crash to usable: a child process runs `vigil_chat` on an agent; its tool kills the process
 *    (SIGKILL) in the middle of the effect, with the lease, the run and the operation open. From
 *    the moment the parent has reaped it, a new "process" (a fresh runtime on the store, as a
 *    new `vigil chat` opens) runs the next chat turn on the same agent: the lease is taken over,
 *    the crashed run settled and closed, the turn run. Also a turn without a crash before it,
 *    for comparison.
 * 2. Recovery of N crashed runs (default 1000): a child leaves N agents each with a run still
 *    running, a started operation of a non-idempotent tool and its lease held, then dies; the
 *    timed part is opening a runtime and preparing it (which settles every dead agent: in-doubt
 *    items raised, runs closed crashed).
 *
 *   bench_recovery [TURNS] [CRASHED_RUNS] [DIR]     (default 20, 1000, /tmp)
 */
#include "helpers/rt.h"
#include "helpers/tool_crash.h"

#include "journal/journal.h"
#include "tool/tool.h"
#include "wake/wake.h"
#include "bench_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what, const vigil_error *err)
{
    fprintf(stderr, "bench_recovery: %s: %s\n", what, err ? err->message : "");
    exit(1);
}

static vigil_code effect_then_die(void *user, const vigil_tool_call_info *call, const char *args,
                                  char **out, vigil_error *err)
{
    if (user)
        raise(SIGKILL); /* the process dies inside the effect */
    *out = NULL;
    return VIGIL_OK;
}

static vigil_runtime *open_rt(const char *store, int kill_in_tool)
{
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    vigil_runtime_options o = {.size = sizeof o, .store_uri = store, .create_if_missing = 1};
    vigil_tool_def d = {.name = "post", .description = "post a message (not idempotent)"};
    if (vigil_runtime_open(&o, &rt, &err) ||
        vigil_tool_register(rt, &d, effect_then_die, kill_in_tool ? rt : NULL, &err))
        die("open", &err);
    return rt;
}

/* One turn in a fresh runtime, as a new `vigil chat` process runs it; its wall time in ns (and
 * its CPU time in *cpu). */
static int64_t fresh_turn(const char *store, const char *agent, int64_t *cpu)
{
    vigil_error err = {0};
    char *out = NULL;
    int64_t t0 = bench_mono_ns(), c0 = bench_cpu_ns();
    vigil_runtime *rt = open_rt(store, 0);
    if (vigil_chat(rt, agent, NULL, "are you there?", NULL, &out, &err))
        die("chat after the crash", &err);
    vigil_runtime_close(rt);
    int64_t t = bench_mono_ns() - t0;
    *cpu = bench_cpu_ns() - c0;
    vigil_free(out);
    return t;
}

static void crash_a_turn(const char *store, const char *agent, const char *cassette)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        vigil_error err = {0};
        char *out = NULL;
        setenv("VIGIL_MODEL_CASSETTE", cassette, 1);
        vigil_runtime *rt = open_rt(store, 1);
        vigil_chat(rt, agent, NULL, "post it", NULL, &out, &err);
        _exit(1); /* not reached: the tool killed the process */
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status))
        die("the driver did not die in its tool", NULL);
}

static void report(const char *what, int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_i64);
    printf("%-48s median %7.2f ms  p95 %7.2f ms  max %7.2f ms  (n=%d)\n", what, v[n / 2] / 1e6,
           v[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1] / 1e6, v[n - 1] / 1e6, n);
}

static void crash_to_usable(const char *dir, int turns)
{
    char store[4096], cassette[4200], agent[37];
    vigil_error err = {0};
    snprintf(store, sizeof store, "%s/bench_recovery_turns.db", dir);
    snprintf(cassette, sizeof cassette, "%s/bench_recovery_cassette.json", dir);
    bench_remove_store(store);
    FILE *f = fopen(cassette, "w");
    if (!f)
        die("cassette", NULL);
    fputs("{\"vigil_cassette\":1,\"exchanges\":[{\"response\":{\"tool_calls\":[{\"id\":\"c1\","
          "\"name\":\"post\",\"arguments\":{}}]}}]}",
          f);
    fclose(f);
    vigil_runtime *rt = open_rt(store, 0);
    vigil_agent_spec spec = {.name = "poster", .config_json = "{\"tools\":[\"post\"]}"};
    if (vigil_agent_create(rt, &spec, agent, &err))
        die("agent", &err);
    vigil_runtime_close(rt);
    int64_t *v = calloc((size_t)turns * 4, sizeof *v);
    if (!v)
        die("out of memory", NULL);
    for (int i = 0; i < turns; i++) {
        v[i] = fresh_turn(store, agent, &v[turns + i]);
        crash_a_turn(store, agent, cassette);
        /* from the reaped crash to the next turn's answer */
        v[2 * turns + i] = fresh_turn(store, agent, &v[3 * turns + i]);
    }
    report("turn in a new process, no crash before: wall", v, turns);
    report("  CPU", v + turns, turns);
    report("crash -> next turn answered (same host): wall", v + 2 * turns, turns);
    report("  CPU", v + 3 * turns, turns);
    free(v);
}

/* The child of crashed_store: n agents each left with a running run, a started operation and
 * its lease held, then the process dies. */
static void leave_crashed_runs(const char *store, int n)
{
    vigil_error err = {0};
    vigil_runtime *rt = open_rt(store, 0);
    struct vg_env *env = vg_runtime_env(rt);
    struct vg_tool_executor *x = NULL;
    if (vg_runtime_tools(rt, &x, &err))
        die("tools", &err);
    vg_tool_executor_test_crash(x, VG_CRASH_AFTER_STARTED);
    for (int i = 0; i < n; i++) {
        char agent[37], key[32];
        int64_t epoch = 0;
        int got = 0;
        struct vg_run *run = NULL;
        struct vg_tool_outcome o = {0};
        vigil_agent_spec spec = {.name = "crashed", .config_json = "{\"tools\":[\"post\"]}"};
        snprintf(key, sizeof key, "turn-%d", i);
        if (vigil_agent_create(rt, &spec, agent, &err) ||
            vg_wake_lease_take(env, agent, "chat:bench", 300000, &epoch, &got, &err))
            die("setup", &err);
        struct vg_run_launch l = {.agent_id = agent, .run_key = key, .wake_reason = "user"};
        struct vg_tool_call_ctx ctx = {.agent_id = agent, .run_key = key};
        if (vg_journal_run_open(env->store, env->clock, env->ids, &l, &run, &err))
            die("run", &err);
        ctx.run_id = vg_journal_run_id(run);
        vg_tool_executor_call(x, &ctx, "post", NULL, &o, NULL); /* stops after "started" */
        vg_tool_outcome_release(&o);
        vg_journal_run_free(run);
    }
    raise(SIGKILL);
}

static void crashed_store(const char *dir, int n)
{
    char store[4096];
    vigil_error err = {0};
    snprintf(store, sizeof store, "%s/bench_recovery_runs.db", dir);
    bench_remove_store(store);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        leave_crashed_runs(store, n);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status))
        die("the store with crashed runs was not made", NULL);
    int64_t t0 = bench_mono_ns(), c0 = bench_cpu_ns();
    vigil_runtime *rt = open_rt(store, 0);
    if (vg_runtime_prepare(rt, &err))
        die("recovery", &err);
    int64_t t = bench_mono_ns() - t0, c = bench_cpu_ns() - c0;
    char *items = NULL, *runs = NULL;
    if (vigil_indoubt_list(rt, NULL, &items, &err) ||
        vigil_runs_list(rt, NULL, "running", NULL, 10, &runs, &err))
        die("after recovery", &err);
    json_t *iv = json_loads(items, 0, NULL), *rv = json_loads(runs, 0, NULL);
    printf("%-44s %7.2f ms wall, %7.2f ms CPU for %d crashed runs; in doubt after: %zu, "
           "running after: %zu\n",
           "start with crashed runs -> all settled", t / 1e6, c / 1e6, n, json_array_size(iv),
           json_array_size(json_object_get(rv, "items")));
    json_decref(iv);
    json_decref(rv);
    vigil_free(items);
    vigil_free(runs);
    vigil_runtime_close(rt);
}

int main(int argc, char **argv)
{
    int turns = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 20;
    int runs = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 1000;
    const char *dir = argc > 3 ? argv[3] : "/tmp";
    if (turns < 1 || turns > 10000 || runs < 1 || runs > 100000)
        return 2;
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    crash_to_usable(dir, turns);
    crashed_store(dir, runs);
    return 0;
}
