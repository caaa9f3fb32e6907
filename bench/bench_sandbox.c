/*
 * bench_sandbox.c: cold start of one execution of the Lua code runtime: request -> confined
 * child (namespaces, rlimits, Landlock, seccomp) -> `return 1` -> result back in the host.
 * Prints min, p50, p90, p99, max (sequential, one at a time) twice: each request after a pause
 * (its spare ready, the spare after it warm, the last child reaped, then PAUSE_MS more), then
 * back to back (the next request as soon as the last answer came: its spare may still be
 * warming, the last child's teardown runs beside it), with the executions per second that
 * sustains; each over BLOCKS blocks of RUNS, with every block's p99 (how far the p99 is from
 * the target, and how steady); asserts nothing.
 * Also the floor under any fresh process per execution on this machine: fork, _exit and wait
 * of this same process, which no design that keeps a new process per execution can beat.
 * The CPU figure counts the host, the execution's child and the zygote that makes it.
 * Then the same for the TypeScript adapter (a whole `deno run` per execution) when deno is
 * there, with the ratio the issue sets a target for (Lua at least 20x faster).
 *
 *   bench_sandbox [RUNS] [DIR] [BLOCKS] [PAUSE_MS]
 *   (defaults: 300 runs, working directory under /tmp, 5 blocks, no pause)
 */
#include "helpers/test.h"

#include "sandbox/sandbox.h"
#include "bench_util.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* CPU time of this process and its reaped children: what an execution costs the machine,
 * whatever else runs on it (wall figures on a loaded machine measure the queue). */
static int64_t cpu_us(void)
{
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (int64_t)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec +
                     b.ru_stime.tv_sec) *
               1000000 +
           a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec + b.ru_stime.tv_usec;
}

/* CPU and wall time of fork + _exit + wait of this process, per process. */
static void fork_floor(int runs, double *cpu_ms, double *wall_ms)
{
    int64_t c0 = cpu_us(), t0 = bench_mono_ns();
    for (int i = 0; i < runs; i++) {
        pid_t p = fork();
        if (p == 0)
            _exit(0);
        int st;
        waitpid(p, &st, 0);
    }
    *cpu_ms = (double)(cpu_us() - c0) / 1000.0 / runs;
    *wall_ms = (double)(bench_mono_ns() - t0) / 1e6 / runs;
}

/* The cgroup layer's own cost per execution, host side: make one cgroup with its caps and
 * remove it (placing the child is one more write per hierarchy). */
static void cgroup_cost(int runs)
{
    struct vg_sandbox_probe p;
    vg_sandbox_probe(&p);
    if (!(p.offered & VG_SBX_CGROUP)) {
        printf("cgroup layer: absent here (%s)\n", p.cgroup.why);
        return;
    }
    int64_t c0 = cpu_us(), t0 = bench_mono_ns();
    for (int i = 0; i < runs; i++) {
        struct vg_sandbox_cg cg;
        int e = vg_sandbox_cg_make(&cg, 256u << 20, VG_CG_MAX_PIDS);
        if (e) {
            printf("cgroup layer: could not make one: %s\n", strerror(e));
            return;
        }
        vg_sandbox_cg_remove(&cg);
    }
    printf("cgroup layer (%s): make + remove %.3f ms CPU, %.3f ms wall per execution\n",
           p.cgroup.use_v1 ? "v1" : "v2", (double)(cpu_us() - c0) / 1000.0 / runs,
           (double)(bench_mono_ns() - t0) / 1e6 / runs);
}

/* How executions follow each other: back to back (the next request as soon as the last
 * answer came: its spare may still be in the making, and the last child's teardown runs
 * beside it), or each once the spare is ready and the last child reaped (the time of one
 * request that finds its spare ready, as a request arriving after a pause does). */
enum pace { BACK_TO_BACK, SPARE_READY };

/* Set by main: blocks of runs each pace measures, and the pause before a request with a
 * spare ready. */
static int blocks = 5;
static int pause_ms;

/* Before a request that finds its spare ready: the last child reaped, the spare ready, the
 * one made after it warm, then pause_ms. */
static void wait_for_pause(void)
{
    vg_sandbox_reap_wait(); /* the last child reaped, the next spare in its cgroup */
    vg_sandbox_spare_pid(); /* said by the zygote only once it is warm */
    vg_sandbox_next_spare_warm();
    if (pause_ms > 0) {
        struct timespec ts = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* The block's p99s, then the whole distribution of the n sorted-in-place times t. */
static void print_distribution(int64_t *t, int runs, int nblocks)
{
    printf("  p99 by block of %d:", runs);
    double worst = 0;
    for (int b = 0; b < nblocks; b++) {
        int64_t *bt = t + (size_t)b * (size_t)runs;
        qsort(bt, (size_t)runs, sizeof *bt, bench_cmp_i64);
        double p99 = (double)bt[(runs * 99) / 100] / 1e6;
        worst = p99 > worst ? p99 : worst;
        printf(" %.2f", p99);
    }
    printf(" ms (worst %.2f)\n", worst);
    int n = runs * nblocks;
    qsort(t, (size_t)n, sizeof *t, bench_cmp_i64);
    printf("  all %d: min %.3f ms  p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f ms\n", n,
           (double)t[0] / 1e6, (double)t[n / 2] / 1e6, (double)t[(n * 90) / 100] / 1e6,
           (double)t[(n * 99) / 100] / 1e6, (double)t[n - 1] / 1e6);
}

/* nblocks blocks of runs executions of q in rt, one at a time; prints the figures, gives the
 * p50 and CPU (ms). */
static int measure(struct vg_code_runtime *rt, const char *what, struct vg_code_request *q,
                   int block_runs, int nblocks, const char *layers, enum pace pace, double *p50_ms,
                   double *cpu_ms)
{
    int runs = block_runs * nblocks;
    int64_t *t = calloc((size_t)runs, sizeof *t);
    pid_t zygote0 = vg_sandbox_zygote_pid(); /* its CPU so far is another loop's */
    int64_t zygote0_us = zygote0 > 0 ? bench_proc_cpu_us(zygote0) : 0;
    int64_t all0 = bench_mono_ns(), cpu0 = cpu_us();
    for (int i = 0; t && i < runs; i++) {
        struct vg_code_result r;
        vigil_error err = {0};
        if (pace == SPARE_READY)
            wait_for_pause();
        int64_t t0 = bench_mono_ns();
        if (vg_code_run(rt, q, &r, &err) || !r.ok) {
            fprintf(stderr, "%s run %d failed: %s %s %s\n", what, i, err.message, r.error_code,
                    r.error_message);
            free(t);
            return 1;
        }
        t[i] = bench_mono_ns() - t0;
        vg_code_result_release(&r);
    }
    vg_sandbox_reap_wait(); /* the last child's teardown counts too */
    double total_s = (double)(bench_mono_ns() - all0) / 1e9;
    pid_t zygote = vg_sandbox_zygote_pid(); /* Lua's children are the zygote's: count it too */
    int64_t zygote_us = zygote > 0 ? bench_proc_cpu_us(zygote) : 0;
    if (zygote > 0 && zygote == zygote0)
        zygote_us -= zygote0_us; /* only what it spent in this loop */
    *cpu_ms = (double)(cpu_us() - cpu0 + zygote_us) / 1000.0 / runs;
    printf("sandbox cold start (%s), %d x %d runs, layers %s\n", what, nblocks, block_runs, layers);
    print_distribution(t, block_runs, nblocks);
    *p50_ms = (double)t[runs / 2] / 1e6;
    if (pace == BACK_TO_BACK)
        printf("  %.0f executions/s sustained (one at a time, back to back)\n", runs / total_s);
    printf("  %.3f ms CPU per execution (host + child + zygote)\n", *cpu_ms);
    free(t);
    return 0;
}

/* The Deno adapter side by side, when a deno binary is there ($VIGIL_DENO, else the one
 * scripts/npm.sh installs): the same work, fewer runs (each is a whole deno process). */
static int measure_deno(struct vg_code_request *q, int runs, const char *layers, double lua_p50,
                        double lua_b2b_p50, double lua_cpu)
{
    char path[4200];
    const char *env = getenv("VIGIL_DENO");
    snprintf(path, sizeof path, "%s",
             env && *env ? env : VIGIL_SOURCE_DIR "/.deps/npm/node_modules/deno/deno");
    if (access(path, X_OK) != 0) {
        printf("deno: not measured (no deno at %s; scripts/npm.sh installs it)\n", path);
        return 0;
    }
    struct vg_code_runtime *deno = vg_code_runtime_deno(path);
    double p50 = 0, cpu = 0;
    q->lim.wall_ms = 60000;
    int rc = deno ? measure(deno, "typescript in deno, return 1", q, VG_MAX(runs / 10, 5), 1,
                            layers, BACK_TO_BACK, &p50, &cpu)
                  : 1;
    if (!rc)
        printf("lua against deno: %.0fx faster at the p50 with a spare ready, %.0fx back to back, "
               "%.0fx less CPU (target: 20x)\n",
               p50 / lua_p50, p50 / lua_b2b_p50, cpu / lua_cpu);
    if (deno)
        deno->methods->destroy(deno);
    return rc;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 300;
    blocks = argc > 3 ? VG_MAX((int)strtol(argv[3], NULL, 10), 1) : 5;
    pause_ms = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 0;
    char wd[4096];
    snprintf(wd, sizeof wd, "%s/vigil-bench-sandbox-%d", argc > 2 ? argv[2] : "/tmp",
             (int)getpid());
    mkdir(wd, 0700);
    struct vg_code_request q = {.code = "return 1",
                                .code_len = 8,
                                .workdir = wd,
                                .required = VG_SBX_REQUIRED_DEFAULT,
                                .sandbox_uid = 65534};
    vg_code_limits_default(&q.lim);
    struct vg_sandbox_probe p;
    vg_sandbox_probe(&p); /* probed once per process: not part of an execution */
    json_t *layers = vg_sandbox_layers_json(p.offered);
    char *names = json_dumps(layers, JSON_COMPACT);
    double p50 = 0, cpu = 0;
    double b2b_p50 = 0, b2b_cpu = 0;
    int rc = measure(vg_code_runtime_lua(), "lua, return 1, spare ready", &q, runs, blocks, names,
                     SPARE_READY, &p50, &cpu);
    if (!rc)
        rc = measure(vg_code_runtime_lua(), "lua, return 1, back to back", &q, runs, blocks, names,
                     BACK_TO_BACK, &b2b_p50, &b2b_cpu);
    double floor_cpu, floor_wall;
    fork_floor(runs < 100 ? runs : 100, &floor_cpu, &floor_wall);
    printf("  floor, fork + _exit + wait of this process: %.3f ms CPU, %.3f ms wall\n", floor_cpu,
           floor_wall);
    cgroup_cost(runs < 100 ? runs : 100);
    if (!rc)
        rc = measure_deno(&q, runs, names, p50, b2b_p50, cpu);
    free(names);
    json_decref(layers);
    rmdir(wd);
    return rc;
}
