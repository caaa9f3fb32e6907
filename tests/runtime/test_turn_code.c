/*
 * test_turn_code.c: vigil_turn_code, the one mapping from a finished turn's outcome to what it
 * amounts to, which `vigil chat`'s exit status and the HTTP API's answer both use: an answer
 * for a completed turn or one ended by the agent's own limits; a refusal for a kill switch or a
 * spent budget; a failure for a doom loop; the provider class for an answer cut by max_tokens
 * inside a tool call. Each refusal comes with its one line.
 */
#include "helpers/test.h"

#include "vigil.h"

struct row {
    const char *outcome;
    vigil_code want;
    const char *says; /* part of the line; NULL: no line */
};

TEST(each_ending_maps_to_its_code_and_line)
{
    static const struct row rows[] = {
        {"{\"end\":\"completed\",\"reply\":\"hi\"}", VIGIL_OK, NULL},
        {"{\"reply\":\"no end at all\"}", VIGIL_OK, NULL},
        {"{\"end\":\"max_steps\"}", VIGIL_OK, NULL},
        {"{\"end\":\"timeout\",\"stop_reason\":\"timeout\"}", VIGIL_OK, NULL},
        {"{\"end\":\"hard_stopped\"}", VIGIL_OK, NULL},
        {"{\"end\":\"hard_stopped\",\"stop_reason\":\"killed: global\"}", VIGIL_EKILLED,
         "kill switch is on"},
        {"{\"end\":\"hard_stopped\",\"stop_reason\":\"budget_exceeded: daily steps\"}",
         VIGIL_EBUDGET, "budget is spent"},
        {"{\"end\":\"doom_loop\"}", VIGIL_ERROR, "doom loop"},
        {"{\"end\":\"max_tokens\"}", VIGIL_EPROVIDER, "max_tokens inside a tool call"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *message = "unset";
        ASSERT_EQ(vigil_turn_code(rows[i].outcome, &message), rows[i].want);
        if (rows[i].says)
            ASSERT_CONTAINS(message, rows[i].says);
        else
            ASSERT(message == NULL);
    }
    /* The line is optional. */
    ASSERT_EQ(vigil_turn_code("{\"end\":\"doom_loop\"}", NULL), VIGIL_ERROR);
}

TEST(an_outcome_that_is_not_an_object_is_refused)
{
    const char *message = NULL;
    ASSERT_EQ(vigil_turn_code(NULL, &message), VIGIL_EINVAL);
    ASSERT(message != NULL);
    ASSERT_EQ(vigil_turn_code("not json", &message), VIGIL_EINVAL);
    ASSERT_EQ(vigil_turn_code("[1,2]", &message), VIGIL_EINVAL);
}

int main(void)
{
    RUN(each_ending_maps_to_its_code_and_line);
    RUN(an_outcome_that_is_not_an_object_is_refused);
    return 0;
}
