/*
 * test_recover_live.c: recovery of operations left started settles only those whose agent has
 * no live run. An operation in flight in a live run (its agent's lease held and unexpired) is
 * left alone — settling it would race the run about to finish it — and is settled once the
 * lease has expired (the run is then presumed dead).
 */
#include "helpers/rt.h"

#include "tool/tool.h"
#include "wake/wake.h"

static vigil_code charge(void *user, const vigil_tool_call_info *call, const char *args, char **out,
                         vigil_error *err)
{
    *out = strdup("{\"charged\":true}");
    return VIGIL_OK;
}

static const char *op_status(struct test_rt *t, const char *op_id)
{
    static char status[32];
    json_t *op = NULL;
    ASSERT_OK(vg_env_get_json(t->env, "operation", op_id, &op, NULL, E));
    snprintf(status, sizeof status, "%s", json_string_value(json_object_get(op, "status")));
    json_decref(op);
    return status;
}

/* proves: S0-173 */
TEST(live_runs_keep_their_operations)
{
    struct test_rt t;
    char agent[37], thread[128];
    test_rt_open(&t, "recover_live");
    vigil_agent_spec spec = {.name = "payer", .config_json = "{\"tools\":[\"charge_card\"]}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    vigil_tool_def def = {.name = "charge_card",
                          .description = "Charge the card.",
                          .contract_json = "{\"risk\":\"low\",\"idempotency\":\"non_idempotent\"}"};
    ASSERT_OK(vigil_tool_register(t.rt, &def, charge, NULL, E));
    snprintf(thread, sizeof thread, "%s:run:r1", agent);
    /* What a crash (or a live run) leaves: the operation recorded as started. */
    json_t *op =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{}, s:s, s:s, s:s}", "operation_id",
                  "op-1", "agent_id", agent, "tool", "charge_card", "run_key", "r1", "thread_id",
                  thread, "run_id", "run-1", "wake_reason", "manual", "arguments", "started_at",
                  "2026-01-01T00:00:00.000Z", "action_id", "", "status", "started");
    ASSERT_OK(
        vg_env_put_json(t.env, "operation", "op-1", agent, "started", "charge_card", 1, op, 0, E));
    json_decref(op);
    /* A run of the agent is live: it holds the lease for another minute. */
    int64_t epoch = 0;
    int got = 0;
    ASSERT_OK(vg_wake_lease_take(t.env, agent, "daemon:w0", 60000, &epoch, &got, E));
    ASSERT_EQ(got, 1);

    struct vg_tool_executor *x = NULL;
    int settled = -1;
    ASSERT_OK(vg_runtime_tools(t.rt, &x, E));
    ASSERT_OK(vg_tool_executor_recover(x, &settled, E));
    ASSERT_EQ(settled, 0);
    ASSERT_STREQ(op_status(&t, "op-1"), "started");

    /* The lease runs out: the run is presumed dead, and its operation is settled (a
     * non-idempotent tool without a lookup goes to a person, never re-run blindly). */
    vg_test_clock_advance(&t.clock, 60001);
    ASSERT_OK(vg_tool_executor_recover(x, &settled, E));
    ASSERT_EQ(settled, 1);
    ASSERT_STREQ(op_status(&t, "op-1"), "in_doubt");
    test_rt_close(&t);
}

int main(void)
{
    RUN(live_runs_keep_their_operations);
    return 0;
}
