/*
 * bench_messages.c: appending messages to one agent through the record spine, and reading the
 * latest 50 of a thread, at growing history. Prints figures; asserts nothing.
 *
 *   bench_messages [COUNT] [DIR]   COUNT messages (default 1000000), store in DIR (default /tmp)
 *   bench_messages [COUNT] pg      the same on PostgreSQL: a fresh schema of $VIGIL_PG_URI
 *
 * Mode 1: one durable transaction per append (what a live agent does for each turn).
 * Mode 2: batches of 1000 appends per transaction (an import or a replay).
 * Per-append time is sampled at history 10, 100k and 1M (or the nearest the count reaches).
 * Single appends are also timed one by one (median and 99th percentile): seed 002's bar is a
 * message append under 1 ms on PostgreSQL (S2-040), printed against it, not asserted.
 */
#include "helpers/rt.h"

#include "helpers/pg_env.h"

#include "agent/agent.h"
#include "bench_util.h"

#include <time.h>
#include <sys/resource.h>

static void open_store(const char *path, vigil_runtime **rt)
{
    vigil_error err = {0};
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path, .create_if_missing = 1};
    if (vigil_runtime_open(&o, rt, &err)) {
        fprintf(stderr, "open: %s\n", err.message);
        exit(1);
    }
}

/* Time `n` appends starting at the current history, in transactions of `batch`. */
static double append_run(struct vg_env *env, const char *agent, const char *thread, long n,
                         int batch)
{
    vigil_error err = {0};
    struct vg_message_in in = {.agent_id = agent,
                               .thread_id = thread,
                               .kind = VG_MSG_THOUGHT,
                               .content = "the task moved forward: two checklist items done"};
    double t0 = bench_wall_s();
    for (long i = 0; i < n; i += batch) {
        if (batch > 1 && vg_store_begin(env->store, &err))
            goto fail;
        for (long j = i; j < i + batch && j < n; j++)
            if (vg_message_append(env, &in, NULL, &err))
                goto fail;
        if (batch > 1 && vg_store_commit(env->store, &err))
            goto fail;
    }
    return (bench_wall_s() - t0) / (double)n;
fail:
    fprintf(stderr, "append: %s\n", err.message);
    exit(1);
}

/* n single appends (one transaction each) timed one by one: the median and the 99th
 * percentile in microseconds. */
static void append_percentiles(struct vg_env *env, const char *agent, const char *thread, int n,
                               double *p50, double *p99, double *cpu_us)
{
    double cpu0 = bench_cpu_s();
    vigil_error err = {0};
    double *us = malloc((size_t)n * sizeof *us);
    struct vg_message_in in = {.agent_id = agent,
                               .thread_id = thread,
                               .kind = VG_MSG_THOUGHT,
                               .content = "the task moved forward: two checklist items done"};
    if (!us)
        exit(1);
    for (int i = 0; i < n; i++) {
        double t0 = bench_wall_s();
        if (vg_message_append(env, &in, NULL, &err)) {
            fprintf(stderr, "append: %s\n", err.message);
            exit(1);
        }
        us[i] = (bench_wall_s() - t0) * 1e6;
    }
    *cpu_us = (bench_cpu_s() - cpu0) / n * 1e6;
    qsort(us, (size_t)n, sizeof *us, bench_cmp_double);
    *p50 = us[n / 2];
    *p99 = us[(n * 99) / 100];
    free(us);
}

static void print_percentiles(const char *what, double p50, double p99, double cpu_us)
{
    printf("append, 1 txn each, %s: median %.1f us, p99 %.1f us (bar: 1000 us, %s); "
           "this process's CPU %.1f us/append\n",
           what, p50, p99, p99 < 1000 ? "met" : "NOT met", cpu_us);
}

static double latest50(struct vg_env *env, const char *agent, const char *thread)
{
    vigil_error err = {0};
    int reps = 200;
    double t0 = bench_wall_s();
    for (int i = 0; i < reps; i++) {
        json_t *v = NULL;
        if (vg_message_latest(env, agent, thread, 50, &v, &err)) {
            fprintf(stderr, "latest: %s\n", err.message);
            exit(1);
        }
        json_decref(v);
    }
    return (bench_wall_s() - t0) / reps;
}

int main(int argc, char **argv)
{
    long count = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000;
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    char path[4096], id[37], thread[128], small_thread[128];
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    int pg = !strcmp(dir, "pg");
    if (pg) {
        vg_test_pg_schema_uri("bench_messages", 1, path, sizeof path);
    } else {
        snprintf(path, sizeof path, "%s/bench_messages.db", dir);
        bench_remove_store(path);
    }
    open_store(path, &rt);
    struct vg_env *env = vg_runtime_env(rt);
    vigil_agent_spec spec = {.name = "bench"};
    if (vigil_agent_create(rt, &spec, id, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    snprintf(thread, sizeof thread, "%s:run:bench", id);
    snprintf(small_thread, sizeof small_thread, "%s:session:small", id);

    printf("vigil bench_messages: %ld messages, store %s\n", count, path);
    /* A thread of exactly 50 messages for the read comparison: the latest 50 of a short history
     * against the latest 50 of the long one. */
    struct vg_message_in in = {
        .agent_id = id, .thread_id = small_thread, .kind = VG_MSG_USER, .content = "hello"};
    for (int i = 0; i < 50; i++)
        vg_message_append(env, &in, NULL, &err);

    /* Durable single appends at small history. */
    double d10 = append_run(env, id, thread, 200, 1);
    printf("append, 1 txn each (durable fsync), history ~10:   %8.1f us/append\n", d10 * 1e6);
    double p50, p99, cpu_us;
    append_percentiles(env, id, thread, 1000, &p50, &p99, &cpu_us);
    print_percentiles("history ~200", p50, p99, cpu_us);
    long done = 1200, marks[] = {10, 100000, 1000000};
    double r10 = latest50(env, id, small_thread);

    double at_mark[3] = {0};
    double cpu0 = bench_cpu_s(), wall0 = bench_wall_s();
    for (int m = 0; m < 3; m++) {
        long target = marks[m] < count ? marks[m] : count;
        if (target > done) {
            append_run(env, id, thread, target - done, 1000);
            done = target;
        }
        at_mark[m] = append_run(env, id, thread, 1000, 1000);
        done += 1000;
        printf("append, batches of 1000, history %8ld:          %8.2f us/append\n", done - 1000,
               at_mark[m] * 1e6);
        if (target >= count)
            break;
    }
    double wall = bench_wall_s() - wall0, cpu = bench_cpu_s() - cpu0;
    printf("bulk: %ld appends in %.1f s wall, %.1f s cpu (%.2f us cpu/append)\n", done - 1200, wall,
           cpu, cpu / (double)(done - 1200) * 1e6);
    printf("ratio last/first (batched): %.2f\n",
           at_mark[2] > 0 ? at_mark[2] / at_mark[0] : at_mark[1] / at_mark[0]);
    double dbig = append_run(env, id, thread, 200, 1);
    printf("append, 1 txn each (durable fsync), history %ld:   %8.1f us/append\n", done,
           dbig * 1e6);
    done += 200;
    char at_history[64];
    append_percentiles(env, id, thread, 1000, &p50, &p99, &cpu_us);
    snprintf(at_history, sizeof at_history, "history %ld", done);
    print_percentiles(at_history, p50, p99, cpu_us);
    done += 1000;
    double rbig = latest50(env, id, thread);
    printf("latest 50 of a thread: history 50 %.1f us, history %ld %.1f us\n", r10 * 1e6, done,
           rbig * 1e6);
    int64_t bytes = 0;
    if (!pg) {
        vg_store_control(env->store, VG_STORE_CTRL_CHECKPOINT, NULL, &err);
        vg_store_control(env->store, VG_STORE_CTRL_FILE_SIZE, &bytes, &err);
    }
    if (bytes > 0)
        printf("store file: %.1f MB, %.0f bytes per message (message, its index entries, head "
               "updates)\n",
               bytes / 1e6, (double)bytes / (double)(done + 50)); /* and the short thread's 50 */
    vigil_runtime_close(rt);
    return 0;
}
