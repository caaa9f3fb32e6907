/*
 * test_wake_context.c: what an autonomous agent's model is sent when a wake runs it. Each wake
 * is a thread of its own: the model gets the agent's prompt, its current report and every
 * observation it recorded (the task-agent memory model, docs/memory.md) and the wake's delta,
 * never an earlier wake's raw turns, which stay in the store as audit. What a wake records (its
 * observations, its report) is what the next wake reads.
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "base/json.h"
#include "loop/watch_model.h"
#include "os/fs.h"
#include "runtime/runtime_int.h"
#include "wake/wake.h"

/* Wake one: a note, a report, a last word; wake two: a word. */
static const char cassette[] =
    "{\"vigil_cassette\":1,\"exchanges\":["
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"record_observations\","
    "\"arguments\":{\"notes\":[\"NOTE-ONE: the draft is half done\"]}}]}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"set_report\","
    "\"arguments\":{\"scope\":\"current\",\"markdown\":\"## REPORT-ONE\\nhalf done\"}}]}},"
    "{\"response\":{\"text\":\"TURN-ONE-WORDS\"}},"
    "{\"response\":{\"text\":\"nothing new\"}}]}";

static int has_text(json_t *v, const char *needle)
{
    char *text = vg_json_dump(v, 1);
    int found = text && strstr(text, needle);
    vg_free(text);
    return found;
}

static void wake_once(struct test_rt *t, const char *agent, const char *token)
{
    struct vg_wake w;
    char key[65];
    enum vg_enqueue_result res;
    const char *tokens[] = {token};
    ASSERT_OK(vg_wake_init(&w, t->env, NULL, E));
    struct vg_wake_req m = {
        .reason = VG_REASON_MANUAL, .agent_id = agent, .tokens = tokens, .n_tokens = 1};
    ASSERT_OK(vg_wake_enqueue(&w, &m, key, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    vg_wake_release(&w);
    int ran = 0;
    ASSERT_OK(vigil_wake_process(t->rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);
}

/* proves: S3-036 S3-037 S3-038 S3-076 */
TEST(a_wake_is_sent_the_report_every_observation_and_its_delta_not_earlier_turns)
{
    struct test_rt t;
    struct watch_model wm;
    char a[37], path[4200];
    snprintf(path, sizeof path, "%s/model.json", vg_test_tmpdir("wake_context_model"));
    ASSERT_OK(vg_fs_write_file(path, cassette, strlen(cassette), E));
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    unsetenv("VIGIL_CONFIG");
    test_rt_open(&t, "wake_context");
    vigil_agent_spec spec = {.name = "keeper",
                             .kind = "task_agent",
                             .mode = "autonomous",
                             .prompt = "PROMPT: you look after a task.",
                             .config_json = "{\"tools\":[\"set_report\",\"record_observations\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    ASSERT_OK(vg_agent_transition(t.env, a, VIGIL_LIFECYCLE_ACTIVE, "test", E));
    ASSERT_OK(vg_runtime_prepare(t.rt, E));
    watch_model_init(&wm, t.rt->model);
    wm.keep = 1;
    t.rt->model = &wm.base;

    wake_once(&t, a, "task-7");
    ASSERT_EQ(json_array_size(wm.requests), 3);
    json_t *first = json_array_get(wm.requests, 0);
    ASSERT(has_text(first, "PROMPT: you look after a task."));
    ASSERT(has_text(first, "You woke up"));
    ASSERT(!has_text(first, "REPORT-ONE")); /* no report yet */
    /* At the wake's end its observation and its report are written. */
    json_t *rep = NULL;
    ASSERT_OK(vg_report_current(t.env, a, "current", &rep, E));
    ASSERT_CONTAINS(json_string_value(json_object_get(rep, "markdown")), "REPORT-ONE");
    json_decref(rep);

    wake_once(&t, a, "task-8");
    ASSERT_EQ(json_array_size(wm.requests), 4);
    json_t *second = json_array_get(wm.requests, 3);
    /* The prompt, the current report, every observation, the delta that woke it ... */
    ASSERT(has_text(second, "PROMPT: you look after a task."));
    ASSERT(has_text(second, "REPORT-ONE"));
    ASSERT(has_text(second, "NOTE-ONE: the draft is half done"));
    ASSERT(has_text(second, "task-8"));
    /* ... and nothing of the first wake's raw turns: its delta, its calls, its words. */
    ASSERT(!has_text(second, "task-7"));
    ASSERT(!has_text(second, "TURN-ONE-WORDS"));
    ASSERT(!has_text(second, "\"c1\""));
    ASSERT(!has_text(second, "\"c2\""));
    ASSERT_EQ(json_array_size(watch_model_messages(&wm, 3)), 1); /* the delta alone */
    /* The first wake's turns are kept, as audit. */
    struct vg_query q = {.kind = "message", .owner = a, .k2 = "thought"};
    int64_t n = 0;
    ASSERT_OK(vg_store_count(t.env->store, &q, &n, E));
    ASSERT(n >= 1);
    t.rt->model = wm.inner;
    watch_model_release(&wm);
    test_rt_close(&t);
}

/* Two wakes, a note each, and a report in markdown. */
static const char notes_cassette[] =
    "{\"vigil_cassette\":1,\"exchanges\":["
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"record_observations\","
    "\"arguments\":{\"notes\":[\"NOTE-A: the client prefers mornings\"]}}]}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"set_report\","
    "\"arguments\":{\"scope\":\"current\",\"markdown\":\"## Status\\n- *on track*\"}}]}},"
    "{\"response\":{\"text\":\"done\"}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"c3\",\"name\":\"record_observations\","
    "\"arguments\":{\"notes\":[\"NOTE-B: the call moved to Friday\"]}}]}},"
    "{\"response\":{\"text\":\"done again\"}}]}";

struct note {
    char id[64], content[128];
    int64_t rev;
};

struct notes {
    struct note n[4];
    int count;
};

static int note_cb(void *user, const struct vg_record *r)
{
    struct notes *ns = user;
    if (ns->count == 4)
        return 1;
    struct note *n = &ns->n[ns->count++];
    json_t *b = json_loads(r->body, 0, NULL);
    snprintf(n->id, sizeof n->id, "%s", r->id);
    snprintf(n->content, sizeof n->content, "%s", json_string_value(json_object_get(b, "content")));
    n->rev = r->rev;
    json_decref(b);
    return 0;
}

/* The agent's observation messages whose content is a note (not a wake's delta), oldest first. */
static struct notes notes_of(struct test_rt *t, const char *agent)
{
    struct notes all = {0}, kept = {0};
    struct vg_query q = {.kind = "message", .owner = agent, .k2 = "observation"};
    ASSERT_OK(vg_store_scan(t->env->store, &q, note_cb, &all, E));
    for (int i = 0; i < all.count; i++)
        if (!strncmp(all.n[i].content, "NOTE-", 5))
            kept.n[kept.count++] = all.n[i];
    return kept;
}

/* Observations are a journal of the agent's private notes: each note is an observation message
 * of its own, appended and never rewritten (the first wake's note is the same record, at its
 * first revision, after the second wake added one), and both reach the next wake. The report
 * is the free-form markdown the agent wrote, exactly, with none of its notes in it.
 * proves: S3-035 S3-053 */
TEST(notes_accumulate_unchanged_across_wakes_and_stay_out_of_the_report)
{
    struct test_rt t;
    struct watch_model wm;
    char a[37], path[4200];
    snprintf(path, sizeof path, "%s/model.json", vg_test_tmpdir("wake_notes_model"));
    ASSERT_OK(vg_fs_write_file(path, notes_cassette, strlen(notes_cassette), E));
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    unsetenv("VIGIL_CONFIG");
    test_rt_open(&t, "wake_notes");
    vigil_agent_spec spec = {.name = "noter",
                             .kind = "task_agent",
                             .mode = "autonomous",
                             .prompt = "You keep notes.",
                             .config_json = "{\"tools\":[\"set_report\",\"record_observations\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    ASSERT_OK(vg_agent_transition(t.env, a, VIGIL_LIFECYCLE_ACTIVE, "test", E));
    ASSERT_OK(vg_runtime_prepare(t.rt, E));
    watch_model_init(&wm, t.rt->model);
    wm.keep = 1;
    t.rt->model = &wm.base;

    wake_once(&t, a, "task-1");
    struct notes one = notes_of(&t, a);
    ASSERT_EQ(one.count, 1);
    ASSERT_STREQ(one.n[0].content, "NOTE-A: the client prefers mornings");
    wake_once(&t, a, "task-2");
    struct notes two = notes_of(&t, a);
    ASSERT_EQ(two.count, 2);
    ASSERT_STREQ(two.n[0].id, one.n[0].id);
    ASSERT_STREQ(two.n[0].content, one.n[0].content);
    ASSERT_EQ(two.n[0].rev, 1);
    ASSERT_EQ(two.n[1].rev, 1);
    ASSERT_STREQ(two.n[1].content, "NOTE-B: the call moved to Friday");
    /* Both notes reach a later model call (the second wake's after its note). */
    json_t *last = json_array_get(wm.requests, json_array_size(wm.requests) - 1);
    ASSERT(has_text(last, "NOTE-A: the client prefers mornings"));
    ASSERT(has_text(last, "NOTE-B: the call moved to Friday"));

    json_t *rep = NULL;
    ASSERT_OK(vg_report_current(t.env, a, "current", &rep, E));
    ASSERT_STREQ(json_string_value(json_object_get(rep, "markdown")), "## Status\n- *on track*");
    json_decref(rep);
    char *shown = NULL;
    ASSERT_OK(vigil_report_get(t.rt, a, "current", 0, &shown, E));
    ASSERT(strstr(shown, "NOTE-") == NULL);
    vigil_free(shown);
    t.rt->model = wm.inner;
    watch_model_release(&wm);
    test_rt_close(&t);
}

/* Runtime state is local and holds nothing durable: when it is lost (here removed from the
 * store, as a crash or a copy without it would leave the agent), the agent still shows, its
 * next wake runs and makes it again, and its notes, report and state are all there.
 * proves: S3-020 */
TEST(losing_the_runtime_state_loses_nothing_durable)
{
    struct test_rt t;
    char a[37], path[4200];
    snprintf(path, sizeof path, "%s/model.json", vg_test_tmpdir("wake_lost_runtime_model"));
    ASSERT_OK(vg_fs_write_file(path, notes_cassette, strlen(notes_cassette), E));
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    unsetenv("VIGIL_CONFIG");
    test_rt_open(&t, "wake_lost_runtime");
    vigil_agent_spec spec = {.name = "noter",
                             .kind = "task_agent",
                             .mode = "autonomous",
                             .prompt = "You keep notes.",
                             .config_json = "{\"tools\":[\"set_report\",\"record_observations\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    ASSERT_OK(vg_agent_transition(t.env, a, VIGIL_LIFECYCLE_ACTIVE, "test", E));
    wake_once(&t, a, "task-1");
    json_t *state = NULL;
    int64_t state_rev = 0;
    ASSERT_OK(vg_state_get(t.env, a, &state, &state_rev, E));
    json_decref(state);

    ASSERT_OK(vg_store_remove(t.env->store, "agent_runtime", a, E));
    char *shown = NULL;
    ASSERT_OK(vigil_agent_show(t.rt, a, &shown, E));
    ASSERT_CONTAINS(shown, "\"run_status\":\"idle\"");
    vigil_free(shown);
    wake_once(&t, a, "task-2");
    json_t *rt = NULL;
    ASSERT_OK(vg_runtime_state_get(t.env, a, &rt, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(rt, "run_status")), "idle");
    json_decref(rt);
    ASSERT_EQ(notes_of(&t, a).count, 2); /* the first wake's note and the second's */
    json_t *rep = NULL;
    ASSERT_OK(vg_report_current(t.env, a, "current", &rep, E));
    ASSERT_STREQ(json_string_value(json_object_get(rep, "markdown")), "## Status\n- *on track*");
    json_decref(rep);
    int64_t rev_after = 0;
    ASSERT_OK(vg_state_get(t.env, a, &state, &rev_after, E));
    ASSERT(rev_after >= state_rev);
    json_decref(state);
    test_rt_close(&t);
}

/* One wake: a report, then a word. */
static const char order_cassette[] =
    "{\"vigil_cassette\":1,\"exchanges\":["
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"set_report\","
    "\"arguments\":{\"scope\":\"current\",\"markdown\":\"ORDER-REPORT\"}}]}},"
    "{\"response\":{\"text\":\"ORDER-DONE\"}}]}";

struct order_probe {
    struct test_rt *t;
    struct vg_store *other; /* a second connection: sees only what is committed */
    const char *agent;
    char key[65];
    int model_calls;
    int run_started_at_call, lease_held_at_call;
    char named[64][VG_RECORD_ID_MAX]; /* the tokens notified, in order */
    int committed[64];                /* 1: a report another connection could read then */
    int n_named;
};

/* A body field of a committed record (read through a connection of its own), or "" when
 * either is missing. */
static void field_of(struct vg_store *s, const char *kind, const char *id, const char *field,
                     char *out, size_t n)
{
    struct vg_record *r = NULL;
    vigil_error miss = {0};
    out[0] = '\0';
    if (vg_store_get_copy(s, kind, id, &r, &miss) != VIGIL_OK)
        return;
    json_t *b = json_loads(r->body, 0, NULL);
    const char *v = json_string_value(json_object_get(b, field));
    snprintf(out, n, "%s", v ? v : "");
    json_decref(b);
    vg_free(r);
}

/* At each model call: is the run logged as started, and does this process hold the agent? */
static void order_at_model_call(void *user, const struct vg_model_request *req)
{
    struct order_probe *p = user;
    char status[32], holder[128];
    (void)req;
    p->model_calls++;
    field_of(p->other, "wake_run", p->key, "status", status, sizeof status);
    field_of(p->other, "agent_lease", p->agent, "holder", holder, sizeof holder);
    p->run_started_at_call += !strcmp(status, "started");
    p->lease_held_at_call += holder[0] != '\0';
}

/* At each notification: the ids it names, and whether each was a committed report then. */
static void order_at_note(void *user, const char *const *tokens, size_t n)
{
    struct order_probe *p = user;
    for (size_t i = 0; i < n && p->n_named < 64; i++) {
        char markdown[64];
        field_of(p->other, "report", tokens[i], "markdown", markdown, sizeof markdown);
        snprintf(p->named[p->n_named], sizeof p->named[0], "%s", tokens[i]);
        p->committed[p->n_named++] = markdown[0] != '\0';
    }
}

/* A wake goes through seed 003's phases in order: its run key is checked first (a key that
 * completed never runs again), the agent is held (its lease) and the run logged started before
 * anything is loaded or sent; the model is sent the agent's prompt and what woke it; what
 * the run made (its report, its messages) is committed, the agent's state moved on (last wake,
 * the last message seen) and the run logged completed, then the agent let go. Notifications
 * follow the commit of what they announce (DESIGN 3.3: each transaction's tokens after its
 * commit, tagged with the writing agent so it does not wake itself), so a notification never
 * names a record a reader cannot yet see. proves: S3-031 */
TEST(a_wake_dedupes_locks_loads_runs_persists_releases_and_notifies_in_order)
{
    struct test_rt t;
    struct watch_model wm;
    struct order_probe p = {.t = &t};
    char a[37], path[4200];
    snprintf(path, sizeof path, "%s/model.json", vg_test_tmpdir("wake_order_model"));
    ASSERT_OK(vg_fs_write_file(path, order_cassette, strlen(order_cassette), E));
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    unsetenv("VIGIL_CONFIG");
    test_rt_open(&t, "wake_order");
    vigil_agent_spec spec = {.name = "orderly",
                             .kind = "task_agent",
                             .mode = "autonomous",
                             .prompt = "PROMPT-ORDER",
                             .config_json = "{\"tools\":[\"set_report\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, a, E));
    ASSERT_OK(vg_agent_transition(t.env, a, VIGIL_LIFECYCLE_ACTIVE, "test", E));
    ASSERT_OK(vg_runtime_prepare(t.rt, E));
    watch_model_init(&wm, t.rt->model);
    wm.keep = 1;
    wm.check = order_at_model_call;
    wm.user = &p;
    t.rt->model = &wm.base;
    p.agent = a;
    struct vg_store_options reader = {0};
    ASSERT_OK(vg_store_open(t.path, &reader, &p.other, E));
    vigil_set_notify_hook(t.rt, order_at_note, &p);

    struct vg_wake w;
    enum vg_enqueue_result res;
    json_t *said = json_string("task-order-1 moved");
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_USER,
                            .agent_id = a,
                            .session_id = "order",
                            .turn_id = "turn-1",
                            .seed_input = said};
    ASSERT_OK(vg_wake_enqueue(&w, &m, p.key, &res, E));
    ASSERT_EQ(res, VG_ENQ_NEW);
    int ran = 0;
    ASSERT_OK(vigil_wake_process(t.rt, 0, &ran, E));
    ASSERT_EQ(ran, 1);

    /* Locked and logged before the model heard anything; loaded and assembled for it. */
    ASSERT_EQ(p.model_calls, 2);
    ASSERT_EQ(p.run_started_at_call, 2);
    ASSERT_EQ(p.lease_held_at_call, 2);
    ASSERT(has_text(json_array_get(wm.requests, 0), "PROMPT-ORDER"));
    ASSERT(has_text(json_array_get(wm.requests, 0), "task-order-1"));
    /* Persisted: the report, the answer, the state; then completed and let go. */
    json_t *rep = NULL;
    ASSERT_OK(vg_report_current(t.env, a, "current", &rep, E));
    ASSERT_STREQ(json_string_value(json_object_get(rep, "markdown")), "ORDER-REPORT");
    char report_id[VG_RECORD_ID_MAX];
    snprintf(report_id, sizeof report_id, "%s", json_string_value(json_object_get(rep, "id")));
    json_decref(rep);
    char head[VG_RECORD_ID_MAX], status[32], holder[128];
    ASSERT_OK(vg_link_pointer_get(t.env, "agent_head_message", a, head, sizeof head, E));
    json_t *last = NULL, *st = NULL;
    ASSERT_OK(vg_message_get(t.env, head, &last, E));
    ASSERT_STREQ(json_string_value(json_object_get(last, "content")), "ORDER-DONE");
    json_decref(last);
    ASSERT_OK(vg_state_get(t.env, a, &st, NULL, E));
    ASSERT_STREQ(json_string_value(json_object_get(st, "recent_head_message_id")), head);
    ASSERT(json_is_string(json_object_get(st, "last_wake_at")));
    json_decref(st);
    field_of(p.other, "wake_run", p.key, "status", status, sizeof status);
    ASSERT_STREQ(status, "completed");
    field_of(p.other, "agent_lease", a, "holder", holder, sizeof holder);
    ASSERT_STREQ(holder, "");
    /* The report was notified, and only once another connection could read it. */
    int notified = 0;
    for (int i = 0; i < p.n_named; i++)
        if (!strcmp(p.named[i], report_id)) {
            notified++;
            ASSERT_EQ(p.committed[i], 1);
        }
    ASSERT(notified >= 1);

    /* Deduped: the completed key (the same turn given again makes it again) is not run. */
    char again[65];
    ASSERT_OK(vg_wake_enqueue(&w, &m, again, &res, E));
    ASSERT_STREQ(again, p.key);
    ASSERT_EQ(res, VG_ENQ_DUPLICATE);
    ASSERT_OK(vigil_wake_process(t.rt, 0, &ran, E));
    ASSERT_EQ(ran, 0);
    ASSERT_EQ(p.model_calls, 2);
    json_decref(said);
    vg_store_close(p.other);
    vg_wake_release(&w);
    vigil_set_notify_hook(t.rt, NULL, NULL);
    t.rt->model = wm.inner;
    watch_model_release(&wm);
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_wake_is_sent_the_report_every_observation_and_its_delta_not_earlier_turns);
    RUN(notes_accumulate_unchanged_across_wakes_and_stay_out_of_the_report);
    RUN(losing_the_runtime_state_loses_nothing_durable);
    RUN(a_wake_dedupes_locks_loads_runs_persists_releases_and_notifies_in_order);
    return 0;
}
