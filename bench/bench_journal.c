/*
 * bench_journal.c: journal figures. Append rate with one transaction per record and batched
 * in one transaction, replay time of a 10,000-record run, and run-history page latency over
 * many runs (default 100,000; pass a count, e.g. 1000000). History runs are inserted as run
 * records directly in large transactions (the page query reads only those), so the figure is
 * the page latency, not the time to create them. Prints figures; asserts nothing.
 *
 * usage: bench_journal [history_runs] [append_records]
 */
#include "helpers/test.h"

#include "journal/journal.h"
#include "os/clock.h"
#include "os/ids.h"
#include "store/store.h"
#include "bench_util.h"

static struct vg_clock *rc_clock;

static double now_s(void)
{
    return (double)vg_clock_mono_ns(rc_clock) / 1e9;
}

static void append_one(struct vg_run *run, long i)
{
    char prog[128];
    snprintf(prog, sizeof prog, "{\"summary\":\"step %ld\",\"units\":{\"completed\":%ld}}", i, i);
    if (i % 4 == 0) {
        char oid[32];
        snprintf(oid, sizeof oid, "obs-%ld", i);
        struct vg_journal_observation o = {.observation_id = oid,
                                           .source = "sdk",
                                           .confidence = "high",
                                           .signal_json =
                                               "{\"type\":\"progress\",\"summary\":\"x\"}"};
        ASSERT_OK(vg_journal_observe(run, &o, NULL, E));
    } else {
        struct vg_journal_activity a = {.progress_json = prog};
        ASSERT_OK(vg_journal_activity(run, &a, E));
    }
}

/* Median and p99 of n page fetches (ms). */
static void page_latency(struct vg_store *s, const char *label, const char *agent,
                         const char *status, int deep)
{
    enum { N = 200 };
    double t[N];
    char *cursor = NULL;
    for (int i = 0; i < N; i++) {
        char *out = NULL;
        double t0 = now_s();
        ASSERT_OK(vg_journal_runs_list(s, agent, status, deep ? cursor : NULL, 50, &out, E));
        t[i] = (now_s() - t0) * 1000.0;
        if (deep) {
            const char *c = strstr(out, "\"next_cursor\":\"");
            vg_free(cursor);
            cursor = NULL;
            if (c) {
                c += 15;
                cursor = vg_strndup(c, (size_t)(strchr(c, '"') - c));
            }
        }
        vg_free(out);
    }
    vg_free(cursor);
    qsort(t, N, sizeof t[0], bench_cmp_double);
    printf("  history page (50) %-28s median %.3f ms  p99 %.3f ms\n", label, t[N / 2],
           t[N * 99 / 100]);
}

int main(int argc, char **argv)
{
    long history_runs = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
    long n_append = argc > 2 ? strtol(argv[2], NULL, 10) : 2000;
    rc_clock = vg_clock_real();
    struct vg_ids *ids = vg_ids_real(rc_clock);
    char path[4300];
    snprintf(path, sizeof path, "%s/bench.db", vg_test_tmpdir("bench_journal"));
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    struct vg_run_launch l = {.agent_id = "0190aaaa-0000-7000-8000-000000000001",
                              .run_key = "bench",
                              .wake_reason = "bench"};

    printf("journal benchmark (SQLite store at %s)\n", path);
    /* 1. one transaction per record */
    struct vg_run *run = NULL;
    ASSERT_OK(vg_journal_run_open(s, rc_clock, ids, &l, &run, E));
    double t0 = now_s();
    for (long i = 0; i < n_append; i++)
        append_one(run, i);
    double dt = now_s() - t0;
    printf("  append, one transaction per record: %ld records in %.3f s = %.0f records/s\n",
           n_append, dt, n_append / dt);
    vg_journal_run_free(run);

    /* 2. batched: a 10,000-record run in one transaction, then replayed */
    long n_batch = 10000;
    ASSERT_OK(vg_journal_run_open(s, rc_clock, ids, &l, &run, E));
    char run_id[37];
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    t0 = now_s();
    ASSERT_OK(vg_store_begin(s, E));
    for (long i = 1; i < n_batch; i++)
        append_one(run, i);
    ASSERT_OK(vg_store_end(s, VIGIL_OK, E));
    dt = now_s() - t0;
    printf("  append, batched in one transaction: %ld records in %.3f s = %.0f records/s\n",
           n_batch - 1, dt, (n_batch - 1) / dt);
    vg_journal_run_free(run);
    for (int rep = 0; rep < 3; rep++) {
        char *out = NULL;
        t0 = now_s();
        ASSERT_OK(vg_journal_replay(s, run_id, &out, E));
        dt = now_s() - t0;
        printf("  replay of a %ld-record run: %.3f s (%s)\n", n_batch, dt,
               strstr(out, "\"stored_projection_matches\":true") ? "matches stored" : "MISMATCH");
        vg_free(out);
    }

    /* 3. history pages over many runs */
    t0 = now_s();
    int64_t base = vg_clock_now_ms(rc_clock) - history_runs * 10;
    static const char *const statuses[] = {"completed", "completed", "completed",
                                           "failed",    "running",   "canceled"};
    for (long i = 0; i < history_runs;) {
        ASSERT_OK(vg_store_begin(s, E));
        for (long k = 0; k < 20000 && i < history_runs; k++, i++) {
            char id[37], agent[40], body[512], at[32];
            vg_ids_new(ids, id);
            snprintf(agent, sizeof agent, "0190bbbb-0000-7000-8000-%012ld", i % 100);
            const char *st = statuses[i % 6];
            vg_time_format_ms(at, base + i * 10);
            snprintf(body, sizeof body,
                     "{\"agent_id\":\"%s\",\"cost_micros\":12,\"ended_at\":null,"
                     "\"model_calls\":3,\"run_id\":\"%s\",\"run_key\":\"key-%ld\","
                     "\"started_at\":\"%s\",\"status\":\"%s\",\"summary\":\"did things\","
                     "\"tool_calls\":2,\"usage\":{\"cached_tokens\":0,\"input_tokens\":100,"
                     "\"output_tokens\":20},\"wake_reason\":\"timer\"}",
                     agent, id, i, at, st);
            struct vg_record r = {.kind = "run",
                                  .id = id,
                                  .owner = agent,
                                  .k1 = st,
                                  .k2 = "",
                                  .seq = base + i * 10,
                                  .at = base + i * 10,
                                  .body = body};
            ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
        }
        ASSERT_OK(vg_store_end(s, VIGIL_OK, E));
    }
    printf("  inserted %ld run records in %.1f s\n", history_runs, now_s() - t0);
    page_latency(s, "all runs, first page", NULL, NULL, 0);
    page_latency(s, "all runs, 200 pages deep", NULL, NULL, 1);
    page_latency(s, "by agent", "0190bbbb-0000-7000-8000-000000000007", NULL, 0);
    page_latency(s, "by status (failed)", NULL, "failed", 0);
    page_latency(s, "by agent + status, paging", "0190bbbb-0000-7000-8000-000000000007",
                 "completed", 1);
    int64_t size = 0;
    vg_store_control(s, VG_STORE_CTRL_FILE_SIZE, &size, NULL);
    printf("  store size: %.1f MB\n", size / 1e6);
    vg_store_close(s);
    vg_ids_free(ids);
    return 0;
}
