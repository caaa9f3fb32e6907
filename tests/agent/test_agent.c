/*
 * test_agent.c: the record spine: agent identity and lifecycle, durable and runtime state,
 * messages, reports, links, hard delete, notifications after commit, and the replay property.
 */
#include "helpers/rt.h"

#include "helpers/fault_store.h"

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "os/fiber.h"

static char *create(struct test_rt *t, const char *name, char id[37])
{
    /* Two live agents never share a name: a test's second "lc" is lc-2, and so on. */
    static int made;
    char unique[64];
    made++;
    snprintf(unique, sizeof unique, made > 1 ? "%s-%d" : "%s", name, made);
    vigil_agent_spec spec = {.name = unique, .kind = "task_agent", .prompt = "watch the task"};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, id, E));
    return id;
}

/* proves: S0-001 */
TEST(lifecycle_transitions_follow_the_diagram)
{
    struct test_rt t;
    test_rt_open(&t, "agent_lifecycle");
    /* allowed[from][to] as the product defines it; every other pair is refused. */
    static const int ok[4][4] = {{0, 1, 0, 1}, {0, 0, 1, 1}, {0, 1, 0, 1}, {0, 0, 0, 0}};
    static const vigil_lifecycle path_to[4][3] = {{VIGIL_LIFECYCLE_CREATED}, /* fresh agent */
                                                  {VIGIL_LIFECYCLE_ACTIVE},
                                                  {VIGIL_LIFECYCLE_ACTIVE, VIGIL_LIFECYCLE_DORMANT},
                                                  {VIGIL_LIFECYCLE_DESTROYED}};
    static const int path_len[4] = {0, 1, 2, 1};
    for (int from = 0; from < 4; from++) {
        for (int to = 0; to < 4; to++) {
            char id[37];
            create(&t, "lc", id);
            for (int i = 0; i < path_len[from]; i++)
                ASSERT_OK(vg_agent_transition(t.env, id, path_to[from][i], "setup", E));
            vigil_error err = {0};
            vigil_code rc = vg_agent_transition(t.env, id, (vigil_lifecycle)to, "test", &err);
            if (ok[from][to]) {
                ASSERT_EQ(rc, VIGIL_OK);
            } else {
                ASSERT_EQ(rc, VIGIL_ESTATE);
                ASSERT_CONTAINS(err.message, vg_lifecycle_name((vigil_lifecycle)from));
            }
            vigil_lifecycle now, shown;
            ASSERT_OK(vg_agent_lifecycle(t.env, id, &now, E));
            ASSERT_EQ(now, ok[from][to] ? to : from);
            ASSERT_OK(vigil_agent_lifecycle(t.rt, id, &shown, E)); /* the public reading */
            ASSERT_EQ(shown, now);
        }
    }
    test_rt_close(&t);
}

/* How many records of the agent-identity kinds the store holds, whoever owns them. */
static int64_t identity_records(struct test_rt *t)
{
    static const char *const kinds[] = {"agent", "agent_state", "agent_runtime", "link"};
    int64_t total = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++) {
        int64_t n = 0;
        struct vg_query q = {.kind = kinds[i]};
        ASSERT_OK(vg_store_count(t->env->store, &q, &n, E));
        total += n;
    }
    return total;
}

/* Creating an agent with the store failing at each of its calls in turn: the agent, its state,
 * its runtime state and the state's link are all written, or none of them (one transaction).
 * proves: S3-055 */
TEST(creating_an_agent_writes_all_of_it_or_nothing)
{
    struct test_rt t;
    char id[37], name[48];
    long calls = 0;
    int64_t whole = 0;
    for (long nth = 0; nth == 0 || nth <= calls; nth++) {
        snprintf(name, sizeof name, "agent_create_fault_%ld", nth);
        test_rt_open(&t, name);
        struct vg_store *fault = NULL;
        ASSERT_OK(vg_store_fault_wrap(t.env->store, &fault, E));
        t.env->store = fault;
        vg_store_fault_arm(fault, nth, VIGIL_EIO);
        vigil_agent_spec spec = {.name = "whole"};
        vigil_code rc = vigil_agent_create(t.rt, &spec, id, NULL);
        if (!nth)
            ASSERT((calls = vg_store_fault_calls(fault)) > 3);
        vg_store_fault_arm(fault, 0, VIGIL_OK);
        int64_t n = identity_records(&t);
        if (!nth)
            whole = n;
        ASSERT(whole >= 4);
        if (rc == VIGIL_OK ? n != whole : n != 0)
            TEST_FAIL_("store call %ld of %ld failed: create %s, %lld of %lld records left", nth,
                       calls, vigil_code_name(rc), (long long)n, (long long)whole);
        test_rt_close(&t);
    }
}

TEST(create_show_and_list_pages)
{
    struct test_rt t;
    test_rt_open(&t, "agent_list");
    char ids[7][37];
    for (int i = 0; i < 7; i++) {
        create(&t, "agent", ids[i]);
        vg_test_clock_advance(&t.clock, i % 2); /* some share a millisecond */
    }
    char *json = NULL;
    ASSERT_OK(vigil_agent_show(t.rt, ids[0], &json, E));
    ASSERT_CONTAINS(json, "\"lifecycle\":\"created\"");
    ASSERT_CONTAINS(json, "\"run_status\":\"idle\"");
    ASSERT_CONTAINS(json, "\"revision\":1");
    vigil_free(json);

    /* Pages of 3 walk every agent once, oldest first. */
    char cursor[256] = "";
    int seen = 0;
    for (int page = 0; page < 5; page++) {
        json_t *v = NULL;
        ASSERT_OK(vg_agent_list(t.env, cursor[0] ? cursor : NULL, 3, &v, E));
        json_t *items = json_object_get(v, "items");
        for (size_t i = 0; i < json_array_size(items); i++)
            ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, i), "id")),
                         ids[seen++]);
        json_t *next = json_object_get(v, "next_cursor");
        if (json_is_null(next)) {
            json_decref(v);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", json_string_value(next));
        json_decref(v);
    }
    ASSERT_EQ(seen, 7);
    json_t *v = NULL;
    ASSERT_CODE(VIGIL_EINVAL, vg_agent_list(t.env, "garbage", 3, &v, NULL));
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_agent_show(t.rt, "nope", &json, NULL));
    vigil_agent_spec bad = {.name = ""};
    char id[37];
    ASSERT_CODE(VIGIL_EINVAL, vigil_agent_create(t.rt, &bad, id, NULL));
    bad.name = "x";
    bad.mode = "sleepy";
    ASSERT_CODE(VIGIL_EINVAL, vigil_agent_create(t.rt, &bad, id, NULL));
    test_rt_close(&t);
}

/* The ids of a listing's items, space separated, and its next cursor (into next, "" at the end). */
static void listed(struct test_rt *t, const char *lifecycle, const char *cursor, int limit,
                   char *ids, size_t n, char next[256])
{
    char *text = NULL;
    ASSERT_OK(vigil_agent_list_lifecycle(t->rt, lifecycle, cursor, limit, 1, &text, E));
    json_t *v = json_loads(text, 0, NULL), *a;
    vigil_free(text);
    ASSERT(v);
    size_t i, at = 0;
    ids[0] = '\0';
    json_array_foreach (json_object_get(v, "items"), i, a)
        at += (size_t)snprintf(ids + at, n - at, "%s%s", at ? " " : "",
                               json_string_value(json_object_get(a, "id")));
    const char *c = json_string_value(json_object_get(v, "next_cursor"));
    snprintf(next, 256, "%s", c ? c : "");
    json_decref(v);
}

/* Listing returns every agent there is, destroyed ones too, and one lifecycle of them when
 * asked, page by page. proves: S3-056 */
TEST(agents_list_whole_or_by_lifecycle)
{
    struct test_rt t;
    test_rt_open(&t, "agent_list_lifecycle");
    char id[5][37], ids[400], want[400], next[256];
    for (int i = 0; i < 5; i++)
        create(&t, "agent", id[i]);
    ASSERT_OK(vigil_agent_resume(t.rt, id[0], NULL, E));
    ASSERT_OK(vigil_agent_resume(t.rt, id[1], NULL, E));
    ASSERT_OK(vigil_agent_pause(t.rt, id[1], NULL, E));
    ASSERT_OK(vigil_agent_destroy(t.rt, id[2], NULL, E));
    ASSERT_OK(vigil_agent_resume(t.rt, id[4], NULL, E));
    listed(&t, NULL, NULL, 10, ids, sizeof ids, next);
    snprintf(want, sizeof want, "%s %s %s %s %s", id[0], id[1], id[2], id[3], id[4]);
    ASSERT_STREQ(ids, want);
    listed(&t, "active", NULL, 1, ids, sizeof ids, next); /* a page at a time */
    ASSERT_STREQ(ids, id[0]);
    ASSERT(next[0]);
    listed(&t, "active", next, 1, ids, sizeof ids, next);
    ASSERT_STREQ(ids, id[4]);
    ASSERT_STREQ(next, "");
    listed(&t, "dormant", NULL, 10, ids, sizeof ids, next);
    ASSERT_STREQ(ids, id[1]);
    listed(&t, "destroyed", NULL, 10, ids, sizeof ids, next);
    ASSERT_STREQ(ids, id[2]);
    listed(&t, "created", NULL, 10, ids, sizeof ids, next);
    ASSERT_STREQ(ids, id[3]);
    char *text = NULL;
    ASSERT_CODE(VIGIL_EINVAL,
                vigil_agent_list_lifecycle(t.rt, "sleeping", NULL, 10, 1, &text, NULL));
    test_rt_close(&t);
}

/* proves: S0-027 S0-028 S0-086 */
TEST(state_revision_rejects_stale_writes)
{
    struct test_rt t;
    test_rt_open(&t, "agent_state");
    char id[37];
    create(&t, "s", id);
    json_t *st = NULL;
    int64_t rev = 0, newrev = 0;
    ASSERT_OK(vg_state_get(t.env, id, &st, &rev, E));
    ASSERT_EQ(rev, 1);
    json_decref(st);
    json_t *ch =
        json_pack("{s:s, s:{s:i}, s:{s:s}}", "next_wake_at", "2026-01-02T07:00:00Z",
                  "processed_counter_by_host", "host-a", 5, "slots", "primary_goal", "ship it");
    ASSERT_OK(vg_state_update(t.env, id, ch, 1, &newrev, E));
    ASSERT_EQ(newrev, 2);
    ASSERT_CODE(VIGIL_ECONFLICT, vg_state_update(t.env, id, ch, 1, NULL, NULL));
    json_decref(ch);
    /* Watermarks never move back. */
    ch = json_pack("{s:{s:i, s:i}}", "processed_counter_by_host", "host-a", 3, "host-b", 1);
    ASSERT_OK(vg_state_update(t.env, id, ch, 2, NULL, E));
    json_decref(ch);
    ASSERT_OK(vg_state_get(t.env, id, &st, &rev, E));
    ASSERT_EQ(rev, 3);
    json_t *pc = json_object_get(st, "processed_counter_by_host");
    ASSERT_EQ(json_integer_value(json_object_get(pc, "host-a")), 5);
    ASSERT_EQ(json_integer_value(json_object_get(pc, "host-b")), 1);
    json_t *slot = json_object_get(json_object_get(st, "slots"), "primary_goal");
    ASSERT_STREQ(json_string_value(json_object_get(slot, "value")), "ship it");
    ASSERT(json_string_value(json_object_get(slot, "updated_at")));
    json_decref(st);
    ch = json_pack("{s:i}", "mood", 1);
    ASSERT_CODE(VIGIL_EINVAL, vg_state_update(t.env, id, ch, 3, NULL, NULL));
    json_decref(ch);
    ch = json_pack("{s:s}", "sleep_until", "tomorrow");
    ASSERT_CODE(VIGIL_EINVAL, vg_state_update(t.env, id, ch, 3, NULL, NULL));
    json_decref(ch);
    test_rt_close(&t);
}

/* A merge that read no snapshot (a wake's finish) applies at whatever revision is stored,
 * keeps the fields it does not name and moves the revision on like any write. */
TEST(state_merge_at_any_revision_moves_the_revision_on)
{
    struct test_rt t;
    test_rt_open(&t, "agent_state_any");
    char id[37];
    create(&t, "s", id);
    json_t *st = NULL;
    int64_t rev = 0, newrev = 0;
    json_t *ch = json_pack("{s:s}", "next_wake_at", "2026-01-02T07:00:00Z");
    ASSERT_OK(vg_state_update(t.env, id, ch, 1, NULL, E));
    json_decref(ch);
    ch = json_pack("{s:s, s:n}", "last_wake_at", "2026-01-02T08:00:00Z", "next_wake_at");
    ASSERT_OK(vg_state_update(t.env, id, ch, VG_STATE_ANY_REVISION, &newrev, E));
    ASSERT_EQ(newrev, 3);
    ASSERT_OK(vg_state_update(t.env, id, ch, VG_STATE_ANY_REVISION, &newrev, E));
    ASSERT_EQ(newrev, 4);
    json_decref(ch);
    ASSERT_OK(vg_state_get(t.env, id, &st, &rev, E));
    ASSERT_EQ(rev, 4);
    ASSERT_STREQ(json_string_value(json_object_get(st, "last_wake_at")), "2026-01-02T08:00:00Z");
    ASSERT(json_is_null(json_object_get(st, "next_wake_at")));
    json_decref(st);
    /* A stale revision is still refused. */
    ch = json_pack("{s:n}", "next_wake_at");
    ASSERT_CODE(VIGIL_ECONFLICT, vg_state_update(t.env, id, ch, 3, NULL, NULL));
    json_decref(ch);
    test_rt_close(&t);
}

/* proves: S0-003 S0-024 (message→previous message, message→payload) S0-026 */
TEST(messages_link_in_threads_and_spill_payloads)
{
    struct test_rt t;
    test_rt_open(&t, "agent_messages");
    char id[37], m1[VG_RECORD_ID_MAX], m2[VG_RECORD_ID_MAX], m3[VG_RECORD_ID_MAX];
    create(&t, "m", id);
    char thread[128], other[128];
    snprintf(thread, sizeof thread, "%s:session:default", id);
    snprintf(other, sizeof other, "%s:run:w1", id);
    struct vg_message_in in = {
        .agent_id = id, .thread_id = thread, .kind = VG_MSG_USER, .content = "hello"};
    ASSERT_OK(vg_message_append(t.env, &in, m1, E));
    in.thread_id = other;
    in.kind = VG_MSG_OBSERVATION;
    in.content = "elsewhere";
    ASSERT_OK(vg_message_append(t.env, &in, m2, E));
    char *big = vg_malloc(10000);
    memset(big, 'x', 9999);
    big[9999] = '\0';
    in.thread_id = thread;
    in.kind = VG_MSG_THOUGHT;
    in.content = big;
    ASSERT_OK(vg_message_append(t.env, &in, m3, E));

    json_t *latest = NULL;
    ASSERT_OK(vg_message_latest(t.env, id, thread, 10, &latest, E));
    ASSERT_EQ(json_array_size(latest), 2);
    json_t *a = json_array_get(latest, 0), *b = json_array_get(latest, 1);
    ASSERT_STREQ(json_string_value(json_object_get(a, "id")), m1);
    ASSERT_STREQ(json_string_value(json_object_get(b, "prev_id")), m1);
    ASSERT_EQ(strlen(json_string_value(json_object_get(b, "content"))), 9999);
    ASSERT_EQ(json_integer_value(json_object_get(b, "seq")), 3);
    json_decref(latest);

    /* The long content lives in a payload record linked from the message. */
    json_t *targets = NULL;
    ASSERT_OK(vg_link_targets(t.env, "message_payload", m3, &targets, E));
    ASSERT_EQ(json_array_size(targets), 1);
    json_decref(targets);

    /* message→previous message, within a thread only; answered from the message's prev_id,
     * so no link row is written for it, and it can be neither added nor removed. */
    ASSERT_OK(vg_link_targets(t.env, "message_prev", m3, &targets, E));
    ASSERT_EQ(json_array_size(targets), 1);
    ASSERT_STREQ(json_string_value(json_array_get(targets, 0)), m1);
    json_decref(targets);
    const char *firsts[] = {m1, m2, "no-such-message"};
    for (size_t i = 0; i < VG_ARRAY_LEN(firsts); i++) {
        ASSERT_OK(vg_link_targets(t.env, "message_prev", firsts[i], &targets, E));
        ASSERT_EQ(json_array_size(targets), 0);
        json_decref(targets);
    }
    char prev_key[VG_RECORD_ID_MAX + 16];
    snprintf(prev_key, sizeof prev_key, "message_prev:%s", m3);
    struct vg_query links = {.kind = "link", .k1 = prev_key};
    int64_t stored = -1;
    ASSERT_OK(vg_store_count(t.env->store, &links, &stored, E));
    ASSERT_EQ(stored, 0);
    ASSERT_CODE(VIGIL_EINVAL, vg_link_add(t.env, id, "message_prev", m3, m2, NULL, NULL));
    ASSERT_CODE(VIGIL_EINVAL, vg_link_remove(t.env, id, "message_prev", m3, m1, NULL));

    json_t *msg = NULL;
    ASSERT_OK(vg_message_get(t.env, m3, &msg, E));
    ASSERT_EQ(strlen(json_string_value(json_object_get(msg, "content"))), 9999);
    json_decref(msg);
    vg_free(big);

    /* An explicit id is written once. */
    in.id = "summary-span-1";
    in.content = "s";
    ASSERT_OK(vg_message_append(t.env, &in, NULL, E));
    ASSERT_CODE(VIGIL_EEXISTS, vg_message_append(t.env, &in, NULL, NULL));
    ASSERT_OK(vg_spine_verify(t.env, id, NULL, E));

    ASSERT_OK(vigil_agent_destroy(t.rt, id, "done", E));
    in.id = NULL;
    ASSERT_CODE(VIGIL_ESTATE, vg_message_append(t.env, &in, NULL, NULL));
    test_rt_close(&t);
}

/* The seven message kinds, each stored under its name (the kind is the row's second key, so
 * an agent's messages of one kind are one indexed read) and read back as written; no other
 * kind is accepted. proves: S0-084 */
TEST(messages_are_of_the_seven_kinds_only)
{
    static const char *const names[] = {"observation", "user",    "thought", "action",
                                        "toolResult",  "summary", "system"};
    ASSERT_EQ(VG_ARRAY_LEN(names), VG_MSG_KIND_COUNT);
    struct test_rt t;
    test_rt_open(&t, "agent_message_kinds");
    char id[37], thread[128], mid[VG_RECORD_ID_MAX];
    create(&t, "kinds", id);
    snprintf(thread, sizeof thread, "%s:session:kinds", id);
    for (size_t i = 0; i < VG_ARRAY_LEN(names); i++) {
        enum vg_message_kind k;
        ASSERT_EQ(vg_message_kind_parse(names[i], &k), 0);
        ASSERT_STREQ(vg_message_kind_name(k), names[i]);
        struct vg_message_in in = {
            .agent_id = id, .thread_id = thread, .kind = k, .content = names[i]};
        ASSERT_OK(vg_message_append(t.env, &in, mid, E));
        json_t *msg = NULL;
        ASSERT_OK(vg_message_get(t.env, mid, &msg, E));
        ASSERT_STREQ(json_string_value(json_object_get(msg, "kind")), names[i]);
        json_decref(msg);
        struct vg_query q = {.kind = "message", .owner = id, .k2 = names[i]};
        int64_t n = -1;
        ASSERT_OK(vg_store_count(t.env->store, &q, &n, E));
        ASSERT_EQ(n, 1);
    }
    static const char *const others[] = {"assistant", "tool", "tool_result", "Summary", "", NULL};
    for (size_t i = 0; i < VG_ARRAY_LEN(others); i++) {
        enum vg_message_kind k = VG_MSG_USER;
        ASSERT_EQ(vg_message_kind_parse(others[i], &k), -1);
    }
    struct vg_message_in bad = {.agent_id = id, .thread_id = thread, .kind = VG_MSG_KIND_COUNT};
    ASSERT_CODE(VIGIL_EINVAL, vg_message_append(t.env, &bad, NULL, NULL));
    json_t *all = NULL;
    ASSERT_OK(vg_message_latest(t.env, id, thread, 100, &all, E));
    ASSERT_EQ(json_array_size(all), VG_MSG_KIND_COUNT);
    json_decref(all);
    test_rt_close(&t);
}

/* The body of the stored link (type, from, to), parsed (owned). */
static json_t *link_body(struct test_rt *t, const char *type, const char *from, const char *to)
{
    char id[3 * VG_RECORD_ID_MAX];
    ASSERT(snprintf(id, sizeof id, "%s|%s|%s", type, from, to) < VG_RECORD_ID_MAX);
    struct vg_record *r = NULL;
    ASSERT_OK(vg_store_get_copy(t->env->store, "link", id, &r, E));
    json_t *v = json_loads(r->body, 0, NULL);
    vg_free(r);
    ASSERT(v != NULL);
    return v;
}

/* Every relation is a row of the one link kind, its relation in the row (type) and its context
 * (a thread, a message) in the link's metadata; no relation has a kind of its own, and the same
 * (type, from, to) added again stays one row. proves: S0-025 */
TEST(links_of_every_relation_are_one_kind_with_their_context)
{
    struct test_rt t;
    test_rt_open(&t, "agent_link_kinds");
    char id[37], thread[128], mid[VG_RECORD_ID_MAX];
    create(&t, "links", id);
    snprintf(thread, sizeof thread, "%s:session:links", id);
    struct vg_message_in in = {
        .agent_id = id, .thread_id = thread, .kind = VG_MSG_ACTION, .content = "act"};
    ASSERT_OK(vg_message_append(t.env, &in, mid, E));
    int64_t kinds_before = -1;
    struct vg_query every = {.kind = "link", .owner = id};
    ASSERT_OK(vg_store_count(t.env->store, &every, &kinds_before, E));
    static const char *const types[] = {"tool_effect", "agent_task", "report_source_span",
                                        "depends_on"};
    for (size_t i = 0; i < VG_ARRAY_LEN(types); i++) {
        json_t *meta = json_pack("{s:s, s:s, s:s}", "relation", types[i], "thread_id", thread,
                                 "message_id", mid);
        ASSERT_OK(vg_link_add(t.env, id, types[i], mid, "task-42", meta, E));
        ASSERT_OK(vg_link_add(t.env, id, types[i], mid, "task-42", meta, E)); /* once */
        json_decref(meta);
    }
    int64_t links = -1;
    ASSERT_OK(vg_store_count(t.env->store, &every, &links, E));
    ASSERT_EQ(links - kinds_before, (int64_t)VG_ARRAY_LEN(types));
    for (size_t i = 0; i < VG_ARRAY_LEN(types); i++) {
        json_t *b = link_body(&t, types[i], mid, "task-42");
        ASSERT_STREQ(json_string_value(json_object_get(b, "type")), types[i]);
        json_t *meta = json_object_get(b, "meta");
        ASSERT_STREQ(json_string_value(json_object_get(meta, "thread_id")), thread);
        ASSERT_STREQ(json_string_value(json_object_get(meta, "message_id")), mid);
        json_decref(b);
        struct vg_query own = {.kind = types[i]};
        int64_t n = -1;
        ASSERT_OK(vg_store_count(t.env->store, &own, &n, E));
        ASSERT_EQ(n, 0);
        json_t *targets = NULL;
        ASSERT_OK(vg_link_targets(t.env, types[i], mid, &targets, E));
        ASSERT_EQ(json_array_size(targets), 1);
        ASSERT_STREQ(json_string_value(json_array_get(targets, 0)), "task-42");
        json_decref(targets);
    }
    test_rt_close(&t);
}

/* A JSON array answer of the public API, as compact text. */
static char *refs_text(char *json)
{
    json_t *v = json_loads(json, 0, NULL);
    vigil_free(json);
    ASSERT(json_is_array(v));
    char *t = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    return t;
}

/* The source types of an agent's references, in order, joined by ",". */
static void ref_ids(struct test_rt *t, const char *agent, const char *type, char *out, size_t n)
{
    char *json = NULL;
    ASSERT_OK(vigil_source_refs(t->rt, agent, type, &json, E));
    json_t *v = json_loads(json, 0, NULL);
    vigil_free(json);
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *r = json_array_get(v, i);
        ASSERT_STREQ(json_string_value(json_object_get(r, "agent_id")), agent);
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%s:%s", i ? "," : "",
                 json_string_value(json_object_get(r, "source_type")),
                 json_string_value(json_object_get(r, "source_id")));
    }
    json_decref(v);
}

/* Source references: an agent records the host entities it relies on as (agent, source type,
 * source id), once however often added; its references are listed (all, or of one type), the
 * agents relying on one entity are found from the entity, a removal leaves a tombstone, and a
 * deleted agent's references go with it. proves: S0-116 */
TEST(source_references_name_the_host_entities_an_agent_relies_on)
{
    struct test_rt t;
    test_rt_open(&t, "agent_source_refs");
    char a[37], b[37], got[512], *json = NULL;
    create(&t, "refs-a", a);
    create(&t, "refs-b", b);
    ASSERT_OK(vigil_source_ref_add(t.rt, a, "task", "task-1", E));
    vg_test_clock_advance(&t.clock, 1);
    ASSERT_OK(vigil_source_ref_add(t.rt, a, "calendar-event", "ev 7", E));
    vg_test_clock_advance(&t.clock, 1);
    ASSERT_OK(vigil_source_ref_add(t.rt, a, "task", "task-2", E));
    ASSERT_OK(vigil_source_ref_add(t.rt, a, "task", "task-1", E)); /* once */
    vg_test_clock_advance(&t.clock, 1);
    ASSERT_OK(vigil_source_ref_add(t.rt, b, "task", "task-1", E));
    ref_ids(&t, a, NULL, got, sizeof got);
    ASSERT_STREQ(got, "task:task-1,calendar-event:ev 7,task:task-2");
    ref_ids(&t, a, "task", got, sizeof got);
    ASSERT_STREQ(got, "task:task-1,task:task-2");
    ASSERT_OK(vigil_source_ref_agents(t.rt, "task", "task-1", &json, E));
    char *text = refs_text(json), want[128];
    snprintf(want, sizeof want, "[\"%s\",\"%s\"]", a, b);
    ASSERT_STREQ(text, want);
    free(text);
    ASSERT_OK(vigil_source_ref_agents(t.rt, "task", "task-9", &json, E));
    text = refs_text(json);
    ASSERT_STREQ(text, "[]");
    free(text);

    /* What is no source reference is refused. */
    ASSERT_CODE(VIGIL_EINVAL, vigil_source_ref_add(t.rt, a, "Task", "task-1", NULL));
    ASSERT_CODE(VIGIL_EINVAL, vigil_source_ref_add(t.rt, a, "task", "", NULL));
    ASSERT_CODE(VIGIL_EINVAL, vigil_source_ref_add(t.rt, a, "task", "a\nb", NULL));
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_source_ref_add(t.rt, "01a20685-48a5-705c-bfd4-89c42b9f4382",
                                                      "task", "task-1", NULL));

    /* Removed: a tombstone says so, and removing it again does nothing. */
    ASSERT_OK(vigil_source_ref_remove(t.rt, a, "task", "task-1", E));
    ASSERT_OK(vigil_source_ref_remove(t.rt, a, "task", "task-1", E));
    ASSERT_OK(vigil_source_ref_agents(t.rt, "task", "task-1", &json, E));
    text = refs_text(json);
    snprintf(want, sizeof want, "[\"%s\"]", b);
    ASSERT_STREQ(text, want);
    free(text);
    struct vg_query tq = {.kind = "tombstone", .owner = a, .k1 = "source_ref"};
    int64_t tombs = -1;
    ASSERT_OK(vg_store_count(t.env->store, &tq, &tombs, E));
    ASSERT_EQ(tombs, 1);

    /* A destroyed agent takes none; deleted, its references go with it. */
    ASSERT_OK(vigil_agent_destroy(t.rt, a, "done", E));
    ASSERT_CODE(VIGIL_ESTATE, vigil_source_ref_add(t.rt, a, "task", "task-3", NULL));
    ASSERT_OK(vg_agent_delete(t.env, a, E));
    ASSERT_OK(vigil_source_ref_agents(t.rt, "task", "task-2", &json, E));
    text = refs_text(json);
    ASSERT_STREQ(text, "[]");
    free(text);
    struct vg_query all = {.kind = "source_ref"};
    int64_t left = -1;
    ASSERT_OK(vg_store_count(t.env->store, &all, &left, E));
    ASSERT_EQ(left, 1); /* b's */

    /* An agent moved to another store takes its references along. */
    char dir[4300];
    snprintf(dir, sizeof dir, "%s.moved", t.path);
    ASSERT_OK(vigil_journal_export(t.rt, b, dir, NULL, E));
    struct test_rt there;
    test_rt_open(&there, "agent_source_refs_moved");
    ASSERT_OK(vigil_journal_import(there.rt, b, dir, NULL, E));
    ref_ids(&there, b, NULL, got, sizeof got);
    ASSERT_STREQ(got, "task:task-1");
    test_rt_close(&there);
    test_rt_close(&t);
}

struct immutable_check {
    int seen;
};

/* An immutable record was written once: revision 1, and its row's time, the time of its last
 * write, is its creation time. Pointer links (kind "pointer" in their body) are the mutable
 * exception among links. */
static int written_once_cb(void *user, const struct vg_record *r)
{
    struct immutable_check *c = user;
    json_t *b = json_loads(r->body, 0, NULL);
    ASSERT(b != NULL);
    const char *pk = json_string_value(json_object_get(b, "kind"));
    if (!(strcmp(r->kind, "link") == 0 && pk && strcmp(pk, "pointer") == 0)) {
        c->seen++;
        if (r->rev != 1)
            TEST_FAIL_("%s %s was rewritten: revision %lld", r->kind, r->id, (long long)r->rev);
        const char *created = json_string_value(json_object_get(b, "created_at"));
        int64_t ms = 0;
        if (created) {
            ASSERT_EQ(vg_time_parse_ms(created, &ms), 0);
            if (ms != r->at)
                TEST_FAIL_("%s %s: updated at %lld, created at %lld", r->kind, r->id,
                           (long long)r->at, (long long)ms);
        }
    }
    json_decref(b);
    return 0;
}

/* Immutable records (messages and their payloads, reports, links) keep the time they were
 * created as the time they were last written, while the heads that point at them move: nothing
 * rewrites them. proves: S3-026 */
TEST(immutable_records_are_updated_when_created)
{
    struct test_rt t;
    test_rt_open(&t, "agent_immutable");
    char id[37], thread[128], mid[VG_RECORD_ID_MAX];
    create(&t, "immutable", id);
    snprintf(thread, sizeof thread, "%s:session:imm", id);
    char *big = vg_malloc(6000);
    memset(big, 'y', 5999);
    big[5999] = '\0';
    for (int i = 0; i < 4; i++) {
        struct vg_message_in in = {.agent_id = id,
                                   .thread_id = thread,
                                   .kind = i % 2 ? VG_MSG_THOUGHT : VG_MSG_USER,
                                   .content = i == 1 ? big : "short"};
        ASSERT_OK(vg_message_append(t.env, &in, mid, E));
        ASSERT_OK(
            vg_report_set(t.env, id, "current", i % 2 ? "# odd" : "# even", mid, mid, NULL, E));
        ASSERT_OK(vg_link_add(t.env, id, "tool_effect", mid, "task-1", NULL, E));
        ASSERT_OK(vg_link_add(t.env, id, "tool_effect", mid, "task-1", NULL, E));
        vg_test_clock_advance(&t.clock, 1000);
    }
    vg_free(big);
    static const char *const kinds[] = {"message", "message_payload", "report", "link"};
    struct immutable_check c = {0};
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++) {
        struct vg_query q = {.kind = kinds[i], .owner = id};
        ASSERT_OK(vg_store_scan(t.env->store, &q, written_once_cb, &c, E));
    }
    ASSERT(c.seen >= 4 + 1 + 4 + 4 + 4); /* with the reports' source spans */
    test_rt_close(&t);
}

/* The member's value of message id as compact text, and the message's row time (*at). */
static char *member_of(struct test_rt *t, const char *id, const char *member, int64_t *at,
                       char created_at[32])
{
    json_t *msg = NULL;
    ASSERT_OK(vg_message_get(t->env, id, &msg, E));
    json_t *v = json_object_get(msg, member);
    char *text = v ? json_dumps(v, JSON_COMPACT) : strdup("null");
    snprintf(created_at, 32, "%s", json_string_value(json_object_get(msg, "created_at")));
    json_decref(msg);
    struct vg_record *r = NULL;
    ASSERT_OK(vg_store_get_copy(t->env->store, "message", id, &r, E));
    *at = r->at;
    vg_free(r);
    return text;
}

/* A journal record kept in a message ([seq, at, form], a tool call's end with the prev_id its
 * form stands for last) leaves the message what it says already: the message's time is the
 * record's and the member has none; the last string goes when it is the message's prev_id
 * (docs/internals/JOURNAL.md, "The record's time and its call's id from the message"). */
TEST(a_kept_journal_record_leaves_its_time_and_prev_to_the_message)
{
    struct test_rt t;
    test_rt_open(&t, "agent_kept_member");
    char id[37], thread[128], action[VG_RECORD_ID_MAX], result[VG_RECORD_ID_MAX];
    char other[VG_RECORD_ID_MAX], end[400], created[32], want[32];
    create(&t, "km", id);
    snprintf(thread, sizeof thread, "%s:session:default", id);
    struct vg_message_in in = {
        .agent_id = id, .thread_id = thread, .kind = VG_MSG_USER, .content = "go"};
    ASSERT_OK(vg_message_append(t.env, &in, NULL, E));
    in.kind = VG_MSG_ACTION;
    in.journal_start = "[2,1795000000123,{\"a\":1}]";
    ASSERT_OK(vg_message_append(t.env, &in, action, E));
    int64_t at = 0;
    char *text = member_of(&t, action, "journal_start", &at, created);
    ASSERT_STREQ(text, "[2,{\"a\":1}]");
    ASSERT_EQ(at, 1795000000123);
    vg_time_format_ms(want, 1795000000123);
    ASSERT_STREQ(created, want);
    free(text);
    /* an end whose form stands for its action, the message's prev_id: neither is kept */
    in.kind = VG_MSG_TOOL_RESULT;
    in.journal_start = NULL;
    snprintf(end, sizeof end, "[3,1795000000130,{\"b\":2},\"%s\"]", action);
    in.journal_end = end;
    ASSERT_OK(vg_message_append(t.env, &in, result, E));
    text = member_of(&t, result, "journal_end", &at, created);
    ASSERT_STREQ(text, "[3,{\"b\":2}]");
    ASSERT_EQ(at, 1795000000130);
    free(text);
    /* one whose form stands for another message than its prev_id keeps that id */
    ASSERT_OK(vg_message_append(t.env, &in, other, E));
    text = member_of(&t, other, "journal_end", &at, created);
    snprintf(end, sizeof end, "[3,{\"b\":2},\"%s\"]", action);
    ASSERT_STREQ(text, end);
    free(text);
    /* a message without a kept record takes the clock's time */
    in.journal_end = NULL;
    in.kind = VG_MSG_THOUGHT;
    ASSERT_OK(vg_message_append(t.env, &in, other, E));
    text = member_of(&t, other, "journal_call", &at, created);
    ASSERT_STREQ(text, "null");
    ASSERT(at != 1795000000130);
    vg_time_format_ms(want, at);
    ASSERT_STREQ(created, want);
    free(text);
    test_rt_close(&t);
}

/* A pointer's counter lives in its body and its row's seq stays 0, so moving it rewrites no
 * index entry; a pointer stored before (the counter in the seq column, as older versions
 * wrote it) still reads right and moves on from there. */
TEST(pointer_counters_live_in_the_body)
{
    struct test_rt t;
    test_rt_open(&t, "agent_pointers");
    char id[37], thread[128];
    create(&t, "p", id);
    snprintf(thread, sizeof thread, "%s:session:default", id);
    struct vg_message_in in = {
        .agent_id = id, .thread_id = thread, .kind = VG_MSG_USER, .content = "one"};
    ASSERT_OK(vg_message_append(t.env, &in, NULL, E));
    ASSERT_OK(vg_message_append(t.env, &in, NULL, E));
    struct vg_pointer p;
    ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", id, &p, E));
    ASSERT_EQ(p.seq, 2);
    char pid[VG_RECORD_ID_MAX];
    snprintf(pid, sizeof pid, "agent_head_message:%s", id);
    struct vg_record *row = NULL;
    ASSERT_OK(vg_store_get_copy(t.env->store, "link", pid, &row, E));
    ASSERT_EQ(row->seq, 0);
    ASSERT_CONTAINS(row->body, "\"seq\":2");

    /* As an older version stored it: the counter in the column, a body without "seq". */
    struct vg_record old = *row;
    char body[512];
    snprintf(body, sizeof body, "{\"from\":\"%s\",\"to\":\"%s\",\"type\":\"agent_head_message\"}",
             id, p.to);
    old.body = body;
    old.seq = 7;
    ASSERT_OK(vg_store_begin(t.env->store, E));
    ASSERT_OK(vg_store_update(t.env->store, &old, row->rev, E));
    ASSERT_OK(vg_store_commit(t.env->store, E));
    vg_free(row);
    ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", id, &p, E));
    ASSERT_EQ(p.seq, 7);
    ASSERT_OK(vg_message_append(t.env, &in, NULL, E)); /* takes number 8 */
    json_t *latest = NULL;
    ASSERT_OK(vg_message_latest(t.env, id, thread, 1, &latest, E));
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(latest, 0), "seq")), 8);
    json_decref(latest);
    ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", id, &p, E));
    ASSERT_EQ(p.seq, 8);
    ASSERT_OK(vg_store_get_copy(t.env->store, "link", pid, &row, E));
    ASSERT_EQ(row->seq, 0);
    vg_free(row);
    test_rt_close(&t);
}

static int64_t seq_of(struct test_rt *t, const char *id, char prev[VG_RECORD_ID_MAX])
{
    json_t *msg = NULL;
    ASSERT_OK(vg_message_get(t->env, id, &msg, E));
    int64_t seq = json_integer_value(json_object_get(msg, "seq"));
    const char *p = json_string_value(json_object_get(msg, "prev_id"));
    snprintf(prev, VG_RECORD_ID_MAX, "%s", p ? p : "");
    json_decref(msg);
    return seq;
}

/* Appends in one transaction chain right: numbers and previous messages follow what stands
 * after a savepoint rolled back, and an agent destroyed inside the transaction takes no more. */
TEST(appends_in_one_transaction_chain_right)
{
    struct test_rt t;
    test_rt_open(&t, "agent_append_memo");
    char id[37], thread[128], a[VG_RECORD_ID_MAX], b[VG_RECORD_ID_MAX], c[VG_RECORD_ID_MAX],
        prev[VG_RECORD_ID_MAX];
    create(&t, "memo", id);
    snprintf(thread, sizeof thread, "%s:session:default", id);
    struct vg_message_in in = {
        .agent_id = id, .thread_id = thread, .kind = VG_MSG_USER, .content = "x"};
    struct vg_store *s = t.env->store;

    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_message_append(t.env, &in, a, E));
    ASSERT_OK(vg_store_begin(s, E)); /* a savepoint with one more, rolled back */
    ASSERT_OK(vg_message_append(t.env, &in, b, E));
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT_OK(vg_message_append(t.env, &in, c, E));
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_EQ(seq_of(&t, a, prev), 1);
    ASSERT_EQ(seq_of(&t, c, prev), 2);
    ASSERT_STREQ(prev, a); /* not the rolled-back b */
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_message_get(t.env, b, &(json_t *){NULL}, NULL));

    /* Three in a row, then one in the next transaction. */
    ASSERT_OK(vg_store_begin(s, E));
    for (int i = 0; i < 3; i++)
        ASSERT_OK(vg_message_append(t.env, &in, a, E));
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(vg_message_append(t.env, &in, b, E));
    ASSERT_EQ(seq_of(&t, b, prev), 6);
    ASSERT_STREQ(prev, a);
    ASSERT_OK(vg_spine_verify(t.env, id, NULL, E));

    /* Destroyed inside the transaction: the next append there is refused. */
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_message_append(t.env, &in, a, E));
    ASSERT_OK(vg_agent_transition(t.env, id, VIGIL_LIFECYCLE_DESTROYED, "test", E));
    ASSERT_CODE(VIGIL_ESTATE, vg_message_append(t.env, &in, b, NULL));
    ASSERT_OK(vg_store_rollback(s, E));
    test_rt_close(&t);
}

static int64_t pointer_rev(struct test_rt *t, const char *type, const char *key, char *to)
{
    char pid[VG_RECORD_ID_MAX];
    snprintf(pid, sizeof pid, "%s:%s", type, key);
    struct vg_record *row = NULL;
    ASSERT_OK(vg_store_get_copy(t->env->store, "link", pid, &row, E));
    int64_t rev = row->rev;
    const char *colon = strchr(row->k2, ':');
    snprintf(to, VG_RECORD_ID_MAX, "%s", colon ? colon + 1 : "");
    vg_free(row);
    return rev;
}

/* In a flat transaction (the loop's phases) the heads an append moves are kept back and written
 * once, at the commit: three appends move each head's row once. Reads inside it see the moved
 * heads, a move from a stale view fails on its revision as before, and a rolled-back
 * transaction leaves them as they were. */
TEST(heads_moved_in_a_flat_transaction_are_written_once)
{
    struct test_rt t;
    test_rt_open(&t, "agent_flat_heads");
    char id[37], thread[128], key[200], a[VG_RECORD_ID_MAX], b[VG_RECORD_ID_MAX],
        to[VG_RECORD_ID_MAX], prev[VG_RECORD_ID_MAX];
    create(&t, "flat", id);
    snprintf(thread, sizeof thread, "%s:session:default", id);
    snprintf(key, sizeof key, "%s:%s", id, thread);
    struct vg_message_in in = {
        .agent_id = id, .thread_id = thread, .kind = VG_MSG_USER, .content = "x"};
    struct vg_store *s = t.env->store;
    ASSERT_OK(vg_message_append(t.env, &in, a, E));
    int64_t thread_rev = pointer_rev(&t, "agent_head_message", key, to);
    int64_t agent_rev = pointer_rev(&t, "agent_head_message", id, to);

    ASSERT_OK(vg_store_begin_flat(s, E));
    for (int i = 0; i < 3; i++)
        ASSERT_OK(vg_message_append(t.env, &in, b, E));
    struct vg_pointer p;
    ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", key, &p, E));
    ASSERT_EQ(p.seq, 4);
    ASSERT_STREQ(p.to, b);
    ASSERT_EQ(pointer_rev(&t, "agent_head_message", key, to), thread_rev); /* not yet */
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_EQ(pointer_rev(&t, "agent_head_message", key, to), thread_rev + 1);
    ASSERT_STREQ(to, b);
    ASSERT_EQ(pointer_rev(&t, "agent_head_message", id, to), agent_rev + 1);
    ASSERT_EQ(seq_of(&t, b, prev), 4);
    ASSERT_OK(vg_spine_verify(t.env, id, NULL, E));

    /* A head moved by a write that could not be kept back (the caller saw the row as it was
     * before the transaction) is written at once, with what was kept back before it. */
    struct vg_pointer before;
    ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", key, &before, E));
    ASSERT_OK(vg_store_begin_flat(s, E));
    ASSERT_OK(vg_message_append(t.env, &in, a, E));
    ASSERT_CODE(VIGIL_ECONFLICT,
                vg_pointer_write(t.env, id, "agent_head_message", key, a, 99, &before, NULL));
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT_OK(vg_store_begin_flat(s, E));
    ASSERT_OK(vg_message_append(t.env, &in, a, E));
    ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", key, &p, E));
    ASSERT_OK(vg_message_append(t.env, &in, b, E));
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_EQ(seq_of(&t, b, prev), 6);
    ASSERT_STREQ(prev, a);
    ASSERT_EQ(pointer_rev(&t, "agent_head_message", key, to), thread_rev + 2);
    ASSERT_STREQ(to, b);

    /* Rolled back: the heads stay, and the next append follows b. */
    ASSERT_OK(vg_store_begin_flat(s, E));
    ASSERT_OK(vg_message_append(t.env, &in, a, E));
    ASSERT_OK(vg_message_append(t.env, &in, a, E));
    ASSERT_OK(vg_store_rollback(s, E));
    ASSERT_EQ(pointer_rev(&t, "agent_head_message", key, to), thread_rev + 2);
    ASSERT_STREQ(to, b);
    ASSERT_OK(vg_message_append(t.env, &in, a, E));
    ASSERT_EQ(seq_of(&t, a, prev), 7);
    ASSERT_STREQ(prev, b);
    ASSERT_OK(vg_spine_verify(t.env, id, NULL, E));
    test_rt_close(&t);
}

/* proves: S0-023 */
TEST(report_and_head_move_together)
{
    struct test_rt t;
    test_rt_open(&t, "agent_reports");
    char id[37], r1[37], r2[37];
    create(&t, "r", id);
    json_t *rep = NULL;
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_report_current(t.env, id, "current", &rep, NULL));
    ASSERT_OK(vg_report_set(t.env, id, "current", "# v1", NULL, NULL, r1, E));
    ASSERT_OK(vg_report_set(t.env, id, "current", "# v2", NULL, NULL, r2, E));
    ASSERT_OK(vg_report_set(t.env, id, "daily", "# day", NULL, NULL, NULL, E));
    ASSERT_OK(vg_report_current(t.env, id, "current", &rep, E));
    ASSERT_STREQ(json_string_value(json_object_get(rep, "markdown")), "# v2");
    ASSERT_EQ(json_integer_value(json_object_get(rep, "seq")), 2);
    json_decref(rep);
    ASSERT_CODE(VIGIL_EINVAL, vg_report_set(t.env, id, "yearly", "x", NULL, NULL, NULL, NULL));
    ASSERT_OK(vg_spine_verify(t.env, id, NULL, E));
    test_rt_close(&t);
}

/* Writing a report with the store failing at each of its calls in turn: the new report and
 * its scope's head are committed together or not at all, so the head always names a committed
 * report (the earlier one when the write failed). proves: S3-083 */
TEST(a_report_and_its_head_are_written_in_one_transaction)
{
    struct test_rt t;
    char id[37], name[48];
    long calls = 0;
    for (long nth = 0; nth == 0 || nth <= calls; nth++) {
        snprintf(name, sizeof name, "report_head_fault_%ld", nth);
        test_rt_open(&t, name);
        create(&t, "r", id);
        ASSERT_OK(vg_report_set(t.env, id, "current", "# v1", NULL, NULL, NULL, E));
        struct vg_store *fault = NULL;
        ASSERT_OK(vg_store_fault_wrap(t.env->store, &fault, E));
        t.env->store = fault;
        vg_store_fault_arm(fault, nth, VIGIL_EIO);
        vigil_code rc = vg_report_set(t.env, id, "current", "# v2", NULL, NULL, NULL, NULL);
        if (!nth)
            ASSERT((calls = vg_store_fault_calls(fault)) > 2);
        vg_store_fault_arm(fault, 0, VIGIL_OK);
        json_t *rep = NULL;
        ASSERT_OK(vg_report_current(t.env, id, "current", &rep, E));
        const char *md = json_string_value(json_object_get(rep, "markdown"));
        struct vg_query q = {.kind = "report", .owner = id};
        int64_t n = 0;
        ASSERT_OK(vg_store_count(t.env->store, &q, &n, E));
        if (rc == VIGIL_OK ? strcmp(md, "# v2") || n != 2 : strcmp(md, "# v1") || n != 1)
            TEST_FAIL_("store call %ld of %ld failed: write %s, head at \"%s\", %lld reports", nth,
                       calls, vigil_code_name(rc), md, (long long)n);
        json_decref(rep);
        test_rt_close(&t);
    }
}

/* The report of scope as vigil_report_get shows it (owned). */
static json_t *report_read(struct test_rt *t, const char *id, const char *scope, int history)
{
    char *text = NULL;
    ASSERT_OK(vigil_report_get(t->rt, id, scope, history, &text, E));
    json_t *v = json_loads(text, 0, NULL);
    vigil_free(text);
    ASSERT(v != NULL);
    return v;
}

static int report_stale(struct test_rt *t, const char *id, const char *scope)
{
    json_t *v = report_read(t, id, scope, 0);
    int stale = json_is_true(json_object_get(json_object_get(v, "report"), "stale"));
    json_decref(v);
    return stale;
}

/* A report says how sure its agent was and what it rests on; every write is a new report
 * that becomes the scope's latest while the earlier ones stay as its history; a reader is told
 * when it went stale, by the scope's default freshness or the agent's own, on the clock.
 * proves: S0-134 S0-135 S3-034 */
TEST(reports_carry_confidence_sources_history_and_freshness)
{
    struct test_rt t;
    char id[37], strict[37], r1[37];
    test_rt_open(&t, "agent_report_fresh");
    create(&t, "r", id);
    json_t *sources = json_pack("[s,s]", "task-42", "https://example.org/spec");
    struct vg_report_in in = {.scope = "daily",
                              .markdown = "# Monday",
                              .has_confidence = 1,
                              .confidence = 0.25,
                              .sources = sources};
    ASSERT_OK(vg_report_write(t.env, id, &in, r1, E));
    in.markdown = "# Tuesday";
    in.confidence = 0.75;
    ASSERT_OK(vg_report_write(t.env, id, &in, NULL, E));
    json_t *v = report_read(&t, id, "daily", 10), *r = json_object_get(v, "report");
    ASSERT_STREQ(json_string_value(json_object_get(r, "markdown")), "# Tuesday");
    ASSERT(json_real_value(json_object_get(r, "confidence")) == 0.75);
    ASSERT(json_equal(json_object_get(r, "sources"), sources));
    ASSERT(json_is_false(json_object_get(r, "stale")));
    json_t *older = json_object_get(v, "history");
    ASSERT_EQ(json_array_size(older), 1);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(older, 0), "id")), r1);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(older, 0), "markdown")),
                 "# Monday");
    json_decref(v);
    /* A daily report is fresh for a day and a 2 h grace by default, so the next day's run at
     * the same hour may take longer than this one's (trial J4); a current one never turns stale
     * by age. */
    ASSERT_OK(vg_report_set(t.env, id, "current", "# now", NULL, NULL, NULL, E));
    vg_test_clock_advance(&t.clock, 86400000LL + 30 * 60000LL);
    ASSERT(!report_stale(&t, id, "daily"));
    vg_test_clock_advance(&t.clock, 90 * 60000LL - 1000);
    ASSERT(!report_stale(&t, id, "daily"));
    vg_test_clock_advance(&t.clock, 1000);
    ASSERT(report_stale(&t, id, "daily"));
    vg_test_clock_advance(&t.clock, 365 * 86400000LL);
    ASSERT(!report_stale(&t, id, "current"));
    v = report_read(&t, id, "current", 0);
    ASSERT(json_is_null(json_object_get(json_object_get(v, "report"), "stale_at")));
    json_decref(v);

    /* An agent's own freshness: a current report stale after an hour, a daily one never. */
    vigil_agent_spec spec = {
        .name = "strict",
        .config_json = "{\"reports\":{\"fresh_for\":{\"current\":\"1h\",\"daily\":\"never\"}}}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, strict, E));
    ASSERT_OK(vg_report_set(t.env, strict, "current", "# c", NULL, NULL, NULL, E));
    ASSERT_OK(vg_report_set(t.env, strict, "daily", "# d", NULL, NULL, NULL, E));
    vg_test_clock_advance(&t.clock, 3600000LL);
    ASSERT(report_stale(&t, strict, "current"));
    vg_test_clock_advance(&t.clock, 30 * 86400000LL);
    ASSERT(!report_stale(&t, strict, "daily"));
    /* agent show carries the same view of the current report */
    char *shown = NULL;
    ASSERT_OK(vigil_agent_show(t.rt, strict, &shown, E));
    ASSERT_CONTAINS(shown, "\"stale\":true");
    vigil_free(shown);

    /* Out of bounds: refused, and nothing written. */
    in.confidence = 1.5;
    ASSERT_CODE(VIGIL_EINVAL, vg_report_write(t.env, id, &in, NULL, NULL));
    in.confidence = 0.5;
    json_array_append_new(sources, json_integer(3));
    ASSERT_CODE(VIGIL_EINVAL, vg_report_write(t.env, id, &in, NULL, NULL));
    v = report_read(&t, id, "daily", 10);
    ASSERT_EQ(json_array_size(json_object_get(v, "history")), 1);
    json_decref(v);
    char *text = NULL;
    ASSERT_CODE(VIGIL_EINVAL, vigil_report_get(t.rt, id, "yearly", 0, &text, NULL));
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_report_get(t.rt, id, "weekly", 0, &text, NULL));
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_report_get(t.rt, "nobody", NULL, 0, &text, NULL));
    json_decref(sources);
    test_rt_close(&t);
}

static int count_owned(struct vg_env *env, const char *owner)
{
    static const char *const kinds[] = {"agent",        "agent_state", "agent_runtime",
                                        "agent_change", "message",     "message_payload",
                                        "report",       "link",        "tombstone"};
    int64_t total = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++) {
        int64_t n = 0;
        struct vg_query q = {.kind = kinds[i], .owner = owner};
        ASSERT_OK(vg_store_count(env->store, &q, &n, E));
        total += n;
    }
    return (int)total;
}

/* proves: S3-058 */
TEST(hard_delete_only_of_destroyed_removes_everything)
{
    struct test_rt t;
    test_rt_open(&t, "agent_delete");
    char id[37], keep[37], thread[128];
    create(&t, "gone", id);
    create(&t, "kept", keep);
    snprintf(thread, sizeof thread, "%s:run:x", id);
    struct vg_message_in in = {
        .agent_id = id, .thread_id = thread, .kind = VG_MSG_USER, .content = "hi"};
    ASSERT_OK(vg_message_append(t.env, &in, NULL, E));
    ASSERT_OK(vg_report_set(t.env, id, "current", "r", NULL, NULL, NULL, E));
    ASSERT_OK(vg_link_add(t.env, id, "agent_task", id, "task-42", NULL, E));
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ESTATE, vigil_agent_delete(t.rt, id, &err));
    ASSERT_CONTAINS(err.message, "destroy it first");
    int before_keep = count_owned(t.env, keep);
    ASSERT_OK(vigil_agent_destroy(t.rt, id, NULL, E));
    ASSERT_OK(vigil_agent_delete(t.rt, id, E));
    ASSERT_EQ(count_owned(t.env, id), 0);
    ASSERT_EQ(count_owned(t.env, keep), before_keep);
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_agent_delete(t.rt, id, NULL));
    test_rt_close(&t);
}

struct heard {
    char tokens[64][80];
    int n, batches;
};

static void hook(void *user, const char *const *tokens, size_t n)
{
    struct heard *h = user;
    h->batches++;
    for (size_t i = 0; i < n && h->n < 64; i++)
        snprintf(h->tokens[h->n++], 80, "%s", tokens[i]);
}

static int heard_has(struct heard *h, const char *tok)
{
    for (int i = 0; i < h->n; i++)
        if (!strcmp(h->tokens[i], tok))
            return 1;
    return 0;
}

/* proves: S0-021 */
TEST(notifications_follow_commits_only)
{
    struct test_rt t;
    test_rt_open(&t, "agent_notify");
    struct heard h = {0};
    vigil_set_notify_hook(t.rt, hook, &h);
    char id[37], mid[VG_RECORD_ID_MAX], thread[128];
    create(&t, "n", id);
    ASSERT_EQ(h.batches, 1);
    ASSERT(heard_has(&h, VIGIL_TOKEN_AGENT_CHANGED));
    ASSERT(heard_has(&h, VIGIL_TOKEN_AGENT_STATE_CHANGED));
    ASSERT(heard_has(&h, id));
    snprintf(thread, sizeof thread, "%s:run:1", id);
    struct vg_message_in in = {.agent_id = id, .thread_id = thread, .kind = VG_MSG_USER};
    h.n = 0;
    ASSERT_OK(vg_message_append(t.env, &in, mid, E));
    ASSERT(heard_has(&h, VIGIL_TOKEN_AGENT_MESSAGE_APPENDED));
    ASSERT(heard_has(&h, mid));
    /* A refused transition raises nothing. */
    int batches = h.batches;
    ASSERT_CODE(VIGIL_ESTATE, vigil_agent_pause(t.rt, id, NULL, NULL));
    ASSERT_EQ(h.batches, batches);
    /* Writes inside a rolled-back transaction raise nothing either. */
    ASSERT_OK(vg_store_begin(t.env->store, E));
    ASSERT_OK(vigil_agent_resume(t.rt, id, NULL, E));
    ASSERT_OK(vg_message_append(t.env, &in, NULL, E));
    ASSERT_EQ(h.batches, batches);
    ASSERT_OK(vg_store_rollback(t.env->store, E));
    ASSERT_EQ(h.batches, batches);
    vigil_lifecycle lc;
    ASSERT_OK(vg_agent_lifecycle(t.env, id, &lc, E));
    ASSERT_EQ(lc, VIGIL_LIFECYCLE_CREATED);
    test_rt_close(&t);
}

/* proves: S0-029 */
TEST(runtime_state_is_local_and_unversioned)
{
    struct test_rt t;
    test_rt_open(&t, "agent_runtime");
    char id[37];
    create(&t, "rt", id);
    json_t *ch = json_pack("{s:s, s:i}", "run_status", "running", "failure_streak", 2);
    ASSERT_OK(vg_runtime_state_update(t.env, id, ch, E));
    json_decref(ch);
    json_t *rs = NULL;
    ASSERT_OK(vg_runtime_state_get(t.env, id, &rs, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(rs, "run_status")), "running");
    json_decref(rs);
    /* No change record: runtime state is not part of what replays or syncs. */
    struct vg_query q = {.kind = "agent_change", .owner = id, .k1 = "agent_runtime"};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(t.env->store, &q, &n, E));
    ASSERT_EQ(n, 0);
    ch = json_pack("{s:s}", "secret", "x");
    ASSERT_CODE(VIGIL_EINVAL, vg_runtime_state_update(t.env, id, ch, NULL));
    json_decref(ch);
    test_rt_close(&t);
}

/* The replay property: projections rebuilt from records equal what the store holds, after a
 * mixed workload and a restart; and a pointer moved without its record is caught. */
TEST(projections_rebuild_from_records)
{
    struct test_rt t;
    test_rt_open(&t, "agent_replay");
    char id[37], thread[128];
    create(&t, "replay", id);
    ASSERT_OK(vigil_agent_resume(t.rt, id, NULL, E));
    for (int i = 0; i < 50; i++) {
        snprintf(thread, sizeof thread, "%s:run:%d", id, i % 3);
        struct vg_message_in in = {.agent_id = id,
                                   .thread_id = thread,
                                   .kind = (enum vg_message_kind)(i % VG_MSG_KIND_COUNT),
                                   .content = "step"};
        ASSERT_OK(vg_message_append(t.env, &in, NULL, E));
        if (i % 10 == 0)
            ASSERT_OK(
                vg_report_set(t.env, id, i % 20 ? "daily" : "current", "r", NULL, NULL, NULL, E));
        if (i % 7 == 0) {
            json_t *st = NULL;
            int64_t rev;
            ASSERT_OK(vg_state_get(t.env, id, &st, &rev, E));
            json_decref(st);
            json_t *ch = json_pack("{s:i}", "wake_counter", i);
            ASSERT_OK(vg_state_update(t.env, id, ch, rev, NULL, E));
            json_decref(ch);
        }
        vg_test_clock_advance(&t.clock, 1000);
    }
    ASSERT_OK(vigil_agent_pause(t.rt, id, "night", E));
    test_rt_reopen(&t);
    struct vg_buf diff;
    vg_buf_init(&diff, 0);
    ASSERT_OK(vg_spine_verify(t.env, id, &diff, E));
    ASSERT_STREQ(diff.data, "");

    /* Tamper: move the current report head to the daily report without a record. */
    json_t *daily = NULL;
    ASSERT_OK(vg_report_current(t.env, id, "daily", &daily, E));
    char key[128];
    snprintf(key, sizeof key, "%s:current", id);
    ASSERT_OK(vg_pointer_set(t.env, id, "agent_report_head", key,
                             json_string_value(json_object_get(daily, "id")), 1, E));
    json_decref(daily);
    ASSERT_CODE(VIGIL_ECORRUPT, vg_spine_verify(t.env, id, &diff, NULL));
    ASSERT_CONTAINS(diff.data, "agent_report_head");
    vg_buf_release(&diff);
    test_rt_close(&t);
}

/* Under folded commits (vigil serve's workers) a fiber's transaction ends only when its round
 * does, while other fibers' flat transactions already use the runtime's one pointer cache: each
 * transaction's kept-back head moves must still be written, and the late end of an earlier one
 * must not drop a later one's. */
struct appender {
    struct test_rt *t;
    char id[37], thread[128], last[VG_RECORD_ID_MAX];
    vigil_code rc;
};

static void append_two(void *arg)
{
    struct appender *a = arg;
    struct vg_store *s = a->t->env->store;
    struct vg_message_in in = {
        .agent_id = a->id, .thread_id = a->thread, .kind = VG_MSG_USER, .content = "hello"};
    for (int round = 0; round < 3 && a->rc == VIGIL_OK; round++) {
        vigil_error err = {0};
        a->rc = vg_store_begin_flat(s, &err);
        if (a->rc == VIGIL_OK)
            a->rc = vg_message_append(a->t->env, &in, NULL, &err);
        if (a->rc == VIGIL_OK)
            a->rc = vg_message_append(a->t->env, &in, a->last, &err);
        a->rc = vg_store_end(s, a->rc, &err);
    }
}

static vigil_code round_end(void *user, vigil_error *err)
{
    return vg_store_round_end(user, err);
}

static vigil_code batch_join(void *user, vigil_error *err)
{
    return vg_fiber_batch_join(user, err);
}

static int no_tx(void *user)
{
    return !vg_store_in_tx(user);
}

TEST(head_moves_of_fibers_sharing_a_runtime_survive_folded_commits)
{
    struct test_rt t;
    test_rt_open(&t, "agent_fold_pointers");
    struct vg_store *s = t.env->store;
    struct vg_fiber_batch *b = NULL;
    struct vg_fiber_sched *sched = NULL;
    struct appender a[3];
    ASSERT_OK(vg_fiber_batch_new(&b, round_end, s, E));
    ASSERT_OK(vg_store_share_syncs(s, batch_join, b, E));
    ASSERT_OK(vg_store_fold_commits(s, 1, E));
    ASSERT_OK(vg_fiber_sched_new(&sched, E));
    vg_fiber_sched_set_guard(sched, no_tx, s);
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "f%d", i);
        a[i] = (struct appender){.t = &t, .rc = VIGIL_OK};
        char id[37];
        create(&t, name, id);
        memcpy(a[i].id, id, sizeof id);
        snprintf(a[i].thread, sizeof a[i].thread, "%s:session:default", id);
        ASSERT_OK(vg_fiber_spawn(sched, append_two, &a[i], E));
    }
    vg_fiber_sched_run(sched);
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(a[i].rc);
        struct vg_pointer p;
        ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", a[i].id, &p, E));
        ASSERT_EQ(p.seq, 6);
        ASSERT_STREQ(p.to, a[i].last);
        char key[200];
        snprintf(key, sizeof key, "%s:%s", a[i].id, a[i].thread); /* the thread's head */
        ASSERT_OK(vg_pointer_read(t.env, "agent_head_message", key, &p, E));
        ASSERT_EQ(p.seq, 6);
        ASSERT_STREQ(p.to, a[i].last);
    }
    vg_fiber_sched_free(sched);
    ASSERT_OK(vg_store_share_syncs(s, NULL, NULL, E));
    vg_fiber_batch_free(b);
    test_rt_close(&t);
}

/* Under folded commits each transaction's tokens go out when its round commits, and only its
 * own: a fiber's rolled-back transaction in the same round drops its tokens, not another's. */
struct notifier_job {
    struct test_rt *t;
    const char *token;
    int commit;
    struct heard *h;
    int heard_when_done; /* batches the listener had heard when the commit returned */
};

static void notify_in_tx(void *arg)
{
    struct notifier_job *j = arg;
    struct vg_store *s = j->t->env->store;
    const char *tokens[] = {j->token};
    struct vg_record r = {.kind = "note", .id = j->token, .owner = "a", .seq = 1, .body = "{}"};
    ASSERT_OK(vg_store_begin(s, E));
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    vg_env_notify(j->t->env, tokens, 1);
    if (j->commit)
        ASSERT_OK(vg_store_commit(s, E));
    else
        ASSERT_OK(vg_store_rollback(s, E));
    j->heard_when_done = j->h->batches;
}

TEST(notifications_follow_their_own_transaction_under_folded_commits)
{
    struct test_rt t;
    test_rt_open(&t, "agent_fold_notify");
    struct heard h = {0};
    vigil_set_notify_hook(t.rt, hook, &h);
    struct vg_store *s = t.env->store;
    struct vg_fiber_batch *b = NULL;
    struct vg_fiber_sched *sched = NULL;
    ASSERT_OK(vg_fiber_batch_new(&b, round_end, s, E));
    ASSERT_OK(vg_store_share_syncs(s, batch_join, b, E));
    ASSERT_OK(vg_store_fold_commits(s, 1, E));
    ASSERT_OK(vg_fiber_sched_new(&sched, E));
    vg_fiber_sched_set_guard(sched, no_tx, s);
    struct notifier_job j[3] = {
        {&t, "tok-kept-1", 1, &h, 0}, {&t, "tok-dropped", 0, &h, 0}, {&t, "tok-kept-2", 1, &h, 0}};
    for (int i = 0; i < 3; i++)
        ASSERT_OK(vg_fiber_spawn(sched, notify_in_tx, &j[i], E));
    vg_fiber_sched_run(sched);
    ASSERT(heard_has(&h, "tok-kept-1"));
    ASSERT(heard_has(&h, "tok-kept-2"));
    ASSERT(!heard_has(&h, "tok-dropped"));
    ASSERT(j[0].heard_when_done >= 1); /* its own tokens were out when its commit returned */
    ASSERT(j[2].heard_when_done >= 1);
    ASSERT_EQ(j[1].heard_when_done, 0); /* the rollback returned first, and heard of nothing */
    vg_fiber_sched_free(sched);
    ASSERT_OK(vg_store_share_syncs(s, NULL, NULL, E));
    vg_fiber_batch_free(b);
    test_rt_close(&t);
}

/* The agent's prompt as a step reads it (inside a read batch, as the loop does). */
static void prompt_now(struct test_rt *t, const char *id, char *buf, size_t n)
{
    json_t *agent = NULL;
    int batch = !vg_store_in_tx(t->env->store);
    if (batch)
        vg_store_read_batch(t->env->store, 1);
    ASSERT_OK(vg_agent_get_shared(t->env, id, &agent, E));
    snprintf(buf, n, "%s", json_string_value(json_object_get(agent, "prompt")));
    json_decref(agent);
    if (batch)
        vg_store_read_batch(t->env->store, 0);
}

static void set_prompt(struct vg_env *env, const char *id, const char *prompt)
{
    json_t *f = json_pack("{s:s}", "prompt", prompt);
    ASSERT_OK(vg_agent_update(env, id, f, E));
    json_decref(f);
}

/* A step reads its agent's record several times; the value read last is served again, but
 * never once an agent record may have changed: this connection's update, one rolled back,
 * another connection's, and another agent's record read in between. */
TEST(an_agent_read_again_sees_every_change_to_it)
{
    struct test_rt t;
    char a[37], b[37], got[64];
    test_rt_open(&t, "agent_kept");
    create(&t, "kept_a", a);
    create(&t, "kept_b", b);
    prompt_now(&t, a, got, sizeof got);
    ASSERT_STREQ(got, "watch the task");
    set_prompt(t.env, a, "v2");
    prompt_now(&t, a, got, sizeof got);
    ASSERT_STREQ(got, "v2");
    ASSERT_OK(vg_store_begin(t.env->store, E));
    set_prompt(t.env, a, "rolled back");
    prompt_now(&t, a, got, sizeof got);
    ASSERT_STREQ(got, "rolled back");
    ASSERT_OK(vg_store_rollback(t.env->store, E));
    prompt_now(&t, a, got, sizeof got);
    ASSERT_STREQ(got, "v2");
    set_prompt(t.env, b, "b's");
    prompt_now(&t, b, got, sizeof got);
    ASSERT_STREQ(got, "b's");
    prompt_now(&t, a, got, sizeof got);
    ASSERT_STREQ(got, "v2");
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    set_prompt(vg_runtime_env(other), a, "v3");
    vigil_runtime_close(other);
    prompt_now(&t, a, got, sizeof got);
    ASSERT_STREQ(got, "v3");
    test_rt_close(&t);
}

/* The store calls reading id's record for a step took. */
static long reading_calls(struct test_rt *t, struct vg_store *counting, const char *id)
{
    char got[64];
    vg_store_fault_arm(counting, 0, VIGIL_OK);
    prompt_now(t, id, got, sizeof got);
    return vg_store_fault_calls(counting);
}

/* Agents taking turns in one thread (vigil_chat_many, the daemon's loop thread) each find their
 * record as they left it: reading one after the others costs what reading it again right after
 * itself does (more agents than the env keeps other records of), and a change is still seen. */
TEST(agents_taking_turns_each_keep_their_record)
{
    struct test_rt t;
    char ids[2 * VG_ENV_KEPT_READS][37], got[64];
    test_rt_open(&t, "agent_kept_turns");
    for (size_t i = 0; i < VG_ARRAY_LEN(ids); i++) {
        char name[32];
        snprintf(name, sizeof name, "turn_%zu", i);
        create(&t, name, ids[i]);
    }
    struct vg_store *counting = NULL; /* closed with the runtime, and the store it wraps */
    ASSERT_OK(vg_store_fault_wrap(t.env->store, &counting, E));
    t.env->store = counting;
    prompt_now(&t, ids[0], got, sizeof got);
    long again = reading_calls(&t, counting, ids[0]);
    for (int turn = 0; turn < 2; turn++)
        for (size_t i = 0; i < VG_ARRAY_LEN(ids); i++)
            if (turn == 0 || getenv("VIGIL_TEST_RT_PG")) /* PostgreSQL keeps no change marks */
                prompt_now(&t, ids[i], got, sizeof got);
            else
                ASSERT_EQ(reading_calls(&t, counting, ids[i]), again);
    set_prompt(t.env, ids[1], "its turn");
    prompt_now(&t, ids[0], got, sizeof got);
    ASSERT_STREQ(got, "watch the task");
    prompt_now(&t, ids[1], got, sizeof got);
    ASSERT_STREQ(got, "its turn");
    test_rt_close(&t);
}

/* The tree a read hands out for id (a reference the caller gives back at once: the keep holds
 * its own), read as a step reads it. */
static const json_t *tree_now(struct test_rt *t, const char *id)
{
    json_t *agent = NULL;
    vg_store_read_batch(t->env->store, 1);
    ASSERT_OK(vg_agent_get_shared(t->env, id, &agent, E));
    vg_store_read_batch(t->env->store, 0);
    json_decref(agent);
    return agent;
}

/* A run holds its agent's tree from its start (the loop's agent) while its steps read the agent
 * again: once another agent was written (its first run's activation, under a vigil_chat_many
 * of new agents), the first agent's record is unchanged, and its read hands out the same tree
 * instead of a second parse of the same text that a hundred runs would hold beside their own. */
TEST(an_unchanged_agent_keeps_its_tree_when_another_is_written)
{
    struct test_rt t;
    char a[37], b[37];
    test_rt_open(&t, "agent_kept_tree");
    create(&t, "tree_a", a);
    create(&t, "tree_b", b);
    json_t *held = NULL; /* as the loop holds it */
    vg_store_read_batch(t.env->store, 1);
    ASSERT_OK(vg_agent_get_shared(t.env, a, &held, E));
    vg_store_read_batch(t.env->store, 0);
    set_prompt(t.env, b, "b's");
    ASSERT(tree_now(&t, a) == held);
    ASSERT(tree_now(&t, a) == held);
    set_prompt(t.env, a, "changed");
    const json_t *now = tree_now(&t, a);
    ASSERT(now != held);
    ASSERT_STREQ(json_string_value(json_object_get(now, "prompt")), "changed");
    ASSERT_STREQ(json_string_value(json_object_get(held, "prompt")), "watch the task");
    json_decref(held);
    test_rt_close(&t);
}

/* A live agent's name is refused to a second agent whatever its characters (the check reads a
 * body only when the name's text is in it, which a quote, a backslash or a non-ASCII letter
 * would defeat if they were looked for as written); a name that appears in another agent's
 * prompt is not taken by that agent; a destroyed agent's name is free again. A control
 * character (a tab, ESC, C1's CSI) is no name at all (trial H2). */
TEST(a_live_agents_name_is_taken_whatever_its_characters)
{
    struct test_rt t;
    test_rt_open(&t, "agent_names");
    static const char *const names[] = {"plain", "say \"hi\"", "back\\slash", "caf\xc3\xa9", "a/b"};
    static const char *const refused[] = {"tab\there", "esc\x1b[2K", "csi\xc2\x9bm", "del\x7f"};
    char id[37], again[37];
    for (size_t i = 0; i < VG_ARRAY_LEN(refused); i++) {
        vigil_agent_spec spec = {.name = refused[i]};
        vigil_error err = {0};
        ASSERT_CODE(VIGIL_EINVAL, vigil_agent_create(t.rt, &spec, id, &err));
        ASSERT_CONTAINS(err.message, "control character");
    }
    for (size_t i = 0; i < VG_ARRAY_LEN(names); i++) {
        vigil_agent_spec spec = {.name = names[i], .prompt = "watch"};
        ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
        vigil_error err = {0};
        ASSERT_CODE(VIGIL_EEXISTS, vigil_agent_create(t.rt, &spec, again, &err));
        ASSERT_CONTAINS(err.message, id);
    }
    vigil_agent_spec quoting = {.name = "quoting", .prompt = "mention ghost and plainly ghost"};
    ASSERT_OK(vigil_agent_create(t.rt, &quoting, id, E));
    vigil_agent_spec ghost = {.name = "ghost", .prompt = "boo"};
    ASSERT_OK(vigil_agent_create(t.rt, &ghost, id, E));
    ASSERT_OK(vg_agent_transition(t.env, id, VIGIL_LIFECYCLE_DESTROYED, "test", E));
    ASSERT_OK(vigil_agent_create(t.rt, &ghost, again, E));
    ASSERT_NE(strcmp(id, again), 0);
    test_rt_close(&t);
}

/* The agent scans a create of name made (through the counting store). */
static long create_scans(struct test_rt *t, struct vg_store *counting, const char *name,
                         vigil_code want, char id[37])
{
    vigil_agent_spec spec = {.name = name, .prompt = "watch"};
    vigil_error err = {0};
    vg_store_fault_watch(counting, "agent");
    ASSERT_CODE(want, vigil_agent_create(t->rt, &spec, id, &err));
    return vg_store_fault_scans(counting);
}

/* A process creating many agents (an app starting its agents, `vigil apply` of many manifests,
 * bench_peer's hundred) checks each new name against the live names it gathered instead of
 * reading every agent again: after its second create, creates scan no agent. A name another
 * connection took, one a destroy freed and one a rename took are still seen. */
TEST(creates_check_their_names_without_reading_every_agent)
{
    struct test_rt t;
    char id[37], n3[37], n4[37], name[32];
    test_rt_open(&t, "agent_names_kept");
    struct vg_store *counting = NULL; /* closed with the runtime, and the store it wraps */
    ASSERT_OK(vg_store_fault_wrap(t.env->store, &counting, E));
    t.env->store = counting;
    long kept = getenv("VIGIL_TEST_RT_PG") ? 1 : 0; /* PostgreSQL keeps no change marks */
    ASSERT_EQ(create_scans(&t, counting, "n0", VIGIL_OK, id), 1);
    ASSERT_EQ(create_scans(&t, counting, "n1", VIGIL_OK, id), 1);
    for (int i = 2; i < 8; i++) {
        snprintf(name, sizeof name, "n%d", i);
        ASSERT_EQ(create_scans(&t, counting, name, VIGIL_OK, i == 3 ? n3 : i == 4 ? n4 : id), kept);
    }
    ASSERT_EQ(create_scans(&t, counting, "n5", VIGIL_EEXISTS, id), kept);
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    vigil_agent_spec theirs = {.name = "theirs"};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    ASSERT_OK(vigil_agent_create(other, &theirs, id, E));
    vigil_runtime_close(other);
    ASSERT_EQ(create_scans(&t, counting, "theirs", VIGIL_EEXISTS, id), 1);
    ASSERT_OK(vg_agent_transition(t.env, n3, VIGIL_LIFECYCLE_DESTROYED, "test", E));
    create_scans(&t, counting, "n3", VIGIL_OK, id);
    json_t *renamed = json_pack("{s:s}", "name", "renamed");
    ASSERT_OK(vg_agent_update(t.env, n4, renamed, E));
    json_decref(renamed);
    create_scans(&t, counting, "renamed", VIGIL_EEXISTS, id);
    create_scans(&t, counting, "n4", VIGIL_OK, id);
    ASSERT_EQ(create_scans(&t, counting, "n8", VIGIL_OK, id), kept);
    test_rt_close(&t);
}

int main(void)
{
    RUN(lifecycle_transitions_follow_the_diagram);
    RUN(create_show_and_list_pages);
    RUN(agents_list_whole_or_by_lifecycle);
    RUN(creating_an_agent_writes_all_of_it_or_nothing);
    RUN(state_revision_rejects_stale_writes);
    RUN(state_merge_at_any_revision_moves_the_revision_on);
    RUN(messages_link_in_threads_and_spill_payloads);
    RUN(messages_are_of_the_seven_kinds_only);
    RUN(links_of_every_relation_are_one_kind_with_their_context);
    RUN(source_references_name_the_host_entities_an_agent_relies_on);
    RUN(immutable_records_are_updated_when_created);
    RUN(report_and_head_move_together);
    RUN(a_report_and_its_head_are_written_in_one_transaction);
    RUN(reports_carry_confidence_sources_history_and_freshness);
    RUN(hard_delete_only_of_destroyed_removes_everything);
    RUN(pointer_counters_live_in_the_body);
    RUN(appends_in_one_transaction_chain_right);
    RUN(heads_moved_in_a_flat_transaction_are_written_once);
    RUN(notifications_follow_commits_only);
    RUN(runtime_state_is_local_and_unversioned);
    RUN(projections_rebuild_from_records);
    RUN(head_moves_of_fibers_sharing_a_runtime_survive_folded_commits);
    RUN(notifications_follow_their_own_transaction_under_folded_commits);
    RUN(an_agent_read_again_sees_every_change_to_it);
    RUN(agents_taking_turns_each_keep_their_record);
    RUN(an_unchanged_agent_keeps_its_tree_when_another_is_written);
    RUN(a_live_agents_name_is_taken_whatever_its_characters);
    RUN(creates_check_their_names_without_reading_every_agent);
    RUN(a_kept_journal_record_leaves_its_time_and_prev_to_the_message);
    return 0;
}
