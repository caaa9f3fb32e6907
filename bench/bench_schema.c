/*
 * bench_schema.c: how fast vigil validates tool arguments. A typical tool schema (an object of
 * 10 properties: strings with length and pattern, enums, integers with bounds, a boolean, an
 * array of objects) is compiled once and validated many times. Prints figures; asserts nothing.
 * Usage: bench_schema [iterations]
 */
#include "base/common.h"

#include "base/buf.h"
#include "os/clock.h"
#include "tool/schema.h"

static const char *schema_text =
    "{\"type\":\"object\",\"additionalProperties\":false,"
    " \"required\":[\"path\",\"mode\",\"content\"],"
    " \"properties\":{"
    "  "
    "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,\"pattern\":\"^[A-Za-z0-9_./"
    "-]+$\"},"
    "  \"mode\":{\"enum\":[\"create\",\"overwrite\",\"append\"]},"
    "  \"content\":{\"type\":\"string\",\"maxLength\":100000},"
    "  \"encoding\":{\"enum\":[\"utf-8\",\"base64\"],\"default\":\"utf-8\"},"
    "  \"max_bytes\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10485760},"
    "  \"dry_run\":{\"type\":\"boolean\",\"default\":false},"
    "  \"reason\":{\"type\":\"string\",\"maxLength\":500},"
    "  \"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^\\\\w+$\"},"
    "           \"uniqueItems\":true,\"maxItems\":20},"
    "  \"priority\":{\"type\":\"integer\",\"enum\":[1,2,3]},"
    "  \"targets\":{\"type\":\"array\",\"maxItems\":10,\"items\":{\"type\":\"object\","
    "     \"required\":[\"id\"],\"properties\":{\"id\":{\"type\":\"string\",\"minLength\":36,"
    "     \"maxLength\":36},\"weight\":{\"type\":\"number\",\"exclusiveMinimum\":0}}}}}}";

static const char *valid_text =
    "{\"path\":\"notes/2024/plan.md\",\"mode\":\"overwrite\",\"content\":\"# Plan\\n\\n- step "
    "one\","
    "\"encoding\":\"utf-8\",\"max_bytes\":65536,\"dry_run\":false,\"reason\":\"user asked\","
    "\"tags\":[\"plan\",\"weekly\",\"draft\"],\"priority\":2,"
    "\"targets\":[{\"id\":\"0190c3a2-7b1e-7c3d-9a4f-1b2c3d4e5f60\",\"weight\":0.5},"
    "{\"id\":\"0190c3a2-7b1e-7c3d-9a4f-1b2c3d4e5f61\"}]}";

static const char *invalid_text =
    "{\"path\":\"bad path!\",\"mode\":\"delete\",\"content\":7,\"max_bytes\":0,"
    "\"tags\":[\"a\",\"a\"],\"priority\":4,\"targets\":[{\"weight\":-1}],\"extra\":true}";

static double run(const struct vg_schema *s, const json_t *inst, long n, struct vg_buf *out)
{
    struct vg_clock *clk = vg_clock_real();
    int64_t t0 = vg_clock_mono_ns(clk);
    for (long i = 0; i < n; i++) {
        if (out)
            vg_buf_reset(out);
        (void)vg_schema_validate(s, inst, out, NULL);
    }
    int64_t t1 = vg_clock_mono_ns(clk);
    return (double)n / ((double)(t1 - t0) / 1e9);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
    json_t *schema = json_loads(schema_text, 0, NULL);
    json_t *valid = json_loads(valid_text, 0, NULL);
    json_t *invalid = json_loads(invalid_text, 0, NULL);
    struct vg_schema *s = NULL;
    vigil_error err = {0};
    if (!schema || !valid || !invalid || vg_schema_compile(schema, &s, &err) != VIGIL_OK) {
        fprintf(stderr, "bench_schema: setup failed: %s\n", err.message);
        return 1;
    }
    if (vg_schema_validate(s, valid, NULL, &err) != VIGIL_OK) {
        fprintf(stderr, "bench_schema: the valid instance is not: %s\n", err.message);
        return 1;
    }
    struct vg_clock *clk = vg_clock_real();
    int64_t t0 = vg_clock_mono_ns(clk);
    long compiles = n / 100 > 0 ? n / 100 : 1;
    for (long i = 0; i < compiles; i++) {
        struct vg_schema *c = NULL;
        if (vg_schema_compile(schema, &c, NULL) == VIGIL_OK)
            vg_schema_free(c);
    }
    double compile_rate = (double)compiles / ((double)(vg_clock_mono_ns(clk) - t0) / 1e9);

    struct vg_buf out;
    vg_buf_init(&out, 0);
    printf("schema: 10 properties (patterns, enums, bounds, array of objects)\n");
    printf("  compile:                     %10.0f schemas/s\n", compile_rate);
    printf("  validate valid instance:     %10.0f validations/s\n", run(s, valid, n, NULL));
    printf("  validate invalid, first:     %10.0f validations/s\n", run(s, invalid, n, NULL));
    (void)vg_schema_validate(s, invalid, &out, NULL);
    int violations = 0;
    for (const char *p = out.data; *p; p++)
        violations += *p == '\n';
    double all_rate = run(s, invalid, n / 4, &out);
    printf("  validate invalid, all (%2d):  %10.0f validations/s\n", violations, all_rate);
    vg_buf_release(&out);
    vg_schema_free(s);
    json_decref(schema);
    json_decref(valid);
    json_decref(invalid);
    return 0;
}
