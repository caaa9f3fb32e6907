/*
 * test_crash_recovery.c: a driver process killed with SIGKILL at a random point of a random
 * phase (a fixed seed), then recovered at once by another process through the public API, over
 * and over, for every tool kind (non-idempotent, reconcilable, idempotent, a built-in
 * transactional one) and both paths (a chat turn; a user wake run by vigil_wake_process).
 *
 * The kill point: the child's clock counts its readings and the child kills itself at the Nth
 * (N drawn from the seed between 1 and a bit more than a whole turn reads), so kills land in
 * every phase: the lease, the journal header, the model call, the tool gate, the effect, the
 * result, the close. Tool effects go to a file outside the store (the host's own state). The
 * children come from a fork server started before the test grows (see start_fork_server).
 *
 * Afterwards: no effect twice, no acknowledged turn lost, no operation left started, no run or
 * tool call left running (a crashed run's calls closed `crashed` with what recovery decided),
 * every in-doubt operation listed, the user's message recorded once.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "journal/journal.h"
#include "store/store.h"
#include "tool/tool.h"
#include "wake/wake.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

enum path { PATH_CHAT, PATH_WAKE };

struct kind {
    const char *tool;
    const char *contract;
    int lookup; /* reconcilable: has a lookup */
    int file;   /* its effects go to the effects file */
};

static const struct kind KINDS[] = {
    {"fx_write", "{\"idempotency\":\"non_idempotent\"}", 0, 1},
    {"fx_sync", "{\"idempotency\":\"reconcilable\"}", 1, 1},
    {"fx_idem", "{\"idempotency\":\"idempotent\"}", 0, 1},
    {"set_report", NULL, 0, 0},
};

static char g_effects[4300];

/* ---- the host: effects in a file, one line per effect ------------------------------------- */

static int effects_of(const char *op)
{
    char line[128];
    int n = 0;
    FILE *f = fopen(g_effects, "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        n += !strncmp(line, op, 64) && line[64] == '\n';
    fclose(f);
    return n;
}

static char *dup_text(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    ASSERT(p);
    memcpy(p, s, n);
    return p;
}

static vigil_code fx_effect(void *user, const vigil_tool_call_info *call, const char *args,
                            char **out, vigil_error *err)
{
    char line[80];
    int fd = open(g_effects, O_WRONLY | O_APPEND | O_CREAT, 0600);
    snprintf(line, sizeof line, "%s\n", call->operation_id);
    ASSERT(fd >= 0 && write(fd, line, strlen(line)) == (ssize_t)strlen(line));
    close(fd);
    *out = dup_text("{\"result\":{\"done\":true}}");
    return VIGIL_OK;
}

static vigil_code fx_lookup(void *user, const vigil_tool_call_info *call, int *found, char **out,
                            vigil_error *err)
{
    *found = effects_of(call->operation_id) > 0;
    if (*found)
        *out = dup_text("{\"result\":{\"reconciled\":true}}");
    return VIGIL_OK;
}

static void register_fx(vigil_runtime *rt)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(KINDS); i++) {
        if (!KINDS[i].file)
            continue;
        vigil_tool_def d = {.name = KINDS[i].tool,
                            .description = "an effect on the host",
                            .contract_json = KINDS[i].contract,
                            .lookup = KINDS[i].lookup ? fx_lookup : NULL};
        ASSERT_OK(vigil_tool_register(rt, &d, fx_effect, NULL, E));
    }
}

/* ---- the driver: a child that dies at its clock's Nth reading ------------------------------ */

struct crash_clock {
    struct vg_test_clock tc; /* must stay first */
    long reads, kill_at;
    const struct vg_clock_methods *inner;
};

static void tick(struct vg_clock *c)
{
    struct crash_clock *k = (struct crash_clock *)c;
    if (++k->reads == k->kill_at)
        raise(SIGKILL);
}

static int64_t cc_now(struct vg_clock *c)
{
    tick(c);
    return ((struct crash_clock *)c)->inner->now_ms(c);
}

static int64_t cc_mono(struct vg_clock *c)
{
    tick(c);
    return ((struct crash_clock *)c)->inner->mono_ns(c);
}

static void cc_sleep(struct vg_clock *c, int64_t ms)
{
    ((struct crash_clock *)c)->inner->sleep_ms(c, ms);
}

static struct vg_clock_methods g_cc_methods = {1, "crash", cc_now, cc_mono, cc_sleep};

struct world {
    struct test_rt t;
    char agent[37];
    char cassette[4300], acks[4300], reads[4300];
    const struct kind *k;
    enum path path;
};

/* The child's turn: open the store, run the turn, write its acknowledgement, exit. */
static void child_turn(struct world *w, int i, long kill_at, int64_t now)
{
    static struct crash_clock cc;
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    char msg[32], *out = NULL;
    vg_test_clock_init(&cc.tc, now);
    cc.inner = cc.tc.base.methods;
    cc.tc.base.methods = &g_cc_methods;
    cc.kill_at = kill_at;
    setenv("VIGIL_MODEL_CASSETTE", w->cassette, 1);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = w->t.path};
    if (vg_runtime_open_with(&o, &cc.tc.base, NULL, &rt, &err)) {
        fprintf(stderr, "child: %s\n", err.message);
        _exit(3);
    }
    register_fx(rt);
    snprintf(msg, sizeof msg, "msg-%d", i);
    vigil_code rc;
    int ran = 0;
    if (w->path == PATH_CHAT) {
        rc = vigil_chat(rt, w->agent, "s", msg, NULL, &out, &err);
        ran = rc == VIGIL_OK;
    } else {
        rc = vigil_wake_process(rt, 1, &ran, &err);
    }
    if (rc || ran != 1) {
        fprintf(stderr, "child: %d ran %d: %s\n", (int)rc, ran, err.message);
        _exit(4);
    }
    FILE *f = fopen(w->acks, "a");
    fprintf(f, "%s\n", msg);
    fclose(f);
    f = fopen(w->reads, "w");
    fprintf(f, "%ld\n", cc.reads);
    fclose(f);
    _exit(0);
}

/* The children are forked by a fork server, a process forked at start while its heap is small:
 * a child forked from the test itself paid a copy-on-write fault for each page of the test's
 * large heap it wrote to, most of its cost (and exec'ing one anew paid for loading its shared
 * libraries instead). A request is the child's world as text, one field a line: store, agent,
 * cassette, acks, reads, effects, kind, path, turn, kill_at, now; the answer its wait status. */
static int g_server_req = -1, g_server_ans = -1;
static pid_t g_server;

static int io_full(int fd, void *p, size_t n, int out)
{
    for (size_t done = 0; done < n;) {
        ssize_t k =
            out ? write(fd, (char *)p + done, n - done) : read(fd, (char *)p + done, n - done);
        if (k <= 0 && !(k < 0 && errno == EINTR))
            return -1;
        done += k > 0 ? (size_t)k : 0;
    }
    return 0;
}

static int child_main(char *text)
{
    static struct world w;
    char *f[11], *save = NULL;
    for (int n = 0; n < 11; n++)
        if (!(f[n] = strtok_r(n ? NULL : text, "\n", &save)))
            return 2;
    snprintf(w.t.path, sizeof w.t.path, "%s", f[0]);
    snprintf(w.agent, sizeof w.agent, "%s", f[1]);
    snprintf(w.cassette, sizeof w.cassette, "%s", f[2]);
    snprintf(w.acks, sizeof w.acks, "%s", f[3]);
    snprintf(w.reads, sizeof w.reads, "%s", f[4]);
    snprintf(g_effects, sizeof g_effects, "%s", f[5]);
    w.k = &KINDS[strtol(f[6], NULL, 10)];
    w.path = (enum path)strtol(f[7], NULL, 10);
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_WAKE_RUNNER");
    child_turn(&w, (int)strtol(f[8], NULL, 10), strtol(f[9], NULL, 10), strtoll(f[10], NULL, 10));
    return 0;
}

static void fork_server(int req, int ans)
{
    static char text[6 * 4400];
    uint32_t n;
    while (!io_full(req, &n, sizeof n, 0) && n < sizeof text && !io_full(req, text, n, 0)) {
        text[n] = 0;
        pid_t pid = fork();
        if (pid == 0) {
            close(req);
            close(ans);
            _exit(child_main(text));
        }
        int status = -1;
        if (pid < 0 || waitpid(pid, &status, 0) != pid)
            status = -1;
        if (io_full(ans, &status, sizeof status, 1))
            break;
    }
    _exit(0);
}

static void start_fork_server(void)
{
    int req[2], ans[2];
    ASSERT(pipe(req) == 0 && pipe(ans) == 0);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(req[1]);
        close(ans[0]);
        fork_server(req[0], ans[1]);
    }
    close(req[0]);
    close(ans[1]);
    g_server = pid;
    g_server_req = req[1];
    g_server_ans = ans[0];
}

/* Run one child turn that dies at clock reading kill_at (0: never); its exit status. */
static int run_child(struct world *w, int i, long kill_at)
{
    static char text[6 * 4400];
    int n = snprintf(text, sizeof text, "%s\n%s\n%s\n%s\n%s\n%s\n%d\n%d\n%d\n%ld\n%lld", w->t.path,
                     w->agent, w->cassette, w->acks, w->reads, g_effects, (int)(w->k - KINDS),
                     (int)w->path, i, kill_at, (long long)vg_env_now(w->t.env));
    uint32_t len = (uint32_t)n;
    int status = -1;
    ASSERT(n > 0 && (size_t)n < sizeof text);
    /* the child opens the store anew, as a new process does */
    ASSERT(!io_full(g_server_req, &len, sizeof len, 1) && !io_full(g_server_req, text, len, 1));
    ASSERT(!io_full(g_server_ans, &status, sizeof status, 0) && status != -1);
    return status;
}

/* ---- the checks ---------------------------------------------------------------------------- */

static int64_t count(struct world *w, const char *kind, const char *k1)
{
    struct vg_query q = {.kind = kind, .owner = w->agent, .k1 = k1};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(w->t.env->store, &q, &n, E));
    return n;
}

static int times_said(json_t *msgs, const char *text)
{
    size_t i;
    json_t *m;
    int n = 0;
    json_array_foreach (msgs, i, m)
        n += !strcmp(json_string_value(json_object_get(m, "kind")), "user") &&
             !strcmp(json_string_value(json_object_get(m, "content")), text);
    return n;
}

static int acked(struct world *w, const char *msg)
{
    char line[64];
    int n = 0;
    FILE *f = fopen(w->acks, "r");
    while (f && fgets(line, sizeof line, f))
        n += !strncmp(line, msg, strlen(msg)) && line[strlen(msg)] == '\n';
    if (f)
        fclose(f);
    return n;
}

static struct vg_tool_executor *executor_of(vigil_runtime *rt)
{
    struct vg_tool_executor *x = NULL;
    ASSERT_OK(vg_runtime_tools(rt, &x, E));
    return x;
}

static int op_effect_cb(void *user, const struct vg_record *r)
{
    ASSERT(effects_of(r->id) <= 1);
    ++*(int *)user;
    return 0;
}

/* A tool call of a crashed run is closed `crashed`, saying what recovery did with its
 * operation; an in-doubt one says so. */
struct crashed_calls {
    struct vg_store *store;
    int seen;
};

static void check_crashed_call(struct crashed_calls *c, const char *id)
{
    static const char *const known[] = {"not_run", "replayed", "in_doubt", "settled", "pending"};
    char *text = NULL; /* the call as its readers give it: the output is its end record's */
    ASSERT_OK(vg_journal_run_tool(c->store, id, &text, E));
    json_t *b = json_loads(text, 0, NULL), *o = json_object_get(b, "output");
    vg_free(text);
    const char *how = json_string_value(json_object_get(o, "recovery"));
    const char *op_status = json_string_value(json_object_get(o, "operation_status"));
    int ok = 0;
    for (size_t i = 0; how && i < VG_ARRAY_LEN(known); i++)
        ok |= !strcmp(how, known[i]);
    ASSERT(ok);
    ASSERT_EQ(!strcmp(how, "in_doubt"), op_status && !strcmp(op_status, "in_doubt"));
    c->seen++;
    json_decref(b);
}

/* Each run's tool calls as `vigil runs tools` lists them (from the journal's records): none
 * left running, each closed `crashed` saying what recovery did. */
static int run_calls_cb(void *user, const struct vg_record *r)
{
    struct crashed_calls *c = user;
    char *page = NULL;
    ASSERT_OK(vg_journal_run_tools(c->store, r->id, NULL, 1000, &page, E));
    json_t *p = json_loads(page, 0, NULL), *it;
    vg_free(page);
    size_t i;
    json_array_foreach (json_object_get(p, "items"), i, it) {
        const char *status = json_string_value(json_object_get(it, "status"));
        ASSERT(strcmp(status, "running") != 0);
        if (!strcmp(status, "crashed"))
            check_crashed_call(c, json_string_value(json_object_get(it, "tool_call_id")));
    }
    json_decref(p);
    return 0;
}

static int open_call_cb(void *user, const char *id, const char *run_id, const char *op)
{
    (void)id, (void)run_id, (void)op;
    ++*(int *)user;
    return 0;
}

static void check_tool_calls(struct world *w)
{
    struct vg_query runs = {.kind = "run", .owner = w->agent};
    struct crashed_calls c = {.store = w->t.env->store};
    int open = 0;
    ASSERT_OK(vg_journal_open_calls(w->t.env->store, w->agent, open_call_cb, &open, E));
    ASSERT_EQ(open, 0);
    ASSERT_OK(vg_store_scan(w->t.env->store, &runs, run_calls_cb, &c, E));
}

static int g_replayed; /* runs replayed by the last check */

static int replay_run_cb(void *user, const struct vg_record *r)
{
    struct world *w = user;
    g_replayed++;
    char *out = NULL;
    ASSERT_OK(vigil_run_replay(w->t.rt, r->id, &out, E));
    json_t *v = json_loads(out, 0, NULL);
    ASSERT(v);
    /* a run's stored projection is what its journal rebuilds, crashed runs included */
    if (json_is_true(json_object_get(v, "stored_projection_found")))
        ASSERT(json_is_true(json_object_get(v, "stored_projection_matches")));
    json_decref(v);
    vigil_free(out);
    return 0;
}

/* Replay equal: every run rebuilds from its journal to what the store holds, and the agent's
 * projections (state, thread heads, reports) rebuild from their immutable records. */
static void check_replay(struct world *w)
{
    struct vg_query runs = {.kind = "run", .owner = w->agent};
    g_replayed = 0;
    ASSERT_OK(vg_store_scan(w->t.env->store, &runs, replay_run_cb, w, E));
    ASSERT(g_replayed > 0);
    ASSERT_OK(vg_spine_verify(w->t.env, w->agent, NULL, E));
}

static void check_world(struct world *w, int iters)
{
    /* Lookups that keep finding nothing go to a person after their tries (1 s apart, doubling). */
    for (int round = 0; round < 6; round++) {
        vg_test_clock_advance(&w->t.clock, 20000);
        ASSERT_OK(vg_tool_executor_recover(executor_of(w->t.rt), NULL, E));
    }
    ASSERT_EQ(count(w, "operation", "started"), 0);
    ASSERT_EQ(count(w, "run", "running"), 0);
    check_tool_calls(w);
    json_t *items = NULL;
    ASSERT_OK(vg_tool_in_doubt_list(w->t.env, w->agent, &items, E));
    ASSERT_EQ((int64_t)json_array_size(items), count(w, "operation", "in_doubt"));
    json_decref(items);
    /* no effect twice (an idempotent tool may run again: that is what it promises) */
    if (w->k->file && strcmp(w->k->tool, "fx_idem")) {
        struct vg_query q = {.kind = "operation", .owner = w->agent};
        int seen = 0;
        ASSERT_OK(vg_store_scan(w->t.env->store, &q, op_effect_cb, &seen, E));
        ASSERT(seen > 0);
    }
    /* the user's message once; acknowledged turns all there */
    char thread[128];
    json_t *msgs = NULL;
    snprintf(thread, sizeof thread, "%s:session:s", w->agent);
    ASSERT_OK(vg_message_latest(w->t.env, w->agent, thread, 10000, &msgs, E));
    for (int i = 0; i < iters; i++) {
        char msg[32];
        snprintf(msg, sizeof msg, "msg-%d", i);
        int said = times_said(msgs, msg);
        ASSERT(said <= 1);
        if (acked(w, msg) || w->path == PATH_WAKE) /* a queued wake always runs in the end */
            ASSERT_EQ(said, 1);
    }
    json_decref(msgs);
    check_replay(w);
}

/* ---- the loop ------------------------------------------------------------------------------ */

static void write_cassette(struct world *w)
{
    const char *args = w->k->file ? "{}" : "{\"scope\":\"current\",\"markdown\":\"# r\"}";
    FILE *f = fopen(w->cassette, "w");
    ASSERT(f);
    fprintf(f,
            "{\"vigil_cassette\":1,\"exchanges\":[{\"response\":{\"tool_calls\":[{\"id\":"
            "\"c1\",\"name\":\"%s\",\"arguments\":%s}]}},{\"response\":{\"text\":\"done\"}}]}",
            w->k->tool, args);
    fclose(f);
}

static long child_reads(struct world *w)
{
    long n = 0;
    FILE *f = fopen(w->reads, "r");
    ASSERT(f && fscanf(f, "%ld", &n) == 1);
    fclose(f);
    return n;
}

/* Recover at once in this process: a chat turn, or the wake queue processed. */
static void recover(struct world *w)
{
    int64_t slept = w->t.clock.slept_ms;
    if (w->path == PATH_CHAT) {
        char *out = NULL;
        ASSERT_OK(vigil_chat(w->t.rt, w->agent, "s", "recover", NULL, &out, E));
        vigil_free(out);
    } else {
        int ran = 0;
        ASSERT_OK(vigil_wake_process(w->t.rt, 0, &ran, E));
    }
    /* the dead holder's lease was taken over at once, not waited out */
    ASSERT_EQ(w->t.clock.slept_ms, slept);
}

static void enqueue(struct world *w, int i)
{
    char msg[32];
    snprintf(msg, sizeof msg, "msg-%d", i);
    if (w->path == PATH_WAKE)
        ASSERT_OK(vigil_wake_agent(w->t.rt, w->agent, msg, "s", NULL, E));
}

static void crash_loop(const struct kind *k, enum path path, int iters, unsigned seed)
{
    static struct world w;
    char name[64];
    memset(&w, 0, sizeof w);
    w.k = k;
    w.path = path;
    snprintf(name, sizeof name, "crash_%s_%s", k->tool, path == PATH_CHAT ? "chat" : "wake");
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_WAKE_RUNNER");
    test_rt_open(&w.t, name);
    char dir[4000];
    snprintf(dir, sizeof dir, "%.3990s", w.t.path);
    *strrchr(dir, '/') = '\0';
    /* On a tmpfs when there is one: a process crash keeps what was written (the page cache
     * survives it), so syncs prove nothing here and this disk's syncs would cost the minute. */
    if (!access("/dev/shm", W_OK)) {
        snprintf(dir, sizeof dir, "/dev/shm/vigil-%s-%ld", name, (long)getpid());
        ASSERT(mkdir(dir, 0700) == 0 || errno == EEXIST);
        snprintf(w.t.path, sizeof w.t.path, "%s/agent.db", dir);
        test_rt_reopen(&w.t);
    }
    snprintf(g_effects, sizeof g_effects, "%s/effects.log", dir);
    snprintf(w.cassette, sizeof w.cassette, "%s/cassette.json", dir);
    snprintf(w.acks, sizeof w.acks, "%s/acks.txt", dir);
    snprintf(w.reads, sizeof w.reads, "%s/reads.txt", dir);
    write_cassette(&w);
    register_fx(w.t.rt);
    vigil_agent_spec spec = {.name = "crashy",
                             .config_json = "{\"tools\":[\"fx_*\",\"set_report\"],"
                                            "\"capabilities\":[\"taskWrite\",\"taskRead\"]}"};
    ASSERT_OK(vigil_agent_create(w.t.rt, &spec, w.agent, E));
    /* a whole turn, to know how many clock readings one takes */
    enqueue(&w, 0);
    ASSERT_EQ(run_child(&w, 0, 0), 0);
    long reads = child_reads(&w);
    ASSERT(reads > 10);
    srand(seed);
    for (int i = 1; i <= iters; i++) {
        enqueue(&w, i);
        long kill_at = 1 + rand() % (reads + reads / 8);
        int status = run_child(&w, i, kill_at);
        ASSERT((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
               (WIFEXITED(status) && WEXITSTATUS(status) == 0));
        vg_test_clock_advance(&w.t.clock, 10);
        recover(&w);
    }
    check_world(&w, iters + 1);
    test_rt_close(&w.t);
    static const char *const files[] = {"agent.db",    "agent.db-wal",  "agent.db-shm",
                                        "effects.log", "cassette.json", "acks.txt",
                                        "reads.txt"};
    char f[4300];
    for (size_t i = 0; !strncmp(dir, "/dev/shm/", 9) && i < VG_ARRAY_LEN(files); i++) {
        snprintf(f, sizeof f, "%s/%s", dir, files[i]);
        unlink(f);
    }
    rmdir(dir);
}

static int iterations(void)
{
    const char *v = getenv("VIGIL_CRASH_ITERS");
    long n = v ? strtol(v, NULL, 10) : 0;
    return n > 0 ? (int)n : 100; /* per kind and path: 200 per kind, 400 per path */
}

/* proves: S0-075 */
TEST(killed_chat_turns_recover_with_no_effect_twice_and_nothing_left_open)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(KINDS); i++)
        crash_loop(&KINDS[i], PATH_CHAT, iterations(), 1234u + (unsigned)i);
}

/* proves: S0-075 S3-016 */
TEST(killed_wake_runs_recover_with_no_effect_twice_and_nothing_left_open)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(KINDS); i++)
        crash_loop(&KINDS[i], PATH_WAKE, iterations(), 4321u + (unsigned)i);
}

int main(void)
{
    start_fork_server();
    RUN(killed_chat_turns_recover_with_no_effect_twice_and_nothing_left_open);
    RUN(killed_wake_runs_recover_with_no_effect_twice_and_nothing_left_open);
    close(g_server_req); /* the server ends; waited for, so its time counts as this test's */
    waitpid(g_server, NULL, 0);
    return 0;
}
