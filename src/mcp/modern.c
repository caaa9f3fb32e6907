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
    if (!t || !strcmp(t, "complete"))
        return VIGIL_OK;
    if (!strcmp(t, "input_required"))
        return VG_FAIL(err, VIGIL_EUNSUPPORTED,
                       "MCP server \"%s\" asks for input (elicitation, sampling or roots) before "
                       "it answers; vigil cannot give it",
                       server);
    return VG_FAIL(err, VIGIL_EPROVIDER,
                   "MCP server \"%s\" answered a result of unknown type \"%s\"", server, t);
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
