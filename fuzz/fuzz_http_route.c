/*
 * fuzz_http_route.c: arbitrary request lines through the HTTP API's router (src/http/routes.c):
 * the first byte picks the method, the rest is the path. Never a crash; a routed path's
 * parameters are non-empty segments of id characters that fit their buffers.
 */
#include "base/common.h"

#include "http/http_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const methods[] = {"GET", "POST", "DELETE", "PUT", "OPTIONS"};
    char path[1024], params[3][256];
    const struct vg_route *route = NULL;
    if (size == 0 || size > sizeof path)
        return 0;
    memcpy(path, data + 1, size - 1);
    path[size - 1] = '\0';
    int rc = vg_http_route_find(methods[data[0] % 5], path, &route, params);
    if (rc == 0) {
        for (int i = 0; i < 3; i++)
            if (strlen(params[i]) >= sizeof params[i] || strchr(params[i], '/'))
                abort();
        if (strcmp(route->method, methods[data[0] % 5]))
            abort();
    } else if (rc != 404 && rc != 405) {
        abort();
    }
    return 0;
}
