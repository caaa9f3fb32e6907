/*
 * test_journal_adoption.c: where a store's run journals come from. A run this store launches
 * gets its journal (the header first); messages that came without a run get none, at no read
 * and no open; the journals of runs made elsewhere come in only through an explicit import of
 * their export.
 */
#include "helpers/rt.h"

#include "agent/agent.h"

/* How many items a JSON list answer of the public API holds, under `key` (NULL: the top). */
static size_t listed(char *json, const char *key)
{
    json_t *v = json_loads(json, 0, NULL);
    vigil_free(json);
    ASSERT(v != NULL);
    size_t n = json_array_size(key ? json_object_get(v, key) : v);
    json_decref(v);
    return n;
}

static size_t runs_of(struct test_rt *t, const char *agent)
{
    char *json = NULL;
    ASSERT_OK(vigil_runs_list(t->rt, agent, NULL, NULL, 50, &json, E));
    return listed(json, "items");
}

static size_t conversation_of(struct test_rt *t, const char *agent)
{
    char *json = NULL;
    ASSERT_OK(vigil_session_messages(t->rt, agent, "default", 50, &json, E));
    return listed(json, "items");
}

/* The run's first journal record (its header) as the run's history shows it. */
static void expect_header_first(struct test_rt *t, const char *agent)
{
    char *json = NULL;
    ASSERT_OK(vigil_runs_list(t->rt, agent, NULL, NULL, 1, &json, E));
    json_t *v = json_loads(json, 0, NULL);
    vigil_free(json);
    const char *run = json_string_value(
        json_object_get(json_array_get(json_object_get(v, "items"), 0), "run_id"));
    ASSERT(run != NULL);
    struct vg_query q = {.kind = "journal", .owner = agent, .k1 = run, .limit = 1};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    ASSERT(n >= 1);
    ASSERT_OK(vigil_run_show(t->rt, run, &json, E));
    ASSERT_CONTAINS(json, run);
    vigil_free(json);
    json_decref(v);
}

/* A run this store launches gets its journal, header first; messages that came without a run
 * (written by a host or a tool through the spine, as an older conversation is) get none, at no
 * read and no open of the store; and the runs of another store, with their journals, come in
 * only through the explicit import of that store's export (seed 001's "explicit migration":
 * no reader makes up a journal for data that has none). proves: S1-046 */
TEST(journals_come_from_launching_runs_and_from_an_explicit_import_only)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    struct test_rt a, b;
    test_rt_open(&a, "adoption_a");
    char agent[37], thread[128];
    vigil_agent_spec spec = {.name = "talker", .prompt = "You talk."};
    ASSERT_OK(vigil_agent_create(a.rt, &spec, agent, E));
    snprintf(thread, sizeof thread, "%s:session:default", agent);
    static const char *const old[] = {"an earlier word", "kept from before"};
    for (size_t i = 0; i < VG_ARRAY_LEN(old); i++) {
        struct vg_message_in in = {
            .agent_id = agent, .thread_id = thread, .kind = VG_MSG_USER, .content = old[i]};
        ASSERT_OK(vg_message_append(a.env, &in, NULL, E));
    }
    ASSERT_EQ(conversation_of(&a, agent), 2);
    ASSERT_EQ(runs_of(&a, agent), 0);
    test_rt_reopen(&a);
    ASSERT_EQ(runs_of(&a, agent), 0);
    struct vg_query journals = {.kind = "journal", .owner = agent};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(a.env->store, &journals, &n, E));
    ASSERT_EQ(n, 0);

    /* Launched here: a run with its journal. */
    char *out = NULL;
    ASSERT_OK(vigil_chat(a.rt, agent, "default", "hello", NULL, &out, E));
    vigil_free(out);
    ASSERT_EQ(runs_of(&a, agent), 1);
    expect_header_first(&a, agent);

    /* Another store holds none of it until it imports the export, explicitly. */
    test_rt_open(&b, "adoption_b");
    test_rt_reopen(&b); /* ids of its own */
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/export", vg_test_tmpdir("adoption_export"));
    int64_t exported = 0, imported = 0;
    ASSERT_OK(vigil_journal_export(a.rt, agent, dir, &exported, E));
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_runs_list(b.rt, agent, NULL, NULL, 50, &out, NULL));
    ASSERT_OK(vigil_journal_import(b.rt, agent, dir, &imported, E));
    ASSERT(imported > 0);
    ASSERT_EQ(runs_of(&b, agent), 1);
    expect_header_first(&b, agent);
    test_rt_close(&a);
    test_rt_close(&b);
}

int main(void)
{
    RUN(journals_come_from_launching_runs_and_from_an_explicit_import_only);
    return 0;
}
