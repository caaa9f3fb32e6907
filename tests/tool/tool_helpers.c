/*
 * tool_helpers.c: see tool_helpers.h.
 */
#include "tool/tool_helpers.h"

struct host g_host;

void host_reset(void)
{
    memset(&g_host, 0, sizeof g_host);
}

static int slot(const char *op, int create)
{
    for (int i = 0; i < g_host.n; i++)
        if (!strcmp(g_host.ops[i], op))
            return i;
    if (!create || g_host.n == 64)
        return -1;
    snprintf(g_host.ops[g_host.n], 65, "%s", op);
    return g_host.n++;
}

int host_applied(const char *op)
{
    int i = slot(op, 0);
    return i < 0 ? 0 : g_host.count[i];
}

static char *dup_text(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n); /* the reply protocol: malloc'd, freed by vigil */
    if (p)
        memcpy(p, s, n);
    return p;
}

static vigil_code host_effect(void *user, const vigil_tool_call_info *call, const char *args,
                              char **out, vigil_error *err)
{
    char reply[512];
    if (call->preview_only) {
        snprintf(reply, sizeof reply, "{\"would\":\"%s\",\"args\":%s}", call->tool, args);
        *out = dup_text(reply);
        return VIGIL_OK;
    }
    if (strstr(args, "\"fail\"")) {
        *out = dup_text("{\"error\":{\"code\":\"unsafe_target\",\"message\":\"refusing\"}}");
        return VIGIL_OK;
    }
    if (strstr(args, "\"garbage\"")) {
        *out = dup_text("{not json");
        return VIGIL_OK;
    }
    int i = slot(call->operation_id, 1);
    g_host.count[i]++;
    g_host.total++;
    snprintf(reply, sizeof reply,
             "{\"result\":{\"applied\":%d},\"changed_entity_ids\":[\"entity-%d\"],"
             "\"changed_tokens\":[\"HOST_CHANGED\"]}",
             g_host.count[i], g_host.total);
    *out = dup_text(reply);
    return VIGIL_OK;
}

static vigil_code host_lookup(void *user, const vigil_tool_call_info *call, int *found, char **out,
                              vigil_error *err)
{
    int n = host_applied(call->operation_id);
    *found = n > 0;
    if (n)
        *out = dup_text("{\"result\":{\"reconciled\":true}}");
    return VIGIL_OK;
}

static vigil_code host_read_fn(void *user, const vigil_tool_call_info *call, const char *args,
                               char **out, vigil_error *err)
{
    *out = dup_text("{\"items\":[]}");
    return VIGIL_OK;
}

static int resolve_scope(void *user, const char *entity, char *out, size_t n)
{
    if (!strncmp(entity, "task-a", 6)) {
        snprintf(out, n, "cat-a");
        return 1;
    }
    if (!strncmp(entity, "task-b", 6)) {
        snprintf(out, n, "cat-b");
        return 1;
    }
    return 0; /* unknown entity: the executor must refuse */
}

void register_host_tools(vigil_runtime *rt)
{
    static const char schema[] =
        "{\"type\":\"object\",\"required\":[\"category\",\"title\"],"
        "\"additionalProperties\":false,\"properties\":{\"category\":{\"type\":\"string\"},"
        "\"title\":{\"type\":\"string\",\"minLength\":1},\"dest\":{\"type\":\"string\"}}}";
    vigil_tool_def w = {.name = "host_write",
                        .description = "write a host entity",
                        .input_schema_json = schema,
                        .contract_json = "{\"risk\":\"medium\",\"mutating\":true,"
                                         "\"idempotency\":\"non_idempotent\","
                                         "\"tool_class\":\"host_write\",\"capabilities\":"
                                         "[\"taskWrite\"],\"scope\":{\"rule\":\"argument\","
                                         "\"arguments\":[\"category\"]},\"side_effects\":"
                                         "{\"entity_types\":[\"task\"],\"tokens\":[\"TASK\"]},"
                                         "\"allowed_wake_reasons\":[\"manual\",\"timer\"]}"};
    ASSERT_OK(vigil_tool_register(rt, &w, host_effect, NULL, E));
    vigil_tool_def s = {.name = "host_sync",
                        .description = "sync a host entity (reconcilable)",
                        .input_schema_json = schema,
                        .contract_json = "{\"idempotency\":\"reconcilable\",\"tool_class\":"
                                         "\"host_write\",\"scope\":{\"rule\":\"argument\","
                                         "\"arguments\":[\"category\"]}}",
                        .lookup = host_lookup};
    ASSERT_OK(vigil_tool_register(rt, &s, host_effect, NULL, E));
    vigil_tool_def r = {.name = "host_read",
                        .description = "read host entities",
                        .contract_json = "{\"mutating\":false,\"idempotency\":\"idempotent\","
                                         "\"capabilities\":[\"taskRead\"]}"};
    ASSERT_OK(vigil_tool_register(rt, &r, host_read_fn, NULL, E));
    vigil_tool_def d = {.name = "host_delete",
                        .description = "delete host entities (destructive)",
                        .input_schema_json = schema,
                        .contract_json = "{\"risk\":\"high\",\"preview\":true,\"tool_class\":"
                                         "\"host_destroy\",\"scope\":{\"rule\":\"argument\","
                                         "\"arguments\":[\"category\"]}}"};
    ASSERT_OK(vigil_tool_register(rt, &d, host_effect, NULL, E));
    vigil_tool_def tg = {.name = "host_target",
                         .description = "update a task by id",
                         .input_schema_json =
                             "{\"type\":\"object\",\"required\":[\"task_id\"],\"properties\":"
                             "{\"task_id\":{\"type\":\"string\"},\"to_task\":{\"type\":"
                             "\"string\"}}}",
                         .contract_json = "{\"scope\":{\"rule\":\"target\",\"arguments\":"
                                          "[\"task_id\"]}}"};
    ASSERT_OK(vigil_tool_register(rt, &tg, host_effect, NULL, E));
    vigil_tool_set_scope_resolver(rt, resolve_scope, NULL);
}

void make_agent(struct test_rt *t, const char *config, char id[37])
{
    /* Two live agents never share a name: the second of a test is tooler-2, and so on. */
    static int made;
    char name[32] = "tooler";
    if (made++)
        snprintf(name, sizeof name, "tooler-%d", made);
    vigil_agent_spec spec = {.name = name, .kind = "task_agent", .config_json = config};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, id, E));
}

struct vg_tool_executor *executor(struct test_rt *t)
{
    struct vg_tool_executor *x = NULL;
    ASSERT_OK(vg_runtime_tools(t->rt, &x, E));
    return x;
}

void call_tool(struct test_rt *t, const char *agent, const char *run_key, const char *tool,
               const char *args_json, struct vg_tool_outcome *out)
{
    json_t *args = args_json ? json_loads(args_json, JSON_DECODE_ANY, NULL) : NULL;
    struct vg_tool_call_ctx ctx = {.agent_id = agent, .run_key = run_key};
    ASSERT(!args_json || args);
    ASSERT_OK(vg_tool_executor_call(executor(t), &ctx, tool, args, out, E));
    json_decref(args);
}

int count_msgs(struct test_rt *t, const char *agent, const char *run_key, const char *kind)
{
    char thread[200];
    json_t *arr = NULL, *m;
    size_t i;
    int n = 0;
    snprintf(thread, sizeof thread, "%s:run:%s", agent, run_key);
    ASSERT_OK(vg_message_latest(t->env, agent, thread, 1000, &arr, E));
    json_array_foreach (arr, i, m)
        if (!strcmp(json_string_value(json_object_get(m, "kind")), kind))
            n++;
    json_decref(arr);
    return n;
}

json_t *message(struct test_rt *t, const char *id)
{
    json_t *m = NULL;
    ASSERT_OK(vg_message_get(t->env, id, &m, E));
    return m;
}

json_t *result_envelope(struct test_rt *t, const char *result_id)
{
    json_t *m = message(t, result_id);
    json_t *env = json_loads(json_string_value(json_object_get(m, "content")), 0, NULL);
    ASSERT(env != NULL);
    json_decref(m);
    return env;
}
