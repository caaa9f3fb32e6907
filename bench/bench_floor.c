/*
 * bench_floor.c: what an agent step costs on this machine before vigil does anything, so the
 * per-step figures of bench_loop can be read against it. Three parts a durable step cannot
 * drop, each measured bare, without vigil's code:
 *   - one HTTP exchange with the loopback model server of bench_loop, through libcurl with a
 *     reused handle (the request body the size of a mid-run request);
 *   - one durable SQLite commit of one small row, with the store's settings (write-ahead log,
 *     synchronous=FULL);
 *   - one 4 KiB write and fdatasync of a plain file;
 *   - a step's writes in an append-only layout made for the hot path (lean_step_floor);
 * and the resident memory of this process (linked like vigil) before and after libcurl starts.
 * Prints figures; asserts nothing.
 *
 *   bench_floor [COUNT] [BODY_BYTES] [DIR]   (defaults: 3000, 3000, /tmp)
 */
#include "base/common.h"

#include "helpers/model_server.h"
#include "bench_util.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct cost {
    double wall, user, sys;
};

static struct cost now(void)
{
    struct timespec ts;
    struct rusage ru;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    getrusage(RUSAGE_SELF, &ru);
    return (struct cost){ts.tv_sec + ts.tv_nsec / 1e9,
                         ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
                         ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6};
}

static void report(const char *what, struct cost a, struct cost b, int n)
{
    double user = (b.user - a.user) / n * 1e6, sys = (b.sys - a.sys) / n * 1e6;
    printf("%-44s %7.1f us cpu (user %.1f, kernel %.1f), %7.1f us wall\n", what, user + sys, user,
           sys, (b.wall - a.wall) / n * 1e6);
}

static double rss_mb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (double)sysconf(_SC_PAGESIZE) / 1e6;
}

static size_t discard(char *p, size_t size, size_t n, void *user)
{
    (void)p;
    (void)user;
    return size * n;
}

/* A chat request with one user message, padded to about `bytes`. */
static char *request_body(size_t bytes)
{
    static const char head[] =
        "{\"model\":\"bench\",\"messages\":[{\"role\":\"user\",\"content\":\"";
    static const char tail[] = "\"}],\"tools\":[]}";
    size_t pad = bytes > sizeof head + sizeof tail ? bytes - sizeof head - sizeof tail : 1;
    char *b = malloc(sizeof head + pad + sizeof tail);
    if (!b)
        return NULL;
    memcpy(b, head, sizeof head - 1);
    memset(b + sizeof head - 1, 'x', pad);
    memcpy(b + sizeof head - 1 + pad, tail, sizeof tail);
    return b;
}

static int http_floor(int port, int n, size_t bytes)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", port);
    char *body = request_body(bytes);
    double before = rss_mb();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (!body || !h || !hdrs) {
        fprintf(stderr, "bench_floor: out of memory\n");
        return 1;
    }
    printf("resident memory: %.1f MB with vigil's libraries loaded, %.1f MB once libcurl has "
           "started\n",
           before, rss_mb());
    struct cost a = {0};
    for (int i = 0; i < n + 100; i++) {
        if (i == 100)
            a = now(); /* after the connection and the first requests */
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        CURLcode rc = curl_easy_perform(h);
        if (rc != CURLE_OK) {
            fprintf(stderr, "bench_floor: request failed: %s\n", curl_easy_strerror(rc));
            return 1;
        }
    }
    char what[64];
    snprintf(what, sizeof what, "HTTP exchange, %zu-byte request:", strlen(body));
    report(what, a, now(), n);
    printf("resident memory after the exchanges: %.1f MB\n", rss_mb());
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    curl_global_cleanup();
    free(body);
    return 0;
}

/* Log frames the connection's commits wrote, counted by the WAL hook, which also checkpoints
 * as SQLite's default hook does (at 1000 frames). */
static long lean_frames, lean_last;

static int count_frames(void *user, sqlite3 *db, const char *name, int frames)
{
    (void)user;
    lean_frames += frames > lean_last ? frames - lean_last : frames;
    lean_last = frames;
    if (frames >= 1000) {
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        lean_last = 0; /* the log starts over at the next commit */
    }
    return SQLITE_OK;
}

/*
 * What a step's writes would cost in a layout made for the hot path, as PERF.md weighs it: one
 * append-only table of the run's records (the sequence is the row id, one index by run) and one
 * small head row per run, guarding the sequence, updated at each commit. A step writes what
 * vigil's does, as bytes: the model's turn (thought 370 bytes, action 560, the model call's
 * record 415, the tool call's start 600) in a durable commit, the tool's result (360) and its
 * end (600) in a commit that is not synced. No JSON is built; this is SQLite's and the kernel's
 * part only.
 */
static int lean_step_floor(const char *dir, int n)
{
    static const int sizes[6] = {370, 560, 415, 600, 360, 600};
    static const char fill[600] = {'r'};
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_floor_lean.db", dir);
    bench_remove_store(path);
    sqlite3 *db = NULL;
    sqlite3_stmt *ins = NULL, *head = NULL, *full = NULL, *normal = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK ||
        sqlite3_exec(db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                     "CREATE TABLE step_log(seq INTEGER PRIMARY KEY, run TEXT NOT NULL,"
                     " body BLOB NOT NULL);"
                     "CREATE INDEX step_log_run ON step_log(run, seq);"
                     "CREATE TABLE run_head(run TEXT PRIMARY KEY, seq INTEGER NOT NULL,"
                     " rev INTEGER NOT NULL);"
                     "INSERT INTO run_head VALUES('01a20a7c-6d2a-719a-bae0-c3b8c90a1d89', 0, 0);",
                     NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO step_log(run, body) VALUES(?, ?)", -1, &ins, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v2(db, "UPDATE run_head SET seq=seq+?, rev=rev+1 WHERE run=? AND rev=?", -1,
                           &head, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "PRAGMA synchronous=FULL", -1, &full, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "PRAGMA synchronous=NORMAL", -1, &normal, NULL) != SQLITE_OK) {
        fprintf(stderr, "bench_floor: %s: %s\n", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return 1;
    }
    sqlite3_wal_hook(db, count_frames, NULL);
    static const char run[] = "01a20a7c-6d2a-719a-bae0-c3b8c90a1d89";
    long rev = 0;
    lean_frames = lean_last = 0;
    struct cost a = now();
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < 2; c++) { /* the durable commit, then the one not synced */
            sqlite3_stmt *mode = c == 0 ? full : normal;
            sqlite3_step(mode);
            sqlite3_reset(mode);
            int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
            for (int r = c * 4; rc == SQLITE_OK && r < (c == 0 ? 4 : 6); r++) {
                sqlite3_bind_text(ins, 1, run, -1, SQLITE_STATIC);
                sqlite3_bind_blob(ins, 2, fill, sizes[r], SQLITE_STATIC);
                rc = sqlite3_step(ins) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
                sqlite3_reset(ins);
            }
            sqlite3_bind_int(head, 1, c == 0 ? 4 : 2);
            sqlite3_bind_text(head, 2, run, -1, SQLITE_STATIC);
            sqlite3_bind_int64(head, 3, rev++);
            if (rc == SQLITE_OK && (sqlite3_step(head) != SQLITE_DONE || sqlite3_changes(db) != 1))
                rc = SQLITE_ERROR;
            sqlite3_reset(head);
            if (rc != SQLITE_OK || sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
                fprintf(stderr, "bench_floor: lean step failed: %s\n", sqlite3_errmsg(db));
                return 1;
            }
        }
    }
    struct cost b = now();
    report("a step's writes, append-only layout:", a, b, n);
    printf("  (6 records and 2 head updates in 2 commits, 1 durable: %.1f log frames a step)\n",
           (double)lean_frames / n);
    sqlite3_finalize(ins);
    sqlite3_finalize(head);
    sqlite3_finalize(full);
    sqlite3_finalize(normal);
    sqlite3_close(db);
    bench_remove_store(path);
    return 0;
}

static int commit_floor(const char *dir, int n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/bench_floor.db", dir);
    bench_remove_store(path);
    sqlite3 *db = NULL;
    sqlite3_stmt *ins = NULL;
    static const char row[600] = {'r'};
    if (sqlite3_open(path, &db) != SQLITE_OK ||
        sqlite3_exec(db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                     "CREATE TABLE t(id INTEGER PRIMARY KEY, body BLOB NOT NULL);",
                     NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO t(body) VALUES(?)", -1, &ins, NULL) != SQLITE_OK) {
        fprintf(stderr, "bench_floor: %s: %s\n", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return 1;
    }
    struct cost a = now();
    for (int i = 0; i < n; i++) {
        sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
        sqlite3_bind_blob(ins, 1, row, sizeof row, SQLITE_STATIC);
        int rc = sqlite3_step(ins);
        sqlite3_reset(ins);
        if (rc != SQLITE_DONE || sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
            fprintf(stderr, "bench_floor: insert failed: %s\n", sqlite3_errmsg(db));
            return 1;
        }
    }
    report("SQLite durable commit of one 600-byte row:", a, now(), n);
    sqlite3_finalize(ins);
    sqlite3_close(db);
    remove(path);
    if (lean_step_floor(dir, n))
        return 1;

    snprintf(path, sizeof path, "%s/bench_floor.raw", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    static const char page[4096] = {'p'};
    if (fd < 0) {
        perror(path);
        return 1;
    }
    a = now();
    for (int i = 0; i < n; i++) {
        if (pwrite(fd, page, sizeof page, (off_t)i * (off_t)sizeof page) != sizeof page ||
            fdatasync(fd) != 0) {
            perror(path);
            close(fd);
            return 1;
        }
    }
    report("4 KiB pwrite + fdatasync of a file:", a, now(), n);
    close(fd);
    remove(path);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 3000;
    long bytes = argc > 2 ? strtol(argv[2], NULL, 10) : 3000;
    const char *dir = argc > 3 ? argv[3] : "/tmp";
    if (n <= 0 || bytes <= 0) {
        fprintf(stderr, "usage: bench_floor [COUNT] [BODY_BYTES] [DIR]\n");
        return 2;
    }
    int port;
    /* The server answers with a tool call until it sees a tool result: here, always. */
    pid_t server = vg_instant_model_start(1, 1, -1, &port);
    printf("vigil bench_floor: the bare cost of a durable step's parts, %d times each\n", n);
    int failed = http_floor(port, n, (size_t)bytes);
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    if (!failed)
        failed = commit_floor(dir, n / 3 > 0 ? n / 3 : 1);
    return failed;
}
