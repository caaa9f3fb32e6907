/*
 * bench_sandbox.c: cold start of one execution of the Lua code runtime: request -> confined
 * child (namespaces, rlimits, Landlock, seccomp) -> `return 1` -> result back in the host.
 * Prints p50, p99 and executions per second (sequential, one at a time); asserts nothing.
 * Also the floor under any fresh process per execution on this machine: fork, _exit and wait
 * of this same process, which no design that keeps a new process per execution can beat.
 * The CPU figure counts the host, the execution's child and the zygote that makes it.
 *
 *   bench_sandbox [RUNS] [DIR]     (default 300 runs, working directory under /tmp)
 */
#include "helpers/test.h"

#include "sandbox/sandbox.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the benchmark times itself; the library does not */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

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

/* utime + stime of another process (the zygote), from /proc/PID/stat. */
static int64_t proc_cpu_us(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (int64_t)(ut + st) * 1000000 / sysconf(_SC_CLK_TCK);
}

/* CPU and wall time of fork + _exit + wait of this process, per process. */
static void fork_floor(int runs, double *cpu_ms, double *wall_ms)
{
    int64_t c0 = cpu_us(), t0 = mono_ns();
    for (int i = 0; i < runs; i++) {
        pid_t p = fork();
        if (p == 0)
            _exit(0);
        int st;
        waitpid(p, &st, 0);
    }
    *cpu_ms = (double)(cpu_us() - c0) / 1000.0 / runs;
    *wall_ms = (double)(mono_ns() - t0) / 1e6 / runs;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 300;
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
    int64_t *t = calloc((size_t)runs, sizeof *t);
    struct vg_sandbox_probe p;
    vg_sandbox_probe(&p); /* probed once per process: not part of an execution */
    int64_t all0 = mono_ns(), cpu0 = cpu_us();
    for (int i = 0; i < runs; i++) {
        struct vg_code_result r;
        vigil_error err = {0};
        int64_t t0 = mono_ns();
        if (vg_code_run(vg_code_runtime_lua(), &q, &r, &err) || !r.ok) {
            fprintf(stderr, "run %d failed: %s %s %s\n", i, err.message, r.error_code,
                    r.error_message);
            return 1;
        }
        t[i] = mono_ns() - t0;
        vg_code_result_release(&r);
    }
    double total_s = (double)(mono_ns() - all0) / 1e9;
    pid_t zygote = vg_sandbox_zygote_pid();
    int64_t zygote_us = zygote > 0 ? proc_cpu_us(zygote) : 0; /* it made nothing else */
    double cpu_ms = (double)(cpu_us() - cpu0 + zygote_us) / 1000.0 / runs;
    double floor_cpu, floor_wall;
    fork_floor(runs < 100 ? runs : 100, &floor_cpu, &floor_wall);
    qsort(t, (size_t)runs, sizeof *t, cmp64);
    json_t *layers = vg_sandbox_layers_json(p.offered & ~(unsigned)VG_SBX_CGROUP);
    char *names = json_dumps(layers, JSON_COMPACT);
    printf("sandbox cold start (lua, return 1), %d runs, layers %s\n", runs, names);
    printf("  p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", (double)t[runs / 2] / 1e6,
           (double)t[(runs * 99) / 100] / 1e6, (double)t[runs - 1] / 1e6);
    printf("  %.0f executions/s sustained (one at a time)\n", runs / total_s);
    printf("  %.3f ms CPU per execution (host + child + zygote)\n", cpu_ms);
    printf("  floor, fork + _exit + wait of this process: %.3f ms CPU, %.3f ms wall\n", floor_cpu,
           floor_wall);
    free(names);
    json_decref(layers);
    free(t);
    rmdir(wd);
    return 0;
}
