/*
 * fuzz_http_body.c: arbitrary bytes as an HTTP API request body (src/http/body.c, the one reader
 * every JSON route uses): never a crash, a leak or a wait; an accepted body is a JSON object
 * nested at most 32 deep, and a body over the cap is refused before it is read.
 */
#include "base/common.h"

#include "http/http.h"

#include <jansson.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = NULL;
    vigil_error err = {0};
    vigil_code rc = vg_http_body_parse((const char *)data, size, 4096, &v, &err);
    if (rc == VIGIL_OK) {
        if (!json_is_object(v) || size > 4096)
            abort();
        json_decref(v);
    } else if (v || !err.message[0]) {
        abort();
    }
    if (size > 16 &&
        vg_http_body_parse((const char *)data, size, size - 1, &v, &err) != VIGIL_ETOOBIG)
        abort();
    return 0;
}
