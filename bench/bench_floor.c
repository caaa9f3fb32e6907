/*
 * bench_floor.c: what an agent step costs on this machine before vigil does anything, so the
 * per-step figures of bench_loop can be read against it. Three parts a durable step cannot
 * drop, each measured bare, without vigil's code:
 *   - one HTTP exchange with the loopback model server of bench_loop, through libcurl with a
 *     reused handle (the request body the size of a mid-run request);
 *   - one durable SQLite commit of one small row, with the store's settings (write-ahead log,
 *     synchronous=FULL);
 *   - one 4 KiB write and fdatasync of a plain file;
 * and the resident memory of this process (linked like vigil) before and after libcurl starts.
 * Prints figures; asserts nothing.
 *
 *   bench_floor [COUNT] [BODY_BYTES] [DIR]   (defaults: 3000, 3000, /tmp)
 */
#include "base/common.h"

#include "helpers/model_server.h"

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
    printf("%-44s %7.1f us cpu (user %.1f, kernel %.1f), %7.1f us wall\n", what, user + sys,
           user, sys, (b.wall - a.wall) / n * 1e6);
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
    static const char head[] = "{\"model\":\"bench\",\"messages\":[{\"role\":\"user\",\"content\":\"";
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

static int commit_floor(const char *dir, int n)
{
    char path[4096], p[4200];
    snprintf(path, sizeof path, "%s/bench_floor.db", dir);
    for (int i = 0; i < 3; i++) {
        static const char *const sfx[] = {"", "-wal", "-shm"};
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        remove(p);
    }
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
