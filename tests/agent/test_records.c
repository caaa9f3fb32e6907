/*
 * test_records.c: the agent domain's records as the store keeps them, read through the spine's
 * own functions and the store's wrappers (never the row layout): what an agent record holds,
 * every variant written, read back, changed and removed, transactions, a record of a kind or
 * with fields this vigil does not know kept whole, and which of them stay on this device.
 * CTest runs it on SQLite and again on PostgreSQL (agent_test_records_pg).
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "store/store.h"
#include "memory/compact.h"
#include "sync/sync.h"
#include "sync/sync_int.h"
#include "wake/wake.h"

static void create(struct test_rt *t, const char *name, const char *config, char id[37])
{
    vigil_agent_spec spec = {.name = name,
                             .kind = "task_agent",
                             .mode = "autonomous",
                             .prompt = "watch the task",
                             .config_json = config};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, id, E));
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The record as a reader gets it (owned). */
static struct vg_record *raw(struct test_rt *t, const char *kind, const char *id)
{
    struct vg_record *r = NULL;
    ASSERT_OK(vg_store_get_copy(t->env->store, kind, id, &r, E));
    return r;
}

static int64_t count(struct test_rt *t, const char *kind, const char *owner)
{
    struct vg_query q = {.kind = kind, .owner = owner};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
    return n;
}

/* The agent record holds its identity (id, kind, display name), lifecycle, interaction mode,
 * allowed scopes (the seeds' allowed category ids, in its config where the tool gate reads
 * them), config and its created, updated and destroyed times; destroying it is a soft delete
 * that keeps the record with its destroyed time. Its current state id is the agent_state
 * pointer (DESIGN 3.2: "current" things are pointers), and its vector clock is kept beside it
 * by sync (docs/internals/SYNC.md), moved on by each write once the store has joined.
 * proves: S0-081 */
TEST(an_agent_record_holds_its_identity_lifecycle_scopes_times_and_clock)
{
    struct test_rt t;
    test_rt_open(&t, "records_agent");
    ASSERT_OK(vg_sync_join(t.env, E));
    char id[37];
    create(&t, "Task watcher",
           "{\"allowed_scopes\":[\"cat-work\"],\"extension\":{\"acme.colour\":1}}", id);
    json_t *a = NULL;
    ASSERT_OK(vg_agent_get(t.env, id, &a, NULL, E));
    ASSERT_STREQ(str(a, "id"), id);
    ASSERT_STREQ(str(a, "kind"), "task_agent");
    ASSERT_STREQ(str(a, "name"), "Task watcher");
    ASSERT_STREQ(str(a, "lifecycle"), "created");
    ASSERT_STREQ(str(a, "mode"), "autonomous");
    json_t *config = json_object_get(a, "config");
    ASSERT_EQ(json_array_size(json_object_get(config, "allowed_scopes")), 1);
    ASSERT_STREQ(json_string_value(json_array_get(json_object_get(config, "allowed_scopes"), 0)),
                 "cat-work");
    ASSERT_EQ(
        json_integer_value(json_object_get(json_object_get(config, "extension"), "acme.colour")),
        1);
    ASSERT_STREQ(str(a, "created_at"), "2026-01-01T00:00:00.000Z");
    ASSERT_STREQ(str(a, "updated_at"), "2026-01-01T00:00:00.000Z");
    ASSERT(json_is_null(json_object_get(a, "destroyed_at")));
    json_decref(a);

    /* The current state: the pointer names the state record the agent's state reads. */
    char state_id[VG_RECORD_ID_MAX];
    ASSERT_OK(vg_link_pointer_get(t.env, "agent_state", id, state_id, sizeof state_id, E));
    json_t *st = NULL;
    ASSERT_OK(vg_state_get(t.env, id, &st, NULL, E));
    ASSERT_STREQ(str(st, "id"), state_id);
    ASSERT_STREQ(str(st, "agent_id"), id);
    json_decref(st);

    /* The vector clock: this host's counter, moved on by a change of the agent. */
    const char *host = vg_sync_host(t.env);
    ASSERT(host != NULL);
    json_t *side = NULL;
    int64_t side_rev = 0;
    ASSERT_OK(vg_sync_sidecar_get(t.env->store, "agent", id, &side, &side_rev, E));
    ASSERT(side != NULL);
    json_int_t first = json_integer_value(json_object_get(json_object_get(side, "clock"), host));
    ASSERT(first > 0);
    json_decref(side);
    vg_test_clock_advance(&t.clock, 60000);
    json_t *rename = json_pack("{s:s}", "name", "Task watcher 2");
    ASSERT_OK(vg_agent_update(t.env, id, rename, E));
    json_decref(rename);
    ASSERT_OK(vg_sync_sidecar_get(t.env->store, "agent", id, &side, &side_rev, E));
    ASSERT(json_integer_value(json_object_get(json_object_get(side, "clock"), host)) > first);
    json_decref(side);

    /* Destroyed: the record stays, with its destroyed (tombstone) time. */
    vg_test_clock_advance(&t.clock, 60000);
    ASSERT_OK(vigil_agent_destroy(t.rt, id, "done", E));
    ASSERT_OK(vg_agent_get(t.env, id, &a, NULL, E));
    ASSERT_STREQ(str(a, "lifecycle"), "destroyed");
    ASSERT_STREQ(str(a, "updated_at"), "2026-01-01T00:02:00.000Z");
    ASSERT_STREQ(str(a, "destroyed_at"), "2026-01-01T00:02:00.000Z");
    ASSERT_STREQ(str(a, "name"), "Task watcher 2");
    json_decref(a);
    test_rt_close(&t);
}

/* A record written by a newer vigil comes back whole: a kind this version has no code for is
 * stored, read, listed with its agent's records, changed and removed with its agent like any
 * other, its body byte for byte; and fields this version does not know, in the agent record
 * and the agent's state, survive this version's own changes of those records (seed 003 10.1's
 * "unknown" variant: the store keeps any kind, the spine changes records field by field).
 * proves: S3-022 */
TEST(records_and_fields_this_vigil_does_not_know_come_back_whole)
{
    struct test_rt t;
    test_rt_open(&t, "records_unknown");
    char id[37];
    create(&t, "future", NULL, id);
    static const char future_body[] =
        "{\"goal\":\"ship \\u00e9t\\u00e9 \\ud83d\\ude80\",\"weights\":[0.25,1e300,-0],"
        "\"nested\":{\"z\":null,\"a\":[{\"deep\":true}]},\"big\":9007199254740993,"
        "\"text\":\"line\\nbreak \\\"quoted\\\"\"}";
    struct vg_record goal = {"agent_goal", "goal-1", id, "open", "weekly", 7, 0, 1234, future_body};
    ASSERT_OK(vg_store_put(t.env->store, &goal, 0, NULL, E));
    struct vg_record *r = raw(&t, "agent_goal", "goal-1");
    ASSERT_STREQ(r->body, future_body);
    ASSERT_STREQ(r->owner, id);
    ASSERT_STREQ(r->k1, "open");
    ASSERT_STREQ(r->k2, "weekly");
    ASSERT_EQ(r->seq, 7);
    ASSERT_EQ(r->at, 1234);
    ASSERT_EQ(r->rev, 1);
    vg_free(r);
    ASSERT_EQ(count(&t, "agent_goal", id), 1);
    struct vg_record changed = goal;
    changed.body = "{\"goal\":\"ship\",\"done\":true}";
    ASSERT_OK(vg_store_update(t.env->store, &changed, 1, E));
    ASSERT_CODE(VIGIL_ECONFLICT, vg_store_update(t.env->store, &changed, 1, NULL));
    r = raw(&t, "agent_goal", "goal-1");
    ASSERT_STREQ(r->body, changed.body);
    ASSERT_EQ(r->rev, 2);
    vg_free(r);

    /* Fields of a newer version in the agent record and the state. */
    struct vg_record *ar = raw(&t, "agent", id);
    json_t *a = json_loads(ar->body, 0, NULL);
    json_object_set_new(a, "future_field", json_pack("{s:[i,i], s:s}", "x", 1, 2, "y", "z"));
    ASSERT_OK(vg_env_update_json(t.env, "agent", id, id, ar->k1, ar->k2, ar->seq, a, ar->rev, E));
    json_decref(a);
    vg_free(ar);
    json_t *st = NULL;
    ASSERT_OK(vg_state_get(t.env, id, &st, NULL, E));
    char state_id[VG_RECORD_ID_MAX];
    snprintf(state_id, sizeof state_id, "%s", str(st, "id"));
    json_decref(st);
    struct vg_record *sr = raw(&t, "agent_state", state_id);
    json_t *sb = json_loads(sr->body, 0, NULL);
    json_object_set_new(sb, "future_policy", json_string("keep me"));
    ASSERT_OK(vg_env_update_json(t.env, "agent_state", state_id, id, sr->k1, sr->k2, sr->seq, sb,
                                 sr->rev, E));
    json_decref(sb);
    vg_free(sr);

    json_t *rename = json_pack("{s:s}", "name", "future-2");
    ASSERT_OK(vg_agent_update(t.env, id, rename, E));
    json_decref(rename);
    ASSERT_OK(vg_agent_transition(t.env, id, VIGIL_LIFECYCLE_ACTIVE, "go", E));
    json_t *ch = json_pack("{s:{s:s}}", "slots", "primary_goal", "ship");
    ASSERT_OK(vg_state_update(t.env, id, ch, VG_STATE_ANY_REVISION, NULL, E));
    json_decref(ch);

    ASSERT_OK(vg_agent_get(t.env, id, &a, NULL, E));
    ASSERT_STREQ(str(a, "name"), "future-2");
    ASSERT_STREQ(str(a, "lifecycle"), "active");
    json_t *want = json_pack("{s:[i,i], s:s}", "x", 1, 2, "y", "z");
    ASSERT(json_equal(json_object_get(a, "future_field"), want));
    json_decref(want);
    json_decref(a);
    ASSERT_OK(vg_state_get(t.env, id, &st, NULL, E));
    ASSERT_STREQ(str(st, "future_policy"), "keep me");
    ASSERT(json_object_get(json_object_get(st, "slots"), "primary_goal") != NULL);
    json_decref(st);

    /* The unknown kind goes with its agent. */
    ASSERT_OK(vigil_agent_destroy(t.rt, id, "done", E));
    ASSERT_OK(vigil_agent_delete(t.rt, id, E));
    ASSERT_EQ(count(&t, "agent_goal", id), 0);
    test_rt_close(&t);
}

/* What an append of a message, a link and a report in one transaction leaves: 1 all of it, 0
 * none of it. */
static int written_together(struct test_rt *t, const char *id, const char *thread, const char *tag)
{
    json_t *msgs = NULL, *targets = NULL, *rep = NULL;
    ASSERT_OK(vg_message_latest(t->env, id, thread, 100, &msgs, E));
    ASSERT_OK(vg_link_targets(t->env, "agent_task", tag, &targets, E));
    vigil_code rc = vg_report_current(t->env, id, "weekly", &rep, NULL);
    int n_msgs = 0;
    for (size_t i = 0; i < json_array_size(msgs); i++)
        n_msgs += !strcmp(str(json_array_get(msgs, i), "content"), tag);
    int report = rc == VIGIL_OK && !strcmp(str(rep, "markdown"), tag);
    int all = n_msgs == 1 && json_array_size(targets) == 1 && report;
    int none = n_msgs == 0 && json_array_size(targets) == 0 && !report;
    json_decref(msgs);
    json_decref(targets);
    json_decref(rep);
    ASSERT(all || none);
    return all;
}

static vigil_code write_together(struct test_rt *t, const char *id, const char *thread,
                                 const char *tag, vigil_error *err)
{
    struct vg_message_in in = {
        .agent_id = id, .thread_id = thread, .kind = VG_MSG_THOUGHT, .content = tag};
    vigil_code rc = vg_message_append(t->env, &in, NULL, err);
    if (!rc)
        rc = vg_link_add(t->env, id, "agent_task", tag, "task-1", NULL, err);
    if (!rc)
        rc = vg_report_set(t->env, id, "weekly", tag, NULL, NULL, NULL, err);
    return rc;
}

/* Writes of several records in one transaction commit together or not at all, and a nested
 * level that fails undoes its own writes only. */
static void transactions_all_or_nothing(struct test_rt *t, const char *id, const char *thread)
{
    struct vg_store *s = t->env->store;
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(write_together(t, id, thread, "rolled-back", E));
    ASSERT_CODE(VIGIL_EINVAL, vg_store_end(s, VIGIL_EINVAL, NULL));
    ASSERT_EQ(written_together(t, id, thread, "rolled-back"), 0);

    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(write_together(t, id, thread, "outer-1", E));
    ASSERT_OK(vg_store_begin(s, E)); /* a savepoint */
    ASSERT_OK(write_together(t, id, thread, "inner", E));
    ASSERT_CODE(VIGIL_ECONFLICT, vg_store_end(s, VIGIL_ECONFLICT, NULL));
    ASSERT_EQ(written_together(t, id, thread, "inner"), 0);
    ASSERT_OK(vg_store_end(s, VIGIL_OK, E));
    ASSERT_EQ(written_together(t, id, thread, "outer-1"), 1);
    ASSERT_EQ(written_together(t, id, thread, "inner"), 0);
}

/* Messages and their payloads are immutable: written once, read back whole, listed newest
 * first up to a limit, never written twice under one id. */
static void messages_written_and_read(struct test_rt *t, const char *id, const char *thread)
{
    char m1[VG_RECORD_ID_MAX], m2[VG_RECORD_ID_MAX];
    struct vg_message_in in = {
        .agent_id = id, .thread_id = thread, .kind = VG_MSG_USER, .content = "short"};
    ASSERT_OK(vg_message_append(t->env, &in, m1, E));
    char *big = vg_malloc(VG_MESSAGE_INLINE_MAX + 100);
    memset(big, 'y', VG_MESSAGE_INLINE_MAX + 99);
    big[VG_MESSAGE_INLINE_MAX + 99] = '\0';
    in.content = big;
    in.kind = VG_MSG_OBSERVATION;
    ASSERT_OK(vg_message_append(t->env, &in, m2, E));
    json_t *m = NULL;
    ASSERT_OK(vg_message_get(t->env, m2, &m, E));
    ASSERT_STREQ(str(m, "content"), big); /* from its payload record */
    ASSERT_STREQ(str(m, "prev_id"), m1);
    ASSERT(str(m, "payload_id") != NULL);
    ASSERT_EQ(count(t, "message_payload", id), 1);
    json_decref(m);
    vg_free(big);
    json_t *latest = NULL;
    ASSERT_OK(vg_message_latest(t->env, id, thread, 1, &latest, E));
    ASSERT_EQ(json_array_size(latest), 1);
    ASSERT_STREQ(str(json_array_get(latest, 0), "id"), m2);
    json_decref(latest);
    in.id = m1;
    in.content = "again";
    ASSERT_CODE(VIGIL_EEXISTS, vg_message_append(t->env, &in, NULL, NULL));
    ASSERT_OK(vg_message_get(t->env, m1, &m, E));
    ASSERT_STREQ(str(m, "content"), "short");
    json_decref(m);
}

/* Each variant of the agent domain written, read back as written, changed where it may change
 * and removed, through the spine's own functions; links once per (type, from, to); writes of
 * several records in one transaction all or none, a failed nested level undoing its own only;
 * and an agent's hard delete leaving none of its records. With
 * records_and_fields_this_vigil_does_not_know_come_back_whole (the unknown variant) and
 * tests/store/test_body.c (the stored form of every kind's body read back as written).
 * proves: S3-073 */
TEST(every_record_variant_is_written_read_changed_and_removed)
{
    struct test_rt t;
    test_rt_open(&t, "records_crud");
    char id[37], thread[128];
    create(&t, "crud", "{\"extension\":{\"acme.k\":\"v\"}}", id);
    snprintf(thread, sizeof thread, "%s:session:crud", id);

    /* Agent: read, change, lifecycle. */
    json_t *ch =
        json_pack("{s:s, s:{s:{s:i}}}", "prompt", "new prompt", "config", "limits", "max_steps", 3);
    ASSERT_OK(vg_agent_update(t.env, id, ch, E));
    json_decref(ch);
    json_t *a = NULL;
    int64_t rev = 0;
    ASSERT_OK(vg_agent_get(t.env, id, &a, &rev, E));
    ASSERT_STREQ(str(a, "prompt"), "new prompt");
    ASSERT_EQ(json_integer_value(json_object_get(
                  json_object_get(json_object_get(a, "config"), "limits"), "max_steps")),
              3);
    ASSERT_EQ(rev, 2);
    json_decref(a);
    ASSERT_OK(vg_agent_transition(t.env, id, VIGIL_LIFECYCLE_ACTIVE, "go", E));

    /* State: a revision-checked change; a stale one refused. */
    json_t *st = NULL;
    ASSERT_OK(vg_state_get(t.env, id, &st, &rev, E));
    json_decref(st);
    ch = json_pack("{s:s, s:{s:s}}", "sleep_until", "2026-02-01T00:00:00Z", "slots", "active_task",
                   "t-9");
    int64_t now_rev = 0;
    ASSERT_OK(vg_state_update(t.env, id, ch, rev, &now_rev, E));
    ASSERT_CODE(VIGIL_ECONFLICT, vg_state_update(t.env, id, ch, rev, NULL, NULL));
    json_decref(ch);
    ASSERT_OK(vg_state_get(t.env, id, &st, &rev, E));
    ASSERT_EQ(rev, now_rev);
    ASSERT_STREQ(str(st, "sleep_until"), "2026-02-01T00:00:00Z");
    ASSERT(json_object_get(json_object_get(st, "slots"), "active_task") != NULL);
    json_decref(st);

    /* Runtime state. */
    ch = json_pack("{s:I}", "failure_streak", (json_int_t)2);
    ASSERT_OK(vg_runtime_state_update(t.env, id, ch, E));
    json_decref(ch);
    json_t *rs = NULL;
    ASSERT_OK(vg_runtime_state_get(t.env, id, &rs, NULL, E));
    ASSERT_EQ(json_integer_value(json_object_get(rs, "failure_streak")), 2);
    json_decref(rs);

    messages_written_and_read(&t, id, thread);

    /* Reports and their head: each write a new report, the head on the newest. */
    char r1[37], r2[37];
    ASSERT_OK(vg_report_set(t.env, id, "current", "first", NULL, NULL, r1, E));
    ASSERT_OK(vg_report_set(t.env, id, "current", "second", NULL, NULL, r2, E));
    json_t *rep = NULL;
    ASSERT_OK(vg_report_current(t.env, id, "current", &rep, E));
    ASSERT_STREQ(str(rep, "id"), r2);
    ASSERT_STREQ(str(rep, "markdown"), "second");
    json_decref(rep);
    ASSERT_OK(vg_report_history(t.env, id, "current", 10, &rep, E));
    ASSERT_EQ(json_array_size(rep), 2);
    json_decref(rep);

    /* Links: added twice, one row; removed. */
    int64_t links = count(&t, "link", id);
    ASSERT_OK(vg_link_add(t.env, id, "tool_effect", "m-x", "task-7", NULL, E));
    ASSERT_OK(vg_link_add(t.env, id, "tool_effect", "m-x", "task-7", NULL, E));
    ASSERT_EQ(count(&t, "link", id), links + 1);
    json_t *targets = NULL;
    ASSERT_OK(vg_link_targets(t.env, "tool_effect", "m-x", &targets, E));
    ASSERT_EQ(json_array_size(targets), 1);
    json_decref(targets);
    ASSERT_OK(vg_link_remove(t.env, id, "tool_effect", "m-x", "task-7", E));
    ASSERT_OK(vg_link_targets(t.env, "tool_effect", "m-x", &targets, E));
    ASSERT_EQ(json_array_size(targets), 0);
    json_decref(targets);

    /* Source references. */
    ASSERT_OK(vg_source_ref_add(t.env, id, "task", "task-7", E));
    json_t *refs = NULL;
    ASSERT_OK(vg_source_refs(t.env, id, NULL, &refs, E));
    ASSERT_EQ(json_array_size(refs), 1);
    json_decref(refs);
    ASSERT_OK(vg_source_ref_remove(t.env, id, "task", "task-7", E));
    ASSERT_OK(vg_source_refs(t.env, id, NULL, &refs, E));
    ASSERT_EQ(json_array_size(refs), 0);
    json_decref(refs);

    transactions_all_or_nothing(&t, id, thread);
    ASSERT_OK(vg_spine_verify(t.env, id, NULL, E));

    /* Hard delete of the destroyed agent: none of its records is left. */
    ASSERT_OK(vigil_agent_destroy(t.rt, id, "done", E));
    ASSERT_OK(vigil_agent_delete(t.rt, id, E));
    static const char *const kinds[] = {"agent",   "agent_state",     "agent_runtime",
                                        "message", "message_payload", "report",
                                        "link",    "source_ref"};
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++)
        if (count(&t, kinds[i], id) != 0)
            TEST_FAIL_("%s records of the deleted agent are left", kinds[i]);
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_agent_get(t.env, id, &a, NULL, NULL));
    test_rt_close(&t);
}

/* Whether the JSON array of strings holds s. */
static int holds(const json_t *array, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (array, i, v) {
        if (strcmp(json_string_value(v), s) == 0)
            return 1;
    }
    return 0;
}

/* The agent store's reads and writes (seed 003, section 4.1), each through the spine's own
 * function: a record written and read by id, an agent's records of one type (the store's query
 * by owner and kind), the agent's state, a thread's newest messages up to a limit, the latest
 * report of a scope, a link written twice and kept once, and the links of a type read from a
 * record and to it: the reports citing a message, the tool results that touched a task. On
 * SQLite and PostgreSQL (agent_test_records_pg).
 * proves: S3-025
 * proves: S3-013 (one row per (from, to, type); read from and to by type) */
TEST(the_agent_store_reads_an_agents_records_and_links_from_and_to_a_record)
{
    struct test_rt t;
    test_rt_open(&t, "records_reads");
    char id[37], thread[128], m[3][VG_RECORD_ID_MAX], rep[37];
    create(&t, "reads", NULL, id);
    snprintf(thread, sizeof thread, "%s:session:r", id);
    json_t *a = NULL, *st = NULL, *got = NULL;
    ASSERT_OK(vg_agent_get(t.env, id, &a, NULL, E));
    ASSERT_STREQ(str(a, "id"), id);
    json_decref(a);
    ASSERT_OK(vg_state_get(t.env, id, &st, NULL, E));
    ASSERT_STREQ(str(st, "agent_id"), id);
    json_decref(st);
    for (int i = 0; i < 3; i++) {
        struct vg_message_in in = {
            .agent_id = id, .thread_id = thread, .kind = VG_MSG_USER, .content = "said"};
        ASSERT_OK(vg_message_append(t.env, &in, m[i], E));
    }
    ASSERT_EQ(count(&t, "message", id), 3);
    ASSERT_OK(vg_message_latest(t.env, id, thread, 2, &got, E));
    ASSERT_EQ(json_array_size(got), 2);
    ASSERT_STREQ(str(json_array_get(got, 1), "id"), m[2]);
    json_decref(got);
    ASSERT_OK(vg_report_set(t.env, id, "daily", "older", m[0], m[0], NULL, E));
    ASSERT_OK(vg_report_set(t.env, id, "daily", "newest", m[0], m[1], rep, E));
    ASSERT_OK(vg_report_current(t.env, id, "daily", &got, E));
    ASSERT_STREQ(str(got, "markdown"), "newest");
    json_decref(got);

    /* Links: one row a (type, from, to), however often written. */
    int64_t links = count(&t, "link", id);
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(vg_link_add(t.env, id, "tool_effect", m[1], "task-7", NULL, E));
        ASSERT_OK(vg_link_add(t.env, id, "tool_effect", m[2], "task-7", NULL, E));
        ASSERT_OK(vg_link_add(t.env, id, "agent_task", id, "task-7", NULL, E));
    }
    ASSERT_EQ(count(&t, "link", id), links + 3);
    ASSERT_OK(vg_link_sources(t.env, "tool_effect", "task-7", &got, E));
    ASSERT_EQ(json_array_size(got), 2);
    ASSERT(holds(got, m[1]) && holds(got, m[2]));
    json_decref(got);
    ASSERT_OK(vg_link_sources(t.env, "agent_task", "task-7", &got, E));
    ASSERT_EQ(json_array_size(got), 1);
    ASSERT(holds(got, id));
    json_decref(got);
    ASSERT_OK(vg_link_sources(t.env, "report_source_span", m[0], &got, E)); /* both reports */
    ASSERT_EQ(json_array_size(got), 2);
    ASSERT(holds(got, rep));
    json_decref(got);
    ASSERT_OK(vg_link_targets(t.env, "tool_effect", m[1], &got, E));
    ASSERT_EQ(json_array_size(got), 1);
    ASSERT(holds(got, "task-7"));
    json_decref(got);
    ASSERT_OK(vg_link_remove(t.env, id, "tool_effect", m[1], "task-7", E));
    ASSERT_OK(vg_link_sources(t.env, "tool_effect", "task-7", &got, E));
    ASSERT_EQ(json_array_size(got), 1);
    ASSERT(holds(got, m[2]));
    json_decref(got);
    ASSERT_OK(vg_link_sources(t.env, "tool_effect", "task-8", &got, E));
    ASSERT_EQ(json_array_size(got), 0);
    json_decref(got);
    ASSERT_CODE(VIGIL_EINVAL, vg_link_sources(t.env, "message_prev", m[1], &got, NULL));
    test_rt_close(&t);
}

/* The agent store's "tables" are kinds of records (docs/internals/STORE.md: one table of typed
 * records, a kind per collection): an agent's agents, states, runtime states, subscriptions,
 * timers, messages, reports, report heads, source references, links and compaction jobs are
 * each a kind of their own, written by their module and found by kind and agent; runtime
 * states and compaction jobs stay on this device (never synced), the others travel.
 * proves: S0-114 */
TEST(each_collection_of_the_agent_store_is_a_kind_of_its_own)
{
    struct test_rt t;
    test_rt_open(&t, "records_tables");
    ASSERT_OK(vg_sync_join(t.env, E));
    char id[37], thread[128], timer[37], job[VG_RECORD_ID_MAX];
    create(&t, "tables", NULL, id);
    snprintf(thread, sizeof thread, "%s:session:t", id);
    char *sub = NULL;
    ASSERT_OK(vigil_subscription_add(t.rt, id, "{\"tokens\":[\"TASK\"]}", &sub, E));
    vigil_free(sub);
    ASSERT_OK(vigil_timer_add(t.rt, id, "cron", "@daily", "UTC", timer, E));
    for (int i = 0; i < 30; i++) {
        struct vg_message_in in = {.agent_id = id,
                                   .thread_id = thread,
                                   .kind = VG_MSG_USER,
                                   .content = "a message long enough that thirty pass a budget"};
        ASSERT_OK(vg_message_append(t.env, &in, NULL, E));
    }
    ASSERT_OK(vg_report_set(t.env, id, "current", "report", NULL, NULL, NULL, E));
    ASSERT_OK(vg_source_ref_add(t.env, id, "task", "task-1", E));
    ASSERT_OK(vg_link_add(t.env, id, "agent_task", id, "task-1", NULL, E));
    struct vg_compaction_policy policy = {.thread_budget = 200, .keep_tokens = 50, .span_max = 10};
    ASSERT_OK(vg_compact_consider(t.env, id, thread, &policy, job, E));
    ASSERT(job[0]);

    static const struct {
        const char *kind;
        int local;
    } kinds[] = {{"agent", 0},        {"agent_state", 0}, {"agent_runtime", 1},
                 {"subscription", 0}, {"timer", 0},       {"message", 0},
                 {"report", 0},       {"source_ref", 0},  {"compaction_job", 1}};
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++) {
        if (count(&t, kinds[i].kind, id) < 1)
            TEST_FAIL_("no %s record of the agent", kinds[i].kind);
        int synced = vg_sync_class_of(kinds[i].kind, "x") != VG_SYNC_LOCAL;
        if (synced == kinds[i].local)
            TEST_FAIL_("%s records %s synced", kinds[i].kind, synced ? "are" : "are not");
    }
    /* Links and report heads are one kind: a report head is the link record that points a
     * scope at its report, and travels as one (the receiver derives its value again). */
    char key[128], head[VG_RECORD_ID_MAX], to[VG_RECORD_ID_MAX];
    snprintf(key, sizeof key, "%s:current", id);
    snprintf(head, sizeof head, "agent_report_head:%s", key);
    json_t *rep = NULL;
    ASSERT_OK(vg_report_current(t.env, id, "current", &rep, E));
    ASSERT_OK(vg_link_pointer_get(t.env, "agent_report_head", key, to, sizeof to, E));
    ASSERT_STREQ(to, str(rep, "id"));
    json_decref(rep);
    struct vg_record *hr = raw(&t, "link", head);
    ASSERT_STREQ(hr->owner, id);
    vg_free(hr);
    ASSERT(vg_sync_derived("link", head));
    ASSERT(vg_sync_class_of("link", "agent_task|a|b") != VG_SYNC_LOCAL);
    ASSERT(count(&t, "link", id) >= 2);
    test_rt_close(&t);
}

/* The stored fixture made by the vigil of schema 17 (tests/cli/test_prune_migration.sh): one
 * agent, two chat turns and two turns that each called set_report. */
#define OLD_AGENT "01a226c8-f14e-703d-847f-8e3df54939fb"
#define OLD_STATE "01a226c8-f14e-703e-a404-cf0d2618e410"
#define OLD_ACTION "01a226c8-f243-7022-8908-07db5cc43de7"
#define OLD_RESULT "01a226c8-f24a-73ff-bb8f-9ec8adea0e38"
#define OLD_OPERATION "91121bc572a8af9e2a0206680a87807f4fe3a35878fe8713bedc6b185d364cc6"

/* Rewrite one record of the old store with field `key` of its body set to `value` (taken),
 * as that vigil's own writes would: through the store, at its schema. */
static void old_set(struct vg_store *s, const char *kind, const char *id, const char *key,
                    json_t *value)
{
    struct vg_record *r = NULL;
    ASSERT_OK(vg_store_get_copy(s, kind, id, &r, E));
    json_t *body = json_loads(r->body, 0, NULL);
    ASSERT(body != NULL);
    json_object_set_new(body, key, value);
    char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    struct vg_record w = *r;
    w.body = text;
    ASSERT_OK(vg_store_update(s, &w, r->rev, E));
    free(text);
    json_decref(body);
    vg_free(r);
}

/* A message's metadata as a reader gets it (owned). */
static json_t *metadata_of(struct vg_env *env, const char *id)
{
    json_t *m = NULL;
    ASSERT_OK(vg_message_get(env, id, &m, E));
    json_t *meta = json_incref(json_object_get(m, "metadata"));
    json_decref(m);
    ASSERT(json_is_object(meta));
    return meta;
}

/* An agent's typed config (tools, limits, allowed scopes, extension fields), its state's slots
 * and its messages' metadata (a tool call's operation id, its action's reference, status,
 * extension fields) are read back as written, and survive the schema upgrades from the store of
 * an older vigil (schema 17, with slots and config that vigil wrote) to this one's.
 * SQLite only: the older store is a SQLite file (PostgreSQL's upgrades: test_conformance_pg.c).
 * proves: S0-089 */
TEST(config_slots_and_message_metadata_round_trip_and_survive_upgrades)
{
    if (getenv("VIGIL_TEST_RT_PG"))
        return;
    char path[4200], cmd[9000];
    snprintf(path, sizeof path, "%s/old.db", vg_test_tmpdir("records_old_store"));
    snprintf(cmd, sizeof cmd, "gunzip -c '%s/tests/fixtures/stores/pre-retention.db.gz' > '%s'",
             VIGIL_SOURCE_DIR, path);
    ASSERT_EQ(system(cmd), 0);
    struct vg_store_options at17 = {.target_version = 17};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &at17, &s, E));
    int version = 0;
    ASSERT_OK(vg_store_control(s, VG_STORE_CTRL_SCHEMA_VERSION, &version, E));
    ASSERT_EQ(version, 17);
    json_t *config =
        json_pack("{s:[s], s:{s:i, s:i}, s:[s], s:{s:s, s:[i, b]}}", "tools", "set_report",
                  "limits", "max_steps", 7, "timeout_s", 90, "allowed_scopes", "cat-work",
                  "extension", "acme.colour", "teal", "acme.x", 1, 1);
    old_set(s, "agent", OLD_AGENT, "config", json_incref(config));
    json_t *slots = json_pack("{s:{s:{s:s, s:s}, s:s}}", "active_task", "value", "id", "t-1",
                              "title", "Ship it", "updated_at", "2026-11-29T10:11:00.000Z");
    old_set(s, "agent_state", OLD_STATE, "slots", json_incref(slots));
    vg_store_close(s);

    vigil_runtime *rt = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path};
    ASSERT_OK(vigil_runtime_open(&o, &rt, E));
    struct vg_env *env = vg_runtime_env(rt);
    ASSERT_OK(vg_store_control(env->store, VG_STORE_CTRL_SCHEMA_VERSION, &version, E));
    ASSERT(version > 17);
    json_t *a = NULL;
    ASSERT_OK(vg_agent_get(env, OLD_AGENT, &a, NULL, E));
    ASSERT(json_equal(json_object_get(a, "config"), config));
    json_decref(a);
    json_t *st = NULL;
    ASSERT_OK(vg_state_get(env, OLD_AGENT, &st, NULL, E));
    ASSERT(json_equal(json_object_get(st, "slots"), slots));
    json_decref(st);
    json_t *meta = metadata_of(env, OLD_ACTION);
    ASSERT_STREQ(str(meta, "operationId"), OLD_OPERATION);
    ASSERT_STREQ(str(meta, "toolName"), "set_report");
    json_decref(meta);
    meta = metadata_of(env, OLD_RESULT);
    ASSERT_STREQ(str(meta, "actionRefId"), OLD_ACTION);
    ASSERT_STREQ(str(meta, "toolName"), "set_report");
    json_decref(meta);

    /* Written now, read back as written: slots, and metadata with an error and extensions. */
    ASSERT_OK(vigil_agent_slots_set(rt, OLD_AGENT, "{\"open_loops\":[\"call Bo\",{\"n\":2}]}", E));
    ASSERT_OK(vg_state_get(env, OLD_AGENT, &st, NULL, E));
    json_t *loops =
        json_object_get(json_object_get(json_object_get(st, "slots"), "open_loops"), "value");
    json_t *want = json_pack("[s, {s:i}]", "call Bo", "n", 2);
    ASSERT(json_equal(loops, want));
    json_decref(want);
    ASSERT(json_object_get(json_object_get(st, "slots"), "active_task") != NULL);
    json_decref(st);
    char thread[128], id[VG_RECORD_ID_MAX];
    snprintf(thread, sizeof thread, "%s:session:default", OLD_AGENT);
    json_t *written =
        json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:{s:[i], s:n}}", "actionRefId", OLD_ACTION,
                  "operationId", OLD_OPERATION, "status", "error", "error", "code", "tool_failed",
                  "message", "it broke", "extension", "tries", 3, "none");
    struct vg_message_in in = {.agent_id = OLD_AGENT,
                               .thread_id = thread,
                               .kind = VG_MSG_TOOL_RESULT,
                               .content = "{}",
                               .metadata = written};
    ASSERT_OK(vg_message_append(env, &in, id, E));
    meta = metadata_of(env, id);
    ASSERT(json_equal(meta, written));
    json_decref(meta);
    json_decref(written);
    json_decref(config);
    json_decref(slots);
    vigil_runtime_close(rt);
}

/* The agent's state keeps its two watermarks (seed 003 4.4): the last message the agent saw,
 * moved to the head of its messages when a wake ends (so a later wake knows what is new), and
 * the processed counters by host, which only move forward (a host's counter merges by maximum,
 * a lower one changes nothing); both are stored with the state and read back after a restart.
 * proves: S3-040 */
TEST(the_state_keeps_the_last_message_seen_and_the_processed_counters)
{
    struct test_rt t;
    test_rt_open(&t, "records_watermarks");
    char id[37], seen[VG_RECORD_ID_MAX], later[VG_RECORD_ID_MAX];
    create(&t, "watermarks", NULL, id);
    ASSERT_OK(vg_agent_transition(t.env, id, VIGIL_LIFECYCLE_ACTIVE, "go", E));
    struct vg_wake w;
    struct vg_wake_job job;
    enum vg_enqueue_result res;
    char key[65];
    int got = 0;
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = id};
    ASSERT_OK(vg_wake_enqueue(&w, &m, key, &res, E));
    ASSERT_OK(vg_wake_claim(&w, &job, &got, E));
    ASSERT_EQ(got, 1);
    struct vg_message_in in = {
        .agent_id = id, .thread_id = job.thread_id, .kind = VG_MSG_THOUGHT, .content = "seen"};
    ASSERT_OK(vg_message_append(t.env, &in, seen, E));
    ASSERT_OK(vg_wake_finish(&w, &job, VG_WAKE_COMPLETED, NULL, E));
    vg_wake_job_release(&job);
    vg_wake_release(&w);
    /* A message after the wake is not one the agent saw. */
    char thread[128];
    snprintf(thread, sizeof thread, "%s:session:later", id);
    in.thread_id = thread;
    in.content = "after the wake";
    ASSERT_OK(vg_message_append(t.env, &in, later, E));

    json_t *ch = json_pack("{s:{s:i, s:i}}", "processed_counter_by_host", "host-a", 5, "host-b", 2);
    ASSERT_OK(vg_state_update(t.env, id, ch, VG_STATE_ANY_REVISION, NULL, E));
    json_decref(ch);
    ch = json_pack("{s:{s:i, s:i, s:i}}", "processed_counter_by_host", "host-a", 3, "host-b", 7,
                   "host-c", 1);
    ASSERT_OK(vg_state_update(t.env, id, ch, VG_STATE_ANY_REVISION, NULL, E));
    json_decref(ch);

    test_rt_reopen(&t);
    json_t *st = NULL;
    ASSERT_OK(vg_state_get(t.env, id, &st, NULL, E));
    ASSERT_STREQ(str(st, "recent_head_message_id"), seen);
    json_t *want = json_pack("{s:i, s:i, s:i}", "host-a", 5, "host-b", 7, "host-c", 1);
    ASSERT(json_equal(json_object_get(st, "processed_counter_by_host"), want));
    json_decref(want);
    json_decref(st);
    test_rt_close(&t);
}

int main(void)
{
    RUN(an_agent_record_holds_its_identity_lifecycle_scopes_times_and_clock);
    RUN(records_and_fields_this_vigil_does_not_know_come_back_whole);
    RUN(every_record_variant_is_written_read_changed_and_removed);
    RUN(each_collection_of_the_agent_store_is_a_kind_of_its_own);
    RUN(the_agent_store_reads_an_agents_records_and_links_from_and_to_a_record);
    RUN(config_slots_and_message_metadata_round_trip_and_survive_upgrades);
    RUN(the_state_keeps_the_last_message_seen_and_the_processed_counters);
    return 0;
}
