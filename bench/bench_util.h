/*
 * The clocks and sort orders the benchmarks in bench/ share: wall time, the CPU time of this
 * process or of another one, and comparators for qsort before a percentile is read. The
 * benchmarks time themselves with these; the library reads time only through its os/ clock.
 * Header only: CMake builds every bench/bench_*.c as a program of its own.
 */
#ifndef VIGIL_BENCH_UTIL_H
#define VIGIL_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* A clock's time, in nanoseconds. */
static inline int64_t bench_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Monotonic wall time, in nanoseconds. */
static inline int64_t bench_mono_ns(void)
{
    return bench_clock_ns(CLOCK_MONOTONIC);
}

/* Monotonic wall time, in seconds. */
static inline double bench_wall_s(void)
{
    return (double)bench_mono_ns() / 1e9;
}

/* This process's CPU time (every thread, user + kernel), in nanoseconds: on a shared machine
 * wall time also counts the waits for a core. */
static inline int64_t bench_cpu_ns(void)
{
    return bench_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

/* This process's CPU time (user + kernel), in seconds. */
static inline double bench_cpu_s(void)
{
    return (double)bench_cpu_ns() / 1e9;
}

/* This process's kernel time alone, in seconds (system calls, page faults). */
static inline double bench_sys_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* User + kernel time of another process (a server, a zygote), in microseconds, from fields 14
 * and 15 of /proc/PID/stat; 0 when it cannot be read. The command name in field 2 may hold
 * spaces or parentheses: the fields are counted from its last ')'. */
static inline int64_t bench_proc_cpu_us(pid_t pid)
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

/* Removes an SQLite store file with its write-ahead log and shared-memory files, so a run
 * starts from an empty store. */
static inline void bench_remove_store(const char *path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char p[4300];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
        remove(p);
    }
}

/* qsort orders: ascending int64_t, ascending double. */
static inline int bench_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
