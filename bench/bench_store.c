/*
 * bench_store.c: store figures (printed, not asserted). For SQLite, and for PostgreSQL when
 * VIGIL_PG_URI is set:
 *   - time per appended record, one transaction (one durable commit) per append, and in
 *     batches of 1000 per transaction, measured at a history of 10, 100k and N records of one
 *     owner (ratio first/last: appending must not slow down as history grows);
 *   - a "latest 50" read of one thread (k1) holding 10 vs N records;
 *   - bytes on disk per record.
 * Usage: bench_store [N=100000] [DIR=.]   (N = 1000000 for the figures in docs/internals/STORE.md)
 * The store lives in DIR on a real file system: commits fsync, and that is what is measured.
 */
#include "helpers/test.h"

#include "helpers/pg_env.h"
#include "os/clock.h"
#include "store/store.h"
#include "bench_util.h"

#include <unistd.h>

#define BODY_LEN 240 /* a typical small message record */
#define SINGLES 200  /* single-transaction appends per measurement */
#define BATCHES 5    /* batches of 1000 per measurement */
#define READS 500    /* latest-50 reads per measurement */

static char body[BODY_LEN + 1];
static long next_id;

static double now_us(void)
{
    return (double)vg_clock_mono_ns(vg_clock_real()) / 1000.0;
}

static void die(vigil_code rc, const vigil_error *err, const char *what)
{
    fprintf(stderr, "bench_store: %s: %s: %s\n", what, vigil_code_name(rc), err->message);
    exit(1);
}

static void append(struct vg_store *s, const char *owner, const char *k1)
{
    char id[40];
    vigil_error err = {0};
    snprintf(id, sizeof id, "msg-%012ld", next_id);
    struct vg_record r = {.kind = "message",
                          .id = id,
                          .owner = owner,
                          .k1 = k1,
                          .k2 = "user",
                          .seq = next_id,
                          .at = 1700000000000 + next_id,
                          .body = body};
    next_id++;
    vigil_code rc = vg_store_put(s, &r, 0, NULL, &err);
    if (rc)
        die(rc, &err, "append");
}

/* n appends in transactions of `per` records; returns microseconds per append. */
static double append_run(struct vg_store *s, long n, long per, const char *k1)
{
    vigil_error err = {0};
    double t0 = now_us();
    for (long i = 0; i < n; i += per) {
        vigil_code rc = VIGIL_OK;
        if (per > 1 && (rc = vg_store_begin(s, &err)))
            die(rc, &err, "begin");
        for (long j = 0; j < per && i + j < n; j++)
            append(s, "agent-1", k1);
        if (per > 1 && (rc = vg_store_commit(s, &err)))
            die(rc, &err, "commit");
    }
    return (now_us() - t0) / (double)n;
}

static int count_cb(void *user, const struct vg_record *r)
{
    (*(long *)user)++;
    return 0;
}

/* Microseconds per "latest 50 messages of this thread" read. */
static double latest50(struct vg_store *s, const char *k1)
{
    vigil_error err = {0};
    struct vg_query q = {
        .kind = "message", .owner = "agent-1", .k1 = k1, .descending = 1, .limit = 50};
    long rows = 0;
    double t0 = now_us();
    for (int i = 0; i < READS; i++) {
        vigil_code rc = vg_store_scan(s, &q, count_cb, &rows, &err);
        if (rc)
            die(rc, &err, "scan");
    }
    return (now_us() - t0) / READS;
}

struct point {
    long history;
    double single_us, batch_us;
};

static void bench(const char *label, const char *uri, long n)
{
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    vigil_error err = {0};
    vigil_code rc = vg_store_open(uri, &o, &s, &err);
    if (rc)
        die(rc, &err, "open");
    next_id = 0;
    printf("\n== %s (N = %ld records of one owner, %d-byte bodies)\n", label, n, BODY_LEN);

    /* The small thread first: 10 records, read while it is the whole history. */
    append_run(s, 10, 10, "thread-small");
    double read_small_alone = latest50(s, "thread-small");

    long marks[3] = {10, 100000, n};
    struct point pts[3];
    int npts = 0;
    long last_mark = 0;
    for (int m = 0; m < 3; m++) {
        if (marks[m] <= last_mark || marks[m] > n)
            continue;
        last_mark = marks[m];
        long have = next_id;
        if (have < marks[m]) {
            double t0 = now_us();
            append_run(s, marks[m] - have, 1000, "thread-big");
            fprintf(stderr, "  %s: filled to %ld records (%.1f s)\n", label, marks[m],
                    (now_us() - t0) / 1e6);
        }
        pts[npts].history = next_id;
        pts[npts].single_us = append_run(s, SINGLES, 1, "thread-big");
        pts[npts].batch_us = append_run(s, BATCHES * 1000, 1000, "thread-big");
        printf("history %8ld: one tx per append %8.1f us/append (%6.0f appends/s); "
               "batches of 1000 %6.2f us/append\n",
               pts[npts].history, pts[npts].single_us, 1e6 / pts[npts].single_us,
               pts[npts].batch_us);
        npts++;
    }
    if (npts > 1)
        printf("ratio last/first: one tx per append %.2f, batches %.2f\n",
               pts[npts - 1].single_us / pts[0].single_us,
               pts[npts - 1].batch_us / pts[0].batch_us);

    double read_big = latest50(s, "thread-big");
    double read_small = latest50(s, "thread-small");
    printf("latest-50 read of one thread: 10 records (alone) %.1f us, 10 records (beside %ld) "
           "%.1f us, %ld records %.1f us\n",
           read_small_alone, next_id, read_small, next_id - 10, read_big);

    int64_t size = 0;
    if ((rc = vg_store_control(s, VG_STORE_CTRL_CHECKPOINT, NULL, &err)) ||
        (rc = vg_store_control(s, VG_STORE_CTRL_FILE_SIZE, &size, &err)))
        die(rc, &err, "size");
    printf("on disk: %.1f MB for %ld records = %.0f bytes/record (body %d bytes)\n",
           (double)size / 1e6, next_id, (double)size / (double)next_id, BODY_LEN);
    vg_store_close(s);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
    const char *dir = argc > 2 ? argv[2] : ".";
    if (n < 10) {
        fprintf(stderr, "usage: bench_store [N >= 10] [DIR]\n");
        return 2;
    }
    snprintf(body, sizeof body, "{\"role\":\"user\",\"text\":\"");
    size_t len = strlen(body);
    for (; len < BODY_LEN - 2; len++)
        body[len] = (char)('a' + len % 26);
    body[len++] = '"';
    body[len++] = '}';
    body[len] = '\0';

    char path[4200];
    snprintf(path, sizeof path, "%s/bench-store-%ld.db", dir, (long)getpid());
    bench("sqlite (WAL, synchronous=FULL)", path, n);
    bench_remove_store(path);

    const char *pg = getenv("VIGIL_PG_URI");
    if (pg && *pg) {
        char uri[1024];
        vg_test_pg_schema_uri("vg_bench", 1, uri, sizeof uri);
        bench("postgres (synchronous_commit=on)", uri, n);
        vg_test_pg_sql("DROP SCHEMA vg_bench CASCADE");
    } else {
        printf("\n(postgres: set VIGIL_PG_URI to measure it too)\n");
    }
    return 0;
}
