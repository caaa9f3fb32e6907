/*
 * test_oom.c: allocation failure torture. A scenario that opens a run, walks every write path,
 * closes it and reads it back is repeated with the Nth allocation failing, for N = 1, 2, ...
 * until a pass completes without an injected failure. Every pass must end in success or a
 * clean ENOMEM (never a crash, a leak under the sanitizer build, or another error), and the
 * journal left behind must still replay to its stored projection.
 */
#include "journal/journal_fixture.h"

static char run_id[37];

static vigil_code scenario(struct fx *f, vigil_error *e)
{
    struct vg_run *run = NULL;
    char *t = NULL;
    char tool[37];
    run_id[0] = '\0';
    vigil_code rc = vg_journal_run_open(f->store, &f->clock.base, f->ids,
                                        &(struct vg_run_launch){.agent_id = FX_AGENT,
                                                                .run_key = "oom",
                                                                .wake_reason = "timer",
                                                                .limits_json = "{\"a\":1}"},
                                        &run, e);
    if (rc)
        return rc;
    snprintf(run_id, sizeof run_id, "%s", vg_journal_run_id(run));
    struct vg_journal_message m = {.message_id = "m",
                                   .source = "owner",
                                   .message_type = "chat",
                                   .payload_json = "{\"text\":\"hi\"}"};
    struct vg_journal_observation o = {.observation_id = "o",
                                       .source = "sdk",
                                       .confidence = "high",
                                       .signal_json = "{\"type\":\"needs_input\",\"request_id\":"
                                                      "\"q\",\"question\":\"?\"}"};
    struct vg_journal_decision d = {.observation_id = "o", .action = "update-state"};
    struct vg_journal_activity a = {.progress_json = "{\"summary\":\"s\"}"};
    struct vg_model_call_trace mc = {
        .provider = "p", .model = "m", .input_tokens = 3, .attempts = 1};
    struct vg_journal_owner_effect ef = {.owner_entity = "agent", .effect_type = "x"};
    if ((rc = vg_journal_message_accept(run, &m, NULL, e)) ||
        (rc = vg_journal_message_delivery(run, "m", "delivered", "model", NULL, e)) ||
        (rc = vg_journal_observe(run, &o, NULL, e)) ||
        (rc = vg_journal_observe(run, &o, NULL, e)) || (rc = vg_journal_decide(run, &d, e)) ||
        (rc = vg_journal_await_input(run, "q", e)) || (rc = vg_journal_activity(run, &a, e)) ||
        (rc = vg_journal_model_call(run, &mc, e)) ||
        (rc = vg_journal_tool_call_started(run, "t", NULL, "[1]", tool, e)) ||
        (rc = vg_journal_tool_call_finished(run, tool, "succeeded", "{}", NULL, 1, e)) ||
        (rc = vg_journal_policy_decision(run, "budget-refusal", NULL, NULL, "r", e)) ||
        (rc = vg_journal_owner_effect(run, &ef, e)) ||
        (rc = vg_journal_run_close(run, VG_RUN_COMPLETED, "s", NULL, e)))
        goto out;
    if ((rc = vg_journal_replay(f->store, run_id, &t, e)))
        goto out;
    vg_free(t);
    t = NULL;
    if ((rc = vg_journal_runs_list(f->store, FX_AGENT, NULL, NULL, 2, &t, e)))
        goto out;
    vg_free(t);
    t = NULL;
    if ((rc = vg_journal_run_show(f->store, run_id, &t, e)))
        goto out;
    vg_free(t);
    t = NULL;
    if ((rc = vg_journal_run_messages(f->store, run_id, NULL, 0, &t, e)))
        goto out;
    vg_free(t);
    t = NULL;
    if ((rc = vg_journal_run_tools(f->store, run_id, NULL, 0, &t, e)))
        goto out;
out:
    vg_free(t);
    vg_journal_run_free(run);
    return rc;
}

TEST(every_allocation_fails_cleanly)
{
    struct fx f;
    fx_open(&f, "jo_oom", 31);
    /* Every third failure point by default (a full pass is slow under the sanitizers);
     * VIGIL_OOM_STRIDE=1 tries every one. */
    const char *env = getenv("VIGIL_OOM_STRIDE");
    long stride = env ? strtol(env, NULL, 10) : 3;
    if (stride < 1)
        stride = 1;
    long n, points = 0;
    for (n = 1; n < 100000; n += stride, points++) {
        vigil_error e = {0};
        vg_alloc_fail_at(n, 1);
        vigil_code rc = scenario(&f, &e);
        int injected = vg_alloc_failed();
        vg_alloc_fail_at(0, 0);
        if (!injected) {
            if (rc != VIGIL_OK)
                TEST_FAIL_("pass %ld failed without injection: %s", n, e.message);
            break;
        }
        if (rc != VIGIL_OK && rc != VIGIL_ENOMEM)
            TEST_FAIL_("pass %ld: %s (%s)", n, vigil_code_name(rc), e.message);
        if (run_id[0]) {
            char *t = NULL;
            ASSERT_OK(vg_journal_replay(f.store, run_id, &t, E));
            if (!strstr(t, "\"stored_projection_matches\":true"))
                TEST_FAIL_("pass %ld (%s): stored projection differs from replay: %s", n, e.message,
                           t);
            vg_free(t);
        }
    }
    fprintf(stderr, "%ld allocation failure points tried (stride %ld)\n", points, stride);
    ASSERT(points > 100);
    fx_close(&f);
}

int main(void)
{
    RUN(every_allocation_fails_cleanly);
    return 0;
}
