/*
 * bench_messages.c: appending messages to one agent through the record spine, and reading the
 * latest 50 of a thread, at growing history. Prints figures; asserts nothing.
 *
 *   bench_messages [COUNT] [DIR]   COUNT messages (default 1000000), store in DIR (default /tmp)
 *
 * Mode 1: one durable transaction per append (what a live agent does for each turn).
 * Mode 2: batches of 1000 appends per transaction (an import or a replay).
 * Per-append time is sampled at history 10, 100k and 1M (or the nearest the count reaches).
 */
#include "helpers/rt.h"

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
    snprintf(path, sizeof path, "%s/bench_messages.db", dir);
    bench_remove_store(path);
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
    double r10 = latest50(env, id, small_thread);

    long done = 200, marks[] = {10, 100000, 1000000};
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
    printf("bulk: %ld appends in %.1f s wall, %.1f s cpu (%.2f us cpu/append)\n", done - 200, wall,
           cpu, cpu / (double)(done - 200) * 1e6);
    printf("ratio last/first (batched): %.2f\n",
           at_mark[2] > 0 ? at_mark[2] / at_mark[0] : at_mark[1] / at_mark[0]);
    double dbig = append_run(env, id, thread, 200, 1);
    printf("append, 1 txn each (durable fsync), history %ld:   %8.1f us/append\n", done,
           dbig * 1e6);
    double rbig = latest50(env, id, thread);
    printf("latest 50 of a thread: history 50 %.1f us, history %ld %.1f us\n", r10 * 1e6, done,
           rbig * 1e6);
    vg_store_control(env->store, VG_STORE_CTRL_CHECKPOINT, NULL, &err);
    int64_t bytes = 0;
    vg_store_control(env->store, VG_STORE_CTRL_FILE_SIZE, &bytes, &err);
    printf("store file: %.1f MB, %.0f bytes per message (message, its index entries, head "
           "updates)\n",
           bytes / 1e6, (double)bytes / (double)(done + 450));
    vigil_runtime_close(rt);
    return 0;
}
