/*
 * modern.c: what revision 2026-07-28 adds to a message (MCP.md section I): no handshake, so
 * every request carries the protocol version and the client's description in params._meta;
 * every result says what it is (resultType). Which revision a server speaks is decided by its
 * answer to server/discover (client.c).
 */
#include "mcp/proc.h"

#include <sodium.h>

#define MODERN "2026-07-28"

json_t *vg_mcp_modern_params(const json_t *params)
{
    json_t *p = params ? json_copy((json_t *)params) : json_object();
    json_t *had = json_object_get(p, "_meta");
    json_t *meta = had ? json_copy(had) : json_object();
    if (!p || !meta) {
        json_decref(p);
        json_decref(meta);
        return NULL;
    }
    int bad =
        json_object_set_new(meta, "io.modelcontextprotocol/protocolVersion", json_string(MODERN));
    bad |=
        json_object_set_new(meta, "io.modelcontextprotocol/clientInfo",
                            json_pack("{s:s, s:s}", "name", "vigil", "version", vigil_version()));
    bad |= json_object_set_new(meta, "io.modelcontextprotocol/clientCapabilities", json_object());
    if (json_object_set_new(p, "_meta", meta) || bad) { /* meta is p's (or freed) either way */
        json_decref(p);
        return NULL;
    }
    return p;
}

int vg_mcp_modern_offered(const json_t *discover_result)
{
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(discover_result, "supportedVersions"), i, v) {
        if (json_is_string(v) && !strcmp(json_string_value(v), MODERN))
            return 1;
    }
    return 0;
}

vigil_code vg_mcp_modern_result(const char *server, const json_t *result, vigil_error *err)
{
    const char *t = json_string_value(json_object_get(result, "resultType"));
    if (!t || !strcmp(t, "complete") || !strcmp(t, "input_required"))
        return VIGIL_OK;
    return VG_FAIL(err, VIGIL_EPROVIDER,
                   "MCP server \"%s\" answered a result of unknown type \"%s\"", server, t);
}

int vg_mcp_modern_input_required(const json_t *result)
{
    const char *t = json_string_value(json_object_get(result, "resultType"));
    return t && !strcmp(t, "input_required");
}

/* What vigil answers to one input request. No person is at hand and vigil declares no client
 * capability, so it gives what needs nobody: a form is declined (the server decides what a
 * refusal means), there are no roots; sampling would need a model call on the server's behalf,
 * which vigil does not make: EUNSUPPORTED. */
static vigil_code input_answer(const char *server, const char *key, const json_t *request,
                               json_t **answer, vigil_error *err)
{
    const char *method = json_string_value(json_object_get(request, "method"));
    if (method && !strcmp(method, "elicitation/create"))
        *answer = json_pack("{s:s}", "action", "decline");
    else if (method && !strcmp(method, "roots/list"))
        *answer = json_pack("{s:[]}", "roots");
    else
        return VG_FAIL(err, VIGIL_EUNSUPPORTED,
                       "MCP server \"%s\" asks for input \"%s\" by %s before it answers; vigil "
                       "cannot give it (it answers only elicitation, by declining, and roots/list)",
                       server, key, method ? method : "(no method)");
    return *answer ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

vigil_code vg_mcp_modern_follow_up(const char *server, const json_t *params, const json_t *result,
                                   json_t **next, vigil_error *err)
{
    json_t *asked = json_object_get(result, "inputRequests"), *req;
    json_t *p = params ? json_deep_copy(params) : json_object(), *answers = json_object();
    const char *key;
    vigil_code rc = p && answers ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc && (!json_is_object(asked) || !json_object_size(asked)))
        rc = VG_FAIL(err, VIGIL_EPROVIDER,
                     "MCP server \"%s\" asked for input without saying what (no inputRequests)",
                     server);
    json_object_foreach (rc ? NULL : asked, key, req) {
        json_t *a = NULL;
        if (!rc && !(rc = input_answer(server, key, req, &a, err)))
            json_object_set_new(answers, key, a);
    }
    json_object_del(p, "requestState");
    json_t *taken = answers;
    answers = NULL; /* p's now, or freed */
    if (!rc && json_object_set_new(p, "inputResponses", taken))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    else if (rc)
        json_decref(taken);
    json_t *state = json_object_get(result, "requestState");
    if (!rc && state && json_object_set(p, "requestState", state))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_decref(answers);
    if (rc) {
        json_decref(p);
        return rc;
    }
    *next = p;
    return VIGIL_OK;
}

/* A header value is sent as written only when it is plain visible ASCII without surrounding
 * spaces and does not itself look like the sentinel; anything else is "=?base64?...?=". */
static int header_safe(const char *v)
{
    size_t n = strlen(v);
    if (n && (v[0] == ' ' || v[n - 1] == ' '))
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
            return 0;
    return !(n >= 11 && !strncmp(v, "=?base64?", 9) && !strcmp(v + n - 2, "?="));
}

char *vg_mcp_header_value(const char *value)
{
    if (header_safe(value))
        return vg_strdup(value);
    size_t n = strlen(value);
    size_t b64 = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    char *out = vg_malloc(b64 + 12);
    if (!out)
        return NULL;
    memcpy(out, "=?base64?", 9);
    sodium_bin2base64(out + 9, b64, (const unsigned char *)value, n,
                      sodium_base64_VARIANT_ORIGINAL);
    memcpy(out + 9 + strlen(out + 9), "?=", 3);
    return out;
}
