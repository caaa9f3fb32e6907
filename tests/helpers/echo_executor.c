/*
 * echo_executor.c: a minimal loop executor with one tool, `echo` (returns its "text" argument),
 * for the loop's tests and bench/bench_loop.c: it skips the tool gate, so they measure and test
 * the loop alone. Test code: it lives in the test library, not in libvigil.
 */
#include "base/common.h"

#include "base/json.h"
#include "base/jscan.h"
#include "helpers/echo_executor.h"

#include <pthread.h>

/* The tool error envelope the loop writes for a refused call (loop.c's own, for the same
 * output). */
static void refuse(struct vg_loop_tool_outcome *o, const char *code, const char *message)
{
    json_t *v = json_pack("{s:s, s:s}", "error", code, "message", message);
    char *text = v ? vg_json_dump(v, 1) : NULL;
    json_decref(v);
    o->is_error = 1;
    o->content = text ? text : vg_strdup("{\"error\":\"tool_failed\"}");
    snprintf(o->error_code, sizeof o->error_code, "%s", code);
}

/* The tool list never changes: built once, then shared (jansson counts references
 * atomically), as the tool executor shares its contracts' schemas. Nothing changes it. */
static pthread_mutex_t echo_tools_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *echo_tools;

static vigil_code echo_visible(void *self, struct vg_env *env, const char *agent_id,
                               const char *run_key, json_t **out, vigil_error *err)
{
    pthread_mutex_lock(&echo_tools_lock);
    if (!echo_tools) /* not kept after a failure: the next call tries again */
        echo_tools =
            json_pack("[{s:s, s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}]", "name", "echo", "description",
                      "Repeat the given text back.", "input_schema", "type", "object", "properties",
                      "text", "type", "string", "required", "text");
    *out = json_incref(echo_tools);
    pthread_mutex_unlock(&echo_tools_lock);
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing tools");
}

static vigil_code echo_call(void *self, struct vg_env *env, const struct vg_loop_call_ctx *ctx,
                            const char *name, const char *args_json,
                            struct vg_loop_tool_outcome *out, vigil_error *err)
{
    json_error_t je;
    if (strcmp(name, "echo") != 0) {
        refuse(out, "unknown_tool", "no such tool");
        return VIGIL_OK;
    }
    /* Its "text" read without a tree when the scanner can (jscan.h), the output written as
     * jansson writes it: a tenth of an agent step's instructions went to parsing and dumping
     * with jansson. Anything the scanner declines goes the jansson way below. */
    if (args_json) {
        struct vg_jscan sc;
        struct vg_buf text;
        const char *key;
        size_t klen, at = (size_t)-1;
        int more, found = 0;
        vg_jscan_init(&sc, args_json, strlen(args_json));
        vg_buf_init(&text, 0);
        more = vg_jscan_enter(&sc, '{') == 0 ? vg_jscan_next(&sc, &key, &klen) : -1;
        while (more == 1) {
            if (vg_jscan_key_is(key, klen, "text")) { /* jansson keeps a repeated key's last */
                text.len = 0;
                more = vg_jscan_string(&sc, &text, &at) == 0 ? 1 : -1;
                found = 1;
            } else {
                more = vg_jscan_skip(&sc) == 0 ? 1 : -1;
            }
            if (more == 1)
                more = vg_jscan_next(&sc, &key, &klen);
        }
        if (more == 0 && vg_jscan_end(&sc) == 0 && text.fail == VIGIL_OK) {
            if (!found || at == (size_t)-1) {
                refuse(out, "invalid_arguments", "echo needs a \"text\" string");
            } else {
                struct vg_buf o;
                vg_buf_init(&o, 0);
                vg_buf_puts(&o, "{\"echo\":");
                vg_json_put_text(&o, text.data + at);
                vg_buf_putc(&o, '}');
                if (vg_buf_finish(&o, NULL) == VIGIL_OK)
                    out->content = vg_buf_detach(&o, NULL);
                vg_buf_release(&o);
                if (!out->content) {
                    vg_buf_release(&text);
                    return VG_FAIL(err, VIGIL_ENOMEM, "out of memory running echo");
                }
            }
            vg_buf_release(&text);
            return VIGIL_OK;
        }
        vg_buf_release(&text);
    }
    json_t *args = json_loads(args_json ? args_json : "", 0, &je);
    const char *text = json_string_value(json_object_get(args, "text"));
    if (!text) {
        refuse(out, "invalid_arguments", "echo needs a \"text\" string");
    } else {
        json_t *r = json_pack("{s:s}", "echo", text);
        out->content = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        if (!out->content) {
            json_decref(args);
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory running echo");
        }
    }
    json_decref(args);
    return VIGIL_OK;
}

static const struct vg_loop_executor echo_executor = {
    .self = NULL, .records_messages = 0, .visible_tools = echo_visible, .call = echo_call};

const struct vg_loop_executor *vg_loop_echo_executor(void)
{
    return &echo_executor;
}
