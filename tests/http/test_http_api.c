/*
 * test_http_api.c: every route of the HTTP API against a live `vigil serve --listen` (the echo
 * wake runner, the scripted model): agents from a manifest, lists with cursors (also while
 * agents are added between pages), lifecycle, chat whole and streamed, wakes, notifications,
 * subscriptions, timers, runs and their messages and replay, approvals, memory, kill switches,
 * budgets, the live event stream (filters, Last-Event-ID, gap), /metrics, and /openapi.json
 * checked against what the server answers for each route it documents.
 */
#include "base/common.h"

#include "helpers/live_http.h"
#include "helpers/test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct live L;
static struct live *daemon_asked = &L; /* the daemon call() asks */
static char agent_id[64], run_id[64], record_id[64];

/* A request that must answer want; returns the parsed body (owned) when it is JSON. */
static json_t *call(long want, const char *method, const char *path, const char *body)
{
    struct live_resp r;
    long got = live_req(daemon_asked, method, path, body, NULL, 1, &r);
    if (got != want)
        TEST_FAIL_("%s %s: status %ld, expected %ld: %s", method, path, got, want, r.body);
    json_t *v = json_loads(r.body, JSON_DECODE_ANY, NULL);
    if (want != 204 && !v)
        TEST_FAIL_("%s %s: the answer is not JSON: %.200s", method, path, r.body);
    live_resp_free(&r);
    return v;
}

/* Does the JSON value's text hold needle? */
static int has(json_t *v, const char *needle)
{
    char *t = json_dumps(v, 0);
    int found = t && strstr(t, needle);
    free(t);
    return found;
}

static void call_code(long want, const char *code, const char *method, const char *path,
                      const char *body)
{
    json_t *v = call(want, method, path, body);
    ASSERT_STREQ(json_string_value(json_object_get(v, "code")), code);
    ASSERT(json_is_string(json_object_get(v, "message")));
    json_decref(v);
}

static char *create_agent(const char *name, char *out, size_t n)
{
    char body[256], path[128];
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"prompt\":\"You help.\"}", name);
    json_t *v = call(200, "POST", "/v1/agents", body);
    json_t *it = json_array_get(v, 0);
    ASSERT_STREQ(json_string_value(json_object_get(it, "action")), "created");
    ASSERT(!json_object_get(it, "file")); /* the temporary file is not the client's business */
    snprintf(out, n, "%s", json_string_value(json_object_get(it, "id")));
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s", out);
    json_decref(call(200, "GET", path, NULL));
    return out;
}

TEST(meta_routes)
{
    json_t *v = call(200, "GET", "/v1/health", NULL);
    ASSERT(json_is_true(json_object_get(v, "ok")));
    json_decref(v);
    v = call(200, "GET", "/v1/version", NULL);
    ASSERT_STREQ(json_string_value(json_object_get(v, "version")), vigil_version());
    json_decref(v);
}

/* An agent's config given over HTTP is a manifest's fields, checked as `agent apply` and
 * `agent create --config` check them (trial E28): a misspelt key, a wrong type and a bad server
 * are each named with its field, 400, and no agent is made. */
TEST(agent_config_over_http_is_checked_as_a_manifest)
{
    json_t *v =
        call(400, "POST", "/v1/agents",
             "{\"name\":\"cfg2\",\"tool\":[\"memory_*\"],\"limits\":{\"max_steps\":\"ten\"},"
             "\"mcp_servers\":{\"BAD\":{\"command\":\"x\"}}}");
    ASSERT_STREQ(json_string_value(json_object_get(v, "code")), "EINVAL");
    char *errors = json_dumps(json_object_get(v, "errors"), 0);
    ASSERT_CONTAINS(errors, "/limits/max_steps");
    ASSERT_CONTAINS(errors, "\"/tool\"");
    ASSERT_CONTAINS(errors, "/mcp_servers/BAD");
    free(errors);
    json_decref(v);
    /* The --config object itself is not a manifest: its fields go at the top. */
    v = call(400, "POST", "/v1/agents", "{\"name\":\"cfg3\",\"config\":{\"tools\":[]}}");
    ASSERT_CONTAINS(json_string_value(json_object_get(v, "message")), "config");
    json_decref(v);
    call_code(404, "ENOTFOUND", "GET", "/v1/agents/cfg2", NULL);
    call_code(404, "ENOTFOUND", "GET", "/v1/agents/cfg3", NULL);
}

TEST(agents_from_manifests)
{
    char other[64];
    create_agent("helper", agent_id, sizeof agent_id);
    json_t *v = call(200, "POST", "/v1/agents?dry_run=1",
                     "{\"name\":\"helper\",\"prompt\":\"You help more.\"}");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(v, 0), "action")), "updated");
    json_decref(v);
    v = call(400, "POST", "/v1/agents", "{\"name\":\"\",\"prompt\":7}");
    ASSERT(json_is_array(json_object_get(v, "errors"))); /* every problem, as apply reports */
    ASSERT(!strstr(json_string_value(json_object_get(v, "message")), "/tmp/"));
    ASSERT(!json_object_get(json_array_get(json_object_get(v, "errors"), 0), "file"));
    ASSERT_STREQ(json_string_value(json_object_get(v, "code")), "EINVAL");
    json_decref(v);
    call_code(404, "ENOTFOUND", "GET", "/v1/agents/01a21c8f-0000-7000-8000-000000000000", NULL);
    char path[160];
    snprintf(path, sizeof path, "/v1/agents/%s/manifest", agent_id);
    v = call(200, "GET", path, NULL);
    ASSERT_CONTAINS(json_string_value(json_object_get(v, "manifest_yaml")), "helper");
    json_decref(v);
    create_agent("second", other, sizeof other);
}

/* A manifest as manifests.md writes it, YAML, is taken with its content type; YAML sent as
 * JSON is refused with the way to send it (trial J7), and nothing is made. */
TEST(agents_from_yaml_manifests)
{
    static const char yaml[] = "name: yamlpal\nprompt: You answer briefly.\ntools: [memory_*]\n";
    static const char *const as_yaml[] = {"Content-Type: application/yaml; charset=utf-8", NULL};
    struct live_resp r;
    ASSERT_EQ(live_req(&L, "POST", "/v1/agents", yaml, NULL, 1, &r), 400);
    ASSERT_CONTAINS(r.body, "Content-Type: application/yaml");
    live_resp_free(&r);
    call_code(404, "ENOTFOUND", "GET", "/v1/agents/yamlpal", NULL);
    ASSERT_EQ(live_req(&L, "POST", "/v1/agents", yaml, as_yaml, 1, &r), 200);
    ASSERT_CONTAINS(r.body, "created");
    live_resp_free(&r);
    json_t *v = call(200, "GET", "/v1/agents/yamlpal", NULL);
    json_t *tools =
        json_object_get(json_object_get(json_object_get(v, "agent"), "config"), "tools");
    ASSERT_STREQ(json_string_value(json_array_get(tools, 0)), "memory_*");
    json_decref(v);
    /* A YAML manifest with a problem answers the reader's list, as JSON does. */
    ASSERT_EQ(live_req(&L, "POST", "/v1/agents", "name: yamlbad\nprompt: [1\n", as_yaml, 1, &r),
              400);
    ASSERT_CONTAINS(r.body, "EPARSE");
    live_resp_free(&r);
    call_code(404, "ENOTFOUND", "GET", "/v1/agents/yamlbad", NULL);
    /* Its chat session's messages (none yet), and an unknown agent's. */
    v = call(200, "GET", "/v1/agents/yamlpal/sessions/default/messages?limit=5", NULL);
    ASSERT_EQ(json_array_size(json_object_get(v, "items")), 0);
    json_decref(v);
    call_code(404, "ENOTFOUND", "GET", "/v1/agents/nobody/sessions/default/messages", NULL);
    /* Gone again, so the listings' counts below see the agents they made. */
    json_decref(call(200, "POST", "/v1/agents/yamlpal/destroy", NULL));
    call(204, "DELETE", "/v1/agents/yamlpal", NULL);
}

/* Pages of limit 1 while agents are added between pages: each agent once, in order. */
TEST(agent_list_cursors_under_inserts)
{
    char seen[16][64], path[768], extra[64], name[32];
    int n = 0;
    const char *cursor = NULL;
    char cur[512] = "";
    for (int page = 0; page < 16; page++) {
        snprintf(path, sizeof path, "/v1/agents?limit=1%s%s", cursor ? "&cursor=" : "",
                 cursor ? cur : "");
        json_t *v = call(200, "GET", path, NULL);
        json_t *items = json_object_get(v, "items");
        ASSERT(json_array_size(items) <= 1);
        if (json_array_size(items))
            snprintf(seen[n++], sizeof seen[0], "%s",
                     json_string_value(json_object_get(json_array_get(items, 0), "id")));
        if (page < 2) { /* a concurrent writer adds an agent behind the cursor */
            snprintf(name, sizeof name, "added-%d", page);
            create_agent(name, extra, sizeof extra);
        }
        json_t *next = json_object_get(v, "next_cursor");
        cursor = json_string_value(next);
        if (cursor)
            snprintf(cur, sizeof cur, "%s", cursor);
        json_decref(v);
        if (!cursor)
            break;
    }
    ASSERT_EQ(n, 4); /* helper, second, added-0, added-1: nothing lost, nothing twice */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            ASSERT(strcmp(seen[i], seen[j]) != 0);
    ASSERT_STREQ(seen[0], agent_id);
    call_code(400, "EINVAL", "GET", "/v1/agents?limit=0", NULL);
}

/* A chat turn sent again with the same Idempotency-Key answers the first one's outcome,
 * replayed, instead of running a second turn (trial F, F6). */
TEST(chat_sent_again_with_its_key_is_not_run_twice)
{
    char path[256];
    const char *key[] = {"Idempotency-Key: turn-0042", NULL};
    struct live_resp r1, r2;
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent_id);
    ASSERT_EQ(live_req(&L, "POST", path, "{\"text\":\"once only\"}", key, 1, &r1), 200);
    ASSERT_EQ(live_req(&L, "POST", path, "{\"text\":\"once only\"}", key, 1, &r2), 200);
    json_t *first = json_loads(r1.body, 0, NULL), *again = json_loads(r2.body, 0, NULL);
    ASSERT(!json_object_get(first, "replayed"));
    ASSERT(json_is_true(json_object_get(again, "replayed")));
    ASSERT_STREQ(json_string_value(json_object_get(again, "run_id")),
                 json_string_value(json_object_get(first, "run_id")));
    json_decref(first);
    json_decref(again);
    live_resp_free(&r1);
    live_resp_free(&r2);
    struct live_resp r3;
    ASSERT_EQ(live_req(&L, "POST", path, "{\"text\":\"another text\"}", key, 1, &r3), 400);
    live_resp_free(&r3);
}

/* proves: S2-006 */
TEST(chat_whole_and_runs)
{
    char path[256], body[] = "{\"text\":\"hello over http\"}";
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent_id);
    json_t *v = call(200, "POST", path, body);
    ASSERT_CONTAINS(json_string_value(json_object_get(v, "reply")), "hello over http");
    snprintf(run_id, sizeof run_id, "%s", json_string_value(json_object_get(v, "run_id")));
    json_decref(v);
    call_code(400, "EINVAL", "POST", path, "{\"text\":5}");
    call_code(400, "EINVAL", "POST", path, "{\"text\":\"\"}"); /* an empty turn, as the CLI */
    snprintf(path, sizeof path, "/v1/runs?agent=%s", agent_id);
    v = call(200, "GET", path, NULL);
    ASSERT_STREQ(json_string_value(
                     json_object_get(json_array_get(json_object_get(v, "items"), 0), "run_id")),
                 run_id);
    json_decref(v);
    snprintf(path, sizeof path, "/v1/runs/%s", run_id);
    v = call(200, "GET", path, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(v, "status")), "completed");
    json_decref(v);
    snprintf(path, sizeof path, "/v1/runs/%s/messages", run_id);
    v = call(200, "GET", path, NULL);
    json_t *items = json_object_get(v, "items");
    ASSERT(json_array_size(items) >= 2);
    snprintf(record_id, sizeof record_id, "%s",
             json_string_value(json_object_get(json_array_get(items, 0), "record_id")));
    json_decref(v);
    snprintf(path, sizeof path, "/v1/messages/%s", record_id);
    v = call(200, "GET", path, NULL);
    ASSERT(has(v, record_id));
    json_decref(v);
    snprintf(path, sizeof path, "/v1/runs/%s/tools", run_id);
    json_decref(call(200, "GET", path, NULL));
    snprintf(path, sizeof path, "/v1/runs/%s/replay", run_id);
    v = call(200, "GET", path, NULL);
    ASSERT(json_is_true(json_object_get(v, "stored_projection_matches")));
    json_decref(v);
    call_code(404, "ENOTFOUND", "GET", "/v1/tool-calls/nope", NULL);
    call_code(404, "ENOTFOUND", "GET", "/v1/runs/nope", NULL);
}

/* Runs newest first, pages of one, a new run added between pages: the new runs are newer than
 * the cursor and stay out; the three older runs come once each, newest first. */
TEST(run_list_cursors_under_inserts)
{
    char pager[64], path[768], chat[256], cur[512] = "", older[3][64];
    int n = 0;
    create_agent("pager", pager, sizeof pager);
    snprintf(chat, sizeof chat, "/v1/agents/%s/chat", pager);
    for (int i = 0; i < 3; i++) {
        json_t *v = call(200, "POST", chat, "{\"text\":\"one more\"}");
        snprintf(older[2 - i], sizeof older[0], "%s",
                 json_string_value(json_object_get(v, "run_id")));
        json_decref(v);
    }
    for (int page = 0; page < 10; page++) {
        snprintf(path, sizeof path, "/v1/runs?agent=%s&limit=1%s%s", pager, *cur ? "&cursor=" : "",
                 cur);
        json_t *v = call(200, "GET", path, NULL);
        json_t *it = json_array_get(json_object_get(v, "items"), 0);
        if (it) {
            ASSERT(n < 3);
            ASSERT_STREQ(json_string_value(json_object_get(it, "run_id")), older[n]);
            n++;
        }
        json_decref(call(200, "POST", chat, "{\"text\":\"meanwhile\"}"));
        const char *next = json_string_value(json_object_get(v, "next_cursor"));
        snprintf(cur, sizeof cur, "%s", next ? next : "");
        json_decref(v);
        if (!next)
            break;
    }
    ASSERT_EQ(n, 3);
}

/* The run ids of a listing's items, in order, into ids (at most n); how many. */
static size_t item_ids(json_t *list, char ids[][64], size_t n)
{
    size_t i, k = 0;
    json_t *it;
    json_array_foreach (json_object_get(list, "items"), i, it)
        if (k < n)
            snprintf(ids[k++], 64, "%s", json_string_value(json_object_get(it, "run_id")));
    return k;
}

/* GET /v1/runs lists newest first (it once answered oldest first), in the same order as
 * `vigil runs list`: the API and the command say the same thing about one store. */
TEST(runs_newest_first_in_api_and_cli)
{
    char agent[64], path[256], made[3][64], api[8][64], cli[8][64], cmd[9000];
    create_agent("ordered", agent, sizeof agent);
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent);
    for (int i = 0; i < 3; i++) {
        json_t *v = call(200, "POST", path, "{\"text\":\"in order\"}");
        snprintf(made[i], sizeof made[i], "%s", json_string_value(json_object_get(v, "run_id")));
        json_decref(v);
    }
    snprintf(path, sizeof path, "/v1/runs?agent=%s", agent);
    json_t *v = call(200, "GET", path, NULL);
    ASSERT_EQ(item_ids(v, api, 8), 3);
    json_decref(v);
    for (int i = 0; i < 3; i++)
        ASSERT_STREQ(api[i], made[2 - i]);
    snprintf(cmd, sizeof cmd, "VIGIL_STORE='%s' '%s' runs list --agent %s --json", L.store,
             getenv("VIGIL_TEST_CLI"), agent);
    FILE *p = popen(cmd, "r");
    ASSERT(p != NULL);
    json_error_t jerr;
    v = json_loadf(p, 0, &jerr);
    ASSERT_EQ(pclose(p), 0);
    ASSERT(v != NULL);
    ASSERT_EQ(item_ids(v, cli, 8), 3);
    json_decref(v);
    for (int i = 0; i < 3; i++)
        ASSERT_STREQ(cli[i], api[i]);
}

TEST(chat_streamed)
{
    char path[256];
    const char *accept[] = {"Accept: text/event-stream", NULL};
    struct live_resp r;
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent_id);
    ASSERT_EQ(live_req(&L, "POST", path, "{\"text\":\"stream me\"}", accept, 1, &r), 200);
    ASSERT_CONTAINS(r.headers, "text/event-stream");
    ASSERT_CONTAINS(r.body, "event: text\ndata: {\"delta\":");
    ASSERT_CONTAINS(r.body, "event: done\ndata: {");
    ASSERT_CONTAINS(r.body, "stream me");
    live_resp_free(&r);
    /* Refused before any stream is promised. */
    ASSERT_EQ(live_req(&L, "POST", "/v1/agents/nope/chat", "{\"text\":\"x\"}", accept, 1, &r), 404);
    live_resp_free(&r);
}

TEST(wakes_subscriptions_timers)
{
    char path[256], sub[64], timer[64];
    snprintf(path, sizeof path, "/v1/agents/%s/wake", agent_id);
    json_t *v = call(202, "POST", path, "{\"message\":\"wake up\"}");
    ASSERT_EQ(strlen(json_string_value(json_object_get(v, "run_key"))), 64);
    json_decref(v);
    snprintf(path, sizeof path, "/v1/wakes?agent=%s", agent_id);
    v = call(200, "GET", path, NULL);
    ASSERT(json_array_size(v) >= 1);
    json_decref(v);
    json_decref(call(202, "POST", "/v1/notify", "{\"tokens\":[\"TASK\",\"workout.running\"]}"));
    call_code(400, "EINVAL", "POST", "/v1/notify", "{\"tokens\":[]}");
    snprintf(path, sizeof path, "/v1/agents/%s/subscriptions", agent_id);
    v = call(201, "POST", path, "{\"tokens\":[\"TASK\"]}");
    snprintf(sub, sizeof sub, "%s", json_string_value(json_object_get(v, "id")));
    json_decref(v);
    v = call(200, "GET", path, NULL);
    ASSERT(has(v, sub));
    json_decref(v);
    snprintf(path, sizeof path, "/v1/subscriptions/%s", sub);
    json_decref(call(204, "DELETE", path, NULL));
    snprintf(path, sizeof path, "/v1/agents/%s/timers", agent_id);
    v = call(201, "POST", path, "{\"kind\":\"cron\",\"spec\":\"@daily\",\"tz\":\"UTC\"}");
    snprintf(timer, sizeof timer, "%s", json_string_value(json_object_get(v, "id")));
    json_decref(v);
    call_code(400, "EINVAL", "POST", path, "{\"kind\":\"cron\",\"spec\":\"not a rule\"}");
    v = call(200, "GET", path, NULL);
    ASSERT_EQ(json_array_size(v), 1);
    json_decref(v);
    snprintf(path, sizeof path, "/v1/timers/%s/zone", timer);
    json_decref(call(200, "POST", path, "{\"tz\":\"Europe/Paris\"}"));
    call_code(400, "EINVAL", "POST", path, "{\"tz\":\"Mars/Olympus\"}");
    snprintf(path, sizeof path, "/v1/timers/%s", timer);
    json_decref(call(204, "DELETE", path, NULL));
}

/* Routes under /v1/agents/{agent} take the agent's name as the CLI does (findings 9 and F4 of
 * session 28); two agents of one name are refused with the CLI's words. */
TEST(agent_by_name)
{
    json_t *v = call(200, "GET", "/v1/agents/helper", NULL);
    ASSERT(has(v, agent_id));
    json_decref(v);
    json_decref(call(200, "GET", "/v1/agents/helper/budget", NULL));
    json_decref(call(200, "POST", "/v1/agents/helper/chat", "{\"text\":\"by name\"}"));
    call_code(404, "ENOTFOUND", "GET", "/v1/agents/nobody-has-this-name", NULL);
    /* The agent= filter of a list takes the name too (trial C7 of session 30: 404). */
    v = call(200, "GET", "/v1/runs?agent=helper", NULL);
    ASSERT(has(v, "by name"));
    json_decref(v);
    json_decref(call(200, "GET", "/v1/wakes?agent=helper", NULL));
    json_decref(call(200, "GET", "/v1/approvals?agent=helper", NULL));
    call_code(404, "ENOTFOUND", "GET", "/v1/runs?agent=nobody-has-this-name", NULL);
    /* Nor does the library make a second live agent of a name (trial F2 of session 32): the
     * name would reach neither. */
    vigil_runtime_options o;
    vigil_runtime_options_default(&o);
    o.store_uri = L.store;
    vigil_runtime *rt = NULL;
    vigil_error e = {0};
    ASSERT_EQ(vigil_runtime_open(&o, &rt, &e), VIGIL_OK);
    char twin[37];
    vigil_agent_spec spec = {.name = "helper"};
    ASSERT_EQ(vigil_agent_create(rt, &spec, twin, &e), VIGIL_EEXISTS);
    ASSERT_CONTAINS(e.message, "an agent named \"helper\" already exists");
    vigil_runtime_close(rt);
}

/* A misspelt filter is refused naming what it takes, never read as an empty list or a stream
 * that can send nothing (findings 24, 10 and 32 of session 28). */
static void refused_naming(long want, const char *path, const char *needle)
{
    json_t *v = call(want, "GET", path, NULL);
    ASSERT_CONTAINS(json_string_value(json_object_get(v, "message")), needle);
    json_decref(v);
}

TEST(list_filters_refused)
{
    refused_naming(400, "/v1/approvals?status=bogus", "pending, approved, rejected or expired");
    refused_naming(400, "/v1/runs?status=bogus", "running, completed, failed");
    refused_naming(400, "/v1/wakes?status=bogus", "queued, started");
    refused_naming(400, "/v1/events?kind=bogus", "run.started");
    refused_naming(400, "/v1/events?kind=run,bogus", "approval.requested");
    refused_naming(400, "/v1/events?kind=ru", "indoubt");
    /* The refusal names every kind the filter takes (trial F18). */
    refused_naming(400, "/v1/events?kind=bogus", "spawn.awaiting_approval, spawn.denied, child");
    refused_naming(400, "/v1/events?kind=bogus", "task or task.status (comma-separated)");
    refused_naming(400, "/v1/wakes?status=bogus", "cancelled or stopped");
    refused_naming(404, "/v1/events?agent=nosuch", "nosuch");
    json_decref(call(200, "GET", "/v1/approvals?status=expired", NULL));
    /* Either spelling of the cancelled state, in every list (trial C14 of session 30). */
    static const char *const both[] = {"/v1/runs?status=cancelled", "/v1/runs?status=canceled",
                                       "/v1/wakes?status=canceled", "/v1/wakes?status=cancelled",
                                       "/v1/tasks?status=canceled", "/v1/tasks?status=cancelled"};
    for (size_t i = 0; i < VG_ARRAY_LEN(both); i++)
        json_decref(call(200, "GET", both[i], NULL));
}

TEST(approvals_memory_budget_tools)
{
    char path[256];
    json_t *v = call(200, "GET", "/v1/approvals?status=pending", NULL);
    ASSERT(json_is_array(v));
    json_decref(v);
    call_code(404, "ENOTFOUND", "POST", "/v1/approvals/nope/approve", "{}");
    call_code(404, "ENOTFOUND", "POST", "/v1/approvals/nope/reject", "{\"reason\":\"no\"}");
    snprintf(path, sizeof path, "/v1/agents/%s/memory", agent_id);
    v = call(200, "GET", path, NULL);
    ASSERT(json_array_size(v) >= 1); /* the first turn seeded the core blocks */
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s/memory/familiar", agent_id);
    v = call(200, "GET", path, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(v, "label")), "familiar");
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s/memory/familiar/history", agent_id);
    json_decref(call(200, "GET", path, NULL));
    snprintf(path, sizeof path, "/v1/agents/%s/memory-search?q=human&k=3", agent_id);
    v = call(200, "GET", path, NULL);
    ASSERT(json_array_size(v) >= 1);
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s/memory-search", agent_id);
    call_code(400, "EINVAL", "GET", path, NULL);
    json_decref(call(200, "GET", "/v1/memory/pending", NULL));
    call_code(404, "ENOTFOUND", "POST", "/v1/memory/pending/nope/approve", "{}");
    call_code(400, "EINVAL", "POST", "/v1/memory/pending/nope/reject", "{}");
    snprintf(path, sizeof path, "/v1/agents/%s/tools/set_report/call", agent_id);
    /* The gate answers: the agent's manifest allows no tools; the recorded outcome comes back
     * with the run key the call got. */
    v = call(403, "POST", path, "{\"arguments\":{\"headline\":\"from http\"}}");
    ASSERT_EQ(strncmp(json_string_value(json_object_get(v, "run_key")), "http-", 5), 0);
    ASSERT_STREQ(json_string_value(json_object_get(v, "error_code")), "not_allowed");
    ASSERT_STREQ(json_string_value(json_object_get(v, "code")), "EDENIED");
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s/tools/no_such_tool/call", agent_id);
    v = call(404, "POST", path, "{}");
    ASSERT_STREQ(json_string_value(json_object_get(v, "code")), "ENOTFOUND");
    json_decref(v);
    v = call(200, "GET", "/v1/indoubt", NULL);
    ASSERT_EQ(json_array_size(v), 0);
    json_decref(v);
    call_code(404, "ENOTFOUND", "GET", "/v1/indoubt/nope", NULL);
    call_code(400, "EINVAL", "POST", "/v1/indoubt/nope/resolve", "{\"answer\":\"maybe\"}");
    v = call(200, "GET", "/v1/model", NULL);
    ASSERT(json_is_true(json_object_get(v, "scripted")));
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s/budget", agent_id);
    json_decref(call(200, "GET", path, NULL));
    snprintf(path, sizeof path, "/v1/agents/%s/tools", agent_id);
    v = call(200, "GET", path, NULL);
    ASSERT(json_is_array(v));
    json_decref(v);
}

/* A person changes an agent's memory over HTTP as `vigil memory set` and `delete` do (trial
 * E14): at once, a read_only block included, recorded as by human; errors from the code table. */
TEST(a_person_sets_and_deletes_memory)
{
    char id[64], path[256];
    create_agent("keeper", id, sizeof id);
    snprintf(path, sizeof path, "/v1/agents/keeper/memory/hours"); /* by name, as the CLI */
    json_t *v = call(200, "POST", path, "{\"content\":\"Open 9-17\",\"permission\":\"read_only\"}");
    ASSERT_STREQ(json_string_value(json_object_get(v, "change")), "created");
    ASSERT_STREQ(json_string_value(json_object_get(v, "permission")), "read_only");
    ASSERT_STREQ(json_string_value(json_object_get(v, "tier")), "core");
    json_decref(v);
    v = call(200, "POST", path, "{\"content\":\"Open 8-18\"}");
    ASSERT_STREQ(json_string_value(json_object_get(v, "change")), "updated");
    ASSERT_STREQ(json_string_value(json_object_get(v, "content")), "Open 8-18");
    ASSERT_STREQ(json_string_value(json_object_get(v, "permission")), "read_only");
    json_decref(v);
    v = call(200, "GET", "/v1/memory/pending?agent=keeper", NULL);
    ASSERT_EQ(json_array_size(v), 0); /* a person's change waits for no one */
    json_decref(v);
    call_code(400, "EINVAL", "POST", path, "{\"content\":\"x\",\"tier\":\"attic\"}");
    call_code(400, "EINVAL", "POST", path, "{\"content\":5}");
    call_code(400, "EINVAL", "POST", path, "{}");
    call_code(404, "ENOTFOUND", "POST", "/v1/agents/keeper/memory/newlabel", "{\"tier\":\"core\"}");
    call_code(404, "ENOTFOUND", "POST", "/v1/agents/nobody/memory/x", "{\"content\":\"x\"}");
    v = call(200, "DELETE", path, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(v, "label")), "hours");
    ASSERT_STREQ(json_string_value(json_object_get(v, "content")), "Open 8-18");
    json_decref(v);
    call_code(404, "ENOTFOUND", "GET", path, NULL);
    call_code(404, "ENOTFOUND", "DELETE", path, NULL);
    snprintf(path, sizeof path, "/v1/agents/keeper/memory/hours/history");
    v = call(200, "GET", path, NULL);
    ASSERT_EQ(json_array_size(v), 3);
    static const char *const types[] = {"create", "update", "delete"};
    for (size_t i = 0; i < 3; i++) {
        json_t *e = json_array_get(v, i);
        ASSERT_STREQ(json_string_value(json_object_get(e, "type")), types[i]);
        ASSERT_STREQ(json_string_value(json_object_get(e, "actor")), "human");
    }
    json_decref(v);
    json_t *doc = call(200, "GET", "/openapi.json", NULL);
    json_t *item =
        json_object_get(json_object_get(doc, "paths"), "/v1/agents/{agent}/memory/{label}");
    ASSERT(json_object_get(item, "post") && json_object_get(item, "delete"));
    ASSERT(json_object_get(json_object_get(json_object_get(item, "post"), "responses"), "404"));
    json_decref(doc);
}

/* ---- the event stream over a raw socket ------------------------------------------------------ */

static int stream_open(const char *path, const char *last_id)
{
    return live_stream_open(&L, path, last_id);
}

static int stream_until(int fd, char *buf, size_t cap, size_t *len, const char *needle)
{
    return live_stream_until(fd, buf, cap, len, needle);
}

TEST(live_events)
{
    static char all[65536], runs[65536], again[65536], named[65536];
    size_t la = 0, lr = 0, lg = 0, ln = 0;
    char path[256], first_id[32];
    int fa = stream_open("/v1/events", NULL);
    snprintf(path, sizeof path, "/v1/events?agent=%s&kind=run", agent_id);
    int fr = stream_open(path, NULL);
    /* The agent by its name, as /v1/agents/{agent} takes it: its events, not an empty stream. */
    int fn = stream_open("/v1/events?agent=helper&kind=run.ended", NULL);
    ASSERT(stream_until(fa, all, sizeof all, &la, ": vigil events"));
    ASSERT(stream_until(fr, runs, sizeof runs, &lr, ": vigil events"));
    ASSERT(stream_until(fn, named, sizeof named, &ln, ": vigil events"));
    json_decref(call(200, "POST", "/v1/kill", "{\"on\":true,\"reason\":\"test\"}"));
    ASSERT(stream_until(fa, all, sizeof all, &la, "event: kill"));
    json_decref(call(200, "POST", "/v1/kill", "{\"on\":false}"));
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent_id);
    json_decref(call(200, "POST", path, "{\"text\":\"tell the stream\"}"));
    ASSERT(stream_until(fa, all, sizeof all, &la, "event: message"));
    ASSERT(stream_until(fa, all, sizeof all, &la, "event: run.ended"));
    ASSERT(stream_until(fr, runs, sizeof runs, &lr, "event: run.ended"));
    ASSERT(stream_until(fn, named, sizeof named, &ln, "event: run.ended"));
    ASSERT_CONTAINS(named, agent_id);
    close(fn);
    ASSERT(strstr(runs, "event: run.started"));
    /* The turn ended before the poller saw it: its started event still tells the start. */
    const char *data = strstr(strstr(runs, "event: run.started"), "data: ");
    char started[2048];
    ASSERT(data);
    snprintf(started, sizeof started, "%.*s", (int)strcspn(data, "\n"), data);
    ASSERT_CONTAINS(started, "\"status\":\"running\"");
    ASSERT_CONTAINS(started, "\"ended_at\":null");
    ASSERT(!strstr(runs, "event: kill") && !strstr(runs, "event: message")); /* filtered */
    /* Resume after the first event: the later ones come again, the first does not. */
    const char *id = strstr(all, "id: ");
    ASSERT(id);
    snprintf(first_id, sizeof first_id, "%.*s", (int)strcspn(id + 4, "\n"), id + 4);
    int fg = stream_open("/v1/events", first_id);
    ASSERT(stream_until(fg, again, sizeof again, &lg, "event: run.ended"));
    ASSERT(!strstr(again, "event: gap"));
    char first_line[48];
    snprintf(first_line, sizeof first_line, "\nid: %s\n", first_id);
    ASSERT(strstr(again, first_line) == NULL);
    close(fg);
    /* Ids are the event log's positions, from 1 in this fresh store: resuming after 0 gives
     * every event again, the first one included, with no gap (the ring still holds them). */
    lg = 0;
    again[0] = '\0';
    fg = stream_open("/v1/events", "0");
    ASSERT(stream_until(fg, again, sizeof again, &lg, "event: run.ended"));
    ASSERT_CONTAINS(again, "\nid: 1\n");
    ASSERT(!strstr(again, "event: gap"));
    close(fg);
    close(fa);
    close(fr);
}

TEST(kill_and_metrics)
{
    json_t *v = call(200, "POST", "/v1/kill", "{\"on\":true}");
    ASSERT(has(v, "\"on\": true"));
    json_decref(v);
    struct live_resp r;
    ASSERT_EQ(live_req(&L, "GET", "/metrics", NULL, NULL, 1, &r), 200);
    ASSERT_CONTAINS(r.headers, "text/plain; version=0.0.4");
    ASSERT_CONTAINS(r.body, "vigil_kill_switch_global 1\n");
    ASSERT_CONTAINS(r.body, "# TYPE vigil_wake_queue_depth gauge\n");
    ASSERT_CONTAINS(r.body, "vigil_approvals_pending 0\n");
    ASSERT_CONTAINS(r.body, "vigil_runs_ended_total{outcome=\"completed\"} ");
    ASSERT_CONTAINS(r.body, "vigil_store_bytes ");
    ASSERT_CONTAINS(r.body, "vigil_run_duration_seconds_bucket{le=\"+Inf\"} ");
    ASSERT_CONTAINS(r.body, "vigil_model_calls_total{model=");
    ASSERT_CONTAINS(r.body, "vigil_tokens_total{model=");
    live_resp_free(&r);
    /* A turn the switch stops is refused as `vigil chat` refuses it (EKILLED, 423), whole and
     * streamed, with what the turn recorded under "turn". */
    char path[256];
    const char *accept[] = {"Accept: text/event-stream", NULL};
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent_id);
    v = call(423, "POST", path, "{\"text\":\"stopped?\"}");
    ASSERT_STREQ(json_string_value(json_object_get(v, "code")), "EKILLED");
    ASSERT_EQ(json_integer_value(json_object_get(v, "status")), 423);
    json_t *turn = json_object_get(v, "turn");
    ASSERT_STREQ(json_string_value(json_object_get(turn, "end")), "hard_stopped");
    ASSERT(json_is_true(json_object_get(turn, "scripted"))); /* the scripted model is in use */
    json_decref(v);
    ASSERT_EQ(live_req(&L, "POST", path, "{\"text\":\"stopped?\"}", accept, 1, &r), 200);
    ASSERT_CONTAINS(r.body, "event: error\ndata: {\"code\":\"EKILLED\"");
    ASSERT(!strstr(r.body, "event: done"));
    live_resp_free(&r);
    ASSERT_EQ(live_req(&L, "GET", "/metrics", NULL, NULL, 1, &r), 200);
    ASSERT_CONTAINS(r.body, "vigil_kill_switches_set 1\n");
    live_resp_free(&r);
    json_decref(call(200, "POST", "/v1/kill", "{\"on\":false}"));
    v = call(200, "GET", "/v1/kill", NULL);
    ASSERT(has(v, "\"on\": false"));
    json_decref(v);
    /* Every switch off again: the gauge counts switches on, not the ones ever set (finding 8). */
    ASSERT_EQ(live_req(&L, "GET", "/metrics", NULL, NULL, 1, &r), 200);
    ASSERT_CONTAINS(r.body, "vigil_kill_switches_set 0\n");
    live_resp_free(&r);
}

/* GET /v1/status answers what `vigil status` prints (trial G7): the store, the daemon serving
 * it (this test's, from the SQLite store's lock), and a kill switch on as a line under
 * attention, gone again once it is off. */
TEST(status_over_http)
{
    json_t *v = call(200, "GET", "/v1/status", NULL);
    json_t *store = json_object_get(v, "store"), *daemons = json_object_get(v, "daemons");
    ASSERT_STREQ(json_string_value(json_object_get(store, "kind")), "sqlite");
    ASSERT(json_integer_value(json_object_get(store, "schema_version")) > 0);
    ASSERT(json_integer_value(json_object_get(store, "bytes")) > 0);
    ASSERT_EQ(json_array_size(daemons), 1);
    ASSERT(json_is_false(json_object_get(json_array_get(daemons, 0), "stale")));
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(daemons, 0), "pid")), L.pid);
    ASSERT(json_integer_value(json_object_get(json_object_get(v, "agents"), "created")) +
               json_integer_value(json_object_get(json_object_get(v, "agents"), "active")) >
           0);
    ASSERT_EQ(json_array_size(json_object_get(v, "kill_switches")), 0);
    json_decref(v);
    json_decref(call(200, "POST", "/v1/kill", "{\"on\":true,\"reason\":\"status test\"}"));
    v = call(200, "GET", "/v1/status", NULL);
    ASSERT_EQ(json_array_size(json_object_get(v, "kill_switches")), 1);
    ASSERT(has(json_object_get(v, "attention"), "a kill switch is on"));
    json_decref(v);
    json_decref(call(200, "POST", "/v1/kill", "{\"on\":false}"));
    v = call(200, "GET", "/v1/status", NULL);
    ASSERT(!has(json_object_get(v, "attention"), "kill switch"));
    json_decref(v);
}

TEST(lifecycle)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/agents/%s/pause", agent_id);
    json_t *v = call(200, "POST", path, "{\"reason\":\"quiet\"}");
    ASSERT_STREQ(json_string_value(json_object_get(json_object_get(v, "agent"), "lifecycle")),
                 "dormant");
    json_decref(v);
    call_code(409, "ESTATE", "POST", path, NULL);
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent_id);
    call_code(409, "ESTATE", "POST", path, "{\"text\":\"asleep?\"}");
    snprintf(path, sizeof path, "/v1/agents/%s/resume", agent_id);
    json_decref(call(200, "POST", path, NULL));
    snprintf(path, sizeof path, "/v1/agents/%s", agent_id);
    call_code(409, "ESTATE", "DELETE", path, NULL); /* only a destroyed agent is deleted */
    snprintf(path, sizeof path, "/v1/agents/%s/destroy", agent_id);
    v = call(200, "POST", path, "{}");
    ASSERT_STREQ(json_string_value(json_object_get(json_object_get(v, "agent"), "lifecycle")),
                 "destroyed");
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s", agent_id);
    json_decref(call(204, "DELETE", path, NULL));
    call_code(404, "ENOTFOUND", "GET", path, NULL);
}

/* ---- the run controls ------------------------------------------------------------------------
 * POST /v1/runs/{run}/cancel|rerun|resume, as `vigil runs cancel|rerun|resume` (finding 27 of
 * session 28), against a daemon whose runner holds each run at its first step while a file
 * exists: a run running, the agent's next wake queued behind it. */

/* POST /v1/agents/AGENT/wake {message}; the run key into key. */
static void wake_key(const char *agent, const char *message, char key[65])
{
    char path[160], body[160];
    snprintf(path, sizeof path, "/v1/agents/%s/wake", agent);
    snprintf(body, sizeof body, "{\"message\":\"%s\"}", message);
    json_t *v = call(202, "POST", path, body);
    snprintf(key, 65, "%s", json_string_value(json_object_get(v, "run_key")));
    json_decref(v);
    ASSERT_EQ(strlen(key), 64);
}

static void run_ctl(long want, const char *code, const char *run, const char *verb,
                    const char *body, const char *needle)
{
    char path[200];
    snprintf(path, sizeof path, "/v1/runs/%s/%s", run, verb);
    json_t *v = call(want, "POST", path, body);
    if (code)
        ASSERT_STREQ(json_string_value(json_object_get(v, "code")), code);
    if (needle)
        ASSERT(has(v, needle));
    json_decref(v);
}

/* Whether path exists, waiting for its folder to say it was made: 30 s at most (a safety
 * bound, not a wait). */
static int appears(const char *path)
{
    char dir[4600];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    int fd = inotify_init1(IN_CLOEXEC), ok = 0;
    if (fd < 0 || inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) < 0)
        return 0;
    for (int i = 0; i < 100 && !(ok = access(path, F_OK) == 0); i++) {
        struct pollfd p = {fd, POLLIN, 0};
        char buf[4096];
        if (poll(&p, 1, 30000) <= 0 || read(fd, buf, sizeof buf) <= 0)
            break;
    }
    close(fd);
    return ok;
}

/* A run held running, the agent's next wake queued behind it: the queued one cancelled (named
 * by the first 16 characters of its key, as `vigil wakes` shows it), then the running one. */
static void cancel_running_and_queued(const char *agent, const char *hold, char k1[65], char k2[65])
{
    char prefix[17], reached[4500];
    snprintf(reached, sizeof reached, "%s.reached", hold);
    wake_key(agent, "first", k1);
    ASSERT(appears(reached));
    wake_key(agent, "second", k2);
    ASSERT(strcmp(k1, k2) != 0);
    snprintf(prefix, sizeof prefix, "%.16s", k2);
    run_ctl(200, NULL, prefix, "cancel", "{}", "\"queued\"");
    /* Cancelled, so ended: cancelling it again is the CLI's exit 4, here 409 with its words. */
    run_ctl(409, "ESTATE", k2, "cancel", NULL, "only a queued or running run can be cancelled");
    run_ctl(200, NULL, k1, "cancel", "{\"by\":\"tester\"}", "\"requested\"");
}

TEST(run_controls)
{
    static struct live R;
    char hold[4400], runner[4500], agent[64], k1[65], k2[65], path[200];
    /* A chat turn is not in the wake log: neither cancelled nor re-run (exit 4). */
    run_ctl(409, "ESTATE", run_id, "cancel", "{}", "chat turn");
    run_ctl(409, "ESTATE", run_id, "rerun", "{}", "chat turn");
    run_ctl(400, "EINVAL", run_id, "resume", "{}", "only a sub-agent's run can be resumed");
    snprintf(hold, sizeof hold, "%s/hold-runs", L.dir);
    int f = open(hold, O_CREAT | O_WRONLY, 0600);
    ASSERT(f >= 0);
    close(f);
    snprintf(runner, sizeof runner, "test:steps=2:block=%s", hold);
    setenv("VIGIL_LIVE_RUNNER", runner, 1);
    live_start(&R, "http-runctl", NULL);
    unsetenv("VIGIL_LIVE_RUNNER");
    daemon_asked = &R;
    live_agent_create(&R, "controlled", agent, sizeof agent);
    cancel_running_and_queued(agent, hold, k1, k2);
    run_ctl(404, "ENOTFOUND", "nosuch-run", "cancel", "{}", "nosuch-run");
    run_ctl(400, "EINVAL", k1, "cancel", "{\"by\":7}", "by");
    /* A re-run: a new run key, queued (202) for the daemon, in the wake log. */
    snprintf(path, sizeof path, "/v1/runs/%s/rerun", k2);
    json_t *v =
        call(202, "POST", path,
             "{\"prompt\":\"once more\",\"model\":\"other-model\",\"tools\":[\"memory_*\"]}");
    char k3[65];
    snprintf(k3, sizeof k3, "%s", json_string_value(json_object_get(v, "run_key")));
    json_decref(v);
    ASSERT(strlen(k3) == 64 && strcmp(k3, k2) != 0 && strcmp(k3, k1) != 0);
    snprintf(path, sizeof path, "/v1/wakes?agent=%s", agent);
    v = call(200, "GET", path, NULL);
    ASSERT(has(v, k3));
    json_decref(v);
    run_ctl(400, "EINVAL", k2, "rerun", "{\"tools\":\"memory_*\"}", "array");
    run_ctl(400, "EINVAL", k2, "rerun", "{\"tools\":[7]}", "strings");
    run_ctl(400, "EINVAL", k2, "rerun", "{\"model\":\"\"}", "model");
    run_ctl(400, "EINVAL", k2, "resume", "{\"model\":\"other\"}", "takes prompt");
    run_ctl(400, "EINVAL", k2, "rerun", "{\"promt\":\"x\"}", "promt");
    run_ctl(400, "EINVAL", k2, "rerun", "{\"prompt\":5}", "prompt");
    run_ctl(404, "ENOTFOUND", "nosuch-run", "rerun", NULL, "nosuch-run");
    /* resume is for a sub-agent's run: another is refused (the CLI's exit 2). */
    run_ctl(400, "EINVAL", k2, "resume", "{}", NULL);
    run_ctl(404, "ENOTFOUND", "nosuch-run", "resume", "{}", "nosuch-run");
    daemon_asked = &L;
    ASSERT_EQ(unlink(hold), 0);
    live_stop(&R);
}

/* ---- lineage and the task graph, read -------------------------------------------------------
 */

/* The id of the first item of a JSON array answer whose field key is value. */
static const char *id_where(json_t *list, const char *key, const char *value)
{
    json_t *it;
    size_t i;
    json_array_foreach (list, i, it)
        if (!strcmp(json_string_value(json_object_get(it, key)) ?: "", value))
            return json_string_value(json_object_get(it, "id"));
    return NULL;
}

/* GET /v1/agents/{agent}/tree both ways, as `vigil agent tree`: a parent's children and its
 * decisions with their reasons (a denied one too), a child's spawned_by. */
TEST(lineage_over_http)
{
    char boss[64], w1[64], path[256];
    json_t *v = call(200, "POST", "/v1/agents",
                     "{\"name\":\"boss\",\"kind\":\"lead\",\"prompt\":\"You split work.\","
                     "\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}");
    snprintf(boss, sizeof boss, "%s",
             json_string_value(json_object_get(json_array_get(v, 0), "id")));
    json_decref(v);
    v = call(200, "POST", "/v1/agents",
             "{\"name\":\"w1\",\"kind\":\"worker\",\"prompt\":\"You do a part.\"}");
    snprintf(w1, sizeof w1, "%s", json_string_value(json_object_get(json_array_get(v, 0), "id")));
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s/tools/spawn_agents/call", boss);
    json_decref(call(200, "POST", path,
                     "{\"run_key\":\"boss-http-1\",\"arguments\":{\"requests\":["
                     "{\"agent\":\"w1\",\"goal\":\"part one\"},"
                     "{\"kind\":\"nobody\",\"goal\":\"x\"}]}}"));
    v = call(200, "GET", "/v1/agents/boss/tree", NULL); /* by name, as the other agent routes */
    ASSERT_STREQ(json_string_value(json_object_get(v, "agent")), boss);
    json_t *kid = json_array_get(json_object_get(v, "children"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(kid, "child_agent")), w1);
    ASSERT_EQ(json_array_size(json_object_get(v, "decisions")), 2);
    ASSERT(has(json_object_get(v, "decisions"), "no live agent of the requested kind"));
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s/tree", w1);
    v = call(200, "GET", path, NULL);
    json_t *up = json_array_get(json_object_get(v, "spawned_by"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(up, "parent_agent")), boss);
    ASSERT_STREQ(json_string_value(json_object_get(up, "parent_name")), "boss");
    ASSERT_STREQ(json_string_value(json_object_get(up, "parent_run_key")), "boss-http-1");
    json_decref(v);
    call_code(404, "ENOTFOUND", "GET", "/v1/agents/01a21c8f-0000-7000-8000-000000000000/tree",
              NULL);
    /* The spawn call was made by hand: it is listed as such (B32), with its run key. */
    v = call(200, "GET", "/v1/agents/boss/tool-calls?limit=5", NULL);
    json_t *hand = json_array_get(json_object_get(v, "items"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(hand, "tool")), "spawn_agents");
    ASSERT_STREQ(json_string_value(json_object_get(hand, "run_key")), "boss-http-1");
    ASSERT(json_is_null(json_object_get(v, "next_cursor")));
    json_decref(v);
    call_code(400, "EINVAL", "GET", "/v1/agents/boss/tool-calls?cursor=bogus", NULL);
}

/* POST /v1/tasks, .../blocks/..., .../cancel and /v1/tasks/dispatch, as `vigil task add|block|
 * cancel|dispatch`: a cycle refused writing nothing, a cancel of an ended task refused, a
 * dispatch that starts a task on an agent of its kind. a blocks b already. */
static void tasks_written_over_http(const char *a, const char *b)
{
    char path[200], c[64];
    json_t *v =
        call(201, "POST", "/v1/tasks", "{\"title\":\"check the result\",\"kind\":\"worker\"}");
    snprintf(c, sizeof c, "%s", json_string_value(json_object_get(v, "id")));
    ASSERT_STREQ(json_string_value(json_object_get(v, "status")), "ready");
    json_decref(v);
    snprintf(path, sizeof path, "/v1/tasks/%s/blocks/%s", b, c);
    v = call(200, "POST", path, NULL); /* b blocks c: c waits now */
    ASSERT_STREQ(json_string_value(json_array_get(json_object_get(v, "blocks"), 0)), c);
    json_decref(v);
    snprintf(path, sizeof path, "/v1/tasks/%s/blocks/%s", c, a); /* a -> b -> c -> a */
    v = call(400, "POST", path, NULL);
    ASSERT_CONTAINS(json_string_value(json_object_get(v, "message")), "cycle");
    json_decref(v);
    snprintf(path, sizeof path, "/v1/tasks/%s", c);
    v = call(200, "GET", path, NULL);
    ASSERT_EQ(json_array_size(json_object_get(v, "blocks")), 0); /* nothing written */
    ASSERT_STREQ(json_string_value(json_object_get(v, "status")), "pending");
    json_decref(v);
    call_code(400, "EINVAL", "POST", "/v1/tasks", "{\"title\":\"x\",\"blocks\":\"abc\"}");
    call_code(400, "EINVAL", "POST", "/v1/tasks", "{\"title\":\"x\",\"tags\":[\"Bad Tag\"]}");
    call_code(400, "EINVAL", "POST", "/v1/tasks", "{\"title\":\"x\",\"tags\":[1]}");
    v = call(201, "POST", "/v1/tasks", "{\"title\":\"on the gpu\",\"tags\":[\"gpu\",\"big\"]}");
    ASSERT_STREQ(json_string_value(json_array_get(json_object_get(v, "tags"), 1)), "big");
    snprintf(path, sizeof path, "/v1/tasks/%s/cancel", json_string_value(json_object_get(v, "id")));
    json_decref(v);
    json_decref(call(200, "POST", path, NULL)); /* no agent has the tags: out of the way */
    call_code(404, "ENOTFOUND", "POST", "/v1/tasks",
              "{\"title\":\"x\",\"blocks\":[\"01a21c8f-0000-7000-8000-000000000000\"]}");
    call_code(400, "EINVAL", "POST", "/v1/tasks/dispatch", "{\"slots\":0}");
    /* Cancel c; then the worker task to dispatch: a new one, ready, of the worker kind. */
    snprintf(path, sizeof path, "/v1/tasks/%s/cancel", c);
    v = call(200, "POST", path, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(v, "status")), "cancelled");
    json_decref(v);
    call_code(409, "ESTATE", "POST", path, NULL);
    v = call(201, "POST", "/v1/tasks", "{\"title\":\"a worker's part\",\"kind\":\"worker\"}");
    snprintf(c, sizeof c, "%s", json_string_value(json_object_get(v, "id")));
    json_decref(v);
    v = call(200, "POST", "/v1/tasks/dispatch", "{\"slots\":4}");
    ASSERT(json_integer_value(json_object_get(v, "started")) >= 1);
    json_decref(v);
    snprintf(path, sizeof path, "/v1/tasks/%s", c);
    v = call(200, "GET", path, NULL);
    ASSERT(strcmp(json_string_value(json_object_get(v, "status")), "ready")); /* started */
    ASSERT(json_is_string(json_object_get(v, "agent")));
    char key[65];
    snprintf(key, sizeof key, "%s", json_string_value(json_object_get(v, "run_key")));
    json_decref(v);
    /* Its task ended (cancelled): a re-run of its run is refused, naming `vigil task add`, as
     * `vigil runs rerun` is (trial L7). */
    snprintf(path, sizeof path, "/v1/tasks/%s/cancel", c);
    json_decref(call(200, "POST", path, NULL));
    snprintf(path, sizeof path, "/v1/runs/%s/rerun", key);
    v = call(409, "POST", path, "{}");
    ASSERT_STREQ(json_string_value(json_object_get(v, "code")), "ESTATE");
    ASSERT_CONTAINS(json_string_value(json_object_get(v, "message")), "vigil task add");
    json_decref(v);
}

/* GET /v1/tasks (?status=), /v1/tasks/{task} and /v1/tasks/graph, as `vigil task list|show|
 * graph`: the edges as added, a status filter checked. */
TEST(tasks_over_http)
{
    char a[37], b[37], path[128];
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    vigil_runtime_options o = {.size = sizeof o, .store_uri = L.store};
    ASSERT_EQ(vigil_runtime_open(&o, &rt, &err), VIGIL_OK);
    ASSERT_EQ(vigil_task_add(rt, "collect the data", NULL, NULL, 0, b, &err), VIGIL_OK);
    const char *blocks[] = {b};
    ASSERT_EQ(vigil_task_add(rt, "fetch the sources", "worker", blocks, 1, a, &err), VIGIL_OK);
    vigil_runtime_close(rt);
    json_t *v = call(200, "GET", "/v1/tasks", NULL);
    ASSERT_STREQ(id_where(v, "title", "fetch the sources"), a);
    ASSERT_STREQ(id_where(v, "title", "collect the data"), b);
    json_decref(v);
    v = call(200, "GET", "/v1/tasks?status=running", NULL);
    ASSERT(!id_where(v, "title", "fetch the sources")); /* pending, not running */
    json_decref(v);
    refused_naming(400, "/v1/tasks?status=bogus",
                   "pending, ready, running, attention, done, failed or cancelled");
    snprintf(path, sizeof path, "/v1/tasks/%s", a);
    v = call(200, "GET", path, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(v, "title")), "fetch the sources");
    ASSERT_STREQ(json_string_value(json_array_get(json_object_get(v, "blocks"), 0)), b);
    json_decref(v);
    call_code(404, "ENOTFOUND", "GET", "/v1/tasks/01a21c8f-0000-7000-8000-000000000000", NULL);
    v = call(200, "GET", "/v1/tasks/graph", NULL);
    ASSERT_STREQ(id_where(json_object_get(v, "nodes"), "title", "collect the data"), b);
    json_t *e;
    size_t i;
    int found = 0;
    json_array_foreach (json_object_get(v, "edges"), i, e)
        found += !strcmp(json_string_value(json_object_get(e, "from")), a) &&
                 !strcmp(json_string_value(json_object_get(e, "to")), b);
    ASSERT_EQ(found, 1);
    json_decref(v);
    tasks_written_over_http(a, b);
}

/* ---- journals ------------------------------------------------------------------------------ */

/* GET /v1/agents/{agent}/journal is what `vigil journal export` writes; POSTed to another
 * daemon's store it brings the runs there (and once only); a bad line refuses the whole body. */
TEST(journal_export_and_import_over_http)
{
    static struct live J;
    char path[200];
    struct live_resp r;
    snprintf(path, sizeof path, "/v1/agents/%s/journal", agent_id);
    ASSERT_EQ(live_req(&L, "GET", "/v1/agents/helper/journal", NULL, NULL, 1, &r), 200);
    ASSERT_CONTAINS(r.headers, "Content-Type: application/x-ndjson");
    int lines = 0;
    for (char *line = r.body, *nl; line && *line; line = nl ? nl + 1 : NULL, lines++) {
        nl = strchr(line, '\n');
        json_t *rec = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        ASSERT(json_is_object(rec)); /* one JSON record a line */
        json_decref(rec);
    }
    ASSERT(lines > 2);
    live_start(&J, "http-journal", NULL);
    daemon_asked = &J;
    json_t *v = call(200, "POST", path, r.body);
    ASSERT_EQ(json_integer_value(json_object_get(v, "imported")), lines);
    json_decref(v);
    v = call(200, "POST", path, r.body); /* again: every record is there already */
    ASSERT_EQ(json_integer_value(json_object_get(v, "imported")), 0);
    json_decref(v);
    char url[300];
    snprintf(url, sizeof url, "/v1/runs?agent=%s", agent_id);
    v = call(200, "GET", url, NULL);
    ASSERT(json_array_size(json_object_get(v, "items")) >= 1); /* its runs, read here */
    json_decref(v);
    char *bad = malloc(strlen(r.body) + 16);
    snprintf(bad, strlen(r.body) + 16, "%s{not json\n", r.body);
    v = call(400, "POST", path, bad);
    ASSERT_STREQ(json_string_value(json_object_get(v, "code")), "EPARSE");
    ASSERT_CONTAINS(json_string_value(json_object_get(v, "message")), "line");
    json_decref(v);
    free(bad);
    call_code(400, "EINVAL", "POST", path, NULL);
    daemon_asked = &L;
    live_stop(&J);
    live_resp_free(&r);
    call_code(404, "ENOTFOUND", "GET", "/v1/agents/01a21c8f-0000-7000-8000-000000000000/journal",
              NULL);
}

/* GET /v1/mcp/servers (?agent=), as `vigil mcp list --json`: an agent's declaration, never
 * started by the listing; the agent filter takes a name. */
TEST(mcp_servers_over_http)
{
    json_decref(call(200, "POST", "/v1/agents",
                     "{\"name\":\"mcp-user\",\"prompt\":\"x\",\"mcp_servers\":{\"notes\":"
                     "{\"command\":[\"/nonexistent/mcp-notes\"],\"env\":{\"T\":\"${SECRET}\"}}}}"));
    json_t *v = call(200, "GET", "/v1/mcp/servers?agent=mcp-user", NULL);
    json_t *notes = json_object_get(v, "notes");
    ASSERT_STREQ(json_string_value(json_object_get(notes, "declared_in")), "agent \"mcp-user\"");
    ASSERT(has(json_object_get(notes, "declaration"), "${SECRET}")); /* as written, no value */
    json_decref(v);
    v = call(200, "GET", "/v1/mcp/servers", NULL);
    ASSERT(json_object_get(v, "notes") != NULL);
    json_decref(v);
    call_code(404, "ENOTFOUND", "GET", "/v1/mcp/servers?agent=nobody", NULL);
}

/* ---- the code sandbox ----------------------------------------------------------------------- */

/* GET /v1/sandbox and POST /v1/sandbox/run, as `vigil sandbox check|run`: a program's result,
 * a program's failure (200, ok false), an agent's gate refusing (its code's status), a bad
 * body. */
TEST(sandbox_over_http)
{
    json_t *v = call(200, "GET", "/v1/sandbox", NULL);
    int can_run = json_is_true(json_object_get(v, "can_run"));
    ASSERT(json_is_array(json_object_get(v, "offered")));
    json_decref(v);
    if (can_run) { /* a machine whose kernel refuses the layers answers ok false for each run */
        v = call(200, "POST", "/v1/sandbox/run", "{\"code\":\"print('hi') return 6*7\"}");
        ASSERT(json_is_true(json_object_get(v, "ok")));
        ASSERT_EQ(json_integer_value(json_object_get(v, "result")), 42);
        ASSERT_CONTAINS(json_string_value(json_object_get(v, "output")), "hi");
        json_decref(v);
        v = call(200, "POST", "/v1/sandbox/run", "{\"code\":\"error('boom')\"}");
        ASSERT(json_is_false(json_object_get(v, "ok")));
        ASSERT(has(json_object_get(v, "error"), "boom"));
        json_decref(v);
    }
    /* helper's manifest grants no execute_code: refused by its gate, nothing ran. */
    v = call(403, "POST", "/v1/sandbox/run", "{\"code\":\"return 1\",\"agent\":\"helper\"}");
    ASSERT_STREQ(json_string_value(json_object_get(v, "code")), "EDENIED");
    ASSERT_CONTAINS(json_string_value(json_object_get(v, "message")), "execute_code");
    json_decref(v);
    call_code(404, "ENOTFOUND", "POST", "/v1/sandbox/run",
              "{\"code\":\"return 1\",\"agent\":\"nobody\"}");
    call_code(400, "EINVAL", "POST", "/v1/sandbox/run", "{\"source\":\"return 1\"}");
    /* An unknown language's refusal lists every name taken (trial L8). */
    v = call(400, "POST", "/v1/sandbox/run", "{\"code\":\"return 1\",\"language\":\"cobol\"}");
    ASSERT_STREQ(json_string_value(json_object_get(v, "code")), "EINVAL");
    ASSERT_CONTAINS(json_string_value(json_object_get(v, "message")),
                    "use lua, typescript or javascript");
    json_decref(v);
}

/* ---- long calls off libmicrohttpd's threads ---------------------------------------------------
 */

/* A raw POST on fd, the daemon D's connection; its answer unread. */
static void post_on(struct live *D, int fd, const char *path, const char *body)
{
    char req[2048];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     path, D->port, D->token, strlen(body), body);
    ASSERT_EQ(send(fd, req, (size_t)n, 0), n);
}

/* A raw POST of a tool call on a connection of its own; the socket, its answer unread. */
static int post_raw(const char *path, const char *body)
{
    int fd = live_connect(&L);
    post_on(&L, fd, path, body);
    return fd;
}

/* Read fd until what came holds needle (into ans, cap bytes): 60 s at most (a safety bound). */
static void read_until(int fd, char *ans, size_t cap, const char *needle)
{
    size_t got = 0;
    ans[0] = '\0';
    while (!strstr(ans, needle) && got < cap - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ASSERT_EQ(poll(&p, 1, 60000), 1);
        ssize_t r = recv(fd, ans + got, cap - 1 - got, 0);
        ASSERT(r > 0);
        got += (size_t)r;
        ans[got] = '\0';
    }
}

/* How many files in dir start with prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
    char cmd[4600], out[32] = "";
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '^%s'", dir, prefix);
    FILE *f = popen(cmd, "r");
    ASSERT(f && fgets(out, sizeof out, f));
    pclose(f);
    return (int)strtol(out, NULL, 10);
}

/* The manifest of agent "holder" into body, whose tool "hold" waits while the file hold exists,
 * which it creates: its program marks its start beside it ("HOLD.PID"), then waits until the
 * file is gone. */
static void holder_manifest(const char *dir, char *hold, size_t hold_len, char *body,
                            size_t body_len)
{
    snprintf(hold, hold_len, "%s/hold-calls", dir);
    int f = open(hold, O_CREAT | O_WRONLY, 0600);
    ASSERT(f >= 0);
    close(f);
    json_t *m = json_pack("{s:s, s:s, s:[s], s:{s:{s:[s,s,s,s], s:s, s:i, s:b, s:s}}}", "name",
                          "holder", "prompt", "x", "tools", "hold", "command_tools", "hold",
                          "command", "/bin/sh", "-c",
                          "touch \"$0.$$\"; while [ -e \"$0\" ]; do sleep 0.05; done; echo "
                          "'{\"result\":\"released\"}'",
                          hold, "description", "Wait until released", "timeout_ms", 120000,
                          "mutating", 0, "risk", "low");
    char *text = json_dumps(m, JSON_COMPACT);
    snprintf(body, body_len, "%s", text);
    free(text);
    json_decref(m);
}

/* More tool calls that take their time than libmicrohttpd has threads: each waits on a worker
 * thread (or one on the thread that read it), so the API still answers while they all run;
 * then each answers its result. */
TEST(long_tool_calls_leave_the_api_serving)
{
    char hold[4400], body[9000];
    int fds[20], n = (int)VG_MIN(sysconf(_SC_NPROCESSORS_ONLN), 16) + 2;
    holder_manifest(L.dir, hold, sizeof hold, body, sizeof body);
    json_decref(call(200, "POST", "/v1/agents", body));
    for (int i = 0; i < n; i++)
        fds[i] = post_raw("/v1/agents/holder/tools/hold/call", "{}");
    for (int tries = 0; count_prefixed(L.dir, "hold-calls.") < n && tries < 3000; tries++)
        poll(NULL, 0, 10); /* each call's program marks its start: wait for all of them */
    ASSERT_EQ(count_prefixed(L.dir, "hold-calls."), n);
    json_t *v = call(200, "GET", "/v1/health", NULL); /* while every call is held */
    json_decref(v);
    for (int i = 0; i < n; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        ASSERT_EQ(poll(&p, 1, 0), 0); /* no call has answered yet */
    }
    ASSERT_EQ(unlink(hold), 0);
    for (int i = 0; i < n; i++) {
        char ans[8192];
        read_until(fds[i], ans, sizeof ans, "released");
        ASSERT(!strncmp(ans, "HTTP/1.1 200", 12));
        close(fds[i]);
    }
}

/* How many threads process pid has (its /proc/PID/status). */
static int threads_of(pid_t pid)
{
    char path[64], line[256];
    int n = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    ASSERT(f);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8))
            n = (int)strtol(line + 8, NULL, 10);
    fclose(f);
    return n;
}

/* A long call on the one connection of a thread of libmicrohttpd's pool runs on that thread (no
 * worker thread starts: the hand-offs to one and back were most of what HTTP added to a turn),
 * the API still answers on other connections meanwhile, and the answer comes on its kept-alive
 * connection even when the call outlasted the idle timeout (1 s here). */
TEST(a_long_call_alone_on_its_thread_runs_there)
{
    static struct live D;
    static const char *const args[] = {"--http-timeout-s", "1", NULL};
    char hold[4400], body[9000], req[9600], ans[8192];
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return; /* a pool of one thread never runs a long call itself */
    live_start(&D, "http-here", args);
    holder_manifest(D.dir, hold, sizeof hold, body, sizeof body);
    /* Created on a connection the daemon closes, so the call's is the only one open. */
    int n = snprintf(req, sizeof req,
                     "POST /v1/agents HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer "
                     "%s\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     D.port, D.token, strlen(body), body);
    ASSERT_EQ(live_raw(&D, req, (size_t)n, 30000, NULL, 0), 200);
    int threads = threads_of(D.pid), fd = live_connect(&D);
    post_on(&D, fd, "/v1/agents/holder/tools/hold/call", "{}");
    for (int tries = 0; count_prefixed(D.dir, "hold-calls.") < 1 && tries < 3000; tries++)
        poll(NULL, 0, 10); /* the call's program marks its start */
    ASSERT_EQ(count_prefixed(D.dir, "hold-calls."), 1);
    daemon_asked = &D;
    json_decref(call(200, "GET", "/v1/health", NULL)); /* another connection, served meanwhile */
    daemon_asked = &L;
    poll(NULL, 0, 2500); /* past libmicrohttpd's idle timeout (1 s), which only real time moves */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ASSERT_EQ(poll(&p, 1, 0), 0); /* still held, the connection still open */
    ASSERT_EQ(unlink(hold), 0);
    read_until(fd, ans, sizeof ans, "released");
    ASSERT(!strncmp(ans, "HTTP/1.1 200", 12));
    ASSERT_EQ(threads_of(D.pid), threads); /* no worker thread started for it */
    close(fd);
    live_stop(&D);
}

/* ---- delegation and the task graph on the event stream and /metrics ------------------------ */

static const char *DELEGATE =
    "{\"vigil_cassette\":1,\"exchanges\":["
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"spawn_agents\",\"arguments\":"
    "\"{\\\"requests\\\":[{\\\"agent\\\":\\\"helper2\\\",\\\"goal\\\":\\\"part\\\"},"
    "{\\\"agent\\\":\\\"nobody\\\",\\\"goal\\\":\\\"x\\\"},"
    "{\\\"agent\\\":\\\"nobody2\\\",\\\"goal\\\":\\\"y\\\"}]}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"Delegated.\"}},"
    "{\"response\":{\"text\":\"part done\"}},"
    "{\"response\":{\"text\":\"boss has it\"}}]}";

/* A spawn call's decisions, a child's end and a task's status changes are events, with their
 * kind filters, and counted in /metrics (trial C16 of session 30: nothing of delegation or the
 * task graph reached either). The daemon runs the agent loop on a scripted model. Each decision
 * is an event, two denials of one call too, and so is each status a task reaches, not only its
 * first (trial M5 and M2 of session 40: the log took them for repeats). */
TEST(delegation_and_tasks_on_events_and_metrics)
{
    static struct live D;
    static char ev[131072], tk[65536];
    size_t le = 0, lt = 0;
    char cas[4400], boss[64], helper[64];
    snprintf(cas, sizeof cas, "%s/delegate.json", L.dir);
    FILE *f = fopen(cas, "w");
    ASSERT(f != NULL);
    fputs(DELEGATE, f);
    fclose(f);
    setenv("VIGIL_LIVE_RUNNER", "loop", 1);
    setenv("VIGIL_MODEL_CASSETTE", cas, 1);
    live_start(&D, "http-delegation", NULL);
    unsetenv("VIGIL_LIVE_RUNNER");
    unsetenv("VIGIL_MODEL_CASSETTE");
    daemon_asked = &D;
    json_t *v = call(200, "POST", "/v1/agents",
                     "{\"name\":\"boss2\",\"prompt\":\"You split work.\","
                     "\"tools\":[\"spawn_agents\"],\"spawn\":{\"enabled\":true}}");
    snprintf(boss, sizeof boss, "%s",
             json_string_value(json_object_get(json_array_get(v, 0), "id")));
    json_decref(v);
    live_agent_create(&D, "helper2", helper, sizeof helper);
    int fe = live_stream_open(&D, "/v1/events?kind=spawn,child", NULL);
    int ft = live_stream_open(&D, "/v1/events?kind=task.status", NULL);
    ASSERT(live_stream_until(fe, ev, sizeof ev, &le, ": vigil events"));
    ASSERT(live_stream_until(ft, tk, sizeof tk, &lt, ": vigil events"));
    json_decref(call(202, "POST", "/v1/agents/boss2/wake", "{\"message\":\"split it\"}"));
    if (!live_stream_until(fe, ev, sizeof ev, &le, "event: child.ended"))
        TEST_FAIL_("no child.ended on the stream: %.3000s", ev);
    ASSERT(strstr(ev, "event: spawn.admitted") && strstr(ev, "event: spawn.denied"));
    const char *second = strstr(strstr(ev, "event: spawn.denied") + 1, "event: spawn.denied");
    if (!second)
        TEST_FAIL_("one spawn.denied for two denials: %.3000s", ev);
    ASSERT(strstr(ev, "\"status\":\"completed\"") && strstr(ev, helper));
    ASSERT(!strstr(ev, "event: run.") && !strstr(ev, "event: message")); /* filtered */
    v = call(201, "POST", "/v1/tasks", "{\"title\":\"watched\"}");
    char path[96];
    snprintf(path, sizeof path, "/v1/tasks/%s/cancel", json_string_value(json_object_get(v, "id")));
    json_decref(v);
    ASSERT(live_stream_until(ft, tk, sizeof tk, &lt, "event: task.status"));
    ASSERT(strstr(tk, "\"title\":\"watched\"") && strstr(tk, "\"previous\":null"));
    json_decref(call(200, "POST", path, NULL));
    if (!live_stream_until(ft, tk, sizeof tk, &lt, "\"status\":\"cancelled\""))
        TEST_FAIL_("no task.status for the cancel: %.3000s", tk);
    ASSERT(!strstr(tk, "event: spawn."));
    close(fe);
    close(ft);
    struct live_resp r;
    ASSERT_EQ(live_req(&D, "GET", "/metrics", NULL, NULL, 1, &r), 200);
    ASSERT_CONTAINS(r.body, "vigil_spawn_decisions_total{decision=\"admitted\"} 1");
    ASSERT_CONTAINS(r.body, "vigil_spawn_decisions_total{decision=\"denied\"} 2");
    ASSERT_CONTAINS(r.body, "vigil_children_ended_total{status=\"completed\"} 1");
    ASSERT_CONTAINS(r.body, "vigil_tasks{status=\"failed\"} 0");
    ASSERT_CONTAINS(r.body, "vigil_tasks{status=\"cancelled\"} 1");
    live_resp_free(&r);
    call_code(400, "EINVAL", "GET", "/v1/events?kind=spawn.bogus", NULL);
    daemon_asked = &L;
    live_stop(&D);
}

/* ---- a failing tool in /metrics ---------------------------------------------------------- */

static const char *CALL_SLOWFAIL =
    "{\"vigil_cassette\":1,\"exchanges\":["
    "{\"response\":{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"slowfail\",\"arguments\":"
    "\"{}\"}],\"stop_reason\":\"tool_use\"}},"
    "{\"response\":{\"text\":\"It is down.\"}}]}";

/* A tool call the event poller first sees running and that then fails is counted failed, by
 * outcome and by tool (trial J3: counted as first seen, it stayed "running", and a tool down on
 * every call showed nowhere an operator looks). */
TEST(a_call_seen_running_is_counted_by_how_it_ended)
{
    static struct live D;
    static char ev[65536];
    size_t le = 0;
    char cas[4400], hold[4400], id[64];
    snprintf(cas, sizeof cas, "%s/slowfail.json", L.dir);
    snprintf(hold, sizeof hold, "%s/hold-slowfail", L.dir);
    FILE *f = fopen(cas, "w");
    ASSERT(f != NULL);
    fputs(CALL_SLOWFAIL, f);
    fclose(f);
    ASSERT((f = fopen(hold, "w")) != NULL);
    fclose(f);
    setenv("VIGIL_LIVE_RUNNER", "loop", 1);
    setenv("VIGIL_MODEL_CASSETTE", cas, 1);
    live_start(&D, "http-slowfail", NULL);
    unsetenv("VIGIL_LIVE_RUNNER");
    unsetenv("VIGIL_MODEL_CASSETTE");
    daemon_asked = &D;
    json_t *m =
        json_pack("{s:s, s:s, s:[s], s:{s:{s:[s,s,s,s], s:s, s:b}}}", "name", "checker", "prompt",
                  "x", "tools", "slowfail", "command_tools", "slowfail", "command", "/bin/sh", "-c",
                  "while [ -e \"$0\" ]; do sleep 0.05; done; echo down >&2; exit 3", hold,
                  "description", "Check the site", "mutating", 0);
    char *body = json_dumps(m, JSON_COMPACT);
    json_t *v = call(200, "POST", "/v1/agents", body);
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(json_array_get(v, 0), "id")));
    json_decref(v);
    free(body);
    json_decref(m);
    int fe = live_stream_open(&D, "/v1/events?kind=tool_call,run.ended", NULL);
    ASSERT(live_stream_until(fe, ev, sizeof ev, &le, ": vigil events"));
    json_decref(call(202, "POST", "/v1/agents/checker/wake", "{\"message\":\"check\"}"));
    if (!live_stream_until(fe, ev, sizeof ev, &le, "\"status\":\"running\""))
        TEST_FAIL_("the call was not seen running: %.3000s", ev);
    ASSERT_EQ(unlink(hold), 0);
    if (!live_stream_until(fe, ev, sizeof ev, &le, "event: run.ended"))
        TEST_FAIL_("no run.ended: %.3000s", ev);
    close(fe);
    struct live_resp r;
    ASSERT_EQ(live_req(&D, "GET", "/metrics", NULL, NULL, 1, &r), 200);
    ASSERT_CONTAINS(r.body, "vigil_tool_calls_total{outcome=\"failed\"} 1");
    ASSERT(!strstr(r.body, "vigil_tool_calls_total{outcome=\"running\"}"));
    ASSERT_CONTAINS(r.body, "vigil_tool_calls_failed_total{tool=\"slowfail\"} 1");
    live_resp_free(&r);
    daemon_asked = &L;
    live_stop(&D);
}

/* ---- /openapi.json against the server ---------------------------------------------------------
 */

/* The documented path with its parameters filled in: a run and a message the chat test's, the
 * first other one the agent's id, a second one a memory label or tool name. */
static void fill(const char *templ, const char *id, char *out, size_t n)
{
    size_t o = 0;
    int k = 0;
    for (const char *p = templ; *p && o + 80 < n;) {
        if (!strncmp(p, "{run}", 5) || !strncmp(p, "{message}", 9)) {
            o += (size_t)snprintf(out + o, n - o, "%s", p[1] == 'r' ? run_id : record_id);
            p += strcspn(p, "}") + 1;
        } else if (*p == '{') {
            o += (size_t)snprintf(out + o, n - o, "%s", k++ ? "familiar" : id);
            p += strcspn(p, "}") + 1;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
}

/* ---- a small JSON Schema checker: what /openapi.json's schemas use ($ref to a component, type
 * (one or a list), enum, anyOf, required, properties, additionalProperties false, items) ---- */

static int type_is(const char *type, json_t *v)
{
    if (!strcmp(type, "integer"))
        return json_is_integer(v);
    if (!strcmp(type, "number"))
        return json_is_number(v);
    return (!strcmp(type, "string") && json_is_string(v)) ||
           (!strcmp(type, "boolean") && json_is_boolean(v)) ||
           (!strcmp(type, "object") && json_is_object(v)) ||
           (!strcmp(type, "array") && json_is_array(v)) ||
           (!strcmp(type, "null") && json_is_null(v));
}

static int type_holds(json_t *type, json_t *v)
{
    size_t i;
    json_t *t;
    if (json_is_string(type))
        return type_is(json_string_value(type), v);
    json_array_foreach (type, i, t)
        if (type_is(json_string_value(t), v))
            return 1;
    return !type;
}

/* Does v hold to schema (at: where v is, for the message)? 0, or 1 with why filled. */
static int schema_fails(json_t *doc, json_t *schema, json_t *v, const char *at, char *why, size_t n)
{
    const char *to = json_string_value(json_object_get(schema, "$ref")), *k;
    json_t *sub, *e;
    size_t i;
    char inner[256];
    if (to) /* "#/components/schemas/NAME" */
        return schema_fails(
            doc,
            json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"),
                            strrchr(to, '/') + 1),
            v, at, why, n);
    if (!schema)
        return snprintf(why, n, "%s: no such schema", at) > 0;
    json_t *any = json_object_get(schema, "anyOf");
    json_array_foreach (any, i, sub)
        if (!schema_fails(doc, sub, v, at, why, n))
            return 0;
    if (json_array_size(any))
        return 1; /* why: the last alternative's */
    if (!type_holds(json_object_get(schema, "type"), v)) {
        char *type = json_dumps(json_object_get(schema, "type"), JSON_ENCODE_ANY);
        snprintf(why, n, "%s: not of type %s", at, type ? type : "?");
        free(type);
        return 1;
    }
    int in_enum = !json_object_get(schema, "enum");
    json_array_foreach (json_object_get(schema, "enum"), i, e)
        in_enum |= json_equal(e, v);
    if (!in_enum)
        return snprintf(why, n, "%s: %s is not one of its enum", at,
                        json_string_value(v) ? json_string_value(v) : "the value") > 0;
    json_array_foreach (json_object_get(schema, "required"), i, e)
        if (json_is_object(v) && !json_object_get(v, json_string_value(e)))
            return snprintf(why, n, "%s: required member %s is absent", at, json_string_value(e)) >
                   0;
    json_object_foreach (json_is_object(v) ? v : NULL, k, e) {
        sub = json_object_get(json_object_get(schema, "properties"), k);
        snprintf(inner, sizeof inner, "%s.%s", at, k);
        if (!sub && json_is_false(json_object_get(schema, "additionalProperties")))
            return snprintf(why, n, "%s: not a member the schema has", inner) > 0;
        if (sub && schema_fails(doc, sub, e, inner, why, n))
            return 1;
    }
    json_array_foreach (json_is_array(v) ? v : NULL, i, e) {
        snprintf(inner, sizeof inner, "%s[%zu]", at, i);
        if (json_object_get(schema, "items") &&
            schema_fails(doc, json_object_get(schema, "items"), e, inner, why, n))
            return 1;
    }
    return 0;
}

/* The schema the document gives for an answer of this status and media type (NULL: none). */
static json_t *answer_schema(json_t *op, const char *status, const char *media)
{
    return json_object_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(op, "responses"), status), "content"),
            media),
        "schema");
}

/* The answer's body holds to the schema the document gives for its status (if any). */
static void expect_schema(json_t *doc, json_t *op, long status, const char *body, const char *what)
{
    char code[8], why[512];
    snprintf(code, sizeof code, "%ld", status);
    json_t *schema = answer_schema(op, code, "application/json");
    json_t *v = body ? json_loads(body, JSON_DECODE_ANY, NULL) : NULL;
    if (schema && !v)
        TEST_FAIL_("%s answered %ld, not JSON: %.200s", what, status, body ? body : "");
    if (schema && schema_fails(doc, schema, v, "answer", why, sizeof why))
        TEST_FAIL_("%s answered %ld against its documented schema: %s; the answer: %.600s", what,
                   status, why, body);
    json_decref(v);
}

TEST(openapi_matches_the_server)
{
    char id[64], path[512], method[16];
    json_t *doc = call(200, "GET", "/openapi.json", NULL), *item, *op;
    const char *templ, *m;
    int checked = 0;
    ASSERT_STREQ(json_string_value(json_object_get(doc, "openapi")), "3.1.0");
    create_agent("openapi", id, sizeof id);
    json_object_foreach (json_object_get(doc, "paths"), templ, item) {
        json_object_foreach (item, m, op) {
            size_t k = 0;
            for (; m[k] && k + 1 < sizeof method; k++)
                method[k] = (char)(m[k] - 'a' + 'A');
            method[k] = '\0';
            if (!strcmp(templ, "/v1/events") || strstr(templ, "/destroy") ||
                !strcmp(method, "DELETE"))
                continue; /* a stream does not end; destroying is checked in lifecycle */
            /* Each path parameter is named by the template's segment (not "id2"). */
            size_t pi;
            json_t *prm;
            json_array_foreach (json_object_get(op, "parameters"), pi, prm) {
                char seg[80];
                const char *pname = json_string_value(json_object_get(prm, "name"));
                snprintf(seg, sizeof seg, "{%s}", pname ? pname : "");
                if (!strcmp(json_string_value(json_object_get(prm, "in")), "path") &&
                    (!strstr(templ, seg) || !strcmp(seg, "{id2}")))
                    TEST_FAIL_("%s %s: path parameter %s is not one of its segments", method, templ,
                               seg);
            }
            fill(templ, id, path, sizeof path);
            const char *body = json_object_get(op, "requestBody") ? "{}" : NULL;
            struct live_resp r;
            long st = live_req(&L, method, path, body, NULL, 1, &r);
            char code[8];
            snprintf(code, sizeof code, "%ld", st);
            if (!json_object_get(json_object_get(op, "responses"), code))
                TEST_FAIL_("%s %s answered %ld, not in its documented responses: %.200s", method,
                           path, st, r.body);
            if (strstr(r.body, "no such route") || st == 405)
                TEST_FAIL_("%s %s is documented but not routed", method, path);
            /* The content type the document gives for the answer (errors: JSON). */
            json_t *content =
                json_object_get(json_object_get(json_object_get(op, "responses"), code), "content");
            char want[100];
            snprintf(want, sizeof want, "Content-Type: %s",
                     json_object_size(content) ? json_object_iter_key(json_object_iter(content))
                                               : "application/json");
            if (st != 204)
                ASSERT_CONTAINS(r.headers, want);
            char what[600];
            snprintf(what, sizeof what, "%s %s", method, path);
            expect_schema(doc, op, st, r.body, what);
            live_resp_free(&r);
            checked++;
        }
    }
    ASSERT(checked >= 35);
    /* The run controls are documented with the success each answers (run_controls sees it). */
    const char *const ctl[][2] = {{"/v1/runs/{run}/cancel", "200"},
                                  {"/v1/runs/{run}/rerun", "202"},
                                  {"/v1/runs/{run}/resume", "202"}};
    for (size_t i = 0; i < VG_ARRAY_LEN(ctl); i++) {
        op = json_object_get(json_object_get(json_object_get(doc, "paths"), ctl[i][0]), "post");
        ASSERT(json_object_get(json_object_get(op, "responses"), ctl[i][1]) != NULL);
        ASSERT(json_object_get(json_object_get(op, "responses"), "409") != NULL);
    }
    json_decref(doc);
}

/* The operation of "METHOD path" in the document. */
static json_t *op_of(json_t *doc, const char *method, const char *templ)
{
    return json_object_get(json_object_get(json_object_get(doc, "paths"), templ), method);
}

/* A real answer of a documented route, checked against the schema the document gives it. */
static void real_answer(json_t *doc, const char *method, const char *templ, const char *path,
                        const char *body, long want)
{
    struct live_resp r;
    long st = live_req(&L, method, path, body, NULL, 1, &r);
    char what[600];
    snprintf(what, sizeof what, "%s %s", method, path);
    if (st != want)
        TEST_FAIL_("%s answered %ld, expected %ld: %.300s", what, st, want, r.body);
    char lower[8] = {0};
    for (size_t i = 0; method[i] && i + 1 < sizeof lower; i++)
        lower[i] = (char)(method[i] - 'A' + 'a');
    json_t *op = op_of(doc, lower, templ);
    char code[8];
    snprintf(code, sizeof code, "%ld", st);
    if (!answer_schema(op, code, "application/json"))
        TEST_FAIL_("%s %s: its %ld answer has no schema", method, templ, st);
    expect_schema(doc, op, st, r.body, what);
    live_resp_free(&r);
}

/* A report written through the gate with its confidence and sources is read back over HTTP,
 * its earlier one as history, each checked against the document's schema; bad queries are 400,
 * a scope without a report 404; the confidence comes back as it was given, 0.8. proves: S0-134 */
TEST(reports_over_http)
{
    char path[256], id[64];
    json_t *made = call(200, "POST", "/v1/agents",
                        "{\"name\":\"reporter\",\"tools\":"
                        "[\"set_report\"],\"reports\":{\"fresh_for\":"
                        "{\"current\":\"never\",\"daily\":\"2d\"}}}");
    snprintf(id, sizeof id, "%s",
             json_string_value(json_object_get(json_array_get(made, 0), "id")));
    json_decref(made);
    snprintf(path, sizeof path, "/v1/agents/%s/tools/set_report/call", id);
    json_decref(call(200, "POST", path,
                     "{\"arguments\":{\"scope\":\"daily\",\"markdown\":\"# first day\"}}"));
    json_decref(call(200, "POST", path,
                     "{\"arguments\":{\"scope\":\"daily\",\"markdown\":\"# second day\","
                     "\"confidence\":0.8,\"sources\":[\"task-7\",\"https://example.org/a\"]}}"));
    snprintf(path, sizeof path, "/v1/agents/%s/report?scope=daily&history=5", id);
    /* the confidence as given, not jansson's 0.80000000000000004 (trial J5) */
    struct live_resp raw;
    ASSERT_EQ(live_req(&L, "GET", path, NULL, NULL, 1, &raw), 200);
    ASSERT_CONTAINS(raw.body, "\"confidence\":0.8,");
    live_resp_free(&raw);
    json_t *v = call(200, "GET", path, NULL), *r = json_object_get(v, "report");
    ASSERT_STREQ(json_string_value(json_object_get(r, "markdown")), "# second day");
    ASSERT(json_real_value(json_object_get(r, "confidence")) == 0.8);
    ASSERT_STREQ(json_string_value(json_array_get(json_object_get(r, "sources"), 1)),
                 "https://example.org/a");
    ASSERT(json_is_false(json_object_get(r, "stale")));
    ASSERT(json_is_string(json_object_get(r, "stale_at"))); /* daily: 2d, from the manifest */
    json_t *older = json_object_get(v, "history");
    ASSERT_EQ(json_array_size(older), 1);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(older, 0), "markdown")),
                 "# first day");
    json_decref(v);
    snprintf(path, sizeof path, "/v1/agents/%s/report", id); /* current: none written */
    call_code(404, "ENOTFOUND", "GET", path, NULL);
    snprintf(path, sizeof path, "/v1/agents/%s/report?scope=yearly", id);
    call_code(400, "EINVAL", "GET", path, NULL);
    snprintf(path, sizeof path, "/v1/agents/%s/report?scope=daily&history=many", id);
    call_code(400, "EINVAL", "GET", path, NULL);
    call_code(404, "ENOTFOUND", "GET", "/v1/agents/nobody/report", NULL);
    json_t *doc = call(200, "GET", "/openapi.json", NULL);
    snprintf(path, sizeof path, "/v1/agents/%s/report?scope=daily&history=1", id);
    real_answer(doc, "GET", "/v1/agents/{agent}/report", path, NULL, 200);
    json_decref(doc);
}

/* An event stream's events (event: NAME, data: JSON) checked against the document's schema of
 * each name's data (x-vigil-event-data); returns how many were checked. */
static int events_hold(json_t *doc, const char *text)
{
    json_t *by_name = json_object_get(
        json_object_get(
            json_object_get(
                json_object_get(json_object_get(op_of(doc, "get", "/v1/events"), "responses"),
                                "200"),
                "content"),
            "text/event-stream"),
        "x-vigil-event-data");
    int n = 0;
    for (const char *e = strstr(text, "\nevent: "); e; e = strstr(e + 1, "\nevent: ")) {
        char name[64], why[512];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(e + 8, "\n"), e + 8);
        const char *data = strstr(e, "\ndata: ");
        json_t *schema = json_object_get(by_name, name);
        if (!data || !schema)
            continue;
        json_t *v = json_loadb(data + 7, strcspn(data + 7, "\n"), 0, NULL);
        if (!v || schema_fails(doc, schema, v, name, why, sizeof why))
            TEST_FAIL_("event %s against its documented data: %s: %.400s", name,
                       v ? why : "not JSON", data + 7);
        json_decref(v);
        n++;
    }
    return n;
}

/* Trial F17: the document types what the server takes and answers. A fixed body's members each
 * have a type, the ones a route needs are required; the main answers (agent, agent list, run
 * list and item, run, chat outcome, approval, budget, a wake's run key, error) and the event
 * stream's data have schemas, and the server's real answers hold to them. */
TEST(openapi_types_what_the_server_takes_and_answers)
{
    char path[256];
    json_t *doc = call(200, "GET", "/openapi.json", NULL), *item, *op, *member;
    const char *templ, *m, *name;
    int typed = 0;
    json_object_foreach (json_object_get(doc, "paths"), templ, item) {
        json_object_foreach (item, m, op) {
            json_t *props = json_object_get(
                json_object_get(
                    json_object_get(json_object_get(json_object_get(op, "requestBody"), "content"),
                                    "application/json"),
                    "schema"),
                "properties");
            json_object_foreach (props, name, member) {
                if (!json_object_get(member, "type") && !json_object_get(member, "enum"))
                    TEST_FAIL_("%s %s: body member %s has no type", m, templ, name);
                typed++;
            }
        }
    }
    ASSERT(typed >= 40);
    json_t *chat = json_object_get(
        json_object_get(
            json_object_get(
                json_object_get(op_of(doc, "post", "/v1/agents/{agent}/chat"), "requestBody"),
                "content"),
            "application/json"),
        "schema");
    ASSERT(has(json_object_get(chat, "required"), "\"text\"") &&
           !has(json_object_get(chat, "required"), "session"));
    ASSERT(has(json_object_get(json_object_get(chat, "properties"), "text"), "\"string\""));
    ASSERT(has(op_of(doc, "get", "/v1/runs"), "\"interrupted\"")); /* status= its values */
    ASSERT(has(op_of(doc, "get", "/v1/events"), "Last-Event-ID"));

    /* Real answers against their schemas; the events of a turn against theirs. */
    static char events[65536];
    size_t len = 0;
    int fd = live_stream_open(&L, "/v1/events", NULL);
    ASSERT(live_stream_until(fd, events, sizeof events, &len, ": vigil events"));
    real_answer(doc, "GET", "/v1/agents", "/v1/agents", NULL, 200);
    snprintf(path, sizeof path, "/v1/agents/%s", agent_id);
    real_answer(doc, "GET", "/v1/agents/{agent}", path, NULL, 200);
    snprintf(path, sizeof path, "/v1/agents/%s/chat", agent_id);
    real_answer(doc, "POST", "/v1/agents/{agent}/chat", path, "{\"text\":\"typed\"}", 200);
    real_answer(doc, "POST", "/v1/agents/{agent}/chat", path, "{\"text\":5}", 400);
    snprintf(path, sizeof path, "/v1/agents/%s/budget", agent_id);
    real_answer(doc, "GET", "/v1/agents/{agent}/budget", path, NULL, 200);
    snprintf(path, sizeof path, "/v1/agents/%s/wake", agent_id);
    real_answer(doc, "POST", "/v1/agents/{agent}/wake", path, "{}", 202);
    snprintf(path, sizeof path, "/v1/runs?agent=%s", agent_id);
    real_answer(doc, "GET", "/v1/runs", path, NULL, 200);
    snprintf(path, sizeof path, "/v1/runs/%s", run_id);
    real_answer(doc, "GET", "/v1/runs/{run}", path, NULL, 200);
    real_answer(doc, "GET", "/v1/runs/{run}", "/v1/runs/0123456789abcdef", NULL, 404);
    /* A call that waits for a person: the approvals list and its event are not empty. */
    json_t *made = call(200, "POST", "/v1/agents",
                        "{\"name\":\"typed\",\"tools\":[\"set_report\"],"
                        "\"require_approval\":[\"set_report\"]}");
    snprintf(path, sizeof path, "/v1/agents/%s/tools/set_report/call",
             json_string_value(json_object_get(json_array_get(made, 0), "id")));
    json_decref(made);
    live_req(&L, "POST", path, "{\"arguments\":{\"scope\":\"current\",\"markdown\":\"x\"}}", NULL,
             1, NULL);
    json_t *pending = call(200, "GET", "/v1/approvals?status=pending", NULL);
    ASSERT(json_array_size(pending) >= 1);
    json_decref(pending);
    real_answer(doc, "GET", "/v1/approvals", "/v1/approvals?status=pending", NULL, 200);
    ASSERT(live_stream_until(fd, events, sizeof events, &len, "event: approval.requested"));
    ASSERT(live_stream_until(fd, events, sizeof events, &len, "event: run.ended"));
    close(fd);
    ASSERT(events_hold(doc, events) >= 3); /* run.started, its messages, run.ended */
    json_decref(doc);
}

/* Every POST whose body is a fixed set of members (the document's additionalProperties false)
 * refuses a member it does not take, 400 naming it, before doing anything: a typo such as
 * {"promt": ...} is never ignored (trial C7 of session 30: a re-run took it and answered 202). */
TEST(a_fixed_body_refuses_an_unknown_member_naming_it)
{
    char id[64], path[512];
    json_t *doc = call(200, "GET", "/openapi.json", NULL), *item, *op;
    const char *templ, *m;
    int checked = 0;
    create_agent("members", id, sizeof id);
    json_object_foreach (json_object_get(doc, "paths"), templ, item) {
        json_object_foreach (item, m, op) {
            json_t *schema = json_object_get(
                json_object_get(json_object_get(json_object_get(op, "requestBody"), "content"),
                                "application/json"),
                "schema");
            if (strcmp(m, "post") ||
                !json_is_false(json_object_get(schema, "additionalProperties")))
                continue;
            fill(templ, id, path, sizeof path);
            json_t *v = call(400, "POST", path, "{\"no_such_member\":1}");
            ASSERT_STREQ(json_string_value(json_object_get(v, "code")), "EINVAL");
            ASSERT(has(v, "unknown member \\\"no_such_member\\\""));
            json_decref(v);
            checked++;
        }
    }
    ASSERT(checked >= 20);
    /* resume takes only a prompt; its type error names the prompt alone. */
    json_t *rs = json_object_get(
        json_object_get(json_object_get(doc, "paths"), "/v1/runs/{run}/resume"), "post");
    ASSERT(has(rs, "\"prompt\"") && !has(rs, "\"model\""));
    json_t *v = call(400, "POST", "/v1/runs/0123456789abcdef/resume", "{\"prompt\":5}");
    ASSERT(has(v, "prompt") && !has(v, "model"));
    json_decref(v);
    json_decref(doc);
}

int main(void)
{
    live_start(&L, "http-api", NULL);
    RUN(meta_routes);
    RUN(agents_from_manifests);
    RUN(agents_from_yaml_manifests);
    RUN(agent_config_over_http_is_checked_as_a_manifest);
    RUN(agent_list_cursors_under_inserts);
    RUN(chat_whole_and_runs);
    RUN(chat_sent_again_with_its_key_is_not_run_twice);
    RUN(run_list_cursors_under_inserts);
    RUN(runs_newest_first_in_api_and_cli);
    RUN(chat_streamed);
    RUN(wakes_subscriptions_timers);
    RUN(agent_by_name);
    RUN(list_filters_refused);
    RUN(approvals_memory_budget_tools);
    RUN(a_person_sets_and_deletes_memory);
    RUN(live_events);
    RUN(kill_and_metrics);
    RUN(status_over_http);
    RUN(openapi_matches_the_server);
    RUN(openapi_types_what_the_server_takes_and_answers);
    RUN(reports_over_http);
    RUN(a_fixed_body_refuses_an_unknown_member_naming_it);
    RUN(run_controls);
    RUN(delegation_and_tasks_on_events_and_metrics);
    RUN(a_call_seen_running_is_counted_by_how_it_ended);
    RUN(lineage_over_http);
    RUN(tasks_over_http);
    RUN(mcp_servers_over_http);
    RUN(sandbox_over_http);
    RUN(journal_export_and_import_over_http);
    RUN(long_tool_calls_leave_the_api_serving);
    RUN(a_long_call_alone_on_its_thread_runs_there);
    RUN(lifecycle);
    live_stop(&L);
    return 0;
}
