/*
 * bench_pg_scale_out.c: daemons on one PostgreSQL store (the test server of scripts/pg.sh,
 * VIGIL_PG_URI; a database of its own). Real `vigil serve` processes (the built binary) run
 * agents through the agent loop against an instant loopback model server. Prints figures;
 * asserts nothing.
 *  1. Wake latency of idle daemons: this process queues a user wake (its commit NOTIFYs the
 *     daemons' listeners) and measures until the model server sees the run's first request.
 *     The daemons poll only every 5 s, so the figure is the work signal's (LISTEN/NOTIFY).
 *  2. Throughput: WAKES wakes of as many agents queued at once, until every one completed
 *     (one model call each, no tool step: no built-in tool runs without a manifest here).
 *
 *   bench_pg_scale_out [DAEMONS] [WAKES]     (default 2 daemons, 200 wakes)
 */
#include "helpers/pg_env.h"
#include "helpers/test.h"

#include "helpers/model_server.h"
#include "runtime/runtime_int.h"
#include "store/store.h"
#include "wake/wake.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LATENCY_WAKES 50
#define MAX_DAEMONS 16

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the benchmark times itself; the library does not */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The test server's URI with another database. */
static void db_uri(const char *db, char *out, size_t n)
{
    const char *base = vg_test_pg_uri();
    const char *path = strchr(strstr(base, "://") + 3, '/');
    snprintf(out, n, "%.*s/%s%s", (int)(path - base), base, db, path + strcspn(path, "?"));
}

static pid_t serve(const char *store, const char *url)
{
    pid_t p = fork();
    if (p == 0) {
        setenv("VIGIL_STORE", store, 1);
        setenv("VIGIL_MODEL_PROVIDER", "openai", 1);
        setenv("VIGIL_MODEL_BASE_URL", url, 1);
        setenv("VIGIL_MODEL", "bench", 1);
        unsetenv("VIGIL_WAKE_RUNNER");
        execl(VIGIL_BINARY_DIR "/vigil", "vigil", "serve", "--workers", "2", "--poll-ms", "5000",
              (char *)NULL);
        _exit(127);
    }
    return p;
}

static int64_t completed(struct vg_store *s)
{
    struct vg_query q = {.kind = "wake_run", .k1 = "completed"};
    int64_t n = 0;
    (void)vg_store_count(s, &q, &n, NULL);
    return n;
}

int main(int argc, char **argv)
{
    int daemons = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 2;
    int wakes = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 200;
    char store[1024], url[128], db[64], sql[128], id[37], key[65];
    int pfd[2], port, port2;
    pid_t pids[MAX_DAEMONS];
    vigil_error err = {0};
    if (daemons < 1 || daemons > MAX_DAEMONS || wakes < 1 || wakes > 100000 || pipe(pfd))
        return 2;
    snprintf(db, sizeof db, "vg_bench_scale_%ld", (long)getpid());
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", db);
    vg_test_pg_sql(sql);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
    vg_test_pg_sql(sql);
    db_uri(db, store, sizeof store);
    pid_t model = vg_instant_model_start(0, 0, pfd[1], &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);

    vigil_runtime *rt = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = store, .create_if_missing = 1};
    vigil_agent_spec spec = {.name = "latency"};
    if (vigil_runtime_open(&o, &rt, &err) || vigil_agent_create(rt, &spec, id, &err) ||
        vigil_agent_resume(rt, id, NULL, &err)) {
        fprintf(stderr, "setup: %s\n", err.message);
        return 1;
    }
    for (int i = 0; i < daemons; i++)
        pids[i] = serve(store, url);
    for (int i = 0; i < 2000 && !vg_daemon_running(store, NULL); i++)
        usleep(5000);
    usleep(500000); /* let every daemon finish its start-up (recovery, LISTEN) */

    /* 1. latency */
    int64_t lat[LATENCY_WAKES];
    for (int i = 0; i < LATENCY_WAKES; i++) {
        char session[32];
        snprintf(session, sizeof session, "bench-%d", i);
        int64_t t0 = mono_ns(), arrived = 0;
        if (vigil_wake_agent(rt, id, "ping", session, key, &err)) {
            fprintf(stderr, "wake: %s\n", err.message);
            return 1;
        }
        if (read(pfd[0], &arrived, sizeof arrived) != (ssize_t)sizeof arrived)
            return 1;
        lat[i] = arrived - t0;
        usleep(20000); /* idle again: let the run finish before the next wake */
    }
    qsort(lat, LATENCY_WAKES, sizeof *lat, cmp64);
    printf("vigil bench_pg_scale_out: %d daemon(s) of 2 workers on one PostgreSQL store, agent "
           "loop, instant loopback model\n",
           daemons);
    printf("idle wake to first model call (LISTEN/NOTIFY, poll every 5 s): p50 %.2f ms, p90 "
           "%.2f ms, max %.2f ms\n",
           lat[LATENCY_WAKES / 2] / 1e6, lat[LATENCY_WAKES * 9 / 10] / 1e6,
           lat[LATENCY_WAKES - 1] / 1e6);

    /* 2. throughput, on a model server that does not report arrivals */
    for (int i = 0; i < daemons; i++) {
        kill(pids[i], SIGTERM);
        waitpid(pids[i], NULL, 0);
    }
    pid_t model2 = vg_instant_model_start(0, 0, -1, &port2);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port2);
    int64_t base = completed(rt->env.store);
    if (vg_store_begin(rt->env.store, &err))
        return 1;
    for (int i = 0; i < wakes; i++) {
        char a[37];
        vigil_agent_spec s2 = {.name = "many"};
        if (vigil_agent_create(rt, &s2, a, &err) || vigil_agent_resume(rt, a, NULL, &err) ||
            vigil_wake_agent(rt, a, "go", "s", key, &err)) {
            fprintf(stderr, "queue: %s\n", err.message);
            return 1;
        }
    }
    if (vg_store_commit(rt->env.store, &err))
        return 1;
    int64_t t0 = mono_ns();
    for (int i = 0; i < daemons; i++)
        pids[i] = serve(store, url);
    while (completed(rt->env.store) - base < wakes)
        usleep(10000);
    double secs = (mono_ns() - t0) / 1e9;
    printf("%d queued wakes of %d agents, from the daemons' start until all completed: %.2f s, "
           "%.0f wakes/s\n",
           wakes, wakes, secs, wakes / secs);
    for (int i = 0; i < daemons; i++) {
        kill(pids[i], SIGTERM);
        waitpid(pids[i], NULL, 0);
    }
    kill(model, SIGKILL);
    waitpid(model, NULL, 0);
    kill(model2, SIGKILL);
    waitpid(model2, NULL, 0);
    vigil_runtime_close(rt);
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", db);
    vg_test_pg_sql(sql);
    return 0;
}
