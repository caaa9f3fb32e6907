/*
 * test_tools.c: the memory tools through the tool executor (every gate, action and toolResult
 * messages), next to the built-in record_observations and set_report, and what the next
 * context assembly sees of them.
 */
#include "helpers/rt.h"

#include "embed/embed.h"
#include "memory/memory.h"
#include "memory/tool_provider.h"
#include "store/store.h"
#include "tool/tool.h"

static void call(struct vg_tool_executor *x, const char *agent, const char *tool, json_t *args,
                 struct vg_tool_outcome *o)
{
    static int n;
    char key[32];
    snprintf(key, sizeof key, "run-%d", ++n);
    struct vg_tool_call_ctx ctx = {
        .agent_id = agent, .run_key = key, .thread_id = "chat", .wake_reason = "user_initiated"};
    memset(o, 0, sizeof *o);
    ASSERT_OK(vg_tool_executor_call(x, &ctx, tool, args, o, E));
    json_decref(args);
}

/* proves: S4-068, S3-046, S4-059 (memory_read(query), memory_write(label, content, tier?),
 * memory_list(tier?); execute_code: tests/sandbox/test_execute_code.c) */
TEST(memory_tools_run_through_the_executor)
{
    struct test_rt t;
    test_rt_open(&t, "mem_tool_exec");
    char agent[37];
    vigil_agent_spec spec = {.name = "ada",
                             .prompt = "You are Ada.",
                             .config_json = "{\"tools\":[\"memory_*\",\"record_observations\","
                                            "\"set_report\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    ASSERT_OK(vg_agent_transition(t.env, agent, VIGIL_LIFECYCLE_ACTIVE, "test", E));
    struct vg_tool_executor *x = NULL;
    struct vg_tool_provider *mp = NULL;
    ASSERT_OK(vg_tool_executor_new(t.env, &x, E));
    ASSERT_OK(vg_tool_executor_add(x, vg_tool_builtin_provider(), E));
    ASSERT_OK(vg_memory_tool_provider(t.env, NULL, &mp, E));
    ASSERT_OK(vg_tool_executor_add(x, mp, E));
    ASSERT(vg_tool_executor_find(x, "memory_read") != NULL);

    struct vg_memory *m = NULL;
    ASSERT_OK(vg_memory_new(t.env, NULL, &m, E));
    int seeded;
    ASSERT_OK(vg_memory_seed(m, agent, NULL, &seeded, E));

    struct vg_tool_outcome o;
    call(x, agent, "memory_write",
         json_pack("{s:s, s:s}", "label", "user:alice", "content", "Alice drinks green tea."), &o);
    if (o.code != VG_TOOL_OK)
        TEST_FAIL_("memory_write: %s %s", o.error_code, o.error_message);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "status")), "created");
    vg_tool_outcome_release(&o);

    /* a restart: the memory is read back through the tool */
    vg_tool_executor_free(x);
    vg_memory_free(m);
    test_rt_reopen(&t);
    ASSERT_OK(vg_tool_executor_new(t.env, &x, E));
    ASSERT_OK(vg_tool_executor_add(x, vg_tool_builtin_provider(), E));
    ASSERT_OK(vg_memory_tool_provider(t.env, NULL, &mp, E));
    ASSERT_OK(vg_tool_executor_add(x, mp, E));
    ASSERT_OK(vg_memory_new(t.env, NULL, &m, E));
    call(x, agent, "memory_read", json_pack("{s:s}", "query", "what does alice drink"), &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    json_t *first = json_array_get(json_object_get(o.result, "results"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(first, "label")), "user:alice");
    vg_tool_outcome_release(&o);

    /* permissions hold through the tool: read-only refused, familiar pending */
    call(x, agent, "memory_write",
         json_pack("{s:s, s:s}", "label", "system", "content", "no rules"), &o);
    ASSERT_EQ(o.code, VG_TOOL_NOT_ALLOWED);
    ASSERT_CONTAINS(o.error_message, "read-only");
    vg_tool_outcome_release(&o);
    call(x, agent, "memory_write",
         json_pack("{s:s, s:s}", "label", "familiar", "content", "My human is Alice."), &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    ASSERT_STREQ(json_string_value(json_object_get(o.result, "status")), "pending");
    vg_tool_outcome_release(&o);
    json_t *pend = NULL;
    ASSERT_OK(vg_memory_pending_list(m, agent, &pend, E));
    ASSERT_EQ(json_array_size(pend), 1);
    json_decref(pend);
    call(x, agent, "memory_list", json_pack("{s:s}", "tier", "core"), &o);
    ASSERT_EQ(json_array_size(json_object_get(o.result, "blocks")), 3);
    vg_tool_outcome_release(&o);
    call(x, agent, "memory_write",
         json_pack("{s:s, s:s, s:s}", "label", "x", "content", "y", "tier", "core"), &o);
    ASSERT_EQ(o.code, VG_TOOL_INVALID_ARGUMENTS); /* the schema refuses core */
    vg_tool_outcome_release(&o);

    /* the built-ins write the journal and the report the next context carries */
    call(x, agent, "record_observations",
         json_pack("{s:[s,s]}", "notes", "alice prefers tea", "she works on bridges"), &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    call(x, agent, "set_report",
         json_pack("{s:s, s:s}", "scope", "current", "markdown", "## Alice\nlikes tea"), &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    vg_tool_outcome_release(&o);
    struct vg_assemble_opts ao = {.agent_id = agent, .thread_id = "chat"};
    struct vg_context c;
    ASSERT_OK(vg_memory_assemble(m, &ao, &c, E));
    ASSERT_CONTAINS(c.report, "likes tea");
    ASSERT_EQ(json_array_size(c.observations), 2);
    ASSERT_CONTAINS(c.system, "<memory label=\"system\"");
    ASSERT(json_array_size(c.hot) > 0); /* the action and toolResult messages of the calls */
    vg_context_release(&c);
    vg_memory_free(m);
    vg_tool_executor_free(x);
    test_rt_close(&t);
}

/* An embedder that needs a service (no OFFLINE capability), wrapping the offline one, and
 * counts its calls and those made while the store had a transaction open. */
struct spy_embedder {
    struct vg_embedder base;
    struct vg_embedder *inner;
    struct vg_store *store;
    int calls, calls_in_tx;
};

static int spy_dim(struct vg_embedder *e)
{
    return vg_embed_dimension(((struct spy_embedder *)e)->inner);
}

static vigil_code spy_embed(struct vg_embedder *e, const char *const *t, size_t n, float *out,
                            vigil_error *err)
{
    struct spy_embedder *s = (struct spy_embedder *)e;
    s->calls++;
    s->calls_in_tx += vg_store_in_tx(s->store);
    return vg_embed(s->inner, t, n, out, err);
}

static void spy_close(struct vg_embedder *e)
{
    VG_UNUSED(e);
}

static const struct vg_embed_methods spy_methods = {.version = 1,
                                                    .name = "spy",
                                                    .caps = 0,
                                                    .dimension = spy_dim,
                                                    .embed = spy_embed,
                                                    .close = spy_close};

/* A networked embedder is never called inside a transaction, where the request would hold the
 * store's write lock: a memory tool's write commits first and its block gets its vector right
 * after, before the call returns; a read runs outside any transaction. Both keep what they
 * promise: the written block has its vector, and the read finds it by meaning as well. */
/* proves: S4-006 */
TEST(memory_tools_call_a_networked_embedder_outside_transactions)
{
    struct test_rt t;
    test_rt_open(&t, "mem_tool_spy");
    char agent[37];
    vigil_agent_spec spec = {.name = "ada", .config_json = "{\"tools\":[\"memory_*\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    ASSERT_OK(vg_agent_transition(t.env, agent, VIGIL_LIFECYCLE_ACTIVE, "test", E));
    struct spy_embedder spy = {.base = {.methods = &spy_methods}, .store = t.env->store};
    ASSERT_OK(vg_embed_hash_new(0, &spy.inner, E));
    snprintf(spy.base.model, sizeof spy.base.model, "%s", vg_embed_model(spy.inner));
    struct vg_tool_executor *x = NULL;
    struct vg_tool_provider *mp = NULL;
    ASSERT_OK(vg_tool_executor_new(t.env, &x, E));
    ASSERT_OK(vg_memory_tool_provider(t.env, &spy.base, &mp, E));
    ASSERT_OK(vg_tool_executor_add(x, mp, E));

    struct vg_tool_outcome o;
    call(x, agent, "memory_write",
         json_pack("{s:s, s:s}", "label", "trip", "content", "flight to Lisbon on May 5"), &o);
    if (o.code != VG_TOOL_OK)
        TEST_FAIL_("memory_write: %s %s", o.error_code, o.error_message);
    const char *block = json_string_value(json_object_get(o.result, "block_id"));
    ASSERT(block != NULL);
    json_t *v = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "memory_vector", block, &v, NULL, E));
    json_decref(v);
    vg_tool_outcome_release(&o);
    ASSERT(spy.calls >= 1);
    ASSERT_EQ(spy.calls_in_tx, 0);

    int before = spy.calls;
    call(x, agent, "memory_read", json_pack("{s:s}", "query", "Lisbon flight"), &o);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    json_t *first = json_array_get(json_object_get(o.result, "results"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(first, "label")), "trip");
    ASSERT(json_object_get(first, "vector_rank") != NULL);
    vg_tool_outcome_release(&o);
    ASSERT_EQ(spy.calls, before + 1);
    ASSERT_EQ(spy.calls_in_tx, 0);

    /* The background pass too leaves the embedder alone inside a transaction: a write there
     * waits for its vector, and the same pass run after the commit makes it. */
    struct vg_memory *m = NULL;
    ASSERT_OK(vg_memory_new(t.env, &spy.base, &m, E));
    json_t *wout = NULL;
    int done = -1;
    ASSERT_OK(vg_store_begin(t.env->store, E));
    ASSERT_OK(vg_memory_write(m, agent, "hotel", "a room near the river", NULL, &wout, E));
    ASSERT_OK(vg_memory_embed_pending(m, agent, 10, &done, E));
    ASSERT_EQ(done, 0);
    ASSERT_OK(vg_store_commit(t.env->store, E));
    ASSERT_EQ(spy.calls_in_tx, 0);
    ASSERT_OK(vg_memory_embed_pending(m, agent, 10, &done, E));
    ASSERT_EQ(done, 1);
    ASSERT_OK(vg_env_get_json(t.env, "memory_vector",
                              json_string_value(json_object_get(wout, "block_id")), &v, NULL, E));
    json_decref(v);
    json_decref(wout);
    vg_memory_free(m);
    ASSERT_EQ(spy.calls_in_tx, 0);

    vg_tool_executor_free(x);
    vg_embed_close(spy.inner);
    test_rt_close(&t);
}

int main(void)
{
    RUN(memory_tools_run_through_the_executor);
    RUN(memory_tools_call_a_networked_embedder_outside_transactions);
    return 0;
}
