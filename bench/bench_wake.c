/*
 * bench_wake.c: figures for the wake module (docs/internals/WAKE.md).
 *
 *   bench_wake match [NSUBS]          subscription matching with NSUBS persisted subscriptions:
 *                                     batches/s and cost per batch for batch sizes 1, 10, 100,
 *                                     for batches that miss every subscription (the index
 *                                     lookups alone) and batches whose every token hits one
 *   bench_wake timers [NTIMERS] [NDUE] NTIMERS persisted timers, NDUE due in the same second:
 *                                     time until all due ones are enqueued
 *   bench_wake agents NAGENTS PATH    build a store of NAGENTS dormant agents, each with one
 *                                     subscription and one timer (for the daemon RSS figure)
 *
 * Without arguments it runs match and timers with small counts. Time is measured with the real
 * clock's monotonic reading; the wake system itself runs on a test clock.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "wake/wake.h"

#include <unistd.h>

static double secs(int64_t ns)
{
    return (double)ns / 1e9;
}

static int64_t mono(void)
{
    return vg_clock_mono_ns(vg_clock_real());
}

static void agents(struct test_rt *t, int n, char (*ids)[37], int active)
{
    vigil_error err = {0};
    for (int i = 0; i < n; i++) {
        if (i % 1000 == 0 && vg_store_begin(t->env->store, &err))
            exit(1);
        char name[32]; /* a name belongs to one live agent */
        snprintf(name, sizeof name, "bench-%d", i);
        vigil_agent_spec spec = {.name = name, .mode = "autonomous"};
        if (vigil_agent_create(t->rt, &spec, ids[i], &err) ||
            vg_agent_transition(t->env, ids[i],
                                active ? VIGIL_LIFECYCLE_ACTIVE : VIGIL_LIFECYCLE_DORMANT, NULL,
                                &err)) {
            fprintf(stderr, "bench: %s\n", err.message);
            exit(1);
        }
        if ((i % 1000 == 999 || i == n - 1) && vg_store_end(t->env->store, VIGIL_OK, &err))
            exit(1);
    }
}

static void bench_match(long nsubs)
{
    struct test_rt t;
    struct vg_wake w;
    vigil_error err = {0};
    int nagents = nsubs < 1000 ? (int)nsubs : 1000;
    char(*ids)[37] = vg_calloc((size_t)nagents, 37);
    test_rt_open(&t, "bench_match");
    agents(&t, nagents, ids, 1);
    int64_t t0 = mono();
    for (long i = 0; i < nsubs; i++) {
        char tok[40], id[201];
        const char *toks[] = {tok};
        snprintf(tok, sizeof tok, "entity-%ld", i);
        if (i % 10000 == 0 && vg_store_begin(t.env->store, &err))
            exit(1);
        struct vg_sub_spec s = {.agent_id = ids[i % nagents], .tokens = toks, .n_tokens = 1};
        if (vg_sub_add(t.env, &s, id, &err)) {
            fprintf(stderr, "bench: %s\n", err.message);
            exit(1);
        }
        if ((i % 10000 == 9999 || i == nsubs - 1) && vg_store_end(t.env->store, VIGIL_OK, &err))
            exit(1);
    }
    printf("match: %ld subscriptions over %d agents persisted in %.1f s\n", nsubs, nagents,
           secs(mono() - t0));
    if (vg_wake_init(&w, t.env, NULL, &err))
        exit(1);
    static const int sizes[] = {1, 10, 100};
    uint64_t seq = 0;
    for (int hit = 0; hit < 2; hit++) {
        for (size_t k = 0; k < VG_ARRAY_LEN(sizes); k++) {
            int size = sizes[k], batches = size == 100 ? 50 : 300;
            char(*tok)[40] = vg_calloc((size_t)size, 40);
            const char **toks = vg_calloc((size_t)size, sizeof *toks);
            int64_t matched = 0, start = mono();
            for (int b = 0; b < batches; b++) {
                struct vg_wake_batch wb;
                struct vg_match_stats st;
                char sq[32];
                for (int i = 0; i < size; i++) {
                    long x = (long)(vg_ids_random_u64(t.env->ids) % (uint64_t)nsubs);
                    snprintf(tok[i], 40, hit ? "entity-%ld" : "missing-%ld", x);
                    toks[i] = tok[i];
                }
                snprintf(sq, sizeof sq, "b%llu", (unsigned long long)++seq);
                if (vg_wake_batch_build(&wb, toks, (size_t)size, NULL, sq, &err) ||
                    vg_wake_batch_process(&w, &wb, &st, &err)) {
                    fprintf(stderr, "bench: %s\n", err.message);
                    exit(1);
                }
                matched += st.matched_subs;
                vg_wake_batch_release(&wb);
            }
            double s = secs(mono() - start);
            printf("match: %-4s batch size %3d: %8.0f batches/s, %8.1f us/batch, %6.2f us/token"
                   " (%lld subscriptions matched)\n",
                   hit ? "hit" : "miss", size, batches / s, s * 1e6 / batches,
                   s * 1e6 / batches / size, (long long)matched);
            vg_free(tok);
            vg_free(toks);
        }
    }
    vg_wake_release(&w);
    vg_free(ids);
    test_rt_close(&t);
}

static void bench_timers(long ntimers, long ndue)
{
    struct test_rt t;
    struct vg_wake w;
    vigil_error err = {0};
    int nagents = ntimers < 1000 ? (int)ntimers : 1000, fired = 0;
    char(*ids)[37] = vg_calloc((size_t)nagents, 37);
    test_rt_open(&t, "bench_timers");
    agents(&t, nagents, ids, 1);
    int64_t t0 = mono(), due_at = t.clock.wall_ms + 3600000; /* 01:00 UTC */
    char at[32];
    vg_time_format_ms(at, due_at);
    for (long i = 0; i < ntimers; i++) {
        char id[37];
        if (i % 10000 == 0 && vg_store_begin(t.env->store, &err))
            exit(1);
        /* ndue one-shots at 01:00:00 (the same second); the rest daily at 07:00 Berlin. */
        vigil_code rc =
            i < ndue ? vg_timer_add(t.env, ids[i % nagents], VG_TIMER_AT, at, "UTC", id, &err)
                     : vg_timer_add(t.env, ids[i % nagents], VG_TIMER_CRON, "0 7 * * *",
                                    "Europe/Berlin", id, &err);
        if (rc) {
            fprintf(stderr, "bench: %s\n", err.message);
            exit(1);
        }
        if ((i % 10000 == 9999 || i == ntimers - 1) && vg_store_end(t.env->store, VIGIL_OK, &err))
            exit(1);
    }
    printf("timers: %ld persisted in %.1f s\n", ntimers, secs(mono() - t0));
    if (vg_wake_init(&w, t.env, NULL, &err))
        exit(1);
    vg_test_clock_set_wall(&t.clock, due_at + 999);
    int64_t start = mono();
    if (vg_timer_fire_due(&w, 0, &fired, &err)) {
        fprintf(stderr, "bench: %s\n", err.message);
        exit(1);
    }
    double s = secs(mono() - start);
    struct vg_query q = {.kind = "wake_run", .k1 = "queued"};
    int64_t queued = 0;
    vg_store_count(t.env->store, &q, &queued, &err);
    printf("timers: %d of %ld due in one second enqueued in %.2f s (%.0f timers/s; %lld wakes "
           "after per-agent coalescing over %d agents)\n",
           fired, ndue, s, fired / s, (long long)queued, nagents);
    vg_wake_release(&w);
    vg_free(ids);
    test_rt_close(&t);
}

static void bench_agents(long n, const char *path)
{
    vigil_error err = {0};
    vigil_runtime *rt = NULL;
    struct vg_test_clock clock;
    vg_test_clock_init(&clock, 1767225600000);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path, .create_if_missing = 1};
    if (vg_runtime_open_with(&o, vg_clock_real(), NULL, &rt, &err)) {
        fprintf(stderr, "bench: %s\n", err.message);
        exit(1);
    }
    struct vg_env *env = vg_runtime_env(rt);
    int64_t t0 = mono();
    for (long i = 0; i < n; i++) {
        char id[37], sid[201], tid[37], tok[40], name[40];
        const char *toks[] = {tok};
        snprintf(tok, sizeof tok, "entity-%ld", i);
        snprintf(name, sizeof name, "sleeper-%ld", i); /* a name belongs to one live agent */
        if (i % 1000 == 0 && vg_store_begin(env->store, &err))
            exit(1);
        vigil_agent_spec spec = {.name = name, .mode = "autonomous"};
        struct vg_sub_spec s = {.tokens = toks, .n_tokens = 1};
        if (vigil_agent_create(rt, &spec, id, &err) ||
            vg_agent_transition(env, id, VIGIL_LIFECYCLE_ACTIVE, NULL, &err) ||
            vg_agent_transition(env, id, VIGIL_LIFECYCLE_DORMANT, NULL, &err) ||
            (s.agent_id = id, vg_sub_add(env, &s, sid, &err)) ||
            vg_timer_add(env, id, VG_TIMER_CRON, "0 7 * * *", "Europe/Berlin", tid, &err)) {
            fprintf(stderr, "bench: %s\n", err.message);
            exit(1);
        }
        if ((i % 1000 == 999 || i == n - 1) && vg_store_end(env->store, VIGIL_OK, &err))
            exit(1);
    }
    printf("agents: %ld dormant agents with a subscription and a timer each in %.1f s: %s\n", n,
           secs(mono() - t0), path);
    vigil_runtime_close(rt);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "match")) {
        bench_match(argc > 2 ? strtol(argv[2], NULL, 10) : 1000000);
    } else if (argc >= 2 && !strcmp(argv[1], "timers")) {
        long n = argc > 2 ? strtol(argv[2], NULL, 10) : 1000000;
        bench_timers(n, argc > 3 ? strtol(argv[3], NULL, 10) : VG_MIN(10000, n));
    } else if (argc >= 4 && !strcmp(argv[1], "agents")) {
        bench_agents(strtol(argv[2], NULL, 10), argv[3]);
    } else if (argc == 1) {
        bench_match(20000);
        bench_timers(20000, 2000);
    } else {
        fprintf(stderr, "usage: bench_wake [match [NSUBS] | timers [NTIMERS [NDUE]] | agents N "
                        "PATH]\n");
        return 2;
    }
    return 0;
}
