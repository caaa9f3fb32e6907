/*
 * openapi.c: GET /openapi.json, an OpenAPI 3.1 document built from the route table, so every
 * route the server answers is in it and nothing else is. Each operation lists its success
 * status and the error statuses of the code table a request can meet; a fixed body's members
 * carry their types and which are required, and the main answers their schemas (components),
 * which tests/http/test_http_api.c checks against what the server really answers.
 */
#include "base/common.h"
#include "base/json.h"

#include "http/http_int.h"

/* The answers' schemas, by component name, as JSON text. Members an answer always has are
 * required; an answer may carry more members than listed (a later version adds some). */
static const char *const SCHEMAS[][2] = {
    {"Error", "{\"type\":\"object\",\"required\":[\"code\",\"message\",\"status\"],"
              "\"properties\":{\"code\":{\"type\":\"string\"},\"message\":{\"type\":\"string\"},"
              "\"status\":{\"type\":\"integer\"},\"turn\":{\"$ref\":\"#/components/schemas/"
              "ChatOutcome\"},\"upstream\":{\"type\":\"boolean\"}}}"},
    {"Usage",
     "{\"type\":\"object\",\"required\":[\"input_tokens\",\"output_tokens\","
     "\"cached_tokens\"],\"properties\":{\"input_tokens\":{\"type\":\"integer\"},"
     "\"output_tokens\":{\"type\":\"integer\"},\"cached_tokens\":{\"type\":\"integer\"}}}"},
    {"Agent",
     "{\"type\":\"object\",\"required\":[\"id\",\"name\",\"kind\",\"lifecycle\",\"config\","
     "\"created_at\",\"updated_at\"],\"properties\":{\"id\":{\"type\":\"string\"},"
     "\"name\":{\"type\":\"string\"},\"kind\":{\"type\":\"string\"},\"lifecycle\":{\"enum\":"
     "[\"created\",\"active\",\"dormant\",\"destroyed\"]},\"lifecycle_reason\":{\"type\":"
     "[\"string\",\"null\"]},\"mode\":{\"type\":\"string\"},\"model\":{\"type\":[\"string\","
     "\"null\"]},\"prompt\":{\"type\":[\"string\",\"null\"]},\"config\":{\"type\":\"object\"},"
     "\"visibility\":{\"type\":\"string\"},\"allowed_scopes\":{\"type\":\"array\",\"items\":"
     "{\"type\":\"string\"}},\"created_at\":{\"type\":\"string\"},\"updated_at\":{\"type\":"
     "\"string\"},\"destroyed_at\":{\"type\":[\"string\",\"null\"]},\"schema_version\":"
     "{\"type\":\"integer\"}}}"},
    {"AgentList", "{\"type\":\"object\",\"required\":[\"items\",\"next_cursor\"],\"properties\":"
                  "{\"items\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/schemas/"
                  "Agent\"}},\"next_cursor\":{\"type\":[\"string\",\"null\"]}}}"},
    {"AgentShow",
     "{\"type\":\"object\",\"required\":[\"agent\",\"report\",\"runtime\",\"state\"],"
     "\"properties\":{\"agent\":{\"$ref\":\"#/components/schemas/Agent\"},\"report\":{\"type\":"
     "[\"object\",\"null\"],\"properties\":{\"markdown\":{\"type\":\"string\"}}},\"runtime\":"
     "{\"type\":[\"object\",\"null\"]},\"state\":{\"type\":[\"object\",\"null\"]}}}"},
    {"Report",
     "{\"type\":\"object\",\"required\":[\"id\",\"scope\",\"markdown\",\"seq\","
     "\"created_at\",\"stale_at\",\"stale\"],\"properties\":{\"id\":{\"type\":\"string\"},"
     "\"scope\":{\"enum\":[\"current\",\"daily\",\"weekly\",\"monthly\"]},\"markdown\":"
     "{\"type\":\"string\"},\"seq\":{\"type\":\"integer\"},\"created_at\":{\"type\":"
     "\"string\"},\"confidence\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1},"
     "\"sources\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"stale_at\":"
     "{\"type\":[\"string\",\"null\"]},\"stale\":{\"type\":\"boolean\"}}}"},
    {"ReportRead",
     "{\"type\":\"object\",\"required\":[\"agent_id\",\"scope\",\"report\"],"
     "\"properties\":{\"agent_id\":{\"type\":\"string\"},\"scope\":{\"type\":\"string\"},"
     "\"report\":{\"$ref\":\"#/components/schemas/Report\"},\"history\":{\"type\":"
     "\"array\",\"items\":{\"$ref\":\"#/components/schemas/Report\"}}}}"},
    {"RunItem",
     "{\"type\":\"object\",\"required\":[\"run_id\",\"agent_id\",\"status\",\"run_key\","
     "\"wake_reason\",\"started_at\",\"ended_at\",\"model_calls\",\"tool_calls\","
     "\"cost_micros\",\"usage\",\"error\"],\"properties\":{\"run_id\":{\"type\":\"string\"},"
     "\"agent_id\":{\"type\":\"string\"},\"status\":{\"$ref\":\"#/components/schemas/"
     "RunStatus\"},\"run_key\":{\"type\":\"string\"},\"wake_reason\":{\"type\":\"string\"},"
     "\"started_at\":{\"type\":\"string\"},\"ended_at\":{\"type\":[\"string\",\"null\"]},"
     "\"duration_ms\":{\"type\":[\"integer\",\"null\"]},\"parent_run_id\":{\"type\":[\"string\","
     "\"null\"]},\"model\":{\"type\":[\"string\",\"null\"]},\"model_calls\":{\"type\":"
     "\"integer\"},\"steps\":{\"type\":\"integer\"},\"tool_calls\":{\"type\":\"integer\"},"
     "\"cost_micros\":{\"type\":\"integer\"},\"usage\":{\"anyOf\":[{\"$ref\":"
     "\"#/components/schemas/Usage\"},{\"type\":\"null\"}],\"description\":\"null in "
     "run.started\"},\"summary_preview\":{\"type\":[\"string\",\"null\"]},\"summary_truncated\":{"
     "\"type\":"
     "\"boolean\"},\"error\":{\"type\":[\"string\",\"null\"],\"description\":\"why the run "
     "failed or was interrupted (null when it completed)\"}}}"},
    {"RunStatus", "{\"enum\":[\"queued\",\"running\",\"completed\",\"failed\",\"interrupted\","
                  "\"canceled\",\"crashed\"]}"},
    {"RunList", "{\"type\":\"object\",\"required\":[\"items\",\"next_cursor\"],\"properties\":"
                "{\"items\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/schemas/"
                "RunItem\"}},\"next_cursor\":{\"type\":[\"string\",\"null\"]}}}"},
    {"Run",
     "{\"type\":\"object\",\"required\":[\"run_id\",\"agent_id\",\"status\",\"run_key\","
     "\"started_at\",\"usage\",\"error\"],\"properties\":{\"run_id\":{\"type\":\"string\"},"
     "\"agent_id\":{\"type\":\"string\"},\"status\":{\"$ref\":\"#/components/schemas/"
     "RunStatus\"},\"run_key\":{\"type\":\"string\"},\"wake_reason\":{\"type\":\"string\"},"
     "\"thread_id\":{\"type\":\"string\"},\"started_at\":{\"type\":\"string\"},\"ended_at\":"
     "{\"type\":[\"string\",\"null\"]},\"summary\":{\"type\":[\"string\",\"null\"]},\"error\":"
     "{\"type\":[\"string\",\"null\"]},\"usage\":{\"$ref\":\"#/components/schemas/Usage\"},"
     "\"model_calls\":{\"type\":\"integer\"},\"tool_calls\":{\"type\":\"integer\"},"
     "\"cost_micros\":{\"type\":\"integer\"},\"children\":{\"type\":\"array\"},"
     "\"spawn_decisions\":{\"type\":\"array\"}}}"},
    {"ChatOutcome",
     "{\"type\":\"object\",\"required\":[\"run_id\",\"end\",\"reply\",\"steps\",\"tool_calls\","
     "\"usage\",\"stop_reason\",\"cost_usd\"],\"properties\":{\"run_id\":{\"type\":\"string\"},"
     "\"end\":{\"type\":\"string\"},\"reply\":{\"type\":[\"string\",\"null\"]},\"steps\":"
     "{\"type\":\"integer\"},\"tool_calls\":{\"type\":\"integer\"},\"usage\":{\"$ref\":"
     "\"#/components/schemas/Usage\"},\"stop_reason\":{\"type\":[\"string\",\"null\"]},"
     "\"cost_usd\":{\"type\":\"number\"},\"scripted\":{\"type\":\"boolean\"}}}"},
    {"Approval",
     "{\"type\":\"object\",\"required\":[\"id\",\"agent_id\",\"tool\",\"status\",\"created_at\","
     "\"operation_id\",\"preview\"],\"properties\":{\"id\":{\"type\":\"string\"},\"agent_id\":"
     "{\"type\":\"string\"},\"tool\":{\"type\":\"string\"},\"status\":{\"enum\":[\"pending\","
     "\"approved\",\"rejected\",\"expired\"]},\"created_at\":{\"type\":\"string\"},"
     "\"expires_at\":{\"type\":[\"string\",\"null\"]},\"operation_id\":{\"type\":\"string\"},"
     "\"preview\":{\"type\":\"object\"},\"request\":{\"type\":\"object\"},\"reason\":{\"type\":"
     "[\"string\",\"null\"]},\"resolved_by\":{\"type\":[\"string\",\"null\"]}}}"},
    {"ApprovalList", "{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/schemas/"
                     "Approval\"}}"},
    {"Budget", "{\"type\":\"object\",\"required\":[\"agent_id\",\"day\",\"tokens\","
               "\"cost_micros\",\"steps\",\"tool_calls\",\"wall_ms\"],\"properties\":{"
               "\"agent_id\":{\"type\":\"string\"},\"day\":{\"type\":\"string\"},\"tokens\":"
               "{\"type\":\"integer\"},\"cost_micros\":{\"type\":\"integer\"},\"steps\":{\"type\":"
               "\"integer\"},\"tool_calls\":{\"type\":\"integer\"},\"wall_ms\":{\"type\":"
               "\"integer\"}}}"},
    {"RunKey", "{\"type\":\"object\",\"required\":[\"run_key\"],\"properties\":{\"run_key\":"
               "{\"type\":\"string\"}}}"},
    {"ToolCallOutcome",
     "{\"description\":\"The recorded outcome of a tool call made through the gate; a "
     "refusal is the same body with code and message, answered with that code's status\","
     "\"type\":\"object\",\"required\":[\"operation_id\",\"status\",\"run_key\"],"
     "\"properties\":{\"operation_id\":{\"type\":\"string\"},\"status\":{\"type\":"
     "\"string\"},\"run_key\":{\"type\":\"string\"},\"result\":{},\"error_code\":"
     "{\"type\":[\"string\",\"null\"]},\"code\":{\"type\":\"string\"},\"message\":"
     "{\"type\":\"string\"}}}"},
    {"Health", "{\"type\":\"object\",\"required\":[\"ok\"],\"properties\":{\"ok\":"
               "{\"type\":\"boolean\"}}}"},
    {"Status",
     "{\"description\":\"vigil status: the store, its daemons, the wake queue, what waits for a "
     "person, and one line per thing that needs a person (attention)\",\"type\":\"object\","
     "\"required\":[\"now_ms\",\"store\",\"daemons\",\"kill_switches\",\"agents\",\"wakes\","
     "\"approvals_pending\",\"in_doubt\",\"memory_pending\",\"next_timer\",\"attention\"],"
     "\"properties\":{\"now_ms\":{\"type\":\"integer\"},\"store\":{\"type\":\"object\","
     "\"required\":[\"uri\",\"kind\",\"bytes\",\"used_bytes\",\"schema_version\"]},"
     "\"daemons\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"required\":[\"host\","
     "\"pid\",\"stale\"]}},\"kill_switches\":{\"type\":\"array\"},\"agents\":{\"type\":"
     "\"object\"},\"wakes\":{\"type\":\"object\",\"required\":[\"queued\",\"running\","
     "\"failed\",\"orphaned\",\"oldest_queued_age_ms\"]},\"approvals_pending\":{\"type\":"
     "\"integer\"},\"in_doubt\":{\"type\":\"integer\"},\"memory_pending\":{\"type\":"
     "\"integer\"},\"next_timer\":{\"type\":[\"object\",\"null\"]},\"attention\":{\"type\":"
     "\"array\",\"items\":{\"type\":\"string\"}}}}"},
    {"Version", "{\"type\":\"object\",\"required\":[\"version\",\"version_number\"],"
                "\"properties\":{\"version\":{\"type\":\"string\"},\"version_number\":"
                "{\"type\":\"integer\"}}}"},
    {"WakeList",
     "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"required\":[\"run_key\","
     "\"agent_id\",\"reason\",\"status\",\"created_at\"],\"properties\":{\"run_key\":"
     "{\"type\":\"string\"},\"agent_id\":{\"type\":\"string\"},\"reason\":{\"type\":"
     "\"string\"},\"status\":{\"enum\":[\"queued\",\"started\",\"completed\",\"skipped\","
     "\"failed\",\"cancelled\"]},\"created_at\":{\"type\":\"string\"},\"error\":"
     "{\"type\":[\"string\",\"null\"]}}}}"},
    {"EventData",
     "{\"description\":\"The data of an event of GET /v1/events, by the event's name (its "
     "`event:` line): run.started and run.ended a RunItem; message and tool_call the item with "
     "run_id and agent_id; approval.requested an Approval; kill {switches}; gap {missed_from, "
     "resume_at}. Every event's data is a JSON object.\",\"type\":\"object\"}"},
    {"EventItem", "{\"type\":\"object\",\"required\":[\"run_id\",\"agent_id\"],\"properties\":"
                  "{\"run_id\":{\"type\":\"string\"},\"agent_id\":{\"type\":\"string\"}}}"},
    {"KillEvent", "{\"type\":\"object\",\"required\":[\"switches\"],\"properties\":{"
                  "\"switches\":{\"type\":\"array\"}}}"},
    {"Gap", "{\"type\":\"object\",\"required\":[\"missed_from\",\"resume_at\"],\"properties\":"
            "{\"missed_from\":{\"type\":\"integer\"},\"resume_at\":{\"type\":\"integer\"}}}"},
};

/* Each answer given a schema: the component of the success answer of "METHOD pattern". */
static const char *const ANSWERS[][2] = {
    {"GET /v1/health", "Health"},
    {"GET /v1/version", "Version"},
    {"GET /v1/agents", "AgentList"},
    {"POST /v1/agents/{agent}/pause", "AgentShow"},
    {"POST /v1/agents/{agent}/resume", "AgentShow"},
    {"POST /v1/agents/{agent}/destroy", "AgentShow"},
    {"GET /v1/wakes", "WakeList"},
    {"GET /v1/agents/{agent}", "AgentShow"},
    {"POST /v1/agents/{agent}/chat", "ChatOutcome"},
    {"POST /v1/agents/{agent}/wake", "RunKey"},
    {"GET /v1/agents/{agent}/budget", "Budget"},
    {"GET /v1/agents/{agent}/report", "ReportRead"},
    {"GET /v1/runs", "RunList"},
    {"GET /v1/runs/{run}", "Run"},
    {"POST /v1/runs/{run}/rerun", "RunKey"},
    {"POST /v1/runs/{run}/resume", "RunKey"},
    {"GET /v1/approvals", "ApprovalList"},
    {"GET /v1/status", "Status"},
    {"POST /v1/agents/{agent}/tools/{tool}/call", "ToolCallOutcome"},
};

/* Routes whose refusals are not an Error but the body a success has, with code and message. */
static const char *const REFUSALS[][2] = {
    {"POST /v1/agents/{agent}/tools/{tool}/call", "ToolCallOutcome"},
};

/* A body member's schema, by its name (a name means one thing in every route that takes it). */
static const char *const MEMBERS[][2] = {
    {"on", "{\"type\":\"boolean\"}"},
    {"tools", "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":100}"},
    {"tokens", "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,"
               "\"maxItems\":256}"},
    {"tags", "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":16}"},
    {"blocks", "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":100}"},
    {"slots", "{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000}"},
    {"arguments", "{\"type\":\"object\"}"},
    {"answer", "{\"enum\":[\"applied\",\"not_applied\",\"retry\"]}"},
    {"language", "{\"enum\":[\"lua\",\"typescript\",\"javascript\"]}"},
    {"items", "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,"
              "\"maxItems\":50}"},
    {"estimate_minutes", "{\"type\":\"integer\",\"minimum\":0}"},
    {"due_date", "{\"type\":[\"string\",\"null\"]}"},
    {"priority", "{\"enum\":[\"low\",\"normal\",\"high\",\"urgent\"]}"},
    {"done", "{\"type\":\"boolean\"}"},
};

/* The members a route's body must hold, by "METHOD pattern". */
static const char *const REQUIRED[][2] = {
    {"POST /v1/agents/{agent}/chat", "text"},
    {"POST /v1/agents/{agent}/timers", "kind,spec"},
    {"POST /v1/agents/{agent}/memory/{label}", "content"},
    {"POST /v1/memory/pending/{change}/reject", "reason"},
    {"POST /v1/notify", "tokens"},
    {"POST /v1/tasks", "title"},
    {"POST /v1/indoubt/{operation}/resolve", "answer"},
    {"POST /v1/timers/{timer}/zone", "tz"},
    {"POST /v1/sandbox/run", "code"},
    {"POST /v1/kill", "on"},
    {"POST /v1/todo/categories/{category}/tasks", "title"},
    {"POST /v1/todo/tasks/{task}/items", "items"},
};

/* The values a list's status= takes (docs/http.md "Routes"). */
static const char *const STATUSES[][2] = {
    {"/v1/runs", "[\"queued\",\"running\",\"completed\",\"failed\",\"interrupted\",\"canceled\","
                 "\"cancelled\",\"crashed\"]"},
    {"/v1/wakes", "[\"queued\",\"started\",\"completed\",\"skipped\",\"failed\",\"cancelled\","
                  "\"canceled\"]"},
    {"/v1/approvals", "[\"pending\",\"approved\",\"rejected\",\"expired\"]"},
    {"/v1/todo/categories/{category}/tasks", "[\"open\",\"done\",\"cancelled\",\"all\"]"},
    {"/v1/tasks", "[\"pending\",\"ready\",\"running\",\"attention\",\"done\",\"failed\","
                  "\"cancelled\",\"canceled\"]"},
};

static const char *lookup(const char *const table[][2], size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(table[i][0], key))
            return table[i][1];
    return NULL;
}
#define LOOKUP(table, key) lookup(table, VG_ARRAY_LEN(table), key)

static json_t *ref(const char *component)
{
    char to[96];
    snprintf(to, sizeof to, "#/components/schemas/%s", component);
    return json_pack("{s:s}", "$ref", to);
}

static json_t *error_response(const char *what, const char *key)
{
    const char *refusal = LOOKUP(REFUSALS, key);
    return json_pack("{s:s, s:{s:{s:o}}}", "description", what, "content", "application/json",
                     "schema", ref(refusal ? refusal : "Error"));
}

/* Does the comma-separated list hold name? */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *m = list; m && *m;) {
        size_t len = strcspn(m, ",");
        if (len == n && !strncmp(m, name, n))
            return 1;
        m += len + (m[len] == ',');
    }
    return 0;
}

/* A body's schema: an object; with the route's members named, only those (the server refuses
 * any other member 400), each with its type, and the ones it must hold required. */
static json_t *body_schema(const struct vg_route *rt, const char *key)
{
    json_t *schema = json_pack("{s:s}", "type", "object"), *props = json_object();
    json_t *required = json_array();
    const char *must = LOOKUP(REQUIRED, key);
    for (const char *m = rt->members; m && *m;) {
        size_t len = strcspn(m, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), m);
        const char *type = LOOKUP(MEMBERS, name);
        json_object_set_new(
            props, name, type ? json_loads(type, 0, NULL) : json_pack("{s:s}", "type", "string"));
        if (listed(must, name))
            json_array_append_new(required, json_string(name));
        m += len + (m[len] == ',');
    }
    if (rt->members) {
        json_object_set_new(schema, "properties", props);
        json_object_set_new(schema, "additionalProperties", json_false());
    } else {
        json_decref(props);
    }
    if (json_array_size(required))
        json_object_set(schema, "required", required);
    json_decref(required);
    return schema;
}

/* A query parameter's schema: limit a number, status= the values its list takes. */
static json_t *query_schema(const char *pattern, const char *name, size_t len)
{
    const char *values = len == 6 && !strncmp(name, "status", 6) ? LOOKUP(STATUSES, pattern) : NULL;
    if (len == 5 && !strncmp(name, "limit", 5))
        return json_pack("{s:s, s:i, s:i}", "type", "integer", "minimum", 1, "maximum", 1000);
    if (values)
        return json_pack("{s:o}", "enum", json_loads(values, 0, NULL));
    return json_pack("{s:s}", "type", "string");
}

static json_t *parameters(const struct vg_route *rt)
{
    json_t *params = json_array();
    for (const char *p = rt->pattern; (p = strchr(p, '{')); p++)
        json_array_append_new(params, json_pack("{s:s%, s:s, s:b, s:{s:s}}", "name", p + 1,
                                                strcspn(p + 1, "}"), "in", "path", "required", 1,
                                                "schema", "type", "string"));
    for (const char *q = rt->query; q && *q;) {
        size_t len = strcspn(q, ",");
        json_array_append_new(params, json_pack("{s:s%, s:s, s:b, s:o}", "name", q, len, "in",
                                                "query", "required", 0, "schema",
                                                query_schema(rt->pattern, q, len)));
        q += len + (q[len] == ',');
    }
    if (rt->fn == vg_http_events_route) /* resume after the last event seen */
        json_array_append_new(params,
                              json_pack("{s:s, s:s, s:b, s:{s:s}}", "name", "Last-Event-ID", "in",
                                        "header", "required", 0, "schema", "type", "integer"));
    return params;
}

/* The event stream's events: each event's data by its name. */
static json_t *event_data(void)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "run.started", ref("RunItem"),
                     "run.ended", ref("RunItem"), "message", ref("EventItem"), "tool_call",
                     ref("EventItem"), "approval.requested", ref("Approval"), "kill",
                     ref("KillEvent"), "gap", ref("Gap"));
}

/* The success answer: its media type and, for the main answers, its schema. */
static json_t *success(const struct vg_route *rt, const char *key)
{
    const char *ctype = !strcmp(rt->pattern, "/metrics")     ? "text/plain"
                        : !strcmp(rt->pattern, "/v1/events") ? "text/event-stream"
                        : rt->fn == vg_http_journal_export   ? "application/x-ndjson"
                                                             : "application/json";
    const char *answer = LOOKUP(ANSWERS, key);
    if (rt->ok_status == 204)
        return json_pack("{s:s}", "description", "done");
    json_t *media = answer ? json_pack("{s:o}", "schema", ref(answer)) : json_object();
    json_t *content = json_pack("{s:o}", ctype, media);
    if (rt->fn == vg_http_events_route)
        json_object_set_new(media, "x-vigil-event-data", event_data());
    if (rt->fn == vg_http_chat_route) /* Accept: text/event-stream: text deltas, then done */
        json_object_set_new(content, "text/event-stream",
                            json_pack("{s:{s:s}, s:{s:o}}", "schema", "type", "string",
                                      "x-vigil-event-data", "done", ref("ChatOutcome")));
    return json_pack("{s:s, s:o}", "description", "success", "content", content);
}

static json_t *responses(const struct vg_route *rt, const char *key)
{
    static const char *const errs[][2] = {{"400", "invalid request"},
                                          {"401", "missing or wrong token"},
                                          {"403", "refused (Host, Origin, permission)"},
                                          {"404", "not found"},
                                          {"405", "method not allowed"},
                                          {"409", "conflict or state"},
                                          {"413", "body too large"},
                                          {"423", "kill switch"},
                                          {"429", "budget or rate"},
                                          {"500", "internal error"},
                                          {"502", "model provider error"},
                                          {"503", "busy"},
                                          {"504", "timed out"}};
    char status[8];
    json_t *out = json_object();
    snprintf(status, sizeof status, "%d", rt->ok_status);
    json_object_set_new(out, status, success(rt, key));
    for (size_t i = 0; i < VG_ARRAY_LEN(errs); i++)
        json_object_set_new(out, errs[i][0], error_response(errs[i][1], key));
    return out;
}

/* Whether a route's body may be left out (every member optional). */
static int body_optional(const struct vg_route *rt)
{
    return strstr(rt->pattern, "pause") || strstr(rt->pattern, "resume") ||
           strstr(rt->pattern, "destroy") || strstr(rt->pattern, "wake") ||
           strstr(rt->pattern, "approve") || strstr(rt->pattern, "/runs/") ||
           strstr(rt->pattern, "/sync/hello");
}

static json_t *operation(const struct vg_route *rt)
{
    char key[160];
    snprintf(key, sizeof key, "%s %s", rt->method, rt->pattern);
    json_t *op = json_pack("{s:s, s:s, s:o, s:o, s:[{s:[]}]}", "operationId", key, "summary",
                           rt->summary, "parameters", parameters(rt), "responses",
                           responses(rt, key), "security", "bearer");
    int journal = rt->fn == vg_http_journal_export || rt->fn == vg_http_journal_import;
    if (journal && !strcmp(rt->method, "POST")) /* the export's lines, not one JSON object */
        json_object_set_new(op, "requestBody",
                            json_pack("{s:b, s:{s:{s:{s:s}}}}", "required", 1, "content",
                                      "application/x-ndjson", "schema", "type", "string"));
    if (rt->body)
        json_object_set_new(op, "requestBody",
                            json_pack("{s:b, s:{s:{s:o}}}", "required", !body_optional(rt),
                                      "content", "application/json", "schema",
                                      body_schema(rt, key)));
    if (rt->body == 2) /* the same manifest as YAML text */
        json_object_set_new(json_object_get(json_object_get(op, "requestBody"), "content"),
                            "application/yaml", json_pack("{s:{s:s}}", "schema", "type", "string"));
    return op;
}

static json_t *components(void)
{
    json_t *schemas = json_object();
    for (size_t i = 0; i < VG_ARRAY_LEN(SCHEMAS); i++)
        json_object_set_new(schemas, SCHEMAS[i][0], json_loads(SCHEMAS[i][1], 0, NULL));
    return json_pack("{s:{s:{s:s, s:s}}, s:o}", "securitySchemes", "bearer", "type", "http",
                     "scheme", "bearer", "schemas", schemas);
}

void vg_http_openapi_route(struct vg_req *r)
{
    json_t *paths = json_object();
    for (size_t i = 0; i < vg_http_n_routes; i++) {
        char method[16];
        const char *name = vg_http_routes[i].pattern;
        if (vg_http_routes[i].fn == vg_http_mcp_route)
            continue; /* MCP: another protocol, docs/http.md "MCP server mode" */
        size_t k = 0;
        for (const char *m = vg_http_routes[i].method; *m && k + 1 < sizeof method; m++)
            method[k++] = (char)(*m - 'A' + 'a');
        method[k] = '\0';
        json_t *item = json_object_get(paths, name);
        if (!item)
            json_object_set_new(paths, name, item = json_object());
        json_object_set_new(item, method, operation(&vg_http_routes[i]));
    }
    json_t *doc = json_pack(
        "{s:s, s:{s:s, s:s, s:s}, s:o, s:o}", "openapi", "3.1.0", "info", "title", "vigil",
        "version", vigil_version(), "description",
        "The vigil daemon's HTTP API (docs/http.md). Every route needs Authorization: Bearer "
        "TOKEN (`vigil token`).",
        "paths", paths, "components", components());
    char *text = doc ? vg_json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    vg_req_json(r, 200, text ? vg_strdup(text) : NULL);
    free(text);
}
