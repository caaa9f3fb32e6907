/*
 * bench_pg_scale_out.c: daemons on one PostgreSQL store (the test server of scripts/pg.sh,
 * VIGIL_PG_URI; a database of its own per configuration). Real `vigil serve` processes (the
 * built binary) run agents through the agent loop against an instant loopback model server.
 * Prints figures; asserts nothing.
 *  1. Wake latency of an idle daemon: this process queues a user wake (its commit NOTIFYs the
 *     daemon's listener) and measures until the model server sees the run's first request.
 *     The daemon polls only every 5 s, so the figure is the work signal's (LISTEN/NOTIFY).
 *  2. Throughput: WAKES wakes of as many agents queued at once (one commit, after the daemons
 *     finished starting), until every one completed, with each of DAEMONS... daemons on
 *     PostgreSQL and one daemon on a SQLite file. CPU per wake by process (/proc/PID/stat):
 *     the daemons, the command tools they reaped, the database server's processes, the bench. Each
 * run is one tool step (a command tool, `cat`) and a final answer: two model calls.
 *  3. Where the time goes, with one daemon on PostgreSQL (BENCH_LOG_DAEMONS): statements and
 *     transactions per wake, and lock waits over 1 ms, from the server's own log
 *     (log_statement=all and log_lock_waits through PGOPTIONS, for that run only). The log is
 *     the file scripts/pg.sh starts the server with ($PG_DIR/log, next to the socket folder);
 *     BENCH_PG_LOG names another.
 *
 *   bench_pg_scale_out [WAKES [DAEMONS...]]     (default 200 wakes; 1, 2 and 4 daemons)
 *   BENCH_MODEL_DELAY_MS=50 gives the model server a latency per call. BENCH_WORKERS and
 *   BENCH_RUNS_PER_WORKER set each daemon's --workers (2) and --runs-per-worker (16): with 1
 *   and 1-4 and a model latency, each daemon is bound by that latency, not by CPU, and the
 *   rate can grow with daemons until the machine's cores are busy. BENCH_REPEAT=N runs the
 *   list of daemon counts N times in turn (1 2 4 1 2 4 ...), so a change of the machine's
 *   load falls on every count alike. BENCH_PARTS (default "latency,pg,sqlite,log") picks the
 *   parts to run; BENCH_LOG_DAEMONS (1) daemons make the logged run. BENCH_VIGIL names another
 * build's `vigil` for the daemons (a before/after from one bench binary). Per configuration it
 * prints the cores busy: this bench's processes' CPU (daemons, tools, database server, bench) over
 * the wall time, and the whole machine's
 *   (/proc/stat, everyone's work included), with the load average at the start.
 */
#include "helpers/pg_env.h"
#include "helpers/test.h"

#include "helpers/model_server.h"
#include "runtime/runtime_int.h"
#include "store/store.h"
#include "wake/wake.h"
#include "bench_util.h"

#include <signal.h>
#include <stdlib.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LATENCY_WAKES 50
#define MAX_DAEMONS 16
#define MAX_CONFIGS 32

static char workers_arg[16] = "2", runs_arg[16] = "16"; /* each daemon's --workers, runs */

static char config_path[512]; /* the config file declaring the `echo` command tool */

/* The test server's URI with another database. */
static void db_uri(const char *db, char *out, size_t n)
{
    const char *base = vg_test_pg_uri();
    const char *path = strchr(strstr(base, "://") + 3, '/');
    snprintf(out, n, "%.*s/%s%s", (int)(path - base), base, db, path + strcspn(path, "?"));
}

/* A fresh database of the test server for one configuration, as a store URI. */
static void fresh_db(int n, char *uri, size_t len)
{
    char db[64], sql[128];
    snprintf(db, sizeof db, "vg_bench_scale_%ld_%d", (long)getpid(), n);
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", db);
    vg_test_pg_sql(sql);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
    vg_test_pg_sql(sql);
    db_uri(db, uri, len);
}

static void drop_db(int n)
{
    char sql[128];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS vg_bench_scale_%ld_%d WITH (FORCE)",
             (long)getpid(), n);
    vg_test_pg_sql(sql);
}

static pid_t serve(const char *store, const char *url, const char *pgoptions)
{
    pid_t p = fork();
    if (p == 0) {
        setenv("VIGIL_STORE", store, 1);
        setenv("VIGIL_CONFIG", config_path, 1);
        setenv("VIGIL_MODEL_PROVIDER", "openai", 1);
        setenv("VIGIL_MODEL_BASE_URL", url, 1);
        setenv("VIGIL_MODEL", "bench", 1);
        if (pgoptions)
            setenv("PGOPTIONS", pgoptions, 1);
        unsetenv("VIGIL_WAKE_RUNNER");
        const char *vigil = getenv("BENCH_VIGIL"); /* another build's, for a before/after */
        execl(vigil && *vigil ? vigil : VIGIL_BINARY_DIR "/vigil", "vigil", "serve", "--workers",
              workers_arg, "--runs-per-worker", runs_arg, "--poll-ms", "5000", (char *)NULL);
        _exit(127);
    }
    return p;
}

static void stop(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        kill(pids[i], SIGTERM);
    for (int i = 0; i < n; i++)
        waitpid(pids[i], NULL, 0);
}

static int64_t completed(struct vg_store *s)
{
    struct vg_query q = {.kind = "wake_run", .k1 = "completed"};
    int64_t n = 0;
    (void)vg_store_count(s, &q, &n, NULL);
    return n;
}

static vigil_runtime *open_store(const char *store)
{
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    vigil_runtime_options o = {.size = sizeof o, .store_uri = store, .create_if_missing = 1};
    if (vigil_runtime_open(&o, &rt, &err)) {
        fprintf(stderr, "open %s: %s\n", store, err.message);
        exit(1);
    }
    return rt;
}

/* 1. Idle wake latency through LISTEN/NOTIFY, one daemon. */
static void latency(const char *store)
{
    int pfd[2], port;
    char url[128], id[37], key[65];
    vigil_error err = {0};
    if (pipe(pfd))
        exit(1);
    pid_t model = vg_instant_model_start(0, 0, pfd[1], &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
    vigil_runtime *rt = open_store(store);
    vigil_agent_spec spec = {.name = "latency"};
    if (vigil_agent_create(rt, &spec, id, &err) || vigil_agent_resume(rt, id, NULL, &err)) {
        fprintf(stderr, "setup: %s\n", err.message);
        exit(1);
    }
    pid_t d = serve(store, url, NULL);
    for (int i = 0; i < 2000 && !vg_daemon_running(store, NULL); i++)
        usleep(5000);
    usleep(500000); /* let the daemon finish its start-up (recovery, LISTEN) */
    int64_t lat[LATENCY_WAKES];
    for (int i = 0; i < LATENCY_WAKES; i++) {
        char session[32];
        snprintf(session, sizeof session, "bench-%d", i);
        int64_t t0 = bench_mono_ns(), arrived = 0;
        if (vigil_wake_agent(rt, id, "ping", session, key, &err)) {
            fprintf(stderr, "wake: %s\n", err.message);
            exit(1);
        }
        if (read(pfd[0], &arrived, sizeof arrived) != (ssize_t)sizeof arrived)
            exit(1);
        lat[i] = arrived - t0;
        usleep(20000); /* idle again: let the run finish before the next wake */
    }
    qsort(lat, LATENCY_WAKES, sizeof *lat, bench_cmp_i64);
    printf("idle wake to first model call (LISTEN/NOTIFY, poll every 5 s), %d wakes: p50 %.2f "
           "ms, p90 %.2f ms, max %.2f ms\n",
           LATENCY_WAKES, lat[LATENCY_WAKES / 2] / 1e6, lat[LATENCY_WAKES * 9 / 10] / 1e6,
           lat[LATENCY_WAKES - 1] / 1e6);
    stop(&d, 1);
    kill(model, SIGKILL);
    waitpid(model, NULL, 0);
    vigil_runtime_close(rt);
    close(pfd[0]);
    close(pfd[1]);
}

/* WAKES agents with one queued wake each, committed at once. */
static void queue_wakes(vigil_runtime *rt, int wakes)
{
    vigil_error err = {0};
    char key[65];
    if (vg_store_begin(rt->env.store, &err))
        exit(1);
    for (int i = 0; i < wakes; i++) {
        char a[37];
        vigil_agent_spec s = {.name = "many", .config_json = "{\"tools\":[\"echo\"]}"};
        if (vigil_agent_create(rt, &s, a, &err) || vigil_agent_resume(rt, a, NULL, &err) ||
            vigil_wake_agent(rt, a, "go", "s", key, &err)) {
            fprintf(stderr, "queue: %s\n", err.message);
            exit(1);
        }
    }
    if (vg_store_commit(rt->env.store, &err))
        exit(1);
}

/* 2. Wakes per second with `daemons` daemons on `store`, from their start until all
 * completed. pgoptions (may be NULL) goes to the daemons' libpq. */
/* CPU (user + sys, ms) of the reaped children: the daemons and the tool processes they ran. */
static double children_cpu_ms(void)
{
    struct rusage u;
    getrusage(RUSAGE_CHILDREN, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

static double last_cpu_ms_per_wake; /* of the last throughput run */

/* CPU (user + sys, ms) of one process from /proc/PID/stat: its own (self) and that of the
 * children it reaped (reaped: the daemons' command tools). 0 when it is gone. */
static void proc_cpu_ms(pid_t pid, double *self, double *reaped)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    *self = *reaped = 0;
    if (!f)
        return;
    char *p = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
    fclose(f);
    unsigned long long ut = 0, st = 0, cut = 0, cst = 0;
    /* after the name: state ppid ... field 14 utime, 15 stime, 16 cutime, 17 cstime */
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &ut,
                    &st, &cut, &cst) == 4) {
        double tick = 1e3 / (double)sysconf(_SC_CLK_TCK);
        *self = (double)(ut + st) * tick;
        *reaped = (double)(cut + cst) * tick;
    }
}

static pid_t parent_of(pid_t pid)
{
    char path[64], line[1024];
    long ppid = -1;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *p = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
    fclose(f);
    if (!p || sscanf(p + 2, "%*c %ld", &ppid) != 1)
        return -1;
    return (pid_t)ppid;
}

/* CPU (ms) of the live children of parent: the PostgreSQL server's backends and helpers, or
 * whatever else parent forked and has not reaped. */
static double children_live_cpu_ms(pid_t parent)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    double sum = 0;
    while (d && (e = readdir(d))) {
        pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);
        double self, reaped;
        if (pid > 0 && parent_of(pid) == parent) {
            proc_cpu_ms(pid, &self, &reaped);
            sum += self;
        }
    }
    if (d)
        closedir(d);
    return sum;
}

static pid_t postmaster_pid(void)
{
    char log[1024], path[1100];
    long pid = -1;
    vg_test_pg_log(log, sizeof log); /* DIR/log: the cluster's data folder is DIR/data */
    char *slash = strrchr(log, '/');
    if (!slash)
        return -1;
    snprintf(path, sizeof path, "%.*s/data/postmaster.pid", (int)(slash - log), log);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = -1;
        fclose(f);
    }
    return (pid_t)pid;
}

/* CPU by process over one throughput run, ms per wake. */
struct cpu_split {
    double daemons, tools, database, bench;
};
static struct cpu_split last_split;

static void cpu_now(const pid_t *daemons, int n, struct cpu_split *c)
{
    struct rusage u;
    memset(c, 0, sizeof *c);
    for (int i = 0; i < n; i++) {
        double self, reaped;
        proc_cpu_ms(daemons[i], &self, &reaped);
        c->daemons += self;
        c->tools += reaped;
    }
    pid_t pm = postmaster_pid();
    c->database = pm > 0 ? children_live_cpu_ms(pm) : 0;
    getrusage(RUSAGE_SELF, &u);
    c->bench = (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
               (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

/* Busy CPU time of the whole machine so far, in seconds (/proc/stat: every core, every
 * process, this bench's and everyone else's). */
static double machine_busy_s(void)
{
    unsigned long long user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                       steal = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle,
                     &iowait, &irq, &softirq, &steal);
    fclose(f);
    if (got < 4)
        return 0;
    return (double)(user + nice + sys + irq + softirq + steal) / (double)sysconf(_SC_CLK_TCK);
}

/* The last throughput run's wall time, and the machine's cores busy over it. */
static double last_secs, last_machine_cores, last_load;
static int64_t last_n; /* wakes completed in it */

static double throughput(const char *store, const char *url, int daemons, int wakes,
                         const char *pgoptions)
{
    pid_t pids[MAX_DAEMONS];
    struct cpu_split c0, c1;
    double cpu0 = children_cpu_ms();
    vigil_runtime *rt = open_store(store);
    for (int i = 0; i < daemons; i++)
        pids[i] = serve(store, url, pgoptions);
    for (int i = 0; i < 2000 && !vg_daemon_running(store, NULL); i++)
        usleep(5000);
    usleep(1000000); /* every daemon past its start-up (migration, recovery, LISTEN) */
    cpu_now(pids, daemons, &c0);
    double busy0 = machine_busy_s(), load[1] = {0};
    last_load = getloadavg(load, 1) == 1 ? load[0] : 0;
    int64_t t0 = bench_mono_ns();
    queue_wakes(rt, wakes); /* one commit: its NOTIFY wakes the idle daemons */
    int64_t n = 0;
    for (int64_t last = -1, at = bench_mono_ns();;) {
        n = completed(rt->env.store);
        if (n >= wakes)
            break;
        if (n != last) {
            last = n;
            at = bench_mono_ns();
        } else if (bench_mono_ns() - at > 60 * 1000000000LL) {
            fprintf(stderr, "no progress for 60 s at %lld of %d wakes completed\n", (long long)n,
                    wakes);
            break;
        }
        usleep(10000);
    }
    double secs = (bench_mono_ns() - t0) / 1e9;
    cpu_now(pids, daemons, &c1);
    last_secs = secs;
    last_machine_cores = (machine_busy_s() - busy0) / secs;
    stop(pids, daemons);
    last_n = n;
    double per = n ? 1.0 / (double)n : 0;
    last_split = (struct cpu_split){(c1.daemons - c0.daemons) * per, (c1.tools - c0.tools) * per,
                                    (c1.database - c0.database) * per, (c1.bench - c0.bench) * per};
    last_cpu_ms_per_wake = n ? (children_cpu_ms() - cpu0) / (double)n : 0;
    vigil_runtime_close(rt);
    return (double)n / secs; /* the wakes that completed, even when it gave up waiting */
}

static void print_split(void)
{
    const struct cpu_split *c = &last_split;
    double per_wake = c->daemons + c->tools + c->database + c->bench;
    double ours = last_secs > 0 ? per_wake * (double)last_n / 1e3 / last_secs : 0;
    printf("  cores busy over the %.1f s: this bench's processes %.2f (%.1f ms CPU a wake), the "
           "whole machine %.2f of %ld; load average at the first wake %.1f\n",
           last_secs, ours, per_wake, last_machine_cores, sysconf(_SC_NPROCESSORS_ONLN), last_load);
    printf("  CPU per wake from the first wake queued to the last completed, ms (user+sys): "
           "daemons %.2f, command tools %.2f, database server %.2f, bench (queues the wakes, "
           "polls) %.2f; the daemons' whole life with tools %.1f (the model server's handlers "
           "exit unreaped: not counted)\n",
           c->daemons, c->tools, c->database, c->bench, last_cpu_ms_per_wake);
}

/* Lines of the server log from offset on that contain needle. */
static long count_log(const char *log, long offset, const char *needle)
{
    FILE *f = fopen(log, "r");
    char line[4096];
    long n = 0;
    if (!f)
        return -1;
    fseek(f, offset, SEEK_SET);
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void env_count(const char *name, int lo, int hi, char *out, size_t n);

/* 3. Statements, transactions and lock waits per wake, one daemon (BENCH_LOG_DAEMONS), from the
 * server log. */
static void where_time_goes(const char *url, int wakes)
{
    char log[1024], store[1024];
    vg_test_pg_log(log, sizeof log);
    long at = file_size(log);
    if (at < 0) {
        printf("round trips: no server log at \"%s\" (BENCH_PG_LOG)\n", log);
        return;
    }
    char daemons[16] = "1";
    env_count("BENCH_LOG_DAEMONS", 1, MAX_DAEMONS, daemons, sizeof daemons);
    fresh_db(MAX_CONFIGS, store, sizeof store);
    double rate = throughput(store, url, (int)strtol(daemons, NULL, 10), wakes,
                             "-c log_statement=all -c log_lock_waits=on -c deadlock_timeout=1ms");
    long stmts = count_log(log, at, "LOG:  statement: ") + count_log(log, at, "LOG:  execute ");
    /* A BEGIN, SET, SAVEPOINT or RELEASE the adapter pipelines with the statement after it
     * shares its round trip (sent alone, they are logged as "statement:"). */
    long pipelined = count_log(log, at, "execute <unnamed>: BEGIN") +
                     count_log(log, at, "execute <unnamed>: SET synchronous_commit") +
                     count_log(log, at, "execute <unnamed>: SAVEPOINT") +
                     count_log(log, at, "execute <unnamed>: RELEASE SAVEPOINT");
    long savepoints = count_log(log, at, ": SAVEPOINT vg");
    long commits = count_log(log, at, ": COMMIT");
    long waits = count_log(log, at, "still waiting for");
    printf("%s daemon(s), %d wakes logged (%.1f wakes/s while logging): %.1f statements, %.1f "
           "round trips per wake (%.1f per model step; the daemon's polls included); %.1f "
           "commits per wake; %.1f savepoints per wake; %ld lock waits over 1 ms\n",
           daemons, wakes, rate, (double)stmts / wakes, (double)(stmts - pipelined) / wakes,
           (double)(stmts - pipelined) / (2.0 * wakes), (double)commits / wakes,
           (double)savepoints / wakes, waits);
    drop_db(MAX_CONFIGS);
}

static void write_config(const char *dir)
{
    snprintf(config_path, sizeof config_path, "%s/config.yaml", dir);
    FILE *f = fopen(config_path, "w");
    if (!f)
        exit(1);
    fputs("command_tools:\n"
          "  echo:\n"
          "    command: [cat]\n"
          "    description: returns its input\n"
          "    input_schema: {type: object}\n"
          "    risk: low\n"
          "    mutating: false\n",
          f);
    fclose(f);
}

/* An environment variable's number from lo to hi into out (as text), else exit 2. */
static void env_count(const char *name, int lo, int hi, char *out, size_t n)
{
    const char *v = getenv(name);
    char *end = NULL;
    if (!v || !*v)
        return;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        fprintf(stderr, "%s takes a number from %d to %d\n", name, lo, hi);
        exit(2);
    }
    snprintf(out, n, "%ld", x);
}

/* Whether BENCH_PARTS (a comma-separated list; all parts when unset) names part. */
static int part(const char *name)
{
    const char *parts = getenv("BENCH_PARTS");
    size_t len = strlen(name);
    for (const char *p = parts; p && *p; p += strcspn(p, ","), p += *p == ',')
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return !parts || !*parts;
}

static void throughput_pg(const int *counts, int n_counts, const char *url, int wakes)
{
    char store[1024], repeat[16] = "1";
    env_count("BENCH_REPEAT", 1, 20, repeat, sizeof repeat);
    for (long r = 0, reps = strtol(repeat, NULL, 10); r < reps; r++)
        for (int i = 0; i < n_counts; i++) {
            fresh_db(i + 1, store, sizeof store);
            double rate = throughput(store, url, counts[i], wakes, NULL);
            printf("PostgreSQL, %d daemon(s): %d wakes of %d agents in %.1f wakes/s, %.1f ms CPU "
                   "(daemons and tools, user+sys) per wake\n",
                   counts[i], wakes, wakes, rate, last_cpu_ms_per_wake);
            print_split();
            drop_db(i + 1);
        }
}

int main(int argc, char **argv)
{
    int wakes = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 200;
    int counts[MAX_CONFIGS] = {1, 2, 4}, n_counts = 3, port;
    char store[1024], url[128], dir[] = "/tmp/vg-bench-scale-XXXXXX";
    if (argc > 2)
        n_counts = 0;
    for (int i = 2; i < argc && n_counts < MAX_CONFIGS - 1; i++)
        counts[n_counts++] = (int)strtol(argv[i], NULL, 10);
    setvbuf(stdout, NULL, _IOLBF, 0); /* figures as they come, even through a pipe */
    if (wakes < 1 || wakes > 100000 || !mkdtemp(dir))
        return 2;
    for (int i = 0; i < n_counts; i++)
        if (counts[i] < 1 || counts[i] > MAX_DAEMONS)
            return 2;
    env_count("BENCH_WORKERS", 1, 64, workers_arg, sizeof workers_arg);
    env_count("BENCH_RUNS_PER_WORKER", 1, 1024, runs_arg, sizeof runs_arg);
    write_config(dir);
    pid_t model = vg_instant_model_start(1, 1, -1, &port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
    const char *delay = getenv("BENCH_MODEL_DELAY_MS");
    printf("vigil bench_pg_scale_out: daemons of %s worker(s) of up to %s runs each, agent loop, "
           "loopback model answering after %s ms, one tool step (command tool `cat`) per wake; "
           "%ld cores\n",
           workers_arg, runs_arg, delay ? delay : "0", sysconf(_SC_NPROCESSORS_ONLN));
    double load[1] = {0};
    if (getloadavg(load, 1) == 1)
        printf("load average at start: %.1f\n", load[0]);

    if (part("latency")) {
        fresh_db(0, store, sizeof store);
        latency(store);
        drop_db(0);
    }
    if (part("pg"))
        throughput_pg(counts, n_counts, url, wakes);
    if (part("sqlite")) {
        snprintf(store, sizeof store, "%s/store.db", dir);
        double rate = throughput(store, url, 1, wakes, NULL);
        printf("SQLite file, 1 daemon: %d wakes of %d agents in %.1f wakes/s, %.1f ms CPU per "
               "wake\n",
               wakes, wakes, rate, last_cpu_ms_per_wake);
        print_split();
    }
    if (part("log"))
        where_time_goes(url, wakes < 50 ? wakes : 50);

    kill(model, SIGKILL);
    waitpid(model, NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
