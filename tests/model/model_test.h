/*
 * model_test.h: small helpers the model tests share (header-only): JSON comparison against a
 * fixture, a recording set of stream callbacks, and the weather tool of the fixtures.
 */
#ifndef VG_MODEL_TEST_H
#define VG_MODEL_TEST_H

#include "helpers/test.h"

#include <jansson.h>

#include "base/buf.h"
#include "base/json.h"
#include "helpers/http_server.h"
#include "model/model.h"
#include "os/clock.h"
#include "os/ids.h"

/* Assert that JSON text equals a fixture file's JSON (as values, not as text). */
static inline void assert_json_fixture(const char *actual, const char *fixture)
{
    char *want = vg_test_fixture(fixture, NULL);
    json_error_t e1, e2;
    json_t *a = json_loads(actual, 0, &e1), *b = json_loads(want, 0, &e2);
    if (!a || !b || !json_equal(a, b)) {
        char *ad = a ? json_dumps(a, JSON_SORT_KEYS | JSON_INDENT(1)) : NULL;
        char *bd = b ? json_dumps(b, JSON_SORT_KEYS | JSON_INDENT(1)) : NULL;
        TEST_FAIL_("request body differs from %s\n--- sent:\n%s\n--- fixture:\n%s", fixture,
                   ad ? ad : actual, bd ? bd : want);
    }
    json_decref(a);
    json_decref(b);
    vg_free(want);
}

/* Records everything a stream delivers. */
struct recorder {
    struct vg_buf text;
    struct vg_buf args[4];
    char ids[4][64];
    char names[4][64];
    int starts;
    int text_calls;
    int cancel_after; /* > 0: cancel once this many text deltas arrived */
    int cancel_now;
};

static inline void rec_text(void *u, const char *d, size_t n)
{
    struct recorder *r = u;
    r->text_calls++;
    vg_buf_append(&r->text, d, n);
}

static inline void rec_start(void *u, size_t i, const char *id, const char *name)
{
    struct recorder *r = u;
    r->starts++;
    if (i < 4) {
        snprintf(r->ids[i], sizeof(r->ids[i]), "%s", id);
        snprintf(r->names[i], sizeof(r->names[i]), "%s", name);
    }
}

static inline void rec_args(void *u, size_t i, const char *d, size_t n)
{
    struct recorder *r = u;
    if (i < 4)
        vg_buf_append(&r->args[i], d, n);
}

static inline int rec_cancel(void *u)
{
    struct recorder *r = u;
    return r->cancel_now || (r->cancel_after > 0 && r->text_calls >= r->cancel_after);
}

static inline struct vg_model_stream_cb recorder_init(struct recorder *r)
{
    memset(r, 0, sizeof(*r));
    vg_buf_init(&r->text, 0);
    for (int i = 0; i < 4; i++)
        vg_buf_init(&r->args[i], 0);
    return (struct vg_model_stream_cb){.user = r,
                                       .on_text = rec_text,
                                       .on_tool_start = rec_start,
                                       .on_tool_args = rec_args,
                                       .cancel = rec_cancel};
}

static inline void recorder_release(struct recorder *r)
{
    vg_buf_release(&r->text);
    for (int i = 0; i < 4; i++)
        vg_buf_release(&r->args[i]);
}

#define WEATHER_SCHEMA                                                                             \
    "{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\",\"description\":"      \
    "\"City name, e.g. Paris\"},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\","              \
    "\"fahrenheit\"]}},\"required\":[\"location\"]}"
#define WEATHER_SCHEMA_STRICT                                                                      \
    "{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\",\"description\":"      \
    "\"City name, e.g. Paris\"},\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\","              \
    "\"fahrenheit\"]}},\"required\":[\"location\"],\"additionalProperties\":false}"
#define WRITE_FILE_SCHEMA                                                                          \
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":"   \
    "\"string\"},\"append\":{\"type\":\"boolean\"}},\"required\":[\"path\",\"content\"]}"

/* A schema the loop dumped (vg_json_dump of an object) goes into the body as it is, not parsed
 * and written again: the body is byte for byte the one the parsing path writes. build is the
 * provider's body builder with its other arguments fixed. */
static inline void assert_dumped_schema_sent_as_it_is(
    vigil_code (*build)(const struct vg_model_request *req, char **body, vigil_error *err),
    const char *schema)
{
    json_t *v = json_loads(schema, 0, NULL);
    ASSERT(v);
    char *dumped = vg_json_dump(v, 1);
    json_decref(v);
    ASSERT(dumped);
    char *body[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        struct vg_model_tool t = {"get_weather", "Weather.", dumped, k};
        struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "hi"};
        struct vg_model_request req = {
            .messages = &msg, .n_messages = 1, .tools = &t, .n_tools = 1};
        ASSERT_OK(build(&req, &body[k], E));
    }
    ASSERT_STREQ(body[1], body[0]);
    ASSERT_CONTAINS(body[1], dumped);
    vg_free(body[0]);
    vg_free(body[1]);
    vg_free(dumped);
}

#endif
