/*
 * openapi.c: GET /openapi.json, an OpenAPI 3.1 document built from the route table, so every
 * route the server answers is in it and nothing else is. Each operation lists its success
 * status and the error statuses of the code table a request can meet.
 */
#include "base/common.h"

#include "http/http_int.h"

static json_t *error_response(const char *what)
{
    return json_pack("{s:s, s:{s:{s:{s:s}}}}", "description", what, "content", "application/json",
                     "schema", "$ref", "#/components/schemas/Error");
}

/* A body's schema: an object; with the route's members named, only those (the server refuses
 * any other member 400). */
static json_t *body_schema(const struct vg_route *rt)
{
    json_t *schema = json_pack("{s:s}", "type", "object"), *props = json_object();
    for (const char *m = rt->members; m && *m;) {
        size_t len = strcspn(m, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), m);
        json_object_set_new(props, name, json_object());
        m += len + (m[len] == ',');
    }
    if (rt->members) {
        json_object_set_new(schema, "properties", props);
        json_object_set_new(schema, "additionalProperties", json_false());
    } else {
        json_decref(props);
    }
    return schema;
}

static json_t *operation(const struct vg_route *rt)
{
    char status[8], opid[128];
    json_t *params = json_array(), *responses = json_object();
    snprintf(opid, sizeof opid, "%s %s", rt->method, rt->pattern);
    for (const char *p = rt->pattern; (p = strchr(p, '{')); p++)
        json_array_append_new(params, json_pack("{s:s%, s:s, s:b, s:{s:s}}", "name", p + 1,
                                                strcspn(p + 1, "}"), "in", "path", "required", 1,
                                                "schema", "type", "string"));
    for (const char *q = rt->query; q && *q;) {
        size_t len = strcspn(q, ",");
        json_array_append_new(params,
                              json_pack("{s:s%, s:s, s:b, s:{s:s}}", "name", q, len, "in", "query",
                                        "required", 0, "schema", "type", "string"));
        q += len + (q[len] == ',');
    }
    snprintf(status, sizeof status, "%d", rt->ok_status);
    int journal = rt->fn == vg_http_journal_export || rt->fn == vg_http_journal_import;
    const char *ctype = !strcmp(rt->pattern, "/metrics")     ? "text/plain"
                        : !strcmp(rt->pattern, "/v1/events") ? "text/event-stream"
                        : rt->fn == vg_http_journal_export   ? "application/x-ndjson"
                                                             : "application/json";
    json_object_set_new(responses, status,
                        rt->ok_status == 204 ? json_pack("{s:s}", "description", "done")
                                             : json_pack("{s:s, s:{s:{}}}", "description",
                                                         "success", "content", ctype));
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
    for (size_t i = 0; i < VG_ARRAY_LEN(errs); i++)
        json_object_set_new(responses, errs[i][0], error_response(errs[i][1]));
    json_t *op =
        json_pack("{s:s, s:s, s:o, s:o, s:[{s:[]}]}", "operationId", opid, "summary", rt->summary,
                  "parameters", params, "responses", responses, "security", "bearer");
    if (journal && !strcmp(rt->method, "POST")) /* the export's lines, not one JSON object */
        json_object_set_new(op, "requestBody",
                            json_pack("{s:b, s:{s:{s:{s:s}}}}", "required", 1, "content",
                                      "application/x-ndjson", "schema", "type", "string"));
    if (rt->body)
        json_object_set_new(
            op, "requestBody",
            json_pack("{s:b, s:{s:{s:o}}}", "required",
                      strstr(rt->pattern, "pause") || strstr(rt->pattern, "resume") ||
                              strstr(rt->pattern, "destroy") || strstr(rt->pattern, "wake") ||
                              strstr(rt->pattern, "approve") || strstr(rt->pattern, "/runs/")
                          ? 0
                          : 1,
                      "content", "application/json", "schema", body_schema(rt)));
    return op;
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
        "{s:s, s:{s:s, s:s, s:s}, s:o, s:{s:{s:{s:s, s:s}}, s:{s:{s:s, s:[s,s], "
        "s:{s:{s:s}, s:{s:s}, s:{s:s}}}}}}",
        "openapi", "3.1.0", "info", "title", "vigil", "version", vigil_version(), "description",
        "The vigil daemon's HTTP API (docs/http.md). Every route needs Authorization: Bearer "
        "TOKEN (`vigil token`).",
        "paths", paths, "components", "securitySchemes", "bearer", "type", "http", "scheme",
        "bearer", "schemas", "Error", "type", "object", "required", "code", "message", "properties",
        "code", "type", "string", "message", "type", "string", "status", "type", "integer");
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    vg_req_json(r, 200, text ? vg_strdup(text) : NULL);
    free(text);
}
