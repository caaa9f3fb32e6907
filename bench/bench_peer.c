/*
 * bench_peer.c: vigil on the user's path, side by side with the peer runtimes of
 * ../shared/bench-peers. It speaks that harness's `--extra` contract (its README): the workload
 * comes from the BENCH_* environment, the model is the harness's mock OpenAI-compatible server,
 * and one line `BENCH_RESULT {...}` reports the time from "ready" to "all conversations done".
 *
 * It uses the public API only (include/vigil.h), as a library user would: a runtime on a store
 * file in BENCH_STORE_DIR, the `add(a, b)` tool registered as a C callback (so every call goes
 * through the tool gate and is recorded), and vigil_chat for each conversation's user turn, with
 * the openai provider pointed at the mock by the documented VIGIL_MODEL_* variables. Every
 * message is durably committed (the store's default). Each agent is created with daily budgets
 * (`config.budgets.steps` and `tool_calls`, docs/tools.md) large enough for the whole workload.
 *
 *   sequential: one agent; each conversation is a session of it, one after the other.
 *   concurrent: one agent per conversation, all turns at once through vigil_chat_many (fibers
 *               on this thread sharing the runtime, as a `vigil serve` worker runs them), or
 *               with BENCH_VIGIL_THREADS=1 a thread and a runtime per conversation.
 *
 * Outside the harness: run `node mock-llm.js --port 0 --port-file F` from the harness folder and
 *   BENCH_BASE_URL=http://127.0.0.1:PORT/v1 BENCH_MODEL=steps-12 BENCH_AGENTS=50 \
 *   BENCH_MODE=sequential BENCH_STORE_DIR=$(mktemp -d) build/bench_peer
 * It prints per-step figures of its own to stderr (CPU of the work phase, store bytes).
 * BENCH_VIGIL_SYNC=1 first syncs the store with an empty one beside it (vigil_sync_with), so
 * the work runs on a store that has joined multi-device sync and logs every synced write
 * (docs/sync.md): what syncing costs a step.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime */

#include "vigil.h"
#include "bench_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

struct bench {
    const char *store_dir;
    const char *run_id;
    int steps, agents, concurrent, stream;
    char store_path[4096];
};

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

/* ---- the tool ----------------------------------------------------------------------------- */

/* add(a, b) -> a + b as text, as the peers' tool answers. The arguments are validated by the
 * gate against the schema before this runs, so reading the two numbers is all that is left. */
static int read_number(const char *json, const char *key, double *out)
{
    char pat[16];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(json, pat);
    if (!p || !(p = strchr(p + strlen(pat), ':')))
        return 0;
    char *end;
    *out = strtod(p + 1, &end);
    return end != p + 1;
}

static vigil_code add_tool(void *user, const vigil_tool_call_info *call, const char *args_json,
                           char **out_result_json, vigil_error *err)
{
    double a, b;
    (void)user;
    (void)call;
    if (!read_number(args_json, "a", &a) || !read_number(args_json, "b", &b)) {
        if (err) {
            err->code = VIGIL_EINVAL;
            snprintf(err->message, sizeof err->message, "add needs numbers a and b");
        }
        return VIGIL_EINVAL;
    }
    char text[64];
    snprintf(text, sizeof text, "\"%.15g\"", a + b); /* a JSON string: the text "a+b" */
    if (!(*out_result_json = malloc(strlen(text) + 1)))
        return VIGIL_ENOMEM;
    strcpy(*out_result_json, text);
    return VIGIL_OK;
}

static const vigil_tool_def add_def = {
    .name = "add",
    .description = "Add two numbers and return the sum.",
    .input_schema_json = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},"
                         "\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"]}",
    .contract_json = "{\"mutating\":false,\"idempotency\":\"idempotent\","
                     "\"risk\":\"low\",\"scope\":{\"rule\":\"unscoped\"}}",
};

/* The daily budgets (docs/tools.md, "Budgets") are twice the workload's: the default 1,000 steps
 * a day would stop the one agent of a sequential 50 x 20 run (1,050 model calls) after 1,000, and
 * a budget used up exactly stops the next model call too. */
#define AGENT_CONFIG "{\"tools\":[\"add\"],\"budgets\":{\"steps\":%d,\"tool_calls\":%d}}"
#define USER_TEXT "Add the numbers the tool gives you, one call at a time, then say done."

/* ---- runtime ------------------------------------------------------------------------------ */

static int open_runtime(const struct bench *b, vigil_runtime **rt)
{
    vigil_error err = {0};
    vigil_runtime_options o = {.size = sizeof o,
                               .store_uri = b->store_path,
                               .create_if_missing = 1,
                               .busy_timeout_ms = 60000};
    if (vigil_runtime_open(&o, rt, &err) ||
        vigil_tool_register(*rt, &add_def, add_tool, NULL, &err)) {
        fprintf(stderr, "bench_peer: cannot open the runtime: %s\n", err.message);
        vigil_runtime_close(*rt);
        *rt = NULL;
        return -1;
    }
    return 0;
}

/* An agent with budgets for the whole workload (its conversations may all be its sessions). */
static int create_agent(const struct bench *b, vigil_runtime *rt, int index, char id[37])
{
    vigil_error err = {0};
    char name[64], config[160];
    snprintf(name, sizeof name, "bench-%d", index);
    snprintf(config, sizeof config, AGENT_CONFIG, 2 * b->agents * (b->steps + 1),
             2 * b->agents * b->steps);
    vigil_agent_spec spec = {.name = name, .config_json = config};
    if (vigil_agent_create(rt, &spec, id, &err)) {
        fprintf(stderr, "bench_peer: cannot create an agent: %s\n", err.message);
        return -1;
    }
    return 0;
}

/* The turn's outcome: its reply must be the mock's final text. */
static int turn_done(vigil_code rc, const char *out_json, const vigil_error *err)
{
    if (rc) {
        fprintf(stderr, "bench_peer: chat failed: %s\n", err->message);
        return 0;
    }
    if (!out_json || !strstr(out_json, "\"reply\":\"done\"")) {
        fprintf(stderr, "bench_peer: unexpected outcome: %s\n", out_json ? out_json : "(none)");
        return 0;
    }
    return 1;
}

static void on_text(void *user, const char *delta, size_t len)
{
    (void)user;
    (void)delta;
    (void)len;
}

static const vigil_chat_callbacks stream_cb = {.on_text = on_text};

/* ---- workloads ---------------------------------------------------------------------------- */

static int run_sequential(const struct bench *b, vigil_runtime *rt, int *ok)
{
    char agent[37], session[64];
    if (create_agent(b, rt, 0, agent))
        return -1;
    for (int i = 0; i < b->agents; i++) {
        vigil_error err = {0};
        char *out = NULL;
        snprintf(session, sizeof session, "c%d", i);
        vigil_code rc =
            vigil_chat(rt, agent, session, USER_TEXT, b->stream ? &stream_cb : NULL, &out, &err);
        *ok += turn_done(rc, out, &err);
        vigil_free(out);
    }
    return 0;
}

/* All conversations at once on this thread: vigil_chat_many. */
static int run_many(const struct bench *b, vigil_runtime *rt, int *ok)
{
    vigil_chat_turn *turns = calloc((size_t)b->agents, sizeof *turns);
    char(*ids)[37] = calloc((size_t)b->agents, sizeof *ids);
    vigil_error err = {0};
    int rc = -1;
    if (!turns || !ids)
        goto out;
    for (int i = 0; i < b->agents; i++) {
        if (create_agent(b, rt, i, ids[i]))
            goto out;
        turns[i] = (vigil_chat_turn){
            .agent_id = ids[i], .text = USER_TEXT, .cb = b->stream ? &stream_cb : NULL};
    }
    if (vigil_chat_many(rt, turns, (size_t)b->agents, &err)) {
        fprintf(stderr, "bench_peer: chat_many failed: %s\n", err.message);
        goto out;
    }
    for (int i = 0; i < b->agents; i++) {
        *ok += turn_done(turns[i].code, turns[i].out_json, &turns[i].error);
        vigil_free(turns[i].out_json);
    }
    rc = 0;
out:
    free(turns);
    free(ids);
    return rc;
}

/* The other way: a thread and a runtime per conversation ("open one runtime per thread"). */
struct thread_job {
    const struct bench *b;
    int index, ok;
};

static void *conversation_thread(void *arg)
{
    struct thread_job *j = arg;
    vigil_runtime *rt = NULL;
    char agent[37];
    if (open_runtime(j->b, &rt) || create_agent(j->b, rt, j->index, agent)) {
        vigil_runtime_close(rt);
        return NULL;
    }
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc =
        vigil_chat(rt, agent, NULL, USER_TEXT, j->b->stream ? &stream_cb : NULL, &out, &err);
    j->ok = turn_done(rc, out, &err);
    vigil_free(out);
    vigil_runtime_close(rt);
    return NULL;
}

static int run_threads(const struct bench *b, int *ok)
{
    struct thread_job *jobs = calloc((size_t)b->agents, sizeof *jobs);
    pthread_t *th = calloc((size_t)b->agents, sizeof *th);
    int started = 0;
    if (!jobs || !th) {
        free(jobs);
        free(th);
        return -1;
    }
    for (; started < b->agents; started++) {
        jobs[started] = (struct thread_job){.b = b, .index = started};
        if (pthread_create(&th[started], NULL, conversation_thread, &jobs[started]))
            break;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        *ok += jobs[i].ok;
    }
    free(jobs);
    free(th);
    return started == b->agents ? 0 : -1;
}

/* ---- main --------------------------------------------------------------------------------- */

static long long dir_bytes(const char *dir, const char *base)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    long long total = 0;
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s%s", dir, base, suffixes[i]);
        if (stat(path, &st) == 0)
            total += st.st_size;
    }
    return total;
}

/* BENCH_VIGIL_SYNC=1: the store joins sync, through an exchange with an empty peer store. */
static int join_sync(const struct bench *b, vigil_runtime *rt)
{
    char path[4200];
    vigil_runtime *peer = NULL;
    vigil_error err = {0};
    char *summary = NULL;
    snprintf(path, sizeof path, "%s/peer.db", b->store_dir);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path, .create_if_missing = 1};
    if (vigil_runtime_open(&o, &peer, &err) || vigil_sync_with(rt, peer, &summary, &err)) {
        fprintf(stderr, "bench_peer: could not join sync: %s\n", err.message);
        vigil_runtime_close(peer);
        return -1;
    }
    vigil_free(summary);
    vigil_runtime_close(peer);
    return 0;
}

/* The documented variables that choose the model provider (docs/models.md). */
static int point_model_at_mock(void)
{
    const char *url = getenv("BENCH_BASE_URL"), *model = getenv("BENCH_MODEL");
    if (!url || !*url || !model || !*model) {
        fprintf(stderr, "bench_peer: BENCH_BASE_URL and BENCH_MODEL must be set\n");
        return -1;
    }
    setenv(VIGIL_ENV_MODEL_PROVIDER, "openai", 1);
    setenv(VIGIL_ENV_MODEL_BASE_URL, url, 1);
    setenv(VIGIL_ENV_MODEL, model, 1);
    setenv(VIGIL_ENV_MODEL_MAX_RETRIES, "0", 1);
    return 0;
}

int main(void)
{
    double t0 = 1e3 * bench_wall_s();
    struct bench b = {.store_dir = getenv("BENCH_STORE_DIR"),
                      .run_id = getenv("BENCH_RUN_ID"),
                      .steps = env_int("BENCH_STEPS", 0),
                      .agents = env_int("BENCH_AGENTS", 1),
                      .stream = env_int("BENCH_STREAM", 0) == 1};
    const char *mode = getenv("BENCH_MODE");
    b.concurrent = mode && !strcmp(mode, "concurrent");
    if (!b.store_dir || !*b.store_dir || b.agents < 1 || point_model_at_mock())
        return fprintf(stderr, "bench_peer: BENCH_STORE_DIR and BENCH_AGENTS >= 1 needed\n"), 2;
    snprintf(b.store_path, sizeof b.store_path, "%s/vigil.db", b.store_dir);

    vigil_runtime *rt = NULL;
    int threads = b.concurrent && env_int("BENCH_VIGIL_THREADS", 0);
    if (!threads && open_runtime(&b, &rt))
        return 1;
    if (env_int("BENCH_VIGIL_SYNC", 0) == 1 && (threads || join_sync(&b, rt)))
        return fprintf(stderr, "bench_peer: BENCH_VIGIL_SYNC needs one runtime\n"), 1;
    double ready = 1e3 * bench_wall_s(), c0 = 1e3 * bench_cpu_s();
    int ok = 0, rc;
    if (!b.concurrent)
        rc = run_sequential(&b, rt, &ok);
    else
        rc = threads ? run_threads(&b, &ok) : run_many(&b, rt, &ok);
    double done = 1e3 * bench_wall_s(), cpu = 1e3 * bench_cpu_s() - c0;
    vigil_runtime_close(rt);

    int failed = b.agents - ok;
    long long bytes = dir_bytes(b.store_dir, "vigil.db");
    long long steps = (long long)b.agents * (b.steps + 1); /* model calls, as the harness counts */
    printf("BENCH_RESULT {\"setup_ms\":%.1f,\"work_ms\":%.1f,\"ok\":%d,\"failed\":%d,"
           "\"cpu_ms\":%.1f,\"store_bytes\":%lld}\n",
           ready - t0, done - ready, ok, failed, cpu, bytes);
    if (steps > 0)
        fprintf(stderr,
                "bench_peer: %s, %d conversations x %d steps: %.3f ms wall/call, "
                "%.3f ms cpu/call (work phase), %.0f store bytes/call\n",
                b.concurrent ? (threads ? "threads" : "vigil_chat_many") : "sequential", b.agents,
                b.steps, (done - ready) / steps, cpu / steps, (double)bytes / steps);
    return rc || failed ? 1 : 0;
}
