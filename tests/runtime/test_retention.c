/*
 * test_retention.c: retention (docs/storage.md, "Growth and retention"). Each class is pruned
 * when its time to live has passed and not before; a pruned run still shows, replays to the
 * same lifecycle, attention and input request, and reads as pruned; holds keep an agent or a
 * run whole; a storage budget prunes in the fixed class order, oldest first, the same way on
 * two identical stores; erasure removes an agent's every record and leaves no byte of it in
 * the store's files, another agent's data untouched.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "config/config.h"
#include "journal/journal.h"
#include "os/fs.h"
#include "runtime/retention.h"
#include "runtime/runtime_int.h"
#include "store/store.h"

#define DAY (24 * 3600000LL)

static const char tool_cassette[] =
    "{\"vigil_cassette\":1,\"exchanges\":["
    "{\"response\":{\"tool_calls\":[{\"id\":\"t1\",\"name\":\"set_report\",\"arguments\":"
    "{\"scope\":\"current\",\"markdown\":\"# Status %s\"}}]}},"
    "{\"response\":{\"text\":\"Report written.\"}}]}";

static void set_config(struct test_rt *t, const char *yaml)
{
    vg_config_free(t->rt->config);
    t->rt->config = NULL;
    ASSERT_OK(vg_config_parse(yaml, strlen(yaml), "config.yaml", &t->rt->config, E));
}

static void make_agent(struct test_rt *t, const char *name, const char *config, char id[37])
{
    vigil_agent_spec spec = {.name = name, .config_json = config};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, id, E));
}

static void chat(struct test_rt *t, const char *agent, const char *session, const char *text)
{
    char *out = NULL;
    ASSERT_OK(vigil_chat(t->rt, agent, session, text, NULL, &out, E));
    vigil_free(out);
}

/* A turn that writes the agent's `current` report through a tool call. */
static void report_turn(struct test_rt *t, const char *agent, const char *status)
{
    char path[4300], text[1024];
    snprintf(path, sizeof path, "%s/cassette.json", vg_test_tmpdir("ret_cassette"));
    snprintf(text, sizeof text, tool_cassette, status);
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs(text, f);
    fclose(f);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    test_rt_reopen(t); /* a runtime builds its model once: this one replays the cassette */
    chat(t, agent, "reports", "write the report");
    unsetenv("VIGIL_MODEL_CASSETTE");
    test_rt_reopen(t);
}

static json_t *prune(struct test_rt *t, const vigil_prune_options *o)
{
    char *text = NULL;
    ASSERT_OK(vigil_prune(t->rt, o, &text, E));
    json_t *v = json_loads(text, 0, NULL);
    ASSERT(v != NULL);
    vigil_free(text);
    return v;
}

static int64_t class_records(const json_t *report, const char *cls)
{
    return json_integer_value(
        json_object_get(json_object_get(json_object_get(report, "classes"), cls), "records"));
}

static int64_t count_kind(struct test_rt *t, const char *kind, const char *owner)
{
    struct vg_query q = {.kind = kind, .owner = owner};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

struct ids {
    json_t *a;
};

static int id_cb(void *user, const struct vg_record *r)
{
    json_array_append_new(((struct ids *)user)->a, json_string(r->id));
    return 0;
}

/* The agent's run ids, oldest first. */
static json_t *runs_of(struct test_rt *t, const char *agent)
{
    struct ids ids = {json_array()};
    struct vg_query q = {.kind = "run", .owner = agent};
    ASSERT_OK(vg_store_scan(t->env->store, &q, id_cb, &ids, E));
    return ids.a;
}

static void setup(struct test_rt *t, const char *name)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    test_rt_open(t, name);
    set_config(t, "{}");
}

/* proves: S0-136 S1-036 */
TEST(each_class_goes_after_its_time_to_live_and_not_before)
{
    struct test_rt t;
    char a[37];
    setup(&t, "ret_ttl");
    make_agent(&t, "keeper", "{\"tools\":[\"set_report\"]}", a);
    chat(&t, a, NULL, "turn one");
    report_turn(&t, a, "one");
    report_turn(&t, a, "two");
    set_config(&t, "retention: {runtime: 1d, trace: 10d, action: 20d, report: 30d}\n");
    json_t *runs = runs_of(&t, a);
    ASSERT_EQ(json_array_size(runs), 3);
    int64_t journal_before = count_kind(&t, "journal", a);

    /* Nothing is old enough yet: nothing goes. */
    vg_test_clock_advance(&t.clock, 9 * DAY);
    json_t *r = prune(&t, NULL);
    ASSERT_EQ(json_integer_value(json_object_get(r, "records")), 0);
    json_decref(r);
    ASSERT_EQ(count_kind(&t, "journal", a), journal_before);

    /* Past ten days the traces go, and only they. */
    vg_test_clock_advance(&t.clock, 2 * DAY);
    r = prune(&t, NULL);
    ASSERT_EQ(json_integer_value(json_object_get(r, "runs_pruned")), 3);
    ASSERT(class_records(r, "trace") > 0);
    ASSERT_EQ(class_records(r, "action"), 0);
    ASSERT_EQ(class_records(r, "report"), 0);
    ASSERT(json_integer_value(json_object_get(
               json_object_get(json_object_get(r, "classes"), "trace"), "bytes")) > 0);
    json_decref(r);
    ASSERT(count_kind(&t, "journal", a) < journal_before);

    /* A pruned run still shows, and replays to the same lifecycle, attention and input
     * request; it says it was pruned. */
    for (size_t i = 0; i < json_array_size(runs); i++) {
        const char *run = json_string_value(json_array_get(runs, i));
        char *text = NULL;
        ASSERT_OK(vigil_run_replay(t.rt, run, &text, E));
        json_t *v = json_loads(text, 0, NULL);
        ASSERT(json_is_true(json_object_get(v, "stored_projection_matches")));
        ASSERT(json_is_object(json_object_get(v, "trace_pruned")));
        ASSERT_STREQ(
            json_string_value(json_object_get(json_object_get(v, "projection"), "lifecycle")),
            "completed");
        json_decref(v);
        vigil_free(text);
        ASSERT_OK(vigil_run_show(t.rt, run, &text, E));
        ASSERT_CONTAINS(text, "\"completed\"");
        ASSERT_CONTAINS(text, "\"trace_pruned\""); /* it reads as pruned */
        vigil_free(text);
    }
    /* Pruning again finds nothing more of the traces. */
    r = prune(&t, NULL);
    ASSERT_EQ(class_records(r, "trace"), 0);
    json_decref(r);

    /* Past twenty days the operations go; past thirty the superseded report, not the head. */
    ASSERT_EQ(count_kind(&t, "operation", a), 2);
    vg_test_clock_advance(&t.clock, 10 * DAY);
    r = prune(&t, NULL);
    ASSERT_EQ(class_records(r, "action"), 2);
    ASSERT_EQ(class_records(r, "report"), 0);
    json_decref(r);
    ASSERT_EQ(count_kind(&t, "report", a), 2);
    vg_test_clock_advance(&t.clock, 10 * DAY);
    r = prune(&t, NULL);
    ASSERT_EQ(class_records(r, "report"), 1);
    json_decref(r);
    ASSERT_EQ(count_kind(&t, "report", a), 1);
    json_t *report = NULL;
    ASSERT_OK(vg_report_current(t.env, a, "current", &report, E));
    ASSERT_CONTAINS(json_string_value(json_object_get(report, "markdown")), "Status two");
    json_decref(report);

    /* The conversation is whole: a new turn in the pruned threads still runs. */
    chat(&t, a, NULL, "turn after pruning");
    json_decref(runs);
    test_rt_close(&t);
}

/* proves: S0-137 */
TEST(holds_keep_an_agent_or_a_run_whole)
{
    struct test_rt t;
    char a[37], b[37];
    setup(&t, "ret_hold");
    make_agent(&t, "held-by-manifest", "{\"retention\":{\"hold\":true}}", a);
    make_agent(&t, "one-run-held", NULL, b);
    chat(&t, a, NULL, "kept");
    chat(&t, b, NULL, "first");
    chat(&t, b, NULL, "second");
    json_t *runs = runs_of(&t, b);
    const char *held_run = json_string_value(json_array_get(runs, 0));
    ASSERT_OK(vigil_retention_hold(t.rt, held_run, 1, E));
    set_config(&t, "retention: {trace: 1d}\n");
    vg_test_clock_advance(&t.clock, 2 * DAY);
    int64_t a_journal = count_kind(&t, "journal", a);
    json_t *r = prune(&t, NULL);
    ASSERT_EQ(json_integer_value(json_object_get(r, "runs_pruned")), 1); /* b's second only */
    ASSERT_EQ(json_integer_value(json_object_get(r, "agents_held")), 1);
    json_decref(r);
    ASSERT_EQ(count_kind(&t, "journal", a), a_journal);
    int64_t at = 0;
    ASSERT_OK(vg_journal_trace_pruned(t.env->store, held_run, &at, NULL, E));
    ASSERT_EQ(at, 0);
    ASSERT_OK(vg_journal_trace_pruned(t.env->store, json_string_value(json_array_get(runs, 1)), &at,
                                      NULL, E));
    ASSERT(at > 0);
    /* An agent on hold cannot be erased; released, the run goes at the next prune. */
    vigil_error err = {0};
    ASSERT_EQ(vigil_agent_erase(t.rt, a, &err), VIGIL_ESTATE);
    ASSERT_CONTAINS(err.message, "on hold");
    ASSERT_OK(vigil_retention_hold(t.rt, b, 1, E));
    ASSERT_EQ(vigil_agent_erase(t.rt, b, &err), VIGIL_ESTATE);
    ASSERT_OK(vigil_retention_hold(t.rt, b, 0, E));
    ASSERT_OK(vigil_retention_hold(t.rt, held_run, 0, E));
    r = prune(&t, NULL);
    ASSERT_EQ(json_integer_value(json_object_get(r, "runs_pruned")), 1);
    json_decref(r);
    json_decref(runs);
    test_rt_close(&t);
}

/* The store of the budget tests: three chat turns, then two turns that write a report. */
static void budget_store(struct test_rt *t, const char *name)
{
    char a[37];
    setup(t, name);
    make_agent(t, "budgeted", "{\"tools\":[\"set_report\"]}", a);
    for (int i = 0; i < 3; i++)
        chat(t, a, NULL, "a turn that leaves a trace behind");
    report_turn(t, a, "one");
    report_turn(t, a, "two");
    set_config(t, "retention: {runtime: never, trace: never, action: never, report: never, "
                  "summary: never}\n");
}

static void describe(const json_t *r, char *out, size_t n)
{
    snprintf(out, n, "over:%d trace:%lld action:%lld report:%lld runs:%lld bytes:%lld",
             json_is_true(json_object_get(r, "over_budget")), (long long)class_records(r, "trace"),
             (long long)class_records(r, "action"), (long long)class_records(r, "report"),
             (long long)json_integer_value(json_object_get(r, "runs_pruned")),
             (long long)json_integer_value(json_object_get(r, "bytes")));
}

static int64_t class_bytes(const json_t *r, const char *cls)
{
    return json_integer_value(
        json_object_get(json_object_get(json_object_get(r, "classes"), cls), "bytes"));
}

/* What a budget prune removes, on a fresh store: the budget is what is in use less `less`
 * bytes, less the trace's bytes too with past_traces. */
static void budget_run(const char *name, int64_t less, int past_traces, char *out, size_t n)
{
    struct test_rt t;
    int64_t used = 0;
    budget_store(&t, name);
    ASSERT_OK(vg_store_control(t.env->store, VG_STORE_CTRL_USED_BYTES, &used, E));
    vigil_prune_options dry = {.dry_run = 1, .budget_bytes = 1};
    json_t *all = prune(&t, &dry); /* everything finished, counted, nothing removed */
    int64_t traces = past_traces ? class_bytes(all, "trace") : 0;
    json_decref(all);
    vigil_prune_options o = {.budget_bytes = used - traces - less};
    vigil_prune_options counted = o;
    counted.dry_run = 1;
    char would[256];
    json_t *r = prune(&t, &counted); /* a dry run says what the prune then does */
    describe(r, would, sizeof would);
    json_decref(r);
    r = prune(&t, &o);
    describe(r, out, n);
    json_decref(r);
    ASSERT_STREQ(would, out);
    test_rt_close(&t);
}

/* proves: S0-138 */
TEST(a_budget_prunes_in_the_fixed_order_the_same_way_twice)
{
    char one[256], again[256], more[256];
    /* Under TTLs of never nothing goes; a budget a byte short of what is in use takes the
     * oldest run's trace alone (no wake log here: the runtime class is empty). */
    budget_run("ret_budget_a", 1, 0, one, sizeof one);
    ASSERT_CONTAINS(one, "over:1 ");
    ASSERT_CONTAINS(one, " action:0 report:0 runs:1 ");
    /* The same store made again prunes the same way, to the byte. */
    budget_run("ret_budget_b", 1, 0, again, sizeof again);
    ASSERT_STREQ(one, again);
    /* A byte past every trace: all the traces go, then the oldest operation, and the reports
     * (a later class) are not touched. */
    budget_run("ret_budget_c", 1, 1, more, sizeof more);
    ASSERT_CONTAINS(more, " action:1 report:0 runs:5 ");
}

/* proves: S0-137 */
TEST(erasure_leaves_nothing_of_the_agent_in_the_files)
{
    struct test_rt t;
    char a[37], b[37];
    setup(&t, "ret_erase");
    make_agent(&t, "erased", NULL, a);
    make_agent(&t, "bystander", NULL, b);
    chat(&t, a, NULL, "my secret is zebra-quartz-4471");
    chat(&t, b, NULL, "the bystander's words");
    int64_t b_records = count_kind(&t, "journal", b) + count_kind(&t, "message", b);
    ASSERT_OK(vigil_agent_erase(t.rt, a, E));
    ASSERT_EQ(count_kind(&t, "agent", a), 0);
    ASSERT_EQ(count_kind(&t, "message", a), 0);
    ASSERT_EQ(count_kind(&t, "journal", a), 0);
    ASSERT_EQ(count_kind(&t, "journal", b) + count_kind(&t, "message", b), b_records);
    if (getenv("VIGIL_TEST_RT_PG")) { /* no files of its own: the server's VACUUM ran */
        test_rt_close(&t);
        return;
    }
    /* Neither the store file nor its log keeps the words. */
    static const char *const files[] = {"", "-wal"};
    int bystander_found = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(files); i++) {
        char path[4300], *data = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s%s", t.path, files[i]);
        if (vg_fs_read_file(path, (size_t)1 << 30, &data, &len, NULL) != VIGIL_OK)
            continue;
        ASSERT(memmem(data, len, "zebra-quartz-4471", 17) == NULL);
        bystander_found |= memmem(data, len, "bystander's words", 17) != NULL;
        vg_free(data);
    }
    ASSERT(bystander_found); /* what the search would find, were it there */
    test_rt_close(&t);
}

/* Archival memory grows without bound and nothing removes it but a person or the agent: a
 * prune with every class past its time to live and a storage budget of one byte (everything
 * finished, whatever its age, is listed) leaves every archival note, each still found by search.
 * proves: S4-036 */
TEST(archival_memory_is_never_pruned)
{
    struct test_rt t;
    char a[37], label[32], text[96];
    setup(&t, "ret_archival");
    make_agent(&t, "rememberer", NULL, a);
    enum { NOTES = 300 };
    for (int i = 0; i < NOTES; i++) {
        snprintf(label, sizeof label, "note-%d", i);
        snprintf(text, sizeof text, "archived fact number %d about zebra%d", i, i);
        ASSERT_OK(vigil_memory_set(t.rt, a, label, text, "archival", NULL, NULL, E));
    }
    chat(&t, a, NULL, "a turn to have something to prune");
    report_turn(&t, a, "one");
    report_turn(&t, a, "two");
    set_config(&t, "retention: {runtime: 1s, trace: 1s, action: 1s, report: 1s, summary: 1s}\n");
    vg_test_clock_advance(&t.clock, 400 * DAY);
    int64_t blocks_before = count_kind(&t, "memory_block", a);
    ASSERT(blocks_before >= NOTES);
    vigil_prune_options all = {.budget_bytes = 1};
    json_t *r = prune(&t, &all);
    ASSERT(json_integer_value(json_object_get(r, "records")) > 0); /* the prune did prune */
    json_decref(r);
    ASSERT_EQ(count_kind(&t, "memory_block", a), blocks_before);
    char *listed = NULL;
    ASSERT_OK(vigil_memory_list(t.rt, a, "archival", &listed, E));
    json_t *v = json_loads(listed, 0, NULL);
    vigil_free(listed);
    json_t *items = json_is_array(v) ? v : json_object_get(v, "blocks");
    ASSERT_EQ(json_array_size(items), NOTES);
    json_decref(v);
    char *hits = NULL;
    ASSERT_OK(vigil_memory_search(t.rt, a, "zebra7", 5, &hits, E));
    ASSERT_CONTAINS(hits, "archived fact number 7 about zebra7");
    vigil_free(hits);
    test_rt_close(&t);
}

int main(void)
{
    RUN(each_class_goes_after_its_time_to_live_and_not_before);
    RUN(holds_keep_an_agent_or_a_run_whole);
    RUN(a_budget_prunes_in_the_fixed_order_the_same_way_twice);
    RUN(erasure_leaves_nothing_of_the_agent_in_the_files);
    RUN(archival_memory_is_never_pruned);
    return 0;
}
