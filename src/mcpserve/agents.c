/*
 * agents.c: what the MCP server exposes, all through include/vigil.h. Only agents whose
 * manifest says `visibility: external` (and that are not destroyed) are seen: each gives three
 * tools (talk_to_<slug>: a chat turn; wake_<slug>: queue a wake; report_of_<slug>: its report)
 * and read-only resources (vigil://agents/<id>/report, vigil://agents/<id>/memory/<label>).
 * project and internal agents do not exist for an MCP client: calling or reading one is
 * "not found", never "denied".
 */
#include "base/common.h"
#include "base/json.h"

#include "mcpserve/mcpserve.h"

#define URI_PREFIX "vigil://agents/"
#define SLUG_MAX 48

static json_t *parse_owned(char *text)
{
    json_t *v = text ? json_loads(text, 0, NULL) : NULL;
    vigil_free(text);
    return v;
}

/* A tool-name-safe form of an agent's name: [A-Za-z0-9_-], at most SLUG_MAX characters. */
static void slug_of(const char *name, char out[SLUG_MAX + 1])
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && n < SLUG_MAX; p++)
        out[n++] = ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '-')
                       ? (char)*p
                       : '_';
    out[n] = '\0';
}

static int exposed(const json_t *agent)
{
    const char *vis = json_string_value(json_object_get(agent, "visibility"));
    const char *lc = json_string_value(json_object_get(agent, "lifecycle"));
    return vis && !strcmp(vis, "external") && lc && strcmp(lc, "destroyed");
}

/* Add one exposed agent to out as {id, name, slug}; a slug already taken gets the id's start. */
static int add_agent(json_t *out, json_t *slugs, const json_t *agent)
{
    const char *id = json_string_value(json_object_get(agent, "id"));
    const char *name = json_string_value(json_object_get(agent, "name"));
    char slug[SLUG_MAX + 16];
    slug_of(name ? name : "agent", slug);
    if (json_object_get(slugs, slug) || !slug[0])
        snprintf(slug + strlen(slug), 16, "_%.8s", id);
    json_object_set_new(slugs, slug, json_true());
    return json_array_append_new(
        out, json_pack("{s:s, s:s, s:s}", "id", id, "name", name ? name : "", "slug", slug));
}

/* Every exposed agent, oldest first (a stable order, so list pages and slugs are stable). */
static json_t *exposed_agents(vigil_runtime *rt, vigil_error *err)
{
    json_t *out = json_array(), *slugs = json_object();
    char *cursor = NULL;
    for (;;) {
        char *text = NULL;
        if (vigil_agent_list(rt, cursor, 1000, &text, err)) {
            json_decref(out);
            out = NULL;
            break;
        }
        json_t *pg = parse_owned(text), *a;
        size_t i;
        json_array_foreach (json_object_get(pg, "items"), i, a)
            if (exposed(a))
                add_agent(out, slugs, a);
        vg_free(cursor);
        const char *next = json_string_value(json_object_get(pg, "next_cursor"));
        cursor = next ? vg_strdup(next) : NULL;
        json_decref(pg);
        if (!cursor)
            break;
    }
    vg_free(cursor);
    json_decref(slugs);
    return out;
}

vigil_code vg_mcpserve_exposed_count(vigil_runtime *rt, size_t *n, vigil_error *err)
{
    json_t *agents = exposed_agents(rt, err);
    if (!agents)
        return err && err->code ? err->code : VIGIL_ENOMEM;
    *n = json_array_size(agents);
    json_decref(agents);
    return VIGIL_OK;
}

static json_t *tool_def(const char *prefix, const json_t *a, const char *what, json_t *props,
                        json_t *required, int read_only)
{
    char name[128], desc[512];
    snprintf(name, sizeof name, "%s%s", prefix, json_string_value(json_object_get(a, "slug")));
    snprintf(desc, sizeof desc, what, json_string_value(json_object_get(a, "name")));
    return json_pack("{s:s, s:s, s:{s:s, s:o, s:o, s:b}, s:{s:b, s:b}}", "name", name,
                     "description", desc, "inputSchema", "type", "object", "properties", props,
                     "required", required, "additionalProperties", 0, "annotations", "readOnlyHint",
                     read_only, "openWorldHint", 0);
}

json_t *vg_mcpserve_tools(vigil_runtime *rt, vigil_error *err)
{
    json_t *agents = exposed_agents(rt, err), *tools = json_array(), *a;
    size_t i;
    if (!agents) {
        json_decref(tools);
        return NULL;
    }
    json_array_foreach (agents, i, a) {
        json_array_append_new(
            tools,
            tool_def("talk_to_", a,
                     "Talk to the vigil agent \"%.200s\": send a message and get its "
                     "reply (one chat turn; the agent remembers the conversation).",
                     json_pack("{s:{s:s, s:s}, s:{s:s, s:s}}", "message", "type", "string",
                               "description", "what to say to the agent", "session", "type",
                               "string", "description", "conversation name (default: \"mcp\")"),
                     json_pack("[s]", "message"), 0));
        json_array_append_new(
            tools, tool_def("wake_", a,
                            "Wake the vigil agent \"%.200s\" now, optionally with a message; "
                            "the running vigil daemon does the work. Returns the run key.",
                            json_pack("{s:{s:s}}", "message", "type", "string"), json_array(), 0));
        json_array_append_new(
            tools, tool_def("report_of_", a,
                            "Read the current report of the vigil agent \"%.200s\" (what it "
                            "last wrote for people to read).",
                            json_object(), json_array(), 1));
    }
    json_decref(agents);
    return tools;
}

static void uri_escape(const char *s, char *out, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && k + 4 < n; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~", *p))
            out[k++] = (char)*p;
        else {
            out[k++] = '%';
            out[k++] = hex[*p >> 4];
            out[k++] = hex[*p & 15];
        }
    }
    out[k] = '\0';
}

static void add_memory_resources(vigil_runtime *rt, const json_t *a, json_t *out)
{
    const char *id = json_string_value(json_object_get(a, "id"));
    const char *name = json_string_value(json_object_get(a, "name"));
    char *text = NULL;
    vigil_error err = {0};
    if (vigil_memory_list(rt, id, NULL, &text, &err))
        return; /* an agent without memory has no memory resources */
    json_t *blocks = parse_owned(text), *b;
    size_t i;
    json_array_foreach (blocks, i, b) {
        const char *label = json_string_value(json_object_get(b, "label"));
        char uri[1200], esc[1000], title[512];
        uri_escape(label ? label : "", esc, sizeof esc);
        snprintf(uri, sizeof uri, URI_PREFIX "%s/memory/%s", id, esc);
        snprintf(title, sizeof title, "memory block \"%.200s\" of %.200s", label ? label : "",
                 name);
        json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s}", "uri", uri, "name", title,
                                             "mimeType", "text/plain", "description",
                                             "read-only: changed only by the agent"));
    }
    json_decref(blocks);
}

json_t *vg_mcpserve_resources(vigil_runtime *rt, vigil_error *err)
{
    json_t *agents = exposed_agents(rt, err), *out = json_array(), *a;
    size_t i;
    if (!agents) {
        json_decref(out);
        return NULL;
    }
    json_array_foreach (agents, i, a) {
        char uri[128], title[256];
        snprintf(uri, sizeof uri, URI_PREFIX "%s/report",
                 json_string_value(json_object_get(a, "id")));
        snprintf(title, sizeof title, "report of %.200s",
                 json_string_value(json_object_get(a, "name")));
        json_array_append_new(out, json_pack("{s:s, s:s, s:s}", "uri", uri, "name", title,
                                             "mimeType", "application/json"));
        add_memory_resources(rt, a, out);
    }
    json_decref(agents);
    return out;
}

/* The exposed agent a tool name or id names; NULL when none (owned). */
static json_t *find_agent(vigil_runtime *rt, const char *prefix, const char *slug, const char *id,
                          vigil_error *err)
{
    json_t *agents = exposed_agents(rt, err), *a, *found = NULL;
    size_t i;
    json_array_foreach (agents, i, a) {
        const char *v = json_string_value(json_object_get(a, slug ? "slug" : "id"));
        size_t pl = prefix ? strlen(prefix) : 0;
        if (!v || found)
            continue;
        if (slug ? !strncmp(slug, prefix, pl) && !strcmp(slug + pl, v) : id && !strcmp(id, v))
            found = json_incref(a);
    }
    json_decref(agents);
    return found;
}

static json_t *tool_result(int is_error, const char *text, json_t *structured /* stolen */)
{
    json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text,
                          "isError", is_error);
    if (structured)
        json_object_set_new(r, "structuredContent", structured);
    return r;
}

static json_t *failed(const vigil_error *err)
{
    char text[600];
    snprintf(text, sizeof text, "%s: %s", vigil_code_name(err->code), err->message);
    return tool_result(1, text, NULL);
}

/* A chat turn's callbacks as progress: the turn started, each tool call, the reply begun. */
struct talk_progress {
    struct vg_mcpserve_call_ctx *ctx;
    int replying;
};

static void talk_on_text(void *user, const char *delta, size_t len)
{
    struct talk_progress *p = user;
    VG_UNUSED(delta);
    VG_UNUSED(len);
    if (!p->replying) /* once per stretch of text, not per streamed word */
        vg_mcpserve_progress(p->ctx, "the agent is replying");
    p->replying = 1;
}

static void talk_on_tool(void *user, const char *name, const char *args_json)
{
    struct talk_progress *p = user;
    char msg[200];
    VG_UNUSED(args_json);
    snprintf(msg, sizeof msg, "the agent calls the tool %.150s", name);
    vg_mcpserve_progress(p->ctx, msg);
    p->replying = 0;
}

static int talk_cancel(void *user)
{
    struct talk_progress *p = user;
    return vg_mcpserve_cancelled(p->ctx);
}

/* A member the tool's schema does not name (its additionalProperties is false): refused like
 * any argument that does not fit, not ignored (a misspelled "sesion" sent the turn to the
 * default session: E10 of session 31's trial). NULL when every member is allowed. */
static const char *unknown_member(json_t *args, const char *const *allowed, size_t n)
{
    const char *k;
    json_t *v;
    json_object_foreach (args, k, v) {
        size_t i = 0;
        while (i < n && strcmp(k, allowed[i]))
            i++;
        if (i == n)
            return k;
    }
    return NULL;
}

static json_t *refuse_member(const char *member, const char *takes)
{
    char text[256];
    snprintf(text, sizeof text, "arguments: unknown member \"%.64s\" (this tool takes %s)", member,
             takes);
    return tool_result(1, text, NULL);
}

static json_t *talk(vigil_runtime *rt, const char *id, json_t *args,
                    struct vg_mcpserve_call_ctx *ctx)
{
    static const char *const allowed[] = {"message", "session"};
    const char *msg = json_string_value(json_object_get(args, "message"));
    const char *extra = unknown_member(args, allowed, 2);
    json_t *session = json_object_get(args, "session");
    if (extra)
        return refuse_member(extra, "message and session");
    if (!msg)
        return tool_result(1, "arguments: message (a string) is required", NULL);
    if (session && !json_is_string(session))
        return tool_result(1, "arguments: session must be a string", NULL);
    char *text = NULL;
    vigil_error err = {0};
    struct talk_progress p = {.ctx = ctx};
    vigil_chat_callbacks cb = {
        .user = &p, .on_text = talk_on_text, .on_tool = talk_on_tool, .cancel = talk_cancel};
    vg_mcpserve_progress(ctx, "the agent is thinking");
    if (vigil_chat(rt, id, session ? json_string_value(session) : "mcp", msg, &cb, &text, &err))
        return failed(&err);
    json_t *out = parse_owned(text);
    const char *reply = json_string_value(json_object_get(out, "reply"));
    return tool_result(0, reply ? reply : "", out);
}

static json_t *wake(vigil_runtime *rt, const char *id, json_t *args)
{
    static const char *const allowed[] = {"message"};
    json_t *msg = json_object_get(args, "message");
    const char *extra = unknown_member(args, allowed, 1);
    if (extra)
        return refuse_member(extra, "only message");
    if (msg && !json_is_string(msg))
        return tool_result(1, "arguments: message must be a string", NULL);
    char key[65], text[128];
    vigil_error err = {0};
    if (vigil_wake_agent(rt, id, json_string_value(msg), msg ? "mcp" : NULL, key, &err))
        return failed(&err);
    snprintf(text, sizeof text, "wake queued: run key %s", key);
    return tool_result(0, text, json_pack("{s:s}", "run_key", key));
}

/* The agent's report as a JSON value (json null when it wrote none); NULL on failure. */
static json_t *report_value(vigil_runtime *rt, const char *id, vigil_error *err)
{
    char *text = NULL;
    if (vigil_agent_show(rt, id, &text, err))
        return NULL;
    json_t *shown = parse_owned(text), *r = json_incref(json_object_get(shown, "report"));
    json_decref(shown);
    return r ? r : json_null();
}

static json_t *report(vigil_runtime *rt, const char *id)
{
    vigil_error err = {0};
    json_t *r = report_value(rt, id, &err);
    if (!r)
        return failed(&err);
    char *text = json_is_null(r) ? NULL : vg_json_dumps(r, JSON_INDENT(2));
    json_t *out = tool_result(0, text ? text : "the agent has written no report yet",
                              json_pack("{s:o}", "report", r));
    vg_free(text);
    return out;
}

json_t *vg_mcpserve_call(vigil_runtime *rt, const char *name, json_t *args,
                         struct vg_mcpserve_call_ctx *ctx, int *code, vigil_error *err)
{
    static const char *const prefixes[] = {"talk_to_", "wake_", "report_of_"};
    json_t *empty = json_object(), *r = NULL;
    args = args ? args : empty;
    for (int k = 0; k < 3 && !r; k++) {
        json_t *a = find_agent(rt, prefixes[k], name, NULL, err);
        const char *id = json_string_value(json_object_get(a, "id"));
        if (a)
            r = k == 0   ? talk(rt, id, args, ctx)
                : k == 1 ? wake(rt, id, args)
                : unknown_member(args, NULL, 0)
                    ? refuse_member(unknown_member(args, NULL, 0), "none")
                    : report(rt, id);
        json_decref(a);
    }
    json_decref(empty);
    if (!r) {
        *code = VG_RPC_INVALID_PARAMS;
        VG_FAIL(err, VIGIL_ENOTFOUND, "unknown tool \"%.100s\" (see tools/list)", name);
    }
    return r;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

/* Percent-decode s into out; -1 on a bad escape, a NUL, or no room. */
static int uri_unescape(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (; *s; s++) {
        int c = (unsigned char)*s;
        if (c == '%') {
            int hi = hexval(s[1]), lo = hi < 0 ? -1 : hexval(s[2]);
            if (lo < 0 || (c = hi * 16 + lo) == 0)
                return -1;
            s += 2;
        }
        if (k + 1 >= n)
            return -1;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    return 0;
}

static json_t *contents(const char *uri, const char *mime, const char *text)
{
    return json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType", mime, "text",
                     text);
}

json_t *vg_mcpserve_read_resource(vigil_runtime *rt, const char *uri, int *code, vigil_error *err)
{
    char id[37], label[1000];
    const char *rest = uri + strlen(URI_PREFIX);
    json_t *a = NULL, *r = NULL;
    *code = VG_MCP_RESOURCE_NOT_FOUND;
    if (strncmp(uri, URI_PREFIX, strlen(URI_PREFIX)) || strlen(rest) < 37 || rest[36] != '/') {
        VG_FAIL(err, VIGIL_ENOTFOUND, "resource not found");
        return NULL;
    }
    snprintf(id, sizeof id, "%.36s", rest);
    rest += 37;
    if (!(a = find_agent(rt, NULL, NULL, id, err))) {
        VG_FAIL(err, VIGIL_ENOTFOUND, "resource not found");
        return NULL;
    }
    json_decref(a);
    if (!strcmp(rest, "report")) {
        json_t *v = report_value(rt, id, err);
        char *text = v ? vg_json_dumps(v, JSON_ENCODE_ANY | JSON_INDENT(2)) : NULL;
        r = text ? contents(uri, "application/json", text) : NULL;
        vg_free(text);
        json_decref(v);
    } else if (!strncmp(rest, "memory/", 7) && !uri_unescape(rest + 7, label, sizeof label)) {
        char *text = NULL;
        if (!vigil_memory_show(rt, id, label, &text, err)) {
            json_t *b = parse_owned(text);
            const char *c = json_string_value(json_object_get(b, "content"));
            r = contents(uri, "text/plain", c ? c : "");
            json_decref(b);
        }
    }
    if (!r)
        VG_FAIL(err, VIGIL_ENOTFOUND, "resource not found");
    return r;
}
