/*
 * test_fiber_deep_json.c: the deepest JSON vigil's readers accept, handled on a fiber's stack
 * (src/os/fiber.c: 512 KiB, 2 MiB under AddressSanitizer), where vigil serve's workers and
 * `vigil chat` run agents' loops and so parse what models send. jansson reads up to
 * JSON_PARSER_MAX_DEPTH (2048) levels, the innermost value counted, and then its tree goes through
 * the writers and the tool-argument validation, most of which recurse once a level. A stack too
 * small would crash the worker on one hostile model reply; here it must all return.
 */
#include "helpers/test.h"

#include "base/buf.h"
#include "base/json.h"
#include "os/fiber.h"
#include "tool/schema.h"

#include <jansson.h>

/* depth containers: nested arrays, the innermost holding an object: [[...[{"k":1}]...]] */
static char *nested(int depth)
{
    size_t n = (size_t)depth * 2 + 16;
    char *t = vg_malloc(n), *p = t;
    ASSERT(t);
    for (int i = 0; i < depth - 1; i++)
        *p++ = '[';
    memcpy(p, "{\"k\":1}", 7);
    p += 7;
    for (int i = 0; i < depth - 1; i++)
        *p++ = ']';
    *p = '\0';
    return t;
}

struct deep {
    int parsed, deeper_refused, written, copied, validated;
};

static void deep_fiber(void *arg)
{
    struct deep *d = arg;
    /* jansson counts the scalar inside as a level too: 2047 containers are its deepest. */
    char *text = nested(JSON_PARSER_MAX_DEPTH - 1);
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    d->parsed = v != NULL;
    if (!v)
        fprintf(stderr, "%s\n", je.text);
    ASSERT(v);
    char *deeper = nested(JSON_PARSER_MAX_DEPTH);
    json_t *no = json_loads(deeper, 0, &je);
    d->deeper_refused = no == NULL;
    json_decref(no);

    struct vg_buf b;
    vg_buf_init(&b, 0);
    int canon = vg_json_put_canonical(&b, v);
    vg_buf_reset(&b);
    int compact = vg_json_put_compact(&b, v);
    char *dumped = json_dumps(v, JSON_COMPACT);
    d->written = canon == 0 && compact == 0 && dumped && strcmp(dumped, text) == 0 &&
                 strcmp(b.data, text) == 0 && !vg_json_is_canonical(text, strlen(text));
    json_t *copy = json_deep_copy(v);
    d->copied = copy && json_equal(copy, v);

    /* A tool's arguments are validated against its schema: a schema that recurses with the
     * instance stops at its own depth limit with a clean refusal. */
    json_t *schema = json_loads("{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}", 0, &je);
    struct vg_schema *sc = NULL;
    ASSERT_OK(vg_schema_compile(schema, &sc, E));
    vigil_error err = {0};
    vigil_code rc = vg_schema_validate(sc, v, NULL, &err);
    d->validated = rc == VIGIL_EINVAL || rc == VIGIL_OK;
    vg_schema_free(sc);
    json_decref(schema);

    json_decref(copy);
    free(dumped);
    vg_buf_release(&b);
    json_decref(v);
    vg_free(deeper);
    vg_free(text);
}

TEST(the_deepest_accepted_json_is_read_written_and_validated_on_a_fiber)
{
    struct vg_fiber_sched *s = NULL;
    ASSERT_OK(vg_fiber_sched_new(&s, E));
    struct deep d = {0};
    ASSERT_OK(vg_fiber_spawn(s, deep_fiber, &d, E));
    vg_fiber_sched_run(s);
    vg_fiber_sched_free(s);
    ASSERT(d.parsed);
    ASSERT(d.deeper_refused);
    ASSERT(d.written);
    ASSERT(d.copied);
    ASSERT(d.validated);
}

int main(void)
{
    RUN(the_deepest_accepted_json_is_read_written_and_validated_on_a_fiber);
    return 0;
}
