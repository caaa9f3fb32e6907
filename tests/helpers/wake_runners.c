/*
 * wake_runners.c: the wake runners of the tests, out of libvigil: they are plugged into the
 * wake layer's runner seam (vg_wake_runner_provide) by the tests that use them and by the test
 * build of the command (vigil-test, which the shell tests run).
 *
 * - "echo" appends one observation message describing the wake to the run's thread.
 * - "test:steps=N[:block=PATH][:fail=1]" writes N effect records, each guarded by an operation
 *   id H(run key, step) the way tool side effects are, so a re-run after a crash finds the done
 *   steps and does not repeat them. With block=PATH it waits after step 1 while PATH exists
 *   (creating PATH.reached first), which lets the crash test kill the daemon mid-run.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "helpers/wake_runners.h"
#include "os/fs.h"

/* ---- echo ------------------------------------------------------------------------------------ */

static enum vg_wake_outcome echo_run(struct vg_wake_runner *r, struct vg_env *env,
                                     const struct vg_wake_job *job, const volatile int *stop,
                                     struct vg_buf *error_text)
{
    vigil_error err = {0};
    char *tokens = json_dumps(job->tokens, JSON_COMPACT);
    struct vg_buf text;
    vg_buf_init(&text, 64 << 10);
    vg_buf_printf(&text, "woke: reason %s%s%s, tokens %s", job->reason, *job->reason_id ? " " : "",
                  job->reason_id, tokens ? tokens : "[]");
    if (job->seed_input && json_is_string(job->seed_input))
        vg_buf_printf(&text, ", input \"%s\"", json_string_value(job->seed_input));
    vg_free(tokens);
    json_t *meta = json_pack("{s:s, s:O?}", "run_key", job->run_key, "wake", job->meta);
    struct vg_message_in m = {.agent_id = job->agent_id,
                              .thread_id = job->thread_id,
                              .kind = VG_MSG_OBSERVATION,
                              .content = text.data,
                              .metadata = meta,
                              .run_id = job->run_key};
    vigil_code rc = vg_buf_finish(&text, &err);
    if (!rc && !(rc = vg_store_begin(env->store, &err))) {
        rc = vg_wake_lease_check(env, job->agent_id, job->epoch, &err);
        if (!rc)
            rc = vg_message_append(env, &m, NULL, &err);
        rc = vg_store_end(env->store, rc, &err);
    }
    json_decref(meta);
    vg_buf_release(&text);
    if (rc) {
        vg_buf_puts(error_text, err.message);
        return VG_WAKE_FAILED;
    }
    return VG_WAKE_COMPLETED;
}

static const struct vg_wake_runner_methods echo_methods = {1,    "echo", 0,   echo_run,
                                                           NULL, NULL,   NULL};
static struct vg_wake_runner echo_runner = {&echo_methods};

/* ---- test ------------------------------------------------------------------------------------ */

struct test_runner {
    struct vg_wake_runner base; /* must stay first */
    int steps;
    int fail;
    char block[1024];
};

static enum vg_wake_outcome test_run(struct vg_wake_runner *r, struct vg_env *env,
                                     const struct vg_wake_job *job, const volatile int *stop,
                                     struct vg_buf *error_text)
{
    struct test_runner *t = (struct test_runner *)r;
    vigil_error err = {0};
    if (t->fail) {
        vg_buf_puts(error_text, "test runner failure");
        return VG_WAKE_FAILED;
    }
    for (int i = 1; i <= t->steps; i++) {
        char step[16], op[65];
        int inserted = 0;
        if (*stop)
            return VG_WAKE_INTERRUPTED;
        snprintf(step, sizeof step, "%d", i);
        const char *parts[] = {job->run_key, "step", step};
        vg_sha256_hex_parts(op, parts, 3);
        json_t *body = json_pack("{s:s, s:i, s:i, s:I}", "run_key", job->run_key, "step", i,
                                 "attempt", job->attempt, "epoch", (json_int_t)job->epoch);
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        vigil_code rc = text ? vg_store_begin(env->store, &err) : VIGIL_ENOMEM;
        if (!rc) {
            rc = vg_wake_lease_check(env, job->agent_id, job->epoch, &err);
            struct vg_record rec = {.kind = "test_effect",
                                    .id = op,
                                    .owner = job->agent_id,
                                    .k1 = job->run_key,
                                    .k2 = step,
                                    .seq = i,
                                    .at = vg_env_now(env),
                                    .body = text};
            if (!rc) /* the operation id guard: a step done before is not done again */
                rc = vg_store_put(env->store, &rec, VG_PUT_IF_ABSENT, &inserted, &err);
            rc = vg_store_end(env->store, rc, &err);
        }
        vg_free(text);
        if (rc) {
            vg_buf_puts(error_text, err.message[0] ? err.message : "out of memory");
            return VG_WAKE_FAILED;
        }
        if (i == 1 && t->block[0] && vg_fs_exists(t->block)) {
            char reached[1100];
            snprintf(reached, sizeof reached, "%s.reached", t->block);
            (void)vg_fs_write_file(reached, job->run_key, strlen(job->run_key), &err);
            while (vg_fs_exists(t->block) && !*stop)
                vg_clock_sleep_ms(env->clock, 20);
        }
    }
    return VG_WAKE_COMPLETED;
}

static void test_destroy(struct vg_wake_runner *r)
{
    vg_free(r);
}

static const struct vg_wake_runner_methods test_methods = {1,    "test", 0, test_run, test_destroy,
                                                           NULL, NULL};

/* The runners of tests/helpers/wake_runners.h by description; ENOTFOUND for another one. */
static vigil_code test_runner_new(const char *desc, struct vg_wake_runner **out, vigil_error *err)
{
    if (!strcmp(desc, "echo")) {
        *out = &echo_runner;
        return VIGIL_OK;
    }
    if (strncmp(desc, "test", 4) || (desc[4] && desc[4] != ':'))
        return VIGIL_ENOTFOUND;
    struct test_runner *t = vg_calloc(1, sizeof *t);
    if (!t)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory making a runner");
    t->base.methods = &test_methods;
    t->steps = 3;
    for (const char *p = desc + 4; *p == ':';) {
        p++;
        size_t n = strcspn(p, ":");
        if (!strncmp(p, "steps=", 6)) {
            t->steps = (int)strtol(p + 6, NULL, 10);
        } else if (!strncmp(p, "fail=", 5)) {
            t->fail = p[5] == '1';
        } else if (!strncmp(p, "block=", 6)) {
            snprintf(t->block, sizeof t->block, "%.*s", (int)(n - 6), p + 6);
        } else {
            vg_free(t);
            return VG_FAIL(err, VIGIL_EINVAL, "unknown test runner option \"%.*s\"", (int)n, p);
        }
        p += n;
    }
    if (t->steps < 1 || t->steps > 1000) {
        vg_free(t);
        return VG_FAIL(err, VIGIL_EINVAL, "test runner steps must be 1 to 1000");
    }
    *out = &t->base;
    return VIGIL_OK;
}

void test_wake_runners_provide(void)
{
    vg_wake_runner_provide(test_runner_new);
}
