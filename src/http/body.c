/*
 * body.c: the one reader of request bodies (fuzz/fuzz_http_body.c). The size cap comes first,
 * then a nesting scan before jansson sees the text, so a JSON bomb of deep brackets costs one
 * pass and no allocation; jansson then refuses invalid UTF-8 and anything that is not JSON.
 */
#include "base/common.h"

#include "http/http.h"

#include <jansson.h>
#include <string.h>

#define BODY_MAX_DEPTH 32

/* The deepest bracket nesting of the text, strings skipped. */
static int nesting_depth(const char *s, size_t n)
{
    int depth = 0, max = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                max = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return max;
}

vigil_code vg_http_body_parse(const char *data, size_t len, size_t max, json_t **out,
                              vigil_error *err)
{
    json_error_t je;
    if (len > max)
        return VG_FAIL(err, VIGIL_ETOOBIG, "request body of %zu bytes is over the %zu-byte limit",
                       len, max);
    if (!data || len == 0)
        return VG_FAIL(err, VIGIL_EPARSE, "request body is empty: send a JSON object");
    if (memchr(data, '\0', len))
        return VG_FAIL(err, VIGIL_EPARSE, "request body holds a NUL byte");
    if (nesting_depth(data, len) > BODY_MAX_DEPTH)
        return VG_FAIL(err, VIGIL_EINVAL, "request body is nested deeper than %d levels",
                       BODY_MAX_DEPTH);
    json_t *v = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    if (!v)
        return VG_FAIL(err, VIGIL_EPARSE, "request body is not JSON: %s (line %d, column %d)",
                       je.text, je.line, je.column);
    if (!json_is_object(v)) {
        json_decref(v);
        return VG_FAIL(err, VIGIL_EINVAL, "request body must be a JSON object");
    }
    *out = v;
    return VIGIL_OK;
}
