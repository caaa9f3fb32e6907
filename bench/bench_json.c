/*
 * bench_json.c: the canonical JSON writer (vg_json_dump sorted) on a run's latest activity with
 * a tool call's arguments, COUNT times, for counting its instructions (callgrind; subtract the
 * run with COUNT 0, the program's start): WHICH 0 an object without a real, 1 the same with
 * three reals (0.8, 21.5, 9.99), whose digits are the writer's slow part. Prints the bytes
 * written; asserts nothing.
 *
 *   bench_json [COUNT] [WHICH]   (defaults: 10000, 0)
 */
#include "base/common.h"

#include "base/json.h"

#include <jansson.h>

static const char plain[] =
    "{\"activity\":\"tool\",\"arguments\":{\"markdown\":\"# Status\\nall good\",\"scope\":"
    "\"daily\",\"sources\":[\"task-7\",\"https://example.org/a\"],\"count\":3},\"occurred_at\":"
    "\"2026-11-29T22:01:27.956Z\",\"sequence\":10,\"telemetry\":{\"cached_tokens\":0,"
    "\"cost_micros\":0,\"input_tokens\":812,\"model_calls\":3,\"output_tokens\":97,"
    "\"tool_calls\":2,\"total_tokens\":909},\"tool\":\"set_report\"}";
static const char reals[] =
    "{\"activity\":\"tool\",\"arguments\":{\"markdown\":\"# Status\\nall good\",\"scope\":"
    "\"daily\",\"confidence\":0.8,\"temperature\":21.5,\"price\":9.99},\"occurred_at\":"
    "\"2026-11-29T22:01:27.956Z\",\"sequence\":10,\"telemetry\":{\"cached_tokens\":0,"
    "\"cost_micros\":0,\"input_tokens\":812,\"model_calls\":3,\"output_tokens\":97,"
    "\"tool_calls\":2,\"total_tokens\":909},\"tool\":\"set_report\"}";

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
    int which = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 0;
    json_t *v = json_loads(which ? reals : plain, 0, NULL);
    if (!v)
        return 1;
    size_t total = 0;
    for (long i = 0; i < n; i++) {
        char *text = vg_json_dump(v, 1);
        if (!text)
            return 1;
        total += strlen(text);
        vg_free(text);
    }
    printf("%zu bytes\n", total);
    json_decref(v);
    return 0;
}
