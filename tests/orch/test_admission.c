/*
 * test_admission.c: spawn requests through the gated tool call, as an agent's run makes them
 * (vigil_tool_call with the run's key): the orchestrator admits or denies each one, deny by
 * default, and records every decision with its reason.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "base/json.h"
#include "helpers/fault_store.h"
#include "orch/orch.h"
#include "os/fs.h"
#include "store/store.h"
#include "tool/tool.h"

static void make_agent(struct test_rt *t, const char *name, const char *kind, const char *config,
                       char id[37])
{
    vigil_agent_spec s = {
        .name = name, .kind = kind, .prompt = "You help.\nMore.", .config_json = config};
    ASSERT_OK(vigil_agent_create(t->rt, &s, id, E));
}

/* One tool call of agent `agent` in the run `run_key`: the envelope (owned). */
static json_t *call(struct test_rt *t, const char *agent, const char *run_key, const char *tool,
                    const char *args)
{
    char *out = NULL;
    vigil_error err = {0};
    vigil_tool_call(t->rt, agent, run_key, tool, args, &out, &err);
    ASSERT(out != NULL);
    json_t *v = json_loads(out, 0, NULL);
    vigil_free(out);
    ASSERT(v != NULL);
    return v;
}

static json_t *child(json_t *env, size_t i)
{
    return json_array_get(json_object_get(json_object_get(env, "result"), "children"), i);
}

static const char *field(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int64_t count(struct test_rt *t, const char *kind, const char *k1)
{
    struct vg_query q = {.kind = kind, .k1 = k1};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

#define SPAWNER                                                                                    \
    "{\"tools\":[\"spawn_agents\",\"list_available_agents\"],\"spawn\":{\"enabled\":true}}"

/* proves: S0-148 */
TEST(spawning_is_off_unless_the_manifest_enables_it)
{
    struct test_rt t;
    char a[37], b[37];
    char *tools = NULL;
    test_rt_open(&t, "orch_off");
    make_agent(&t, "plain", "worker", "{\"tools\":[\"*\"]}", a);
    make_agent(&t, "boss", "lead", SPAWNER, b);
    /* Every tool by glob, yet not the spawn tools: the manifest did not enable spawning. */
    ASSERT_OK(vigil_tool_list_for_agent(t.rt, a, &tools, E));
    ASSERT(!strstr(tools, "spawn_agents") && !strstr(tools, "list_available_agents"));
    ASSERT_CONTAINS(tools, "set_report");
    vigil_free(tools);
    json_t *v =
        call(&t, a, "run-a", "spawn_agents", "{\"requests\":[{\"kind\":\"lead\",\"goal\":\"x\"}]}");
    ASSERT_STREQ(field(v, "error_code"), "not_allowed");
    json_decref(v);
    ASSERT_EQ(count(&t, "spawn_child", NULL), 0);
    ASSERT_OK(vigil_tool_list_for_agent(t.rt, b, &tools, E));
    ASSERT_CONTAINS(tools, "spawn_agents");
    vigil_free(tools);
    test_rt_close(&t);
}

/* proves: S2-005 S2-016 */
TEST(list_available_agents_shows_every_agent_whatever_its_visibility)
{
    struct test_rt t;
    char a[37], b[37], c[37];
    test_rt_open(&t, "orch_list");
    make_agent(&t, "boss", "lead", SPAWNER, a);
    make_agent(&t, "seen", "worker", "{}", c);
    /* A manifest makes the other one private: still listed to agents. */
    char path[4300], *out = NULL;
    snprintf(path, sizeof path, "%s/hidden.yaml", vg_test_tmpdir("orch_list_manifest"));
    const char *yaml = "name: hidden\nkind: worker\nvisibility: private\n";
    ASSERT_OK(vg_fs_write_file(path, yaml, strlen(yaml), E));
    ASSERT_OK(vigil_agent_apply(t.rt, path, 0, &out, E));
    vigil_free(out);
    (void)b;
    json_t *v = call(&t, a, "run-1", "list_available_agents", "{\"kind\":\"worker\"}");
    json_t *agents = json_object_get(json_object_get(v, "result"), "agents");
    ASSERT_EQ(json_array_size(agents), 2);
    ASSERT_STREQ(field(json_array_get(agents, 0), "description"), "You help.");
    json_decref(v);
    test_rt_close(&t);
}

static int lists(const char *page_json, const char *name)
{
    json_t *page = json_loads(page_json, 0, NULL), *a;
    size_t i;
    int found = 0;
    json_array_foreach (json_object_get(page, "items"), i, a)
        found |= !strcmp(field(a, "name"), name);
    json_decref(page);
    return found;
}

static int listed_to_people(struct test_rt *t, const char *name, int all)
{
    char *out = NULL;
    ASSERT_OK(vigil_agent_list_visible(t->rt, NULL, 100, all, &out, E));
    int found = lists(out, name);
    vigil_free(out);
    return found;
}

/* Visibility hides internal agents from people's listings only; the old spellings map.
 * proves: S2-015 S2-017 */
TEST(visibility_restricts_listings_to_people_not_agents)
{
    struct test_rt t;
    char boss[37], old[37], *out = NULL;
    test_rt_open(&t, "orch_visibility");
    make_agent(&t, "boss", "lead", SPAWNER, boss);
    const char *dir = vg_test_tmpdir("orch_visibility_manifests");
    static const char *const files[][2] = {
        {"ext", "external"}, {"int", "internal"}, {"pub", "public"}, {"priv", "private"}};
    char path[4300];
    for (size_t i = 0; i < 4; i++) {
        char yaml[200];
        snprintf(path, sizeof path, "%s/%s.yaml", dir, files[i][0]);
        snprintf(yaml, sizeof yaml, "name: %s\nkind: worker\nvisibility: %s\n", files[i][0],
                 files[i][1]);
        ASSERT_OK(vg_fs_write_file(path, yaml, strlen(yaml), E));
    }
    snprintf(path, sizeof path, "%s/proj.yaml", dir);
    ASSERT_OK(vg_fs_write_file(path, "name: proj\nkind: worker\n", 24, E));
    ASSERT_OK(vigil_agent_apply(t.rt, dir, 0, &out, E));
    vigil_free(out);
    ASSERT(listed_to_people(&t, "ext", 0) && listed_to_people(&t, "proj", 0) &&
           listed_to_people(&t, "pub", 0) && listed_to_people(&t, "boss", 0));
    ASSERT(!listed_to_people(&t, "int", 0) && !listed_to_people(&t, "priv", 0));
    ASSERT(listed_to_people(&t, "int", 1) && listed_to_people(&t, "priv", 1));
    /* The stored values are the new names. */
    ASSERT_OK(vigil_agent_list_visible(t.rt, NULL, 100, 1, &out, E));
    ASSERT_CONTAINS(out, "\"visibility\":\"external\"");
    ASSERT(!strstr(out, "\"public\"") && !strstr(out, "\"private\""));
    vigil_free(out);
    /* A page counts only what it shows: one agent a page still reaches every listed agent. */
    ASSERT_OK(vigil_agent_list_visible(t.rt, NULL, 1, 0, &out, E));
    ASSERT_CONTAINS(out, "\"next_cursor\":\"");
    vigil_free(out);

    /* A record stored before the change (schema 1, `internal` the old default) is project. */
    make_agent(&t, "old", "worker", "{}", old);
    json_t *raw = NULL;
    int64_t rev = 0;
    ASSERT_OK(vg_env_get_json(t.env, "agent", old, &raw, &rev, E));
    json_object_set_new(raw, "schema_version", json_integer(1));
    json_object_set_new(raw, "visibility", json_string("internal"));
    ASSERT_OK(vg_env_update_json(t.env, "agent", old, old, "created", "worker", 0, raw, rev, E));
    json_decref(raw);
    ASSERT(listed_to_people(&t, "old", 0));

    /* Agents see every agent whatever its visibility. */
    json_t *v = call(&t, boss, "run-v", "list_available_agents", "{\"kind\":\"worker\"}");
    ASSERT_EQ(json_array_size(json_object_get(json_object_get(v, "result"), "agents")), 6);
    json_decref(v);
    test_rt_close(&t);
}

/* proves: S0-143 S0-147 */
TEST(an_admitted_child_is_a_queued_wake_and_every_decision_is_recorded)
{
    struct test_rt t;
    char a[37], b[37];
    test_rt_open(&t, "orch_admit");
    make_agent(&t, "boss", "lead", SPAWNER, a);
    make_agent(&t, "w", "worker", "{}", b);
    json_t *v = call(&t, a, "run-1", "spawn_agents",
                     "{\"requests\":[{\"kind\":\"worker\",\"goal\":\"sum it\"},"
                     "{\"kind\":\"nobody\",\"goal\":\"x\"}]}");
    ASSERT_STREQ(field(v, "status"), "success");
    ASSERT_STREQ(field(child(v, 0), "decision"), "admitted");
    ASSERT_STREQ(field(child(v, 0), "child_agent"), b);
    ASSERT_STREQ(field(child(v, 1), "decision"), "denied");
    ASSERT_CONTAINS(field(child(v, 1), "reason"), "no live agent");
    const char *key = field(child(v, 0), "run_key");
    json_t *run = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", key, &run, NULL, E));
    ASSERT_STREQ(field(run, "status"), "queued");
    ASSERT_STREQ(field(run, "agent_id"), b);
    ASSERT_CONTAINS(field(run, "seed_input"), "sum it");
    json_decref(run);
    ASSERT_EQ(test_rt_decisions_saying(&t, a, "admitted"), 1);
    ASSERT_EQ(test_rt_decisions_saying(&t, a, "denied"), 1);
    /* The same call again (a crash replay) starts nothing new. */
    json_t *again = call(&t, a, "run-1", "spawn_agents",
                         "{\"requests\":[{\"kind\":\"worker\",\"goal\":\"sum it\"},"
                         "{\"kind\":\"nobody\",\"goal\":\"x\"}]}");
    ASSERT(json_is_true(json_object_get(again, "replayed")));
    ASSERT_EQ(count(&t, "wake_run", NULL), 1);
    ASSERT_EQ(count(&t, "spawn_child", NULL), 1);
    json_decref(again);
    /* Lineage: the tree names the child and both decisions. */
    char *tree = NULL;
    ASSERT_OK(vigil_agent_tree(t.rt, a, &tree, E));
    ASSERT_CONTAINS(tree, key);
    ASSERT_CONTAINS(tree, "no live agent");
    vigil_free(tree);
    json_decref(v);
    test_rt_close(&t);
}

/* An admitted child's wake as its run reads it: keyed by the child, its session and turn "1"
 * (the key a replay and lineage find it by, the one its spawn_child record and the call's
 * answer name), its meta naming that key, and its input the parent's goal whole (non-ASCII
 * and quoted text kept). */
TEST(an_admitted_childs_wake_is_keyed_by_its_session_and_carries_its_goal_whole)
{
    struct test_rt t;
    char a[37], b[37], key[65], want[200];
    const char *goal = "r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93 \"this\" \\ now";
    test_rt_open(&t, "orch_admit_wake");
    make_agent(&t, "boss", "lead", SPAWNER, a);
    make_agent(&t, "w", "worker", "{}", b);
    json_t *v = call(&t, a, "run-1", "spawn_agents",
                     "{\"requests\":[{\"agent\":\"w\",\"goal\":"
                     "\"r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93 \\\"this\\\" \\\\ now\"}]}");
    ASSERT_STREQ(field(child(v, 0), "decision"), "admitted");
    const char *answered = field(child(v, 0), "run_key");
    json_t *rec = NULL, *run = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "spawn_child", answered, &rec, NULL, E));
    ASSERT_STREQ(field(rec, "child_agent"), b);
    const char *parts[] = {b, field(rec, "session"), "1"};
    vg_sha256_hex_parts(key, parts, 3);
    ASSERT_STREQ(answered, key);
    ASSERT_STREQ(field(rec, "run_key"), key);
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", key, &run, NULL, E));
    ASSERT_STREQ(field(run, "agent_id"), b);
    ASSERT_STREQ(field(run, "session_id"), field(rec, "session"));
    ASSERT_STREQ(field(json_object_get(json_object_get(run, "meta"), "spawn"), "run_key"), key);
    snprintf(want, sizeof want, "Task delegated to you by agent %s: %s", a, goal);
    ASSERT_STREQ(field(run, "seed_input"), want);
    json_decref(run);
    json_decref(rec);
    json_decref(v);
    test_rt_close(&t);
}

/* Spawn from `agent` in run `key` to agent `to` granting `grant`; the child's run key. */
static int refused(json_t *v)
{
    const char *code = field(v, "error_code");
    int no = code && !strcmp(code, "not_allowed");
    json_decref(v);
    return no;
}

static void spawn_one(struct test_rt *t, const char *agent, const char *key, const char *to,
                      const char *grant, char out[65], const char **decision, char *reason,
                      size_t n)
{
    char args[512];
    snprintf(args, sizeof args,
             "{\"requests\":[{\"agent\":\"%s\",\"goal\":\"go\",\"allowed_tools\":[%s]}]}", to,
             grant);
    json_t *v = call(t, agent, key, "spawn_agents", args);
    json_t *c = child(v, 0);
    static char dec[16];
    snprintf(dec, sizeof dec, "%s", field(c, "decision") ? field(c, "decision") : "");
    *decision = dec;
    snprintf(reason, n, "%s", field(c, "reason") ? field(c, "reason") : "");
    snprintf(out, 65, "%s", field(c, "run_key") ? field(c, "run_key") : "");
    json_decref(v);
}

/* proves: S2-013 S2-014 S0-149 */
/* spawn.agents lists the agents a parent may spawn, by name or glob: an agent the list leaves
 * out is denied, by name or picked by kind, so turning spawning on does not hand the parent
 * every live agent's tools (trial H3). Without the list, any agent (the default). */
TEST(spawn_agents_lists_the_agents_a_parent_may_spawn)
{
    struct test_rt t;
    char a[37], w[37], adm[37];
    test_rt_open(&t, "orch_spawn_agents");
    make_agent(&t, "boss", "lead",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true,"
               "\"agents\":[\"work*\"]}}",
               a);
    make_agent(&t, "admin", "ops", "{\"tools\":[\"*\"]}", adm);
    make_agent(&t, "worker1", "helper", "{}", w);
    json_t *v = call(&t, a, "run-1", "spawn_agents",
                     "{\"requests\":[{\"agent\":\"admin\",\"goal\":\"purge\"},"
                     "{\"kind\":\"ops\",\"goal\":\"purge\"},"
                     "{\"agent\":\"worker1\",\"goal\":\"sum it\"}]}");
    ASSERT_STREQ(field(v, "status"), "success");
    for (size_t i = 0; i < 2; i++) {
        ASSERT_STREQ(field(child(v, i), "decision"), "denied");
        ASSERT_CONTAINS(field(child(v, i), "reason"), "does not list this agent in spawn.agents");
    }
    ASSERT_STREQ(field(child(v, 2), "decision"), "admitted");
    ASSERT_STREQ(field(child(v, 2), "child_agent"), w);
    json_decref(v);
    ASSERT_EQ(count(&t, "spawn_child", NULL), 1);
    test_rt_close(&t);
}

TEST(depth_is_capped_at_two_and_sub_agents_spawn_only_when_granted)
{
    struct test_rt t;
    char a[37], b[37], c[37], d[37], k1[65], k2[65], k3[65], reason[200];
    const char *dec;
    test_rt_open(&t, "orch_depth");
    make_agent(&t, "top", "lead", SPAWNER, a);
    make_agent(&t, "mid", "lead", SPAWNER, b);
    make_agent(&t, "low", "lead", SPAWNER, c);
    make_agent(&t, "leaf", "worker", "{}", d);
    /* Not granted by its parent: the sub-agent may not spawn. */
    spawn_one(&t, a, "run-top", "mid", "", k1, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "admitted");
    /* Its grant (nothing) closes spawn_agents at the gate, before any admission. */
    ASSERT(refused(
        call(&t, b, k1, "spawn_agents", "{\"requests\":[{\"agent\":\"leaf\",\"goal\":\"go\"}]}")));
    /* Granted all the way: depth 1, then 2, and a third level is refused even so. */
    spawn_one(&t, a, "run-top-2", "mid", "\"spawn_agents\"", k1, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "admitted");
    spawn_one(&t, b, k1, "low", "\"spawn_agents\"", k2, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "admitted");
    spawn_one(&t, c, k2, "leaf", "\"spawn_agents\"", k3, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "denied");
    ASSERT_CONTAINS(reason, "depth limit");
    json_t *rec = NULL;
    ASSERT_OK(vg_orch_child_get(t.env, k2, &rec, NULL, E));
    ASSERT_EQ(json_integer_value(json_object_get(rec, "depth")), 2);
    json_decref(rec);
    /* The denial is in the lineage of the agent that asked, with its reason. */
    char *tree = NULL;
    ASSERT_OK(vigil_agent_tree(t.rt, c, &tree, E));
    ASSERT_CONTAINS(tree, "depth limit");
    vigil_free(tree);
    test_rt_close(&t);
}

/* proves: S0-145 */
TEST(kill_switches_cooldowns_and_budgets_deny_and_high_risk_waits_for_approval)
{
    struct test_rt t;
    char a[37], b[37], k[65], reason[200];
    const char *dec;
    test_rt_open(&t, "orch_deny");
    make_agent(&t, "boss", "lead",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true,\"cooldown_ms\":60000},"
               "\"budgets\":{\"cost_usd\":1}}",
               a);
    make_agent(&t, "w", "worker", "{}", b);
    ASSERT_OK(vigil_kill_set(t.rt, b, NULL, 1, "stop", E));
    spawn_one(&t, a, "r1", "w", "", k, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "denied");
    ASSERT_CONTAINS(reason, "kill switch");
    ASSERT_OK(vigil_kill_set(t.rt, b, NULL, 0, "go", E));
    json_t *v = call(&t, a, "r2", "spawn_agents",
                     "{\"requests\":[{\"agent\":\"w\",\"goal\":\"g\",\"risk_tier\":\"high\"},"
                     "{\"agent\":\"w\",\"goal\":\"g\",\"cost_budget_usd\":2},"
                     "{\"agent\":\"w\",\"goal\":\"g\",\"cost_budget_usd\":0.5}]}");
    ASSERT_STREQ(field(child(v, 0), "decision"), "awaiting_approval"); /* not started */
    ASSERT_CONTAINS(field(child(v, 0), "reason"), "approval");
    ASSERT_CONTAINS(field(child(v, 1), "reason"), "cost budget");
    ASSERT_STREQ(field(child(v, 2), "decision"), "admitted");
    json_decref(v);
    /* 30 s later: within the minute of cooldown since that admission. */
    vg_test_clock_advance(&t.clock, 30000);
    spawn_one(&t, a, "r3", "w", "", k, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "denied");
    ASSERT_CONTAINS(reason, "cooldown");
    vg_test_clock_advance(&t.clock, 31000);
    /* The 0.5 reserved for the running child leaves 0.5: a request for 0.6 is too much. */
    v = call(&t, a, "r4", "spawn_agents",
             "{\"requests\":[{\"agent\":\"w\",\"goal\":\"g\",\"cost_budget_usd\":0.6},"
             "{\"agent\":\"w\",\"goal\":\"g\",\"cost_budget_usd\":0.4}]}");
    ASSERT_CONTAINS(field(child(v, 0), "reason"), "cost budget");
    ASSERT_STREQ(field(child(v, 1), "decision"), "admitted");
    json_decref(v);
    test_rt_close(&t);
}

/* A request's token budget must fit in what the parent has left today, after what its running
 * children hold; a request requiring approval waits for a person whatever its risk tier, and
 * starts once approved.
 * proves: S0-144 (token budget, required approvals) */
TEST(a_token_budget_is_admitted_within_the_parents_and_required_approvals_wait_for_a_person)
{
    struct test_rt t;
    char a[37], b[37], *text = NULL;
    test_rt_open(&t, "orch_tokens_approvals");
    make_agent(&t, "boss", "lead",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true},"
               "\"budgets\":{\"tokens\":1000}}",
               a);
    make_agent(&t, "w", "worker", "{}", b);
    json_t *v = call(&t, a, "r1", "spawn_agents",
                     "{\"requests\":[{\"agent\":\"w\",\"goal\":\"g\",\"token_budget\":2000},"
                     "{\"agent\":\"w\",\"goal\":\"g\",\"token_budget\":600},"
                     "{\"agent\":\"w\",\"goal\":\"g\",\"token_budget\":600}]}");
    ASSERT_STREQ(field(child(v, 0), "decision"), "denied");
    ASSERT_CONTAINS(field(child(v, 0), "reason"), "token budget");
    ASSERT_STREQ(field(child(v, 1), "decision"), "admitted");
    /* 600 of the 1,000 are held by the running child: 400 are left. */
    ASSERT_CONTAINS(field(child(v, 2), "reason"), "token budget");
    json_decref(v);
    v = call(&t, a, "r2", "spawn_agents",
             "{\"requests\":[{\"agent\":\"w\",\"goal\":\"g\",\"token_budget\":400,"
             "\"required_approvals\":1,\"risk_tier\":\"low\",\"request_id\":\"mine\"}]}");
    ASSERT_STREQ(field(child(v, 0), "decision"), "awaiting_approval");
    ASSERT_CONTAINS(field(child(v, 0), "reason"), "requires a person's approval");
    ASSERT_STREQ(field(child(v, 0), "request_id"), "mine");
    char key[65];
    snprintf(key, sizeof key, "%s", field(child(v, 0), "run_key"));
    json_decref(v);
    ASSERT_EQ(count(&t, "wake_run", NULL), 1); /* r1's admitted child's; none for this one */
    ASSERT_OK(vigil_approval_list(t.rt, a, "pending", &text, E));
    json_t *list = json_loads(text, 0, NULL);
    vigil_free(text);
    json_t *item = json_array_get(list, 0);
    ASSERT(item != NULL);
    char id[64];
    snprintf(id, sizeof id, "%s", field(item, "id"));
    json_decref(list);
    ASSERT_OK(vigil_approval_resolve(t.rt, id, 1, "alice", NULL, NULL, E));
    ASSERT_EQ(count(&t, "wake_run", NULL), 2);
    json_t *rec = NULL;
    ASSERT_OK(vg_orch_child_get(t.env, key, &rec, NULL, E));
    ASSERT_STREQ(field(rec, "status"), "running");
    json_decref(rec);
    test_rt_close(&t);
}

/* The verdict of key in verdicts (borrowed), or NULL. */
static json_t *verdict_of(json_t *verdicts, const char *key)
{
    size_t i;
    json_t *v;
    json_array_foreach (verdicts, i, v)
        if (!strcmp(field(v, "decision_key"), key))
            return v;
    return NULL;
}

/* When children answer one decision differently, the policy picks one from the results alone:
 * the answer most gave (compared trimmed, white space collapsed, case folded), ties to the
 * lowest index; a failed child has no vote; a key only one child names is no decision; the
 * order the results come in changes nothing.
 * proves: S0-142 */
TEST(disagreeing_children_are_arbitrated_by_a_fixed_policy)
{
    const char *text =
        "[{\"index\":0,\"status\":\"completed\",\"result\":\"Take the M6\",\"decision_key\":"
        "\"route\",\"request_id\":\"a\"},"
        "{\"index\":1,\"status\":\"completed\",\"result\":\" take the  a1 \",\"decision_key\":"
        "\"route\",\"request_id\":\"b\"},"
        "{\"index\":2,\"status\":\"completed\",\"result\":\"Take the A1\",\"decision_key\":"
        "\"route\",\"request_id\":\"c\"},"
        "{\"index\":3,\"status\":\"failed\",\"result\":\"Take the M6\",\"decision_key\":"
        "\"route\"},"
        "{\"index\":5,\"status\":\"completed\",\"result\":\"no\",\"decision_key\":\"go\"},"
        "{\"index\":4,\"status\":\"completed\",\"result\":\"yes\",\"decision_key\":\"go\"},"
        "{\"index\":6,\"status\":\"completed\",\"result\":\"OK\",\"decision_key\":\"same\"},"
        "{\"index\":7,\"status\":\"completed\",\"result\":\"ok\",\"decision_key\":\"same\"},"
        "{\"index\":8,\"status\":\"completed\",\"result\":\"alone\",\"decision_key\":\"solo\"},"
        "{\"index\":9,\"status\":\"completed\",\"result\":\"x\"}]";
    json_t *results = json_loads(text, 0, NULL), *reversed = json_array(), *r;
    size_t i;
    ASSERT(results != NULL);
    json_array_foreach (results, i, r)
        json_array_insert(reversed, 0, r);
    json_t *a = vg_orch_arbitrate(results), *b = vg_orch_arbitrate(reversed);
    ASSERT_EQ(json_array_size(a), 3); /* route, go, same; solo has one voter, 9 no key */
    json_t *route = verdict_of(a, "route"), *go = verdict_of(a, "go"),
           *same = verdict_of(a, "same");
    ASSERT(route && go && same && !verdict_of(a, "solo"));
    ASSERT_EQ(json_integer_value(json_object_get(route, "chosen_index")), 1);
    ASSERT_STREQ(field(route, "chosen_request_id"), "b");
    ASSERT_STREQ(field(route, "answer"), "take the a1");
    ASSERT_EQ(json_integer_value(json_object_get(route, "votes")), 2);
    ASSERT_EQ(json_integer_value(json_object_get(route, "voters")), 3);
    ASSERT(json_is_false(json_object_get(route, "agreed")));
    ASSERT_EQ(json_integer_value(json_object_get(go, "chosen_index")), 4); /* a tie */
    ASSERT(json_is_true(json_object_get(same, "agreed")));
    /* The same verdicts whatever the order of the results. */
    json_array_foreach (a, i, r)
        ASSERT(json_equal(r, verdict_of(b, field(r, "decision_key"))));
    json_decref(a);
    json_decref(b);
    json_decref(results);
    json_decref(reversed);
}

/* An agent may not spawn itself, and a grant to a tool its own manifest lacks gives nothing. */
/* proves: S0-146 */
TEST(a_child_runs_under_its_own_envelope_whatever_the_parent_grants)
{
    struct test_rt t;
    char a[37], b[37], k[65], reason[200];
    const char *dec;
    test_rt_open(&t, "orch_envelope");
    make_agent(&t, "boss", "lead", SPAWNER, a);
    make_agent(&t, "w", "worker", "{\"tools\":[\"record_observations\"]}", b);
    spawn_one(&t, a, "r1", "boss", "", k, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "denied");
    ASSERT_CONTAINS(reason, "itself");
    spawn_one(&t, a, "r2", "w", "\"set_report\",\"spawn_agents\"", k, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "admitted");
    /* In the child's run, the granted tools its manifest does not list stay closed. */
    json_t *v = call(&t, b, k, "set_report", "{\"scope\":\"current\",\"markdown\":\"x\"}");
    ASSERT_STREQ(field(v, "error_code"), "not_allowed");
    json_decref(v);
    v = call(&t, b, k, "spawn_agents", "{\"requests\":[{\"agent\":\"boss\",\"goal\":\"g\"}]}");
    ASSERT_STREQ(field(v, "error_code"), "not_allowed");
    json_decref(v);
    test_rt_close(&t);
}

TEST(admission_is_deny_by_default)
{
    struct vg_orch_facts f = {0};
    const char *why = NULL;
    ASSERT_EQ(vg_orch_admit(&f, &why), VG_ORCH_DENIED);
    ASSERT(why != NULL);
    f.spawn_enabled = f.child_found = 1;
    f.cost_left = -1;
    f.since_last_ms = -1;
    f.cap_parent = f.cap_global = 1;
    ASSERT_EQ(vg_orch_admit(&f, &why), VG_ORCH_ADMITTED);
    f.running_parent = 1;
    ASSERT_EQ(vg_orch_admit(&f, &why), VG_ORCH_QUEUED);
}

/* proves: S0-146 */
TEST(a_grant_narrows_the_child_and_never_widens_it)
{
    struct test_rt t;
    char a[37], b[37], none[65], some[65], reason[200];
    const char *dec;
    const char *report = "{\"scope\":\"current\",\"markdown\":\"x\"}";
    test_rt_open(&t, "orch_grant");
    make_agent(&t, "boss", "lead", SPAWNER, a);
    make_agent(&t, "w", "worker", "{\"tools\":[\"set_report\",\"record_observations\"]}", b);
    /* Granted nothing: its manifest's tools are closed in that run. */
    spawn_one(&t, a, "r1", "w", "", none, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "admitted");
    ASSERT(refused(call(&t, b, none, "set_report", report)));
    ASSERT(refused(call(&t, b, none, "record_observations", "{\"observations\":[]}")));
    /* Granted set_report and spawn_agents: set_report only (the manifest lacks spawn_agents). */
    spawn_one(&t, a, "r2", "w", "\"set_report\",\"spawn_agents\"", some, &dec, reason,
              sizeof reason);
    ASSERT_STREQ(dec, "admitted");
    ASSERT(!refused(call(&t, b, some, "set_report", report)));
    ASSERT(refused(call(&t, b, some, "record_observations", "{\"observations\":[]}")));
    ASSERT(refused(call(&t, b, some, "spawn_agents", "{\"requests\":[]}")));
    /* The agent's own runs are not narrowed. */
    ASSERT(!refused(call(&t, b, "own-run", "set_report", report)));
    test_rt_close(&t);
}

/* The decisions of a run as `vigil runs show` lists them (new array). */
static json_t *run_decisions(struct test_rt *t, const char *run_key)
{
    json_t *d = NULL;
    ASSERT_OK(vg_orch_run_decisions(t->env, run_key, &d, E));
    return d;
}

static vigil_code category_write(void *user, const vigil_tool_call_info *call, const char *args,
                                 char **out, vigil_error *err)
{
    (void)user;
    (void)call;
    (void)args;
    (void)err;
    *out = vg_strdup("{\"written\":true}");
    return VIGIL_OK;
}

/* A tool that writes into the category its argument names (scope rule "argument"). */
static void register_category_tool(struct test_rt *t)
{
    vigil_tool_def d = {.name = "cat_write",
                        .description = "write into a category",
                        .input_schema_json = "{\"type\":\"object\",\"required\":[\"category\"],"
                                             "\"properties\":{\"category\":{\"type\":\"string\"}}}",
                        .contract_json = "{\"mutating\":true,\"scope\":{\"rule\":\"argument\","
                                         "\"arguments\":[\"category\"]}}"};
    ASSERT_OK(vigil_tool_register(t->rt, &d, category_write, NULL, E));
}

/* The error code of cat_write into category in the run key's run ("" when it ran). */
static const char *write_into(struct test_rt *t, const char *agent, const char *key,
                              const char *category)
{
    static char code[64];
    char args[128];
    snprintf(args, sizeof args, "{\"category\":\"%s\"}", category);
    json_t *v = call(t, agent, key, "cat_write", args);
    snprintf(code, sizeof code, "%s", field(v, "error_code") ? field(v, "error_code") : "");
    json_decref(v);
    return code;
}

/* One child spawned in run `key` with the request's extra fields; its run key into out, and
 * the scopes its decision records it was granted (canonical text). */
static void spawn_scoped(struct test_rt *t, const char *parent, const char *key, const char *fields,
                         char out[65], char *granted, size_t n)
{
    char args[512];
    snprintf(args, sizeof args, "{\"requests\":[{\"agent\":\"w\",\"goal\":\"go\"%s}]}", fields);
    json_t *v = call(t, parent, key, "spawn_agents", args);
    ASSERT_STREQ(field(child(v, 0), "decision"), "admitted");
    snprintf(out, 65, "%s", field(child(v, 0), "run_key"));
    json_decref(v);
    json_t *d = run_decisions(t, key);
    json_t *g = json_object_get(json_array_get(d, 0), "granted_scopes");
    char *text = json_is_array(g) ? vg_json_dump(g, 1) : NULL;
    snprintf(granted, n, "%s", text ? text : "(none recorded)");
    vg_free(text);
    json_decref(d);
}

/* A sub-agent never reaches outside its parent's scope, whatever its request asks: spawned
 * with no scopes it gets its parent's, with wider ones the parent's part of them; the gate
 * refuses the rest, and the decision names what was granted. A child's own child is held to
 * the child's grant in turn. The agent record's allowed_scopes says what its config grants.
 * proves: S2-043 */
TEST(a_child_never_gets_more_than_its_parents_scopes)
{
    struct test_rt t;
    char boss[37], w[37], mid[37], k[65], granted[256], *text = NULL;
    test_rt_open(&t, "orch_scopes");
    register_category_tool(&t);
    make_agent(&t, "boss", "lead",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true},"
               "\"allowed_scopes\":[\"cat-a\"]}",
               boss);
    make_agent(&t, "w", "worker",
               "{\"tools\":[\"cat_write\"],\"allowed_scopes\":[\"cat-a\",\"cat-b\"]}", w);
    make_agent(&t, "mid", "worker",
               "{\"tools\":[\"cat_write\",\"spawn_agents\"],\"spawn\":{\"enabled\":true},"
               "\"allowed_scopes\":[\"cat-a\",\"cat-b\"]}",
               mid);
    /* The child's own runs touch both of its categories. */
    ASSERT_STREQ(write_into(&t, w, "own", "cat-b"), "");
    /* No scopes asked: the parent's. */
    spawn_scoped(&t, boss, "r1", "", k, granted, sizeof granted);
    ASSERT_STREQ(write_into(&t, w, k, "cat-a"), "");
    ASSERT_STREQ(write_into(&t, w, k, "cat-b"), "out_of_scope");
    ASSERT_STREQ(granted, "[\"cat-a\"]");
    /* Wider scopes asked: the parent's part of them. */
    spawn_scoped(&t, boss, "r2", ",\"allowed_scopes\":[\"cat-b\",\"cat-a\",\"cat-c\"]", k, granted,
                 sizeof granted);
    ASSERT_STREQ(granted, "[\"cat-a\"]");
    ASSERT_STREQ(write_into(&t, w, k, "cat-b"), "out_of_scope");
    ASSERT_STREQ(write_into(&t, w, k, "cat-a"), "");
    /* Narrower asked: that. */
    spawn_scoped(&t, boss, "r3", ",\"allowed_scopes\":[\"cat-a/t1\"]", k, granted, sizeof granted);
    ASSERT_STREQ(granted, "[\"cat-a/t1\"]");
    ASSERT_STREQ(write_into(&t, w, k, "cat-a"), "out_of_scope");
    ASSERT_STREQ(write_into(&t, w, k, "cat-a/t1"), "");
    /* A child allowed to spawn passes on no more than it was granted. */
    char args[256], km[65];
    json_t *v = call(&t, boss, "r4", "spawn_agents",
                     "{\"requests\":[{\"agent\":\"mid\",\"goal\":\"go\",\"allowed_tools\":"
                     "[\"cat_write\",\"spawn_agents\"]}]}");
    snprintf(km, sizeof km, "%s", field(child(v, 0), "run_key"));
    json_decref(v);
    ASSERT_STREQ(write_into(&t, mid, km, "cat-b"), "out_of_scope");
    snprintf(args, sizeof args, ",\"allowed_scopes\":[\"cat-b\"]");
    spawn_scoped(&t, mid, km, args, k, granted, sizeof granted);
    ASSERT_STREQ(granted, "[]");
    ASSERT_STREQ(write_into(&t, w, k, "cat-b"), "out_of_scope");
    ASSERT_STREQ(write_into(&t, w, k, "cat-a"), "out_of_scope");
    /* The agent's record says what its config grants (it said [] before). */
    ASSERT_OK(vigil_agent_show(t.rt, w, &text, E));
    json_t *shown = json_loads(text, 0, NULL);
    vigil_free(text);
    text = vg_json_dump(json_object_get(json_object_get(shown, "agent"), "allowed_scopes"), 1);
    ASSERT_STREQ(text, "[\"cat-a\",\"cat-b\"]");
    vg_free(text);
    json_decref(shown);
    test_rt_close(&t);
}

/* proves: S0-147 */
TEST(a_spawn_call_records_all_its_decisions_in_one_record)
{
    struct test_rt t;
    char a[37], b[37];
    test_rt_open(&t, "orch_one_record");
    make_agent(&t, "boss", "lead", SPAWNER, a);
    make_agent(&t, "w", "worker", "{}", b);
    json_t *v = call(&t, a, "run-1", "spawn_agents",
                     "{\"requests\":[{\"kind\":\"worker\",\"goal\":\"one\"},"
                     "{\"kind\":\"nobody\",\"goal\":\"two\"},"
                     "{\"agent\":\"w\",\"goal\":\"three\"}]}");
    ASSERT_STREQ(field(v, "status"), "success");
    json_decref(v);
    /* Three decisions, one row: the call's. */
    ASSERT_EQ(count(&t, "spawn_call", "admitted"), 1);
    ASSERT_EQ(count(&t, "spawn_decision", NULL), 0);
    /* Each is still a decision of its own where decisions are read, with its reason. */
    json_t *d = run_decisions(&t, "run-1");
    ASSERT_EQ(json_array_size(d), 3);
    const char *want[] = {"admitted", "denied", "admitted"};
    for (size_t i = 0; i < 3; i++) {
        json_t *one = json_array_get(d, i);
        ASSERT_EQ(json_integer_value(json_object_get(one, "index")), (json_int_t)i);
        ASSERT_STREQ(field(one, "decision"), want[i]);
        ASSERT(field(one, "reason") != NULL);
        ASSERT_EQ(json_integer_value(json_object_get(one, "depth")), 1);
        ASSERT(field(one, "group") != NULL);
        ASSERT(json_object_get(json_object_get(one, "request"), "goal") != NULL);
    }
    ASSERT_CONTAINS(field(json_array_get(d, 1), "reason"), "no live agent");
    ASSERT_STREQ(field(json_array_get(d, 2), "child_agent"), b);
    json_decref(d);
    ASSERT_EQ(test_rt_decisions_saying(&t, a, "admitted"), 2);
    ASSERT_EQ(test_rt_decisions_saying(&t, a, "denied"), 1);
    /* A call that admits nobody says so in its record's k1. */
    json_decref(call(&t, a, "run-2", "spawn_agents",
                     "{\"requests\":[{\"kind\":\"nobody\",\"goal\":\"x\"}]}"));
    ASSERT_EQ(count(&t, "spawn_call", "denied"), 1);
    test_rt_close(&t);
}

/* The running children a call counts are kept after it for the next call on this runtime
 * (spawn.c, child.c): a child another process started in between still counts. */
TEST(a_child_started_by_another_process_between_calls_counts_against_the_cap)
{
    struct test_rt t;
    char a[37], b[37];
    test_rt_open(&t, "orch_running_kept");
    make_agent(&t, "boss", "lead",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true,"
               "\"max_concurrent\":2}}",
               a);
    make_agent(&t, "w", "worker", "{}", b);
    const char *one = "{\"requests\":[{\"agent\":\"w\",\"goal\":\"g\"}]}";
    json_t *v = call(&t, a, "run-1", "spawn_agents", one);
    ASSERT_STREQ(field(child(v, 0), "decision"), "admitted");
    json_decref(v);
    /* A second process on the same store: its child is the parent's second running one. */
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    char *out = NULL;
    ASSERT_OK(vigil_tool_call(other, a, "run-2", "spawn_agents", one, &out, E));
    ASSERT_CONTAINS(out, "\"admitted\"");
    vigil_free(out);
    vigil_runtime_close(other);
    ASSERT_EQ(count(&t, "spawn_child", "running"), 2);
    /* This runtime's kept count (one) is stale: the cap of two is reached, the child waits. */
    v = call(&t, a, "run-3", "spawn_agents", one);
    ASSERT_STREQ(field(child(v, 0), "decision"), "queued");
    json_decref(v);
    ASSERT_EQ(count(&t, "spawn_child", "running"), 2);
    test_rt_close(&t);
}

/* A decision as a store written before spawn_call holds it: a spawn_decision record. */
static void put_old_decision(struct test_rt *t, const char *agent, const char *run_key, int index,
                             const char *decision, const char *reason, int64_t at)
{
    char id[64], body[512];
    snprintf(id, sizeof id, "0123456789abcdef0123456789abcdef:%d", index);
    snprintf(body, sizeof body,
             "{\"child_agent\":null,\"decision\":\"%s\",\"depth\":1,\"group\":"
             "\"0123456789abcdef0123456789abcdef\",\"index\":%d,\"parent_run_key\":\"%s\","
             "\"reason\":\"%s\",\"request\":{\"goal\":\"old\",\"kind\":\"worker\"},"
             "\"run_key\":null}",
             decision, index, run_key, reason);
    ASSERT_OK(
        vg_env_put_text(t->env, "spawn_decision", id, agent, decision, run_key, at, body, 0, E));
}

/* proves: S0-147 */
TEST(decisions_stored_one_a_record_before_spawn_call_still_read)
{
    struct test_rt t;
    char a[37], b[37], k[65], reason[200];
    const char *dec;
    test_rt_open(&t, "orch_old_decisions");
    make_agent(&t, "boss", "lead",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true,"
               "\"cooldown_ms\":60000}}",
               a);
    make_agent(&t, "w", "worker", "{}", b);
    int64_t now = vg_env_now(t.env);
    put_old_decision(&t, a, "run-old", 0, "admitted", "admitted (old form)", now - 1000);
    put_old_decision(&t, a, "run-old", 1, "denied", "denied (old form)", now - 1000);
    json_t *d = run_decisions(&t, "run-old");
    ASSERT_EQ(json_array_size(d), 2);
    ASSERT_STREQ(field(json_array_get(d, 0), "reason"), "admitted (old form)");
    ASSERT_STREQ(field(json_array_get(d, 1), "decision"), "denied");
    json_decref(d);
    /* An admission of the old form counts for the cooldown. */
    spawn_one(&t, a, "run-new", "w", "", k, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "denied");
    ASSERT_CONTAINS(reason, "cooldown");
    /* The lineage lists both forms, oldest first. */
    char *text = NULL;
    ASSERT_OK(vigil_agent_tree(t.rt, a, &text, E));
    json_t *tree = json_loads(text, 0, NULL);
    vigil_free(text);
    json_t *all = json_object_get(tree, "decisions");
    ASSERT_EQ(json_array_size(all), 3);
    ASSERT_STREQ(field(json_array_get(all, 0), "reason"), "admitted (old form)");
    ASSERT_CONTAINS(field(json_array_get(all, 2), "reason"), "cooldown");
    json_decref(tree);
    test_rt_close(&t);
}

/* ---- children queued for a slot: kept in their call's record (schema 18) ------------------ */

/* What the readers say of agent's children: `agent tree`, the run's lineage (`runs show`) and
 * its decisions, as one text (owned). */
static char *readers_say(struct test_rt *t, const char *agent, const char *run_key)
{
    char *tree = NULL;
    json_t *parent = NULL, *kids = NULL, *decisions = NULL;
    ASSERT_OK(vigil_agent_tree(t->rt, agent, &tree, E));
    ASSERT_OK(vg_orch_run_lineage(t->env, agent, run_key, &parent, &kids, E));
    ASSERT_OK(vg_orch_run_decisions(t->env, run_key, &decisions, E));
    json_t *all =
        json_pack("{s:s, s:o, s:o}", "tree", tree, "lineage", kids, "decisions", decisions);
    char *text = json_dumps(all, JSON_COMPACT | JSON_SORT_KEYS);
    vigil_free(tree);
    json_decref(parent);
    json_decref(all);
    return text;
}

/* Rewrite the store as a vigil before schema 18 wrote it: each child a call keeps waiting
 * becomes a spawn_child record of its own (status waiting), and the call's k1 `admitted`. */
static void to_old_layout(struct test_rt *t, const char *group)
{
    struct vg_record *r = NULL;
    json_t *w;
    size_t i;
    ASSERT_OK(vg_store_get_copy(t->env->store, "spawn_call", group, &r, E));
    json_t *body = json_loads(r->body, 0, NULL);
    ASSERT(body != NULL);
    json_array_foreach (json_object_get(body, "waiting"), i, w) {
        char *text = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS);
        ASSERT_OK(vg_env_put_text(t->env, "spawn_child", field(w, "run_key"), r->owner, "waiting",
                                  group, json_integer_value(json_object_get(w, "admitted_ms")),
                                  text, 0, E));
        free(text);
    }
    json_object_del(body, "waiting");
    ASSERT_OK(vg_env_update_json(t->env, "spawn_call", r->id, r->owner, "admitted", r->k2, r->seq,
                                 body, r->rev, E));
    json_decref(body);
    vg_free(r);
}

static int64_t count_of(struct test_rt *t, const char *kind, const char *owner, const char *k1)
{
    struct vg_query q = {.kind = kind, .owner = owner, .k1 = k1};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

/* proves: S0-147 */
TEST(queued_children_live_in_their_call_and_every_reader_says_what_it_said_of_their_records)
{
    struct test_rt t[2]; /* [0] as written, [1] rewritten to the layout before */
    char a[37], b[37], group[40] = "", running[65] = "";
    const char *names[] = {"orch_kept_new", "orch_kept_old"};
    for (int s = 0; s < 2; s++) {
        test_rt_open(&t[s], names[s]);
        make_agent(&t[s], "boss", "lead",
                   "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true,"
                   "\"max_concurrent\":1}}",
                   a);
        make_agent(&t[s], "w", "worker", "{}", b);
        json_t *v = call(&t[s], a, "run-1", "spawn_agents",
                         "{\"requests\":[{\"agent\":\"w\",\"goal\":\"one\"},"
                         "{\"agent\":\"w\",\"goal\":\"two\",\"cost_budget_usd\":0.5},"
                         "{\"agent\":\"w\",\"goal\":\"three\"}]}");
        ASSERT_STREQ(field(child(v, 0), "decision"), "admitted");
        ASSERT_STREQ(field(child(v, 1), "decision"), "queued");
        ASSERT_STREQ(field(child(v, 2), "decision"), "queued");
        snprintf(group, sizeof group, "%s", field(json_object_get(v, "result"), "group"));
        snprintf(running, sizeof running, "%s", field(child(v, 0), "run_key"));
        json_decref(v);
    }
    /* One record for the started child; the two waiting ones are in the call's record. */
    ASSERT_EQ(count_of(&t[0], "spawn_child", a, NULL), 1);
    ASSERT_EQ(count_of(&t[0], "spawn_call", a, "waiting"), 1);
    to_old_layout(&t[1], group);
    ASSERT_EQ(count_of(&t[1], "spawn_child", a, "waiting"), 2);
    char *say[2];
    for (int s = 0; s < 2; s++)
        say[s] = readers_say(&t[s], a, "run-1");
    ASSERT_STREQ(say[0], say[1]);
    ASSERT_CONTAINS(say[0], "\"status\":\"waiting\"");
    free(say[0]);
    free(say[1]);
    /* Each child's end starts the next waiting one, oldest first, in both layouts alike; the
     * parent is woken once, after the last. */
    struct vg_orch_outcome o = {.status = "completed", .text = "done"};
    for (int round = 0; round < 3; round++) {
        char next[2][65];
        for (int s = 0; s < 2; s++) {
            ASSERT_OK(vg_orch_run_ended(t[s].env, NULL, running, &o, E));
            say[s] = readers_say(&t[s], a, "run-1");
            ASSERT_EQ(count_of(&t[s], "wake_run", a, NULL), round == 2 ? 1 : 0);
            struct vg_query q = {.kind = "spawn_child", .owner = a, .k1 = "running"};
            struct vg_id_list ids = {0};
            ASSERT_OK(vg_store_scan_ids(t[s].env->store, &q, &ids, E));
            ASSERT_EQ(ids.n, round == 2 ? 0 : 1);
            snprintf(next[s], sizeof next[s], "%s", ids.n ? ids.ids[0] : "");
            vg_id_list_release(&ids);
        }
        ASSERT_STREQ(say[0], say[1]);
        ASSERT_STREQ(next[0], next[1]);
        free(say[0]);
        free(say[1]);
        /* The call's k1 says `waiting` while a child waits in it, then `admitted`. */
        ASSERT_EQ(count_of(&t[0], "spawn_call", a, "waiting"), round == 0 ? 1 : 0);
        snprintf(running, sizeof running, "%s", next[0]);
    }
    ASSERT_EQ(count_of(&t[0], "spawn_child", a, "completed"), 3);
    for (int s = 0; s < 2; s++)
        test_rt_close(&t[s]);
}

/* The text a record holds for a JSON value is its canonical encoding. */
static void is_canonical_of(const char *text, json_t *v)
{
    char *want = vg_json_dump(v, 1);
    ASSERT(want != NULL);
    ASSERT_STREQ(text, want);
    vg_free(want);
}

/* A spawn call's answer is written as text from its decisions' fields, once, and that text goes
 * as it is into the call's toolResult message, its operation record and the caller's copy: each
 * must say what the answer's tree says, for every kind of decision. The children's kill switches
 * are read once for the call: the killed child is denied, the others are not. */
TEST(a_spawn_calls_answer_text_says_what_its_tree_says_in_every_record)
{
    struct test_rt t;
    char a[37], w[37], v[37], u[37];
    struct vg_tool_executor *x = NULL;
    struct vg_tool_outcome o;
    test_rt_open(&t, "orch_answer_text");
    make_agent(&t, "boss", "lead",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true,"
               "\"max_concurrent\":1}}",
               a);
    make_agent(&t, "w", "worker", "{}", w);
    make_agent(&t, "v", "worker", "{}", v);
    make_agent(&t, "u", "worker", "{}", u);
    ASSERT_OK(vigil_kill_set(t.rt, w, NULL, 1, "stop", E));
    ASSERT_OK(vigil_kill_set(t.rt, u, NULL, 1, "stop", E));
    ASSERT_OK(vigil_kill_set(t.rt, u, NULL, 0, "go again", E)); /* off: counts for nothing */
    ASSERT_OK(vg_runtime_tools(t.rt, &x, E));
    json_t *args = json_loads("{\"requests\":[{\"agent\":\"w\",\"goal\":\"g\"},"
                              "{\"agent\":\"v\",\"goal\":\"g \\\"quoted\\\" \\u00e9\"},"
                              "{\"agent\":\"u\",\"goal\":\"g\"},"
                              "{\"agent\":\"nobody\",\"goal\":\"g\"},"
                              "{\"agent\":\"v\",\"goal\":\"g\",\"risk_tier\":\"high\"}]}",
                              0, NULL);
    ASSERT(args != NULL);
    struct vg_tool_call_ctx ctx = {.agent_id = a, .run_key = "run-text"};
    ASSERT_OK(vg_tool_executor_call(x, &ctx, "spawn_agents", args, &o, E));
    json_decref(args);
    ASSERT_EQ(o.code, VG_TOOL_OK);
    static const char *const want[] = {"denied", "admitted", "queued", "denied",
                                       "awaiting_approval"};
    static const char *const kinds[] = {"spawn-denied", "spawn-admitted", "spawn-admitted",
                                        "spawn-denied", "spawn-awaiting-approval"};
    json_t *kids = json_object_get(o.result, "children");
    ASSERT_EQ(json_array_size(kids), 5);
    ASSERT_EQ(json_array_size(o.decisions), 5);
    for (size_t i = 0; i < 5; i++) {
        ASSERT_STREQ(field(json_array_get(kids, i), "decision"), want[i]);
        ASSERT_STREQ(field(json_array_get(o.decisions, i), "kind"), kinds[i]);
    }
    ASSERT_CONTAINS(field(json_array_get(kids, 0), "reason"), "kill switch");
    /* The provider's text is the tree's encoding, and every record holds it. */
    ASSERT(o.result_text != NULL);
    is_canonical_of(o.result_text, o.result);
    json_t *msg = NULL, *op = NULL;
    ASSERT_OK(vg_message_get(t.env, o.result_id, &msg, E));
    const char *content = field(msg, "content");
    json_t *env = json_loads(content, 0, NULL);
    ASSERT(env != NULL && json_equal(json_object_get(env, "result"), o.result));
    is_canonical_of(content, env);
    ASSERT_OK(vg_env_get_json(t.env, "operation", o.operation_id, &op, NULL, E));
    ASSERT(json_equal(json_object_get(json_object_get(op, "outcome"), "result"), o.result));
    char *mine = vg_tool_outcome_text(&o);
    json_t *back = json_loads(mine, 0, NULL);
    ASSERT(json_equal(json_object_get(back, "result"), o.result));
    is_canonical_of(mine, back);
    ASSERT_STREQ(field(back, "result_id"), o.result_id);
    vg_free(mine);
    json_decref(back);
    json_decref(op);
    json_decref(env);
    json_decref(msg);
    vg_tool_outcome_release(&o);
    test_rt_close(&t);
}

/* The agents a spawn call reads are kept for the next call while no agent record is written,
 * by this connection or another: each change in between (an agent created here, one created by
 * a second runtime on the store, one destroyed there) is seen by the next call's admission. */
TEST(agents_kept_between_calls_follow_every_change_to_them)
{
    struct test_rt t;
    char a[37], w[37], x[37], reason[200], key[65];
    const char *dec;
    test_rt_open(&t, "orch_agents_kept");
    make_agent(&t, "boss", "lead", SPAWNER, a);
    spawn_one(&t, a, "r1", "w", "", key, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "denied");     /* no agent "w" yet */
    if (!getenv("VIGIL_TEST_RT_PG")) /* PostgreSQL keeps no change marks: nothing is kept */
        ASSERT(t.env->spawn_agents != NULL);
    make_agent(&t, "w", "worker", "{}", w);
    spawn_one(&t, a, "r2", "w", "", key, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "admitted");
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    vigil_agent_spec xs = {.name = "x", .kind = "worker"};
    ASSERT_OK(vigil_agent_create(other, &xs, x, E));
    spawn_one(&t, a, "r3", "x", "", key, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "admitted");
    ASSERT_OK(vigil_agent_destroy(other, w, "gone", E));
    vigil_runtime_close(other);
    spawn_one(&t, a, "r4", "w", "", key, &dec, reason, sizeof reason);
    ASSERT_STREQ(dec, "denied");
    test_rt_close(&t);
}

/* The scans of spawn_decision records (a person's approvals) one spawn call of `agent` makes
 * (vigil_tool_call, the gate's included), counted by the wrapper `counting` (vg_store_fault_wrap,
 * failing nothing). */
static long call_record_scans(struct test_rt *t, struct vg_store *counting, const char *agent,
                              const char *run_key)
{
    vg_store_fault_arm(counting, 0, VIGIL_OK);
    json_t *v = call(t, agent, run_key, "spawn_agents",
                     "{\"requests\":[{\"agent\":\"w\",\"goal\":\"g\"}]}");
    long scans = vg_store_fault_scans(counting);
    ASSERT_STREQ(field(child(v, 0), "decision"), "admitted");
    json_decref(v);
    return scans;
}

/* Only a parent with a cooldown has its spawn calls read when it last had a child admitted (its
 * latest admitting spawn_call, and a person's latest approval: three scans a call); without one,
 * the default, a call reads none of them (the approvals are what is counted here: the waiting
 * calls are read for other reasons). */
TEST(only_a_parent_with_a_cooldown_reads_when_it_last_spawned)
{
    struct test_rt t;
    char plain[37], cool[37], w[37];
    test_rt_open(&t, "orch_cooldown_reads");
    make_agent(&t, "plain", "lead", SPAWNER, plain);
    make_agent(&t, "cool", "lead",
               "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true,\"cooldown_ms\":1000}}",
               cool);
    make_agent(&t, "w", "worker", "{}", w);
    struct vg_store *counting = NULL; /* closed with the runtime, and the store it wraps */
    ASSERT_OK(vg_store_fault_wrap(t.env->store, &counting, E));
    t.env->store = counting;
    vg_store_fault_watch(counting, "spawn_decision");
    ASSERT_EQ(call_record_scans(&t, counting, plain, "p-0"), 0);
    ASSERT_EQ(call_record_scans(&t, counting, plain, "p-1"), 0);
    ASSERT(call_record_scans(&t, counting, cool, "c-0") > 0);
    /* The cooldown still holds where it is set, and ends. */
    json_t *v =
        call(&t, cool, "c-1", "spawn_agents", "{\"requests\":[{\"agent\":\"w\",\"goal\":\"g\"}]}");
    ASSERT_CONTAINS(field(child(v, 0), "reason"), "cooldown");
    json_decref(v);
    vg_test_clock_advance(&t.clock, 2000);
    ASSERT(call_record_scans(&t, counting, cool, "c-2") > 0);
    test_rt_close(&t);
}

/* A handoff between agents is a typed request, never free-form: a request that carries anything
 * outside the spawn request's shape (a note to negotiate with), or lacks its goal, refuses the
 * whole call before any child is admitted; a typed one reaches the child as its input (the goal,
 * then its references) and stays in the lineage as the request it was, field for field. */
/* proves: S0-141 */
TEST(a_handoff_is_a_typed_request_and_free_form_text_is_refused)
{
    struct test_rt t;
    char a[37], b[37];
    test_rt_open(&t, "orch_typed_handoff");
    make_agent(&t, "boss", "lead", SPAWNER, a);
    make_agent(&t, "w", "worker", "{}", b);
    static const char *const untyped[] = {
        "{\"requests\":[{\"kind\":\"worker\",\"goal\":\"x\",\"note\":\"if not, talk to me\"}]}",
        "{\"requests\":[{\"kind\":\"worker\",\"message\":\"could you sum it?\"}]}",
        "{\"requests\":[{\"kind\":\"worker\",\"goal\":\"sum it\",\"priority\":\"urgent\"}]}",
        "{\"message\":\"please sum it\"}"};
    for (size_t i = 0; i < VG_ARRAY_LEN(untyped); i++) {
        json_t *v = call(&t, a, "run-untyped", "spawn_agents", untyped[i]);
        ASSERT_STREQ(field(v, "error_code"), "invalid_arguments");
        json_decref(v);
    }
    ASSERT_EQ(count(&t, "wake_run", NULL), 0);
    ASSERT_EQ(count(&t, "spawn_child", NULL), 0);
    json_t *v = call(&t, a, "run-typed", "spawn_agents",
                     "{\"requests\":[{\"kind\":\"worker\",\"goal\":\"sum the March invoices\","
                     "\"input_refs\":[\"invoice:2026-03\"],\"priority\":3,"
                     "\"risk_tier\":\"low\",\"max_steps\":5}]}");
    ASSERT_STREQ(field(child(v, 0), "decision"), "admitted");
    json_t *run = NULL;
    ASSERT_OK(vg_env_get_json(t.env, "wake_run", field(child(v, 0), "run_key"), &run, NULL, E));
    ASSERT_CONTAINS(field(run, "seed_input"), "sum the March invoices");
    ASSERT_CONTAINS(field(run, "seed_input"), "invoice:2026-03");
    json_decref(run);
    char *text = NULL;
    ASSERT_OK(vigil_agent_tree(t.rt, a, &text, E));
    json_t *tree = json_loads(text, 0, NULL);
    vigil_free(text);
    json_t *req = json_object_get(json_array_get(json_object_get(tree, "children"), 0), "request");
    ASSERT_STREQ(field(req, "goal"), "sum the March invoices");
    ASSERT_EQ(json_integer_value(json_object_get(req, "priority")), 3);
    ASSERT_STREQ(field(req, "risk_tier"), "low");
    ASSERT_STREQ(json_string_value(json_array_get(json_object_get(req, "input_refs"), 0)),
                 "invoice:2026-03");
    json_decref(tree);
    json_decref(v);
    test_rt_close(&t);
}

int main(void)
{
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    unsetenv("VIGIL_MODEL_CASSETTE");
    unsetenv("VIGIL_CONFIG");
    RUN(admission_is_deny_by_default);
    RUN(spawning_is_off_unless_the_manifest_enables_it);
    RUN(list_available_agents_shows_every_agent_whatever_its_visibility);
    RUN(visibility_restricts_listings_to_people_not_agents);
    RUN(an_admitted_child_is_a_queued_wake_and_every_decision_is_recorded);
    RUN(an_admitted_childs_wake_is_keyed_by_its_session_and_carries_its_goal_whole);
    RUN(spawn_agents_lists_the_agents_a_parent_may_spawn);
    RUN(depth_is_capped_at_two_and_sub_agents_spawn_only_when_granted);
    RUN(kill_switches_cooldowns_and_budgets_deny_and_high_risk_waits_for_approval);
    RUN(a_child_runs_under_its_own_envelope_whatever_the_parent_grants);
    RUN(a_grant_narrows_the_child_and_never_widens_it);
    RUN(disagreeing_children_are_arbitrated_by_a_fixed_policy);
    RUN(a_child_never_gets_more_than_its_parents_scopes);
    RUN(a_token_budget_is_admitted_within_the_parents_and_required_approvals_wait_for_a_person);
    RUN(a_spawn_call_records_all_its_decisions_in_one_record);
    RUN(decisions_stored_one_a_record_before_spawn_call_still_read);
    RUN(a_child_started_by_another_process_between_calls_counts_against_the_cap);
    RUN(only_a_parent_with_a_cooldown_reads_when_it_last_spawned);
    RUN(queued_children_live_in_their_call_and_every_reader_says_what_it_said_of_their_records);
    RUN(a_spawn_calls_answer_text_says_what_its_tree_says_in_every_record);
    RUN(agents_kept_between_calls_follow_every_change_to_them);
    RUN(a_handoff_is_a_typed_request_and_free_form_text_is_refused);
    return 0;
}
