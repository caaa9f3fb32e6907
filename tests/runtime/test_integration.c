/*
 * test_integration.c: the seeds' integration paths end to end through the public API, on one
 * store, with the scripted model answering and a watcher on it to see what each call was sent:
 *
 * - a personal agent (seed 004, Phase 8): a person's message, the agent's core memory in the
 *   model's context, a memory_write, an execute_code program whose result goes back to the
 *   model, the answer; after a restart memory_read finds what was written; a change to the
 *   familiar block waits for the person, and once approved it is in the next turn's context;
 * - an interactive session (seed 000, Phase 5): a person's turns in one session, each a
 *   user-initiated run on the session's thread whose tool calls are action/toolResult pairs
 *   between the person's words and the agent's answers;
 * - create -> wake -> run -> append -> summarize (seed 000, "Integration"): wakes queued and run
 *   as the daemon runs them, their messages appended to the thread, and once the thread passes
 *   its budget its oldest span summarized into a summary message the next run's model reads.
 */
#include "helpers/rt.h"

#include <stdio.h>

#include "agent/agent.h"
#include "base/json.h"
#include "loop/watch_model.h"
#include "memory/compact.h"
#include "os/fs.h"
#include "runtime/runtime_int.h"
#include "store/store.h"

static char sandbox_root[4096];

/* The store's config: the code sandbox's folders under the test's own. */
static void use_config(const char *name)
{
    char cfg[4300], text[4500], dir[200];
    snprintf(dir, sizeof dir, "%s_config", name); /* apart from the store's folder */
    snprintf(sandbox_root, sizeof sandbox_root, "%s", vg_test_tmpdir(dir));
    snprintf(cfg, sizeof cfg, "%s/config.json", sandbox_root);
    snprintf(text, sizeof text, "{\"sandbox\":{\"root\":\"%s\"}}", sandbox_root);
    ASSERT_OK(vg_fs_write_file(cfg, text, strlen(text), E));
    setenv("VIGIL_CONFIG", cfg, 1);
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
}

/* The scripted model answers with `exchanges` (a JSON array), behind a watcher. */
static void script(struct test_rt *t, struct watch_model *w, const char *name,
                   const char *exchanges)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s.json", vg_test_tmpdir(name), name);
    json_t *doc =
        json_pack("{s:i, s:o}", "vigil_cassette", 1, "exchanges", json_loads(exchanges, 0, NULL));
    ASSERT(doc != NULL && json_array_size(json_object_get(doc, "exchanges")) > 0);
    char *text = vg_json_dump(doc, 1);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
    vg_free(text);
    json_decref(doc);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    test_rt_reopen(t); /* a process of its own: its model starts at the cassette's first answer */
    ASSERT_OK(vg_runtime_prepare(t->rt, E));
    watch_model_init(w, t->rt->model);
    w->keep = 1;
    t->rt->model = &w->base;
}

static void unscript(struct test_rt *t, struct watch_model *w)
{
    t->rt->model = w->inner;
    watch_model_release(w);
}

/* Request i as text (its system prompt, messages and tools). */
static char *request_text(struct watch_model *w, size_t i)
{
    ASSERT(i < json_array_size(w->requests));
    return vg_json_dump(json_array_get(w->requests, i), 1);
}

static int request_has(struct watch_model *w, size_t i, const char *needle)
{
    char *text = request_text(w, i);
    int found = strstr(text, needle) != NULL;
    vg_free(text);
    return found;
}

/* The text of the "tool" message of request i that answers call_id. */
static const char *tool_answer(struct watch_model *w, size_t i, const char *call_id)
{
    json_t *msgs = watch_model_messages(w, i), *m;
    size_t k;
    json_array_foreach (msgs, k, m)
        if (!strcmp(json_string_value(json_object_get(m, "role")), "tool") &&
            !strcmp(json_string_value(json_object_get(m, "tool_call_id")), call_id))
            return json_string_value(json_object_get(m, "text"));
    TEST_FAIL_("request %zu has no answer to %s", i, call_id);
    return NULL;
}

static json_t *chat(struct test_rt *t, const char *agent, const char *session, const char *text)
{
    char *out = NULL;
    ASSERT_OK(vigil_chat(t->rt, agent, session, text, NULL, &out, E));
    json_t *v = json_loads(out, 0, NULL);
    vigil_free(out);
    ASSERT(v != NULL);
    ASSERT_STREQ(json_string_value(json_object_get(v, "end")), "completed");
    return v;
}

static const char *reply_of(json_t *outcome)
{
    return json_string_value(json_object_get(outcome, "reply"));
}

/* ---- a personal agent ---------------------------------------------------------------------- */

#define PAL_CONFIG                                                                                 \
    "{\"tools\":[\"memory_*\",\"execute_code\"],\"capabilities\":[\"code_execution\"]}"

static const char TURN_ONE[] =
    "[{\"response\":{\"tool_calls\":[{\"id\":\"w1\",\"name\":\"memory_write\",\"arguments\":"
    "{\"label\":\"release\",\"tier\":\"archival\",\"content\":\"The 2.0 release ships on "
    "Friday the 4th.\"}}]}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"x1\",\"name\":\"execute_code\",\"arguments\":"
    "{\"code\":\"local hits = vigil.call('memory_read', {query = 'release ships'})\\n"
    "return {days = 3 * 2 + 1, found = #hits.results}\"}}]}},"
    "{\"response\":{\"text\":\"Noted: Friday the 4th, seven days from now.\"}}]";

/* The run's JSON answer to call (vigil_run_*), parsed. */
static json_t *run_json(vigil_code (*call)(vigil_runtime *, const char *, char **, vigil_error *),
                        struct test_rt *t, const char *id)
{
    char *out = NULL;
    ASSERT_OK(call(t->rt, id, &out, E));
    json_t *v = json_loads(out, 0, NULL);
    vigil_free(out);
    ASSERT(v != NULL);
    return v;
}

/* Whether the agent's journal export (its interaction records) holds text. */
static int exported_has(struct test_rt *t, const char *agent, const char *text)
{
    char dir[4200], path[4600], *body = NULL;
    int64_t n = 0;
    size_t len = 0;
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("integration-export"));
    ASSERT_OK(vigil_journal_export(t->rt, agent, dir, &n, E));
    snprintf(path, sizeof path, "%s/agent-journals/%s.interaction.jsonl", dir, agent);
    ASSERT_OK(vg_fs_read_file(path, 1u << 26, &body, &len, E));
    int found = strstr(body, text) != NULL;
    vg_free(body);
    return found;
}

/* The program's memory_read through the bridge is one of the run's tool calls, after the
 * execute_code that made it and marked with the bridge's key "<run key>/code/<op>/0": in the
 * run's tool list, its counts, its replay and its journal export (trial L4). */
static void program_calls_are_the_runs(struct test_rt *t, const char *run_id)
{
    char *out = NULL;
    ASSERT(run_id != NULL);
    ASSERT_OK(vigil_run_tools(t->rt, run_id, NULL, 0, &out, E));
    json_t *page = json_loads(out, 0, NULL), *items = json_object_get(page, "items");
    vigil_free(out);
    ASSERT_EQ(json_array_size(items), 3);
    static const char *const names[] = {"memory_write", "execute_code", "memory_read"};
    for (size_t i = 0; i < 3; i++)
        ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, i), "name")),
                     names[i]);
    json_t *code = json_array_get(items, 1), *read = json_array_get(items, 2);
    ASSERT(json_object_get(code, "via") == NULL); /* the model's own calls carry none */
    const char *via = json_string_value(json_object_get(read, "via"));
    const char *op = json_string_value(json_object_get(code, "operation_id"));
    char want[64];
    ASSERT(via != NULL && op != NULL);
    snprintf(want, sizeof want, "/code/%.16s/0", op);
    ASSERT(strlen(via) > strlen(want) && !strcmp(via + strlen(via) - strlen(want), want));
    ASSERT_STREQ(json_string_value(json_object_get(read, "status")), "succeeded");
    json_t *one =
        run_json(vigil_run_tool, t, json_string_value(json_object_get(read, "tool_call_id")));
    ASSERT_STREQ(json_string_value(json_object_get(one, "via")), via);
    char *input = json_dumps(json_object_get(one, "input"), JSON_COMPACT);
    ASSERT_CONTAINS(input, "release ships");
    free(input);
    json_decref(one);
    json_t *shown = run_json(vigil_run_show, t, run_id);
    ASSERT_EQ(json_integer_value(json_object_get(shown, "tool_calls")), 3);
    json_t *replayed = run_json(vigil_run_replay, t, run_id);
    ASSERT(json_is_true(json_object_get(replayed, "stored_projection_matches")));
    json_decref(replayed);
    ASSERT(exported_has(t, json_string_value(json_object_get(shown, "agent_id")), via));
    json_decref(shown);
    json_decref(page);
}

/* Turn one: the persona in context, memory_write, then execute_code (which reads memory back
 * through the bridge) and its result in the model's next request. */
static void personal_first_turn(struct test_rt *t, const char *pal)
{
    struct watch_model w;
    script(t, &w, "pal_one", TURN_ONE);
    json_t *o = chat(t, pal, NULL, "My 2.0 release ships on Friday the 4th; how many days?");
    ASSERT_EQ(json_array_size(w.requests), 3);
    /* memory context -> model: the seeded core blocks are in every request */
    ASSERT(request_has(&w, 0, "calm, careful assistant"));
    ASSERT(request_has(&w, 0, "Nothing is known yet about my human"));
    ASSERT(request_has(&w, 0, "My 2.0 release ships on Friday the 4th; how many days?"));
    /* the model was offered the tools it used */
    ASSERT(request_has(&w, 0, "\"execute_code\""));
    ASSERT(request_has(&w, 0, "\"memory_write\""));
    /* tool use: the write's result back, then the program's */
    ASSERT_CONTAINS(tool_answer(&w, 1, "w1"), "release");
    const char *ran = tool_answer(&w, 2, "x1");
    json_t *res = json_loads(ran, 0, NULL);
    ASSERT(res != NULL);
    json_t *value = json_object_get(res, "result");
    ASSERT_EQ(json_integer_value(json_object_get(value, "days")), 7);
    ASSERT_EQ(json_integer_value(json_object_get(value, "found")),
              1); /* the note, via the bridge */
    json_decref(res);
    ASSERT_CONTAINS(reply_of(o), "seven days");
    ASSERT_EQ(json_integer_value(json_object_get(o, "tool_calls")), 2);
    program_calls_are_the_runs(t, json_string_value(json_object_get(o, "run_id")));
    json_decref(o);
    unscript(t, &w);
}

/* Turn two, after a restart: memory_read finds the note the first turn wrote. */
static void personal_recall_turn(struct test_rt *t, const char *pal)
{
    struct watch_model w;
    script(t, &w, "pal_two",
           "[{\"response\":{\"tool_calls\":[{\"id\":\"r1\",\"name\":\"memory_read\","
           "\"arguments\":{\"query\":\"when does the release ship\"}}]}},"
           "{\"response\":{\"text\":\"It ships on Friday the 4th.\"}}]");
    json_t *o = chat(t, pal, NULL, "When does my release ship?");
    ASSERT_CONTAINS(tool_answer(&w, 1, "r1"), "ships on Friday the 4th");
    ASSERT_CONTAINS(reply_of(o), "Friday the 4th");
    json_decref(o);
    unscript(t, &w);
}

/* The familiar block: the agent's change waits; approved, it applies and the next turn's
 * context holds it. */
static void personal_approval(struct test_rt *t, const char *pal)
{
    struct watch_model w;
    script(t, &w, "pal_three",
           "[{\"response\":{\"tool_calls\":[{\"id\":\"f1\",\"name\":\"memory_write\","
           "\"arguments\":{\"label\":\"familiar\",\"content\":\"My human is Ada; she ships "
           "2.0.\"}}]}},"
           "{\"response\":{\"text\":\"I asked to remember your name.\"}},"
           "{\"response\":{\"text\":\"Hello Ada.\"}}]");
    json_t *o = chat(t, pal, NULL, "I am Ada.");
    ASSERT_CONTAINS(tool_answer(&w, 1, "f1"), "pending");
    json_decref(o);
    char *out = NULL;
    ASSERT_OK(vigil_memory_show(t->rt, pal, "familiar", &out, E));
    ASSERT(!strstr(out, "My human is Ada")); /* not applied before the person says so */
    vigil_free(out);
    ASSERT_OK(vigil_memory_pending(t->rt, pal, &out, E));
    json_t *pending = json_loads(out, 0, NULL);
    vigil_free(out);
    ASSERT_EQ(json_array_size(pending), 1);
    const char *id = json_string_value(json_object_get(json_array_get(pending, 0), "id"));
    ASSERT_OK(vigil_memory_approve(t->rt, id, NULL, E));
    json_decref(pending);
    ASSERT_OK(vigil_memory_show(t->rt, pal, "familiar", &out, E));
    ASSERT_CONTAINS(out, "My human is Ada");
    vigil_free(out);
    o = chat(t, pal, NULL, "Who am I?");
    ASSERT(request_has(&w, 2, "My human is Ada; she ships 2.0."));
    json_decref(o);
    unscript(t, &w);
}

/* proves: S4-069 */
TEST(a_personal_agent_remembers_runs_code_and_waits_for_approval)
{
    struct test_rt t;
    char pal[37];
    use_config("integration_pal");
    test_rt_open(&t, "integration_pal");
    vigil_agent_spec spec = {.name = "Pal", .kind = "personal", .config_json = PAL_CONFIG};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, pal, E));
    int seeded = 0;
    ASSERT_OK(vigil_memory_seed(t.rt, pal, NULL, &seeded, E));
    ASSERT_EQ(seeded, 1);
    personal_first_turn(&t, pal);
    personal_recall_turn(&t, pal);
    personal_approval(&t, pal);
    test_rt_close(&t);
}

/* ---- an interactive session ---------------------------------------------------------------- */

static int timer_calls;

/* The host's focus timer: start_task_timer and stop_task_timer answer what they did. */
static vigil_code focus_timer(void *user, const vigil_tool_call_info *call, const char *args_json,
                              char **out_result_json, vigil_error *err)
{
    (void)user;
    (void)err;
    timer_calls++;
    int start = !strcmp(call->tool, "start_task_timer");
    *out_result_json = strdup(start ? "{\"timer\":\"t-1\",\"running\":true}"
                                    : "{\"timer\":\"t-1\",\"running\":false,\"minutes\":25}");
    (void)args_json;
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

static void register_timer_tools(struct test_rt *t)
{
    static const char *const names[] = {"start_task_timer", "stop_task_timer"};
    for (size_t i = 0; i < 2; i++) {
        vigil_tool_def def = {.name = names[i],
                              .description = "The focus timer of a task.",
                              .input_schema_json = "{\"type\":\"object\"}",
                              .contract_json = "{\"idempotency\":\"idempotent\"}"};
        ASSERT_OK(vigil_tool_register(t->rt, &def, focus_timer, NULL, E));
    }
}

/* The kinds of the session's messages, joined with ' '; each action is a call its model turn
 * asked for, and each toolResult answers the action just before it. */
static void session_kinds(struct test_rt *t, const char *agent, const char *session, char *out,
                          size_t n)
{
    char *text = NULL;
    ASSERT_OK(vigil_session_messages(t->rt, agent, session, 0, &text, E));
    json_t *v = json_loads(text, 0, NULL), *m, *asked = NULL;
    vigil_free(text);
    const char *acted = NULL;
    size_t i, used = 0;
    out[0] = '\0';
    json_array_foreach (json_object_get(v, "items"), i, m) {
        const char *kind = json_string_value(json_object_get(m, "kind"));
        const char *tool = json_string_value(json_object_get(m, "tool_name"));
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? " " : "", kind);
        ASSERT(used < n);
        if (!strcmp(kind, "thought"))
            asked = json_object_get(m, "tool_calls");
        if (!strcmp(kind, "action")) {
            ASSERT(tool != NULL && json_array_size(asked) == 1);
            ASSERT_STREQ(json_string_value(json_object_get(json_array_get(asked, 0), "name")),
                         tool);
            acted = tool;
        }
        if (!strcmp(kind, "toolResult")) {
            ASSERT(acted != NULL);
            ASSERT_STREQ(tool, acted);
            acted = NULL;
        }
    }
    json_decref(v);
}

/* Every run of the agent was user-initiated, on the session's thread. */
static void runs_were_the_persons(struct test_rt *t, const char *agent, size_t want)
{
    char *text = NULL;
    ASSERT_OK(vigil_runs_list(t->rt, agent, NULL, NULL, 0, &text, E));
    json_t *v = json_loads(text, 0, NULL), *r;
    vigil_free(text);
    json_t *items = json_is_array(v) ? v : json_object_get(v, "items");
    ASSERT_EQ(json_array_size(items), want);
    size_t i;
    json_array_foreach (items, i, r) {
        ASSERT_STREQ(json_string_value(json_object_get(r, "wake_reason")), "user");
        ASSERT_STREQ(json_string_value(json_object_get(r, "status")), "completed");
    }
    json_decref(v);
}

/* proves: S0-170 */
TEST(an_interactive_session_is_a_conversation_of_actions_and_tool_results)
{
    struct test_rt t;
    struct watch_model w;
    char coach[37];
    use_config("integration_focus");
    test_rt_open(&t, "integration_focus");
    vigil_agent_spec spec = {.name = "Coach",
                             .kind = "pomodoro",
                             .mode = "interactive",
                             .config_json =
                                 "{\"tools\":[\"start_task_timer\",\"stop_task_timer\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, coach, E));
    script(&t, &w, "focus",
           "[{\"response\":{\"tool_calls\":[{\"id\":\"s1\",\"name\":\"start_task_timer\","
           "\"arguments\":{\"task\":\"report\",\"minutes\":25}}]}},"
           "{\"response\":{\"text\":\"Focus on the report: 25 minutes, go.\"}},"
           "{\"response\":{\"tool_calls\":[{\"id\":\"s2\",\"name\":\"stop_task_timer\","
           "\"arguments\":{\"task\":\"report\"}}]}},"
           "{\"response\":{\"text\":\"25 minutes logged. Take five.\"}}]");
    register_timer_tools(&t);
    timer_calls = 0;
    /* The first turn as a chat; the second as a user wake the queue runs (`vigil wake -m`). */
    json_t *o = chat(&t, coach, "focus", "Start a pomodoro on the report.");
    ASSERT_CONTAINS(reply_of(o), "25 minutes, go");
    json_decref(o);
    char key[65];
    int ran = 0;
    ASSERT_OK(vigil_wake_agent(t.rt, coach, "Done, stop the timer.", "focus", key, E));
    ASSERT_OK(vigil_wake_process(t.rt, 4, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(timer_calls, 2);
    /* the second turn's model saw the first turn's conversation, tool call and result included */
    ASSERT(request_has(&w, 2, "Start a pomodoro on the report."));
    ASSERT(request_has(&w, 2, "\\\"running\\\":true"));
    char kinds[512];
    session_kinds(&t, coach, "focus", kinds, sizeof kinds);
    ASSERT_STREQ(kinds, "user thought action toolResult thought "
                        "user thought action toolResult thought");
    runs_were_the_persons(&t, coach, 2);
    unscript(&t, &w);
    test_rt_close(&t);
}

/* ---- create -> wake -> run -> append -> summarize ------------------------------------------ */

/* The thread's messages of one kind. */
static size_t thread_count(struct test_rt *t, const char *agent, const char *thread,
                           const char *kind, json_t **last)
{
    json_t *msgs = NULL, *m;
    size_t i, n = 0;
    ASSERT_OK(vg_message_latest(t->env, agent, thread, 1000, &msgs, E));
    json_array_foreach (msgs, i, m)
        if (!strcmp(json_string_value(json_object_get(m, "kind")), kind)) {
            n++;
            if (last) {
                json_decref(*last);
                *last = json_incref(m);
            }
        }
    json_decref(msgs);
    return n;
}

/* One user wake, queued and run as the daemon runs it: one run each time. */
static void wake_and_run(struct test_rt *t, const char *agent, char letter)
{
    char text[2200], key[65];
    int n =
        snprintf(text, sizeof text, "Turn %c: the plan for step %c is settled. ", letter, letter);
    memset(text + n, 'w', sizeof text - 1 - (size_t)n);
    text[sizeof text - 1] = '\0';
    int ran = 0;
    ASSERT_OK(vigil_wake_agent(t->rt, agent, text, "log", key, E));
    ASSERT_OK(vigil_wake_process(t->rt, 4, &ran, E));
    ASSERT_EQ(ran, 1);
    vg_runtime_compact_settle(t->rt); /* the runtime's compactor has done what the run made due */
}

/* proves: S0-171 */
TEST(wakes_run_append_and_their_history_is_summarized)
{
    struct test_rt t;
    struct watch_model w;
    char agent[37], thread[200], summaries[VG_RECORD_ID_MAX];
    use_config("integration_summary");
    unsetenv("VIGIL_MODEL_CASSETTE");
    test_rt_open(&t, "integration_summary");
    /* a small context (a small local model's): its budget is passed within a few wakes */
    vigil_agent_spec spec = {.name = "Logger",
                             .config_json = "{\"limits\":{\"context_tokens\":4000}}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    snprintf(thread, sizeof thread, "%s:session:log", agent);
    vg_compact_summary_thread(thread, summaries); /* where the thread's summaries go */
    char letter = 'a';
    for (; letter < 'a' + 8 && !thread_count(&t, agent, summaries, "summary", NULL); letter++)
        wake_and_run(&t, agent, letter);
    int wakes = letter - 'a';
    ASSERT(wakes >= 2 && wakes < 8); /* summarized once the history passed its budget */
    /* every wake ran and appended its input and its answer */
    char *out = NULL;
    ASSERT_OK(vigil_wake_runs(t.rt, agent, "completed", 0, &out, E));
    json_t *log = json_loads(out, 0, NULL);
    vigil_free(out);
    json_t *items = json_is_array(log) ? log : json_object_get(log, "items");
    ASSERT_EQ(json_array_size(items), (size_t)wakes);
    json_decref(log);
    ASSERT_EQ(thread_count(&t, agent, thread, "user", NULL), (size_t)wakes);
    ASSERT_EQ(thread_count(&t, agent, thread, "thought", NULL), (size_t)wakes);
    /* the summary covers the oldest span: the first turn's words are in it */
    json_t *summary = NULL;
    ASSERT_EQ(thread_count(&t, agent, summaries, "summary", &summary), 1);
    ASSERT_CONTAINS(json_string_value(json_object_get(summary, "content")),
                    "Turn a: the plan for step a is settled.");
    json_decref(summary);
    /* and the next run's model reads the summary */
    script(&t, &w, "summary_next", "[{\"response\":{\"text\":\"Step a was settled first.\"}}]");
    wake_and_run(&t, agent, 'z');
    ASSERT_EQ(json_array_size(w.requests), 1);
    ASSERT(request_has(&w, 0, "Turn a: the plan for step a is settled."));
    unscript(&t, &w);
    test_rt_close(&t);
}

/* ---- a mutating run explained from its trace, and replayed --------------------------------- */

static int sales_recorded;

static vigil_code record_sale(void *user, const vigil_tool_call_info *call, const char *args_json,
                              char **out_result_json, vigil_error *err)
{
    (void)user;
    (void)call;
    (void)args_json;
    (void)err;
    sales_recorded++;
    *out_result_json = strdup(
        "{\"result\":{\"sale\":\"sale-7\",\"amount\":5},\"changed_entity_ids\":[\"sale-7\"]}");
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

static json_t *parsed(char *text)
{
    json_t *v = json_loads(text, 0, NULL);
    vigil_free(text);
    ASSERT(v != NULL);
    return v;
}

/* The run a subscription woke: its wake, its tool calls with their operation ids and effects,
 * the report it wrote, and its replay matching what was stored. */
static void explain_run(struct test_rt *t, const char *agent, const char *report_id)
{
    char *text = NULL;
    ASSERT_OK(vigil_wake_runs(t->rt, agent, "completed", 0, &text, E));
    json_t *log = parsed(text);
    json_t *entries = json_is_array(log) ? log : json_object_get(log, "items");
    ASSERT_EQ(json_array_size(entries), 1);
    json_t *wake = json_array_get(entries, 0);
    ASSERT_STREQ(json_string_value(json_object_get(wake, "reason")), "subscription");
    const char *key = json_string_value(json_object_get(wake, "run_key"));
    /* wake -> run: the run under the wake's key says why it woke */
    ASSERT_OK(vigil_run_show(t->rt, key, &text, E));
    json_t *run = parsed(text);
    ASSERT_STREQ(json_string_value(json_object_get(run, "wake_reason")), "subscription");
    ASSERT_STREQ(json_string_value(json_object_get(run, "run_key")), key);
    ASSERT_EQ(json_integer_value(json_object_get(run, "tool_calls")), 2);
    const char *run_id = json_string_value(json_object_get(run, "run_id"));
    /* the input: the wake's delta, naming the change that woke it */
    ASSERT_OK(vigil_run_messages(t->rt, run_id, NULL, 0, &text, E));
    ASSERT_CONTAINS(text, "sale-7");
    vigil_free(text);
    /* action -> toolResult: each call with its operation id, input and output */
    ASSERT_OK(vigil_run_tools(t->rt, run_id, NULL, 0, &text, E));
    json_t *tools = parsed(text), *calls = json_object_get(tools, "items");
    ASSERT_EQ(json_array_size(calls), 2);
    static const char *const names[] = {"record_sale", "set_report"};
    for (size_t i = 0; i < 2; i++) {
        json_t *c = json_array_get(calls, i);
        ASSERT_STREQ(json_string_value(json_object_get(c, "name")), names[i]);
        ASSERT_STREQ(json_string_value(json_object_get(c, "status")), "succeeded");
        ASSERT_EQ(strlen(json_string_value(json_object_get(c, "operation_id"))), 64);
        ASSERT_OK(
            vigil_run_tool(t->rt, json_string_value(json_object_get(c, "tool_call_id")), &text, E));
        /* the effect: the sale recorded, then the report written (its id) */
        ASSERT_CONTAINS(text, i == 0 ? "sale-7" : report_id);
        vigil_free(text);
    }
    json_decref(tools);
    /* replayed from the journal alone, to the state stored while it ran */
    ASSERT_OK(vigil_run_replay(t->rt, run_id, &text, E));
    json_t *replay = parsed(text);
    ASSERT(json_is_true(json_object_get(replay, "stored_projection_matches")));
    ASSERT_STREQ(
        json_string_value(json_object_get(json_object_get(replay, "projection"), "lifecycle")),
        "completed");
    json_decref(replay);
    json_decref(run);
    json_decref(log);
}

/* proves: S0-127 */
TEST(a_mutating_run_is_explained_from_its_trace_and_replayed)
{
    struct test_rt t;
    struct watch_model w;
    char agent[37], *text = NULL;
    use_config("integration_trace");
    test_rt_open(&t, "integration_trace");
    vigil_agent_spec spec = {.name = "Clerk",
                             .config_json = "{\"tools\":[\"record_sale\",\"set_report\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    ASSERT_OK(vigil_subscription_add(t.rt, agent, "{\"tokens\":[\"SALE\"]}", &text, E));
    vigil_free(text);
    script(&t, &w, "trace",
           "[{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"record_sale\","
           "\"arguments\":{\"amount\":5}}]}},"
           "{\"response\":{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"set_report\","
           "\"arguments\":{\"scope\":\"current\",\"markdown\":\"# Sales\\nOne sale of 5.\"}}]}},"
           "{\"response\":{\"text\":\"Recorded and reported.\"}}]");
    vigil_tool_def def = {.name = "record_sale",
                          .description = "Record a sale.",
                          .input_schema_json = "{\"type\":\"object\"}",
                          .contract_json = "{\"idempotency\":\"idempotent\"}"};
    ASSERT_OK(vigil_tool_register(t.rt, &def, record_sale, NULL, E));
    sales_recorded = 0;
    const char *tokens[] = {"SALE", "sale-7"};
    ASSERT_OK(vigil_notify(t.rt, tokens, 2, E));
    int ran = 0;
    ASSERT_OK(vigil_wake_process(t.rt, 4, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_EQ(sales_recorded, 1);
    ASSERT_OK(vigil_report_get(t.rt, agent, "current", 0, &text, E));
    json_t *report = parsed(text);
    json_t *r = json_object_get(report, "report");
    ASSERT_CONTAINS(json_string_value(json_object_get(r, "markdown")), "One sale of 5.");
    explain_run(&t, agent, json_string_value(json_object_get(r, "id")));
    json_decref(report);
    unscript(&t, &w);
    test_rt_close(&t);
}

/* ---- diagnostics of failed and partial runs, and of replays -------------------------------- */

static vigil_code note(void *user, const vigil_tool_call_info *call, const char *args_json,
                       char **out_result_json, vigil_error *err)
{
    (void)user;
    (void)call;
    (void)args_json;
    (void)err;
    *out_result_json = strdup("{\"noted\":true}");
    return *out_result_json ? VIGIL_OK : VIGIL_ENOMEM;
}

/* The newest run of the agent, from the list, as vigil_run_show gives it. */
static json_t *newest_run(struct test_rt *t, const char *agent)
{
    char *text = NULL;
    ASSERT_OK(vigil_runs_list(t->rt, agent, NULL, NULL, 1, &text, E));
    json_t *list = parsed(text);
    json_t *items = json_is_array(list) ? list : json_object_get(list, "items");
    ASSERT_EQ(json_array_size(items), 1);
    ASSERT_OK(vigil_run_show(
        t->rt, json_string_value(json_object_get(json_array_get(items, 0), "run_id")), &text, E));
    json_decref(list);
    return parsed(text);
}

/* The stored projection of a run overwritten, as a damaged or tampered store would have it. */
static void scribble_projection(struct test_rt *t, const char *run_id)
{
    struct vg_record *r = NULL;
    ASSERT_OK(vg_store_get_copy(t->env->store, "run_projection", run_id, &r, E));
    r->body = "{\"lifecycle\":\"running\"}";
    ASSERT_OK(vg_store_update(t->env->store, r, r->rev, E));
    vg_free(r);
}

/* proves: S0-126 */
TEST(failed_and_partial_runs_and_replays_say_what_happened)
{
    struct test_rt t;
    struct watch_model w;
    char agent[37];
    use_config("integration_diagnostics");
    setenv("VIGIL_MODEL_MAX_RETRIES", "0", 1);
    test_rt_open(&t, "integration_diagnostics");
    vigil_agent_spec spec = {
        .name = "Noter", .config_json = "{\"tools\":[\"note\"],\"budgets\":{\"tool_calls\":1}}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    script(&t, &w, "diagnostics",
           "[{\"error\":{\"code\":\"EAUTH\",\"message\":\"key refused by the provider\"}},"
           "{\"response\":{\"tool_calls\":[{\"id\":\"n1\",\"name\":\"note\",\"arguments\":{}}]}},"
           "{\"response\":{\"text\":\"one note\"}}]");
    vigil_tool_def def = {.name = "note",
                          .description = "Take a note.",
                          .input_schema_json = "{\"type\":\"object\"}",
                          .contract_json = "{\"idempotency\":\"idempotent\"}"};
    ASSERT_OK(vigil_tool_register(t.rt, &def, note, NULL, E));
    /* a failed run: the provider's error, on the run the turn names */
    char *out = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EAUTH, vigil_chat(t.rt, agent, NULL, "hello", NULL, &out, &err));
    json_t *failed = newest_run(&t, agent);
    ASSERT_STREQ(json_string_value(json_object_get(failed, "status")), "failed");
    ASSERT_CONTAINS(json_string_value(json_object_get(failed, "error")), "key refused");
    ASSERT_CONTAINS(err.detail, json_string_value(json_object_get(failed, "run_id")));
    /* a partial run: what it did before its budget stopped it, and why it stopped */
    vigil_error_clear(&err);
    vigil_chat(t.rt, agent, NULL, "take a note", NULL, &out, &err);
    vigil_free(out);
    json_t *partial = newest_run(&t, agent);
    const char *partial_id = json_string_value(json_object_get(partial, "run_id"));
    ASSERT_STREQ(json_string_value(json_object_get(partial, "status")), "interrupted");
    ASSERT_CONTAINS(json_string_value(json_object_get(partial, "error")), "tool_calls budget");
    char *text = NULL;
    ASSERT_OK(vigil_run_tools(t.rt, partial_id, NULL, 0, &text, E));
    json_t *tools = parsed(text), *calls = json_object_get(tools, "items");
    ASSERT_EQ(json_array_size(calls), 1); /* the call it made before the budget ran out */
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(calls, 0), "status")),
                 "succeeded");
    ASSERT_EQ(json_integer_value(json_object_get(partial, "model_calls")), 1);
    json_decref(tools);
    /* replays: each run replays to what was stored; one whose stored state was tampered with
     * names the field; an unknown run is named as given */
    ASSERT_OK(vigil_run_replay(t.rt, partial_id, &text, E));
    json_t *replay = parsed(text);
    ASSERT(json_is_true(json_object_get(replay, "stored_projection_matches")));
    json_decref(replay);
    scribble_projection(&t, partial_id);
    ASSERT_OK(vigil_run_replay(t.rt, partial_id, &text, E));
    replay = parsed(text);
    ASSERT(json_is_false(json_object_get(replay, "stored_projection_matches")));
    json_t *d, *lifecycle = NULL;
    size_t i;
    json_array_foreach (json_object_get(replay, "differences"), i, d)
        if (!strcmp(json_string_value(json_object_get(d, "field")), "lifecycle"))
            lifecycle = d;
    ASSERT(lifecycle != NULL);
    ASSERT_STREQ(json_string_value(json_object_get(lifecycle, "stored")), "running");
    ASSERT_STREQ(json_string_value(json_object_get(lifecycle, "replayed")), "interrupted");
    json_decref(replay);
    vigil_error_clear(&err);
    ASSERT_CODE(VIGIL_ENOTFOUND, vigil_run_replay(t.rt, "no-such-run-0000", &text, &err));
    ASSERT_CONTAINS(err.message, "no-such-run-0000");
    json_decref(partial);
    json_decref(failed);
    unscript(&t, &w);
    unsetenv("VIGIL_MODEL_MAX_RETRIES");
    test_rt_close(&t);
}

/* ---- who sent a run's input ----------------------------------------------------------------- */

/* The role (the journal's source) of the first message of the agent's newest run whose reason is
 * `reason`, and that message's full record. */
static void first_input(struct test_rt *t, const char *agent, const char *reason, char *role,
                        size_t n, char *type, size_t tn)
{
    char *text = NULL;
    ASSERT_OK(vigil_runs_list(t->rt, agent, NULL, NULL, 0, &text, E));
    json_t *list = parsed(text), *run, *found = NULL;
    size_t i;
    json_array_foreach (json_object_get(list, "items"), i, run)
        if (!found && !strcmp(json_string_value(json_object_get(run, "wake_reason")), reason))
            found = run;
    ASSERT(found != NULL);
    ASSERT_OK(vigil_run_messages(t->rt, json_string_value(json_object_get(found, "run_id")), NULL,
                                 0, &text, E));
    json_t *msgs = parsed(text), *first = json_array_get(json_object_get(msgs, "items"), 0);
    snprintf(role, n, "%s", json_string_value(json_object_get(first, "role")));
    ASSERT_OK(
        vigil_run_message(t->rt, json_string_value(json_object_get(first, "record_id")), &text, E));
    json_t *full = parsed(text);
    char *dump = vg_json_dump(full, 1);
    const char *mt = strstr(dump, "\"message_type\":\"");
    snprintf(type, tn, "%.*s", mt ? (int)strcspn(mt + 16, "\"") : 0, mt ? mt + 16 : "");
    vg_free(dump);
    json_decref(full);
    json_decref(msgs);
    json_decref(list);
}

/* A person's turn is the operator's; a turn vigil built (a spawned child's goal, the results
 * wake that brings the children's answers back) and a wake's delta are the daemon's, each typed
 * by what it is. */
TEST(a_runs_input_is_journaled_as_sent_by_whoever_sent_it)
{
    struct test_rt t;
    struct watch_model w;
    char boss[37], worker[37], role[32], type[32];
    use_config("integration_sources");
    test_rt_open(&t, "integration_sources");
    vigil_agent_spec a = {.name = "boss",
                          .config_json = "{\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":"
                                         "true}}"};
    ASSERT_OK(vigil_agent_create(t.rt, &a, boss, E));
    vigil_agent_spec b = {.name = "worker"};
    ASSERT_OK(vigil_agent_create(t.rt, &b, worker, E));
    script(&t, &w, "sources",
           "[{\"response\":{\"tool_calls\":[{\"id\":\"s1\",\"name\":\"spawn_agents\","
           "\"arguments\":{\"requests\":[{\"agent\":\"worker\",\"goal\":\"sum the "
           "invoices\"}]}}]}},"
           "{\"response\":{\"text\":\"asked the worker\"}},"
           "{\"response\":{\"text\":\"the sum is 42\"}},"
           "{\"response\":{\"text\":\"the worker says 42\"}}]");
    json_decref(chat(&t, boss, NULL, "get the invoices summed"));
    int ran = 0;
    ASSERT_OK(vigil_wake_process(t.rt, 8, &ran, E));
    ASSERT_EQ(ran, 2); /* the child, then the boss's results wake */
    first_input(&t, boss, "user", role, sizeof role, type, sizeof type);
    ASSERT_STREQ(role, "operator");
    ASSERT_STREQ(type, "chat");
    first_input(&t, worker, "spawn", role, sizeof role, type, sizeof type);
    ASSERT_STREQ(role, "daemon");
    ASSERT_STREQ(type, "spawn");
    first_input(&t, boss, "children", role, sizeof role, type, sizeof type);
    ASSERT_STREQ(role, "daemon");
    ASSERT_STREQ(type, "children");
    unscript(&t, &w);
    test_rt_close(&t);
}

int main(void)
{
    RUN(a_personal_agent_remembers_runs_code_and_waits_for_approval);
    RUN(an_interactive_session_is_a_conversation_of_actions_and_tool_results);
    RUN(wakes_run_append_and_their_history_is_summarized);
    RUN(a_mutating_run_is_explained_from_its_trace_and_replayed);
    RUN(failed_and_partial_runs_and_replays_say_what_happened);
    RUN(a_runs_input_is_journaled_as_sent_by_whoever_sent_it);
    return 0;
}
