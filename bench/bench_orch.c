/*
 * bench_orch.c: the orchestrator's costs (issue 31's targets: 50,000 admission decisions a
 * second; 50 us of dispatcher CPU a task).
 *   - the admission policy alone (admit.c) over varied facts;
 *   - whole spawn_agents calls through the gated executor (16 requests each, then 64): gathering
 *     the facts once a call, deciding, recording each decision, and writing each admitted child
 *     and its wake, all in the call's one transaction (the user's path, and the figure the
 *     50,000 target is held to);
 *   - a 10,000-task DAG (task i waits for (i-1)/2 and i/3) dispatched with 8 slots to instant
 *     agents: each run is claimed and finished at once, without the loop, so what is timed is
 *     the dispatcher's work (starting tasks, a run's end moving its task and what it blocks on,
 *     and refilling the slots), in process CPU time; twice: with each run's wake finished
 *     apart (its own transaction, timed beside), then together with its end in the
 *     dispatcher's transaction, as the daemon's runner has it since session 34 (end_runs).
 * Prints figures; asserts only that each call succeeds and finishes the wakes it was given.
 *
 * The DAG is dispatched twice per commit mode: each run's end its own call (what the daemon
 * does, run by run), and the runs that ended together in one call (vg_task_runs_ended).
 *
 *   bench_orch [TASKS] [SPAWN_CALLS] [group|batch|loop] [apart|together]   (defaults: 10000,
 *      200; group: only the group-commit run with one end a call, batch: only the group-commit
 *      batched run, for callgrind; loop: the spawn calls also made by a chat turn's scripted
 *      model, through the agent loop, which journals each decision in the run: the user's path
 *      in full; apart or together: only that way of finishing the wakes)
 */
#include "helpers/rt.h"

#include "orch/orch.h"
#include "orch/task.h"
#include "tool/tool.h"
#include "bench_util.h"

#include <time.h>

static void bench_policy(void)
{
    enum { N = 10000000 };
    struct vg_orch_facts f = {.spawn_enabled = 1,
                              .child_found = 1,
                              .cost_left = -1,
                              .cap_parent = 4,
                              .cap_global = 64,
                              .since_last_ms = -1};
    const char *why;
    long admitted = 0;
    double t0 = bench_cpu_s();
    for (long i = 0; i < N; i++) {
        f.parent_depth = (int)(i % 3);
        f.granted = (int)(i & 1);
        f.running_parent = (int)(i % 6);
        admitted += vg_orch_admit(&f, &why) != VG_ORCH_DENIED;
    }
    double t = bench_cpu_s() - t0;
    printf("admission policy alone: %.0f decisions/s (%ld of %d admitted)\n", N / t, admitted, N);
}

static void bench_spawn(int calls, int per_call)
{
    struct test_rt t;
    char boss[37], args[16384];
    char dir[32];
    snprintf(dir, sizeof dir, "bench_orch_spawn%d", per_call);
    test_rt_open(&t, dir);
    vigil_agent_spec s = {.name = "boss",
                          .kind = "lead",
                          .config_json = "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":"
                                         "true,\"max_concurrent\":64},\"budgets\":{\"steps\":null,"
                                         "\"cost_usd\":null}}"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, boss, E));
    for (int i = 0; i < 16; i++) {
        char name[16], id[37];
        snprintf(name, sizeof name, "w%d", i);
        vigil_agent_spec w = {.name = name, .kind = "worker"};
        ASSERT_OK(vigil_agent_create(t.rt, &w, id, E));
    }
    size_t n = (size_t)snprintf(args, sizeof args, "{\"requests\":[");
    for (int i = 0; i < per_call; i++)
        n += (size_t)snprintf(args + n, sizeof args - n, "%s{\"agent\":\"w%d\",\"goal\":\"g\"}",
                              i ? "," : "", i % 16);
    snprintf(args + n, sizeof args - n, "]}");
    double w0 = bench_wall_s(), c0 = bench_cpu_s();
    for (int i = 0; i < calls; i++) {
        char key[32], *out = NULL;
        snprintf(key, sizeof key, "run-%d", i);
        ASSERT_OK(vigil_tool_call(t.rt, boss, key, "spawn_agents", args, &out, E));
        vigil_free(out);
    }
    double w = bench_wall_s() - w0, c = bench_cpu_s() - c0;
    long d = (long)calls * per_call;
    printf("spawn_agents through the gate, %d requests a call: %ld decisions in %.2f s: %.0f "
           "decisions/s wall, %.0f decisions/s of CPU (%.1f us CPU each, durable commits)\n",
           per_call, d, w, d / w, d / c, c * 1e6 / d);
    test_rt_close(&t);
}

/* The same calls on the user's path in full: a chat turn of the lead agent (vigil_chat), whose
 * scripted model asks for spawn_agents with per_call requests and then answers in text. The
 * agent loop runs the call through the same gate, keeps its start and end in its messages and
 * journals each decision in the run; the turn's two model calls and its messages are counted in
 * the CPU figure too, so it bounds a decision's cost from above. */
static void bench_spawn_loop(int calls, int per_call)
{
    struct test_rt t;
    char boss[37], args[8192], dir[40], path[64];
    snprintf(dir, sizeof dir, "bench_orch_loop%d", per_call);
    snprintf(path, sizeof path, "bench_orch_loop%d.cassette", per_call);
    size_t n = (size_t)snprintf(args, sizeof args, "{\\\"requests\\\":[");
    for (int i = 0; i < per_call; i++)
        n += (size_t)snprintf(args + n, sizeof args - n,
                              "%s{\\\"agent\\\":\\\"w%d\\\",\\\"goal\\\":\\\"g\\\"}", i ? "," : "",
                              i % 16);
    snprintf(args + n, sizeof args - n, "]}");
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fprintf(f, "{\"vigil_cassette\":1,\"exchanges\":[");
    for (int i = 0; i < calls; i++)
        fprintf(f,
                "%s{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\","
                "\"arguments\":\"%s\"}],\"stop_reason\":\"tool_use\"}},"
                "{\"response\":{\"text\":\"Delegated.\"}}",
                i ? "," : "", args);
    fprintf(f, "]}");
    fclose(f);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    test_rt_open(&t, dir);
    vigil_agent_spec s = {.name = "boss",
                          .kind = "lead",
                          .config_json = "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":"
                                         "true,\"max_concurrent\":64},\"budgets\":{\"steps\":null,"
                                         "\"cost_usd\":null}}"};
    ASSERT_OK(vigil_agent_create(t.rt, &s, boss, E));
    for (int i = 0; i < 16; i++) {
        char name[16], id[37];
        snprintf(name, sizeof name, "w%d", i);
        vigil_agent_spec w = {.name = name, .kind = "worker"};
        ASSERT_OK(vigil_agent_create(t.rt, &w, id, E));
    }
    double w0 = bench_wall_s(), c0 = bench_cpu_s();
    for (int i = 0; i < calls; i++) {
        char session[32], *out = NULL;
        snprintf(session, sizeof session, "s%d",
                 i); /* a new conversation each: no growing window */
        ASSERT_OK(vigil_chat(t.rt, boss, session, "Split the job.", NULL, &out, E));
        vigil_free(out);
    }
    double w = bench_wall_s() - w0, c = bench_cpu_s() - c0;
    long d = (long)calls * per_call;
    printf("spawn_agents in a chat turn (the agent loop), %d requests a call: %ld decisions in "
           "%.2f s: %.0f decisions/s wall, %.0f decisions/s of CPU (%.1f us CPU each, the whole "
           "turn)\n",
           per_call, d, w, d / w, d / c, c * 1e6 / d);
    test_rt_close(&t);
    unsetenv("VIGIL_MODEL_CASSETTE");
}

/* The ended runs' wakes: finished by the bench in their own transactions as soon as they are
 * claimed (apart: the dispatcher's work alone is timed, the finishes beside it; an agent's
 * next wake may then be claimed into the same batch, as before session 34), or by the
 * dispatcher's call in its transaction (together: as the daemon's runner has it since session
 * 34; the finishes are then inside what is timed, and a batch holds one run an agent, each
 * holding its agent's lease until its end). */
static double end_runs(struct vg_env *env, struct vg_wake *w, struct vg_wake_job *job, int n,
                       int together)
{
    struct vg_task_end ends[8];
    struct vg_orch_outcome o[8];
    int finished[8] = {0};
    for (int i = 0; i < n; i++) {
        o[i] = (struct vg_orch_outcome){.status = "completed", .text = "ok"};
        if (together) {
            o[i].job = &job[i];
            o[i].finished = &finished[i];
        }
        ends[i] = (struct vg_task_end){job[i].run_key, &o[i]};
    }
    double c0 = bench_cpu_s();
    ASSERT_OK(vg_task_runs_ended(env, w, ends, (size_t)n, E));
    double cpu = bench_cpu_s() - c0;
    for (int i = 0; i < n; i++)
        ASSERT_EQ(finished[i], together);
    return cpu;
}

static void bench_dispatch(int tasks, int durable, int batch, int together)
{
    struct test_rt t;
    struct vg_wake w;
    static char id[100000][37];
    if (tasks > 100000)
        tasks = 100000;
    test_rt_open(&t, "bench_orch_dag");
    ASSERT_OK(vg_store_durable_commits(t.env->store, durable, E));
    for (int i = 0; i < 4; i++) {
        char name[16], a[37];
        snprintf(name, sizeof name, "w%d", i);
        vigil_agent_spec s = {.name = name, .kind = "worker"};
        ASSERT_OK(vigil_agent_create(t.rt, &s, a, E));
    }
    double b0 = bench_wall_s();
    for (int i = 0; i < tasks; i++) {
        ASSERT_OK(vg_task_add(t.env, "t", "worker", NULL, 0, NULL, 0, id[i], E));
        if (i >= 1)
            ASSERT_OK(vg_task_block(t.env, id[(i - 1) / 2], id[i], E));
        if (i >= 2 && i / 3 != (i - 1) / 2)
            ASSERT_OK(vg_task_block(t.env, id[i / 3], id[i], E));
    }
    printf("built a DAG of %d tasks in %.1f s\n", tasks, bench_wall_s() - b0);
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    double cpu = 0, finish_cpu = 0, w0 = bench_wall_s(), c0 = bench_cpu_s();
    ASSERT_OK(vg_task_dispatch(t.env, &w, 8, NULL, E));
    cpu += bench_cpu_s() - c0;
    int done = 0, calls = 0;
    for (;;) {
        /* The runs that ended (one, or every one that was running when batched), then the
         * dispatcher's call that moves their tasks on and refills the slots. */
        struct vg_wake_job job[8];
        int n = 0, got = 1;
        while (n < (batch ? 8 : 1)) {
            memset(&job[n], 0, sizeof job[n]);
            ASSERT_OK(vg_wake_claim(&w, &job[n], &got, E));
            if (!got)
                break;
            if (!together) {
                double f0 = bench_cpu_s();
                ASSERT_OK(vg_wake_finish(&w, &job[n], VG_WAKE_COMPLETED, NULL, E));
                finish_cpu += bench_cpu_s() - f0;
            }
            n++;
        }
        if (!n)
            break;
        cpu += end_runs(t.env, &w, job, n, together);
        for (int i = 0; i < n; i++)
            vg_wake_job_release(&job[i]);
        done += n;
        calls++;
    }
    int per = done ? done : 1;
    printf("dispatched %d tasks (8 slots, instant agents, %s commits, %s) in %.1f s: ", done,
           durable ? "durable" : "group",
           batch ? "the runs ended together in one call" : "one run's end a call",
           bench_wall_s() - w0);
    if (together)
        printf("dispatcher CPU with the wakes' finishes in its transaction %.1f us a task (%d "
               "calls)\n",
               cpu * 1e6 / per, calls);
    else
        printf("dispatcher CPU %.1f us a task (its reads, transitions and wake enqueues; %d "
               "calls); with the wakes' finishes, each its own transaction, %.1f us\n",
               cpu * 1e6 / per, calls, (cpu + finish_cpu) * 1e6 / per);
    vg_wake_release(&w);
    test_rt_close(&t);
}

int main(int argc, char **argv)
{
    int tasks = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 10000;
    int calls = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 200;
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    bench_policy();
    const char *mode = argc > 3 ? argv[3] : "";
    if (calls > 0) {
        bench_spawn(calls, 16);
        bench_spawn(calls / 4 ? calls / 4 : 1, 64);
    }
    if (calls > 0 && !strcmp(mode, "loop")) {
        bench_spawn_loop(calls, 16);
        bench_spawn_loop(calls / 4 ? calls / 4 : 1, 64);
    }
    const char *finish = argc > 4 ? argv[4] : "";
    for (int together = 0; together < 2; together++) {
        if (strcmp(finish, together ? "together" : "apart") && *finish)
            continue;
        if (strcmp(mode, "batch"))
            bench_dispatch(tasks, 0, 0, together);
        if (strcmp(mode, "group"))
            bench_dispatch(tasks, 0, 1, together);
        if (!*mode) {
            bench_dispatch(tasks, 1, 0, together);
            bench_dispatch(tasks, 1, 1, together);
        }
    }
    return 0;
}
