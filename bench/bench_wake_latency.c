/*
 * bench_wake_latency.c: wake-to-first-model-call latency on an idle daemon. A real `vigil
 * serve` (the built binary) runs agents through the agent loop against an instant loopback
 * model server; this process wakes an agent (durable queue + control-socket poke, as `vigil
 * wake` does) and measures until the model server sees the run's first request. Prints
 * figures; asserts nothing.
 *
 *   bench_wake_latency [WAKES] [DIR]     (default 50 wakes, store in /tmp)
 */
#include "helpers/rt.h"

#include "helpers/model_server.h"

#include "wake/wake.h"
#include "bench_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int wakes = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 50;
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    char store[4096], url[128], id[37], key[65];
    int pfd[2], port;
    vigil_error err = {0};
    if (wakes < 1 || wakes > 10000 || pipe(pfd))
        return 2;
    snprintf(store, sizeof store, "%s/bench_wake_latency.db", dir);
    bench_remove_store(store);
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

    pid_t daemon = fork();
    if (daemon == 0) {
        setenv("VIGIL_STORE", store, 1);
        setenv("VIGIL_MODEL_PROVIDER", "openai", 1);
        setenv("VIGIL_MODEL_BASE_URL", url, 1);
        setenv("VIGIL_MODEL", "bench", 1);
        unsetenv("VIGIL_WAKE_RUNNER");
        execl(VIGIL_BINARY_DIR "/vigil", "vigil", "serve", "--workers", "2", "--poll-ms", "1000",
              (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 2000 && !vg_daemon_running(store, NULL); i++)
        usleep(5000);
    usleep(200000); /* let the daemon finish its start-up (recovery, first poll) */

    int64_t *lat = calloc((size_t)wakes, sizeof *lat);
    for (int i = 0; i < wakes; i++) {
        char session[32];
        snprintf(session, sizeof session, "bench-%d", i);
        int64_t t0 = bench_mono_ns(), arrived = 0;
        if (vigil_wake_agent(rt, id, "ping", session, key, &err)) {
            fprintf(stderr, "wake: %s\n", err.message);
            break;
        }
        vg_daemon_poke(store);
        if (read(pfd[0], &arrived, sizeof arrived) != (ssize_t)sizeof arrived)
            break;
        lat[i] = arrived - t0;
        usleep(20000); /* idle again: let the run finish before the next wake */
    }
    qsort(lat, (size_t)wakes, sizeof *lat, bench_cmp_i64);
    printf("vigil bench_wake_latency: %d wakes of an idle daemon (2 workers, agent loop, instant "
           "loopback model)\n",
           wakes);
    printf("wake to first model call: p50 %.2f ms, p90 %.2f ms, max %.2f ms\n",
           lat[wakes / 2] / 1e6, lat[wakes * 9 / 10] / 1e6, lat[wakes - 1] / 1e6);
    kill(daemon, SIGTERM);
    waitpid(daemon, NULL, 0);
    kill(model, SIGKILL);
    waitpid(model, NULL, 0);
    vigil_runtime_close(rt);
    free(lat);
    return 0;
}
