/*
 * test_schema.c: the record registry and the signal registry. Every record type has a valid
 * sample that is accepted, and each kind of invalid record (unknown type, missing field, wrong
 * type, unknown field, bad enum value, wrong schema version, bad base field) is refused with a
 * message that names the problem. Every signal is validated the same way.
 */
#include "helpers/test.h"

#include <jansson.h>

#include "journal/journal.h"

#define RID "0190aaaa-0000-7000-8000-0000000000a1"
#define RUNID "0190aaaa-0000-7000-8000-0000000000b1"

static const char *BASE = "\"record_id\":\"" RID "\",\"schema_version\":1,\"run_id\":\"" RUNID
                          "\",\"owner_id\":\"agent-1\",\"scope\":\"agent\","
                          "\"occurred_at\":\"2026-11-23T03:21:54.123Z\"";

/* One valid payload per record type, in registry order. */
static const struct {
    const char *type;
    const char *payload;
} VALID[] = {
    {"journal.header", "\"kind\":\"agent-execution-interaction-journal\",\"agent_id\":\"agent-1\","
                       "\"run_key\":\"k\",\"wake_reason\":\"message\",\"protocol_descriptor\":{},"
                       "\"thread_id\":\"t\",\"model\":\"m\",\"limits\":{\"max_steps\":5},"
                       "\"working_directory\":\"/w\""},
    {"message.accepted", "\"message_id\":\"m1\",\"source\":\"operator\",\"message_type\":\"chat\","
                         "\"payload\":\"hello\",\"mutates_context\":true"},
    {"message.delivery",
     "\"message_id\":\"m1\",\"status\":\"failed\",\"transport\":\"model\",\"reason\":\"x\""},
    {"observation.recorded",
     "\"observation_id\":\"o1\",\"source\":\"mcp\",\"confidence\":\"high\","
     "\"signal\":{\"type\":\"progress\",\"summary\":\"half\",\"completed\":1,\"total\":2},"
     "\"raw_text\":\"r\",\"payload\":{}"},
    {"decision.recorded", "\"decision_id\":\"d1\",\"observation_id\":\"o1\",\"action\":\"reject\","
                          "\"reason\":\"no\",\"policy\":{\"kind\":\"budget-refusal\"}"},
    {"decisions.recorded",
     "\"decisions\":[{\"decision_id\":\"d1\",\"action\":\"record-only\",\"reason\":\"ok\","
     "\"policy\":{\"kind\":\"spawn-admitted\",\"tool\":\"spawn_agents\"}},"
     "{\"decision_id\":\"d2\",\"action\":\"reject\"}]"},
    {"state.changed", "\"lifecycle\":\"running\",\"attention\":\"awaiting-operator\","
                      "\"current_input_request_id\":\"q1\""},
    {"activity.updated",
     "\"activity\":\"editing\",\"progress\":{\"summary\":\"s\",\"units\":{\"completed\":1}},"
     "\"telemetry\":{\"input_tokens\":3},\"capabilities\":{\"streaming\":true},"
     "\"current_target\":{\"kind\":\"file\",\"path\":\"a.c\"}"},
    {"owner-effect.recorded", "\"effect_id\":\"e1\",\"owner_entity\":\"task\","
                              "\"effect_type\":\"task.completed\",\"payload\":{}"},
    {"projection.recorded", "\"projection\":\"timeline-item\",\"payload\":{}"},
};

static char *record(const char *type, int seq, const char *payload)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "{%s,\"type\":\"%s\",\"sequence\":%d%s%s}", BASE, type, seq,
             *payload ? "," : "", payload);
    return buf;
}

static vigil_code check(const char *text, vigil_error *e)
{
    return vg_journal_validate_text(text, strlen(text), e);
}

/* Validate a record, expecting refusal with a message containing want. */
static void refused(const char *text, const char *want)
{
    vigil_error e = {0};
    vigil_code rc = check(text, &e);
    if (rc == VIGIL_OK)
        TEST_FAIL_("accepted: %s", text);
    ASSERT_CONTAINS(e.message, want);
}

TEST(every_type_valid)
{
    /* proves: S1-018 S1-022 S1-047 */
    ASSERT_EQ(vg_journal_type_count(), VG_ARRAY_LEN(VALID));
    for (size_t i = 0; i < VG_ARRAY_LEN(VALID); i++) {
        ASSERT_STREQ(vg_journal_type_name(i), VALID[i].type);
        int seq = i == 0 ? 1 : 2;
        ASSERT_OK(check(record(VALID[i].type, seq, VALID[i].payload), E));
    }
}

/* Drop each required field of each valid sample in turn: always refused. */
TEST(missing_fields_refused)
{
    /* proves: S1-039 S1-047 */
    for (size_t i = 0; i < VG_ARRAY_LEN(VALID); i++) {
        json_t *rec = json_loads(record(VALID[i].type, i == 0 ? 1 : 2, VALID[i].payload), 0, NULL);
        ASSERT(rec);
        const char *key;
        json_t *v;
        void *tmp;
        json_object_foreach_safe (rec, tmp, key, v) {
            json_t *copy = json_deep_copy(rec);
            json_object_del(copy, key);
            char *text = json_dumps(copy, JSON_COMPACT);
            vigil_error e = {0};
            vigil_code rc = check(text, &e);
            /* Optional fields may go; required and base fields may not. */
            static const char *const optional[] = {
                "thread_id",      "model",     "limits",    "working_directory",
                "reason",         "signal",    "raw_text",  "payload",
                "observation_id", "policy",    "attention", "current_input_request_id",
                "activity",       "progress",  "telemetry", "capabilities",
                "current_target", "lifecycle", NULL};
            int opt = 0;
            for (const char *const *o = optional; *o; o++)
                opt |= strcmp(*o, key) == 0;
            const char *type = VALID[i].type;
            /* payload is required in message.accepted and projection.recorded */
            if (strcmp(key, "payload") == 0 &&
                (!strcmp(type, "message.accepted") || !strcmp(type, "projection.recorded")))
                opt = 0;
            /* state.changed needs at least one field; attention is needed with a request */
            if (!strcmp(type, "state.changed") && strcmp(key, "attention") == 0)
                opt = 0;
            if (i == 3 && strcmp(key, "observation_id") == 0)
                opt = 0;
            if (opt && rc != VIGIL_OK)
                TEST_FAIL_("%s without optional %s refused: %s", VALID[i].type, key, e.message);
            if (!opt && rc == VIGIL_OK)
                TEST_FAIL_("%s without %s accepted", VALID[i].type, key);
            vg_free(text);
            json_decref(copy);
        }
        json_decref(rec);
    }
}

TEST(invalid_records_refused)
{
    /* proves: S1-039 S1-017 */
    refused(record("journal.footer", 2, ""), "unknown journal record type");
    refused(record("message.accepted", 2,
                   "\"message_id\":\"m1\",\"source\":\"robot\",\"message_type\":\"chat\","
                   "\"payload\":1,\"mutates_context\":true"),
            "\"robot\" is not allowed");
    refused(record("message.accepted", 2,
                   "\"message_id\":\"m1\",\"source\":\"operator\",\"message_type\":\"chat\","
                   "\"payload\":1,\"mutates_context\":\"yes\""),
            "must be a boolean");
    refused(record("message.accepted", 2,
                   "\"message_id\":\"m1\",\"source\":\"operator\",\"message_type\":\"chat\","
                   "\"payload\":1,\"mutates_context\":true,\"colour\":\"red\""),
            "unknown field \"colour\"");
    refused(record("message.delivery", 2,
                   "\"message_id\":7,\"status\":\"failed\","
                   "\"transport\":\"model\""),
            "must be a non-empty string");
    /* header only at sequence 1, and sequence 1 only for the header */
    refused(record("journal.header", 2, VALID[0].payload), "sequence 1 must be journal.header");
    refused(record("state.changed", 1, "\"lifecycle\":\"running\""),
            "sequence 1 must be journal.header");
    refused(record("state.changed", 0, "\"lifecycle\":\"running\""), "sequence");
    /* awaiting-input is not a lifecycle */
    refused(record("state.changed", 2, "\"lifecycle\":\"awaiting-input\""), "is not allowed");
    refused(record("state.changed", 2,
                   "\"lifecycle\":\"running\",\"current_input_request_id\":"
                   "\"q\""),
            "awaiting-operator");
    refused(record("state.changed", 2, ""), "changes nothing");
    refused(record("activity.updated", 2, ""), "carries nothing");
    refused(record("activity.updated", 2, "\"telemetry\":{\"input_tokens\":-1}"),
            "non-negative integer");
    refused(record("activity.updated", 2, "\"current_target\":{\"label\":\"x\"}"),
            "activity.updated.current_target is missing required field \"kind\"");
    refused(record("decision.recorded", 2, "\"decision_id\":\"d\",\"action\":\"maybe\""),
            "not allowed");
    /* a call's decisions: at least one, each item a decision as decision.recorded has it */
    refused(record("decisions.recorded", 2, "\"decisions\":[]"), "holds no decision");
    refused(record("decisions.recorded", 2, "\"decisions\":{}"), "must be an array");
    refused(record("decisions.recorded", 2, "\"decisions\":[\"d\"]"),
            "decisions.recorded.decisions item 0 must be an object");
    refused(record("decisions.recorded", 2,
                   "\"decisions\":[{\"decision_id\":\"d\",\"action\":\"reject\"},"
                   "{\"decision_id\":\"e\",\"action\":\"maybe\"}]"),
            "\"maybe\" is not allowed");
    refused(record("decisions.recorded", 2, "\"decisions\":[{\"action\":\"reject\"}]"),
            "decisions.recorded.decisions is missing required field \"decision_id\"");
    refused(record("decisions.recorded", 2,
                   "\"decisions\":[{\"decision_id\":\"d\",\"action\":\"reject\","
                   "\"policy\":{\"kind\":\"spawn-maybe\"}}]"),
            "\"spawn-maybe\" is not allowed");
    /* base fields */
    char text[4096];
    snprintf(text, sizeof text, "%s", record("state.changed", 2, "\"lifecycle\":\"running\""));
    char *p = strstr(text, "\"schema_version\":1");
    p[17] = '2';
    refused(text, "schema_version 1");
    snprintf(text, sizeof text, "%s", record("state.changed", 2, "\"lifecycle\":\"running\""));
    p = strstr(text, "\"scope\":\"agent\"");
    memcpy(p + 9, "xyzzy", 5);
    refused(text, "scope");
    snprintf(text, sizeof text, "%s", record("state.changed", 2, "\"lifecycle\":\"running\""));
    p = strstr(text, "2026-11-23T");
    memcpy(p, "yesterday", 9);
    refused(text, "occurred_at");
    snprintf(text, sizeof text, "%s", record("state.changed", 2, "\"lifecycle\":\"running\""));
    p = strstr(text, RUNID);
    p[3] = 'X';
    refused(text, "run_id");
    refused("[1,2]", "must be a JSON object");
    refused("{\"type\":", "not JSON");
    refused("{\"type\":\"state.changed\",\"type\":\"state.changed\"}", "not JSON");
    /* header's agent must be its owner */
    snprintf(text, sizeof text, "%s", record("journal.header", 1, VALID[0].payload));
    p = strstr(text, "\"agent_id\":\"agent-1\"");
    p[17] = '9';
    refused(text, "differs from owner_id");
}

static const struct {
    const char *signal;
    const char *valid;
    const char *invalid; /* one invalid variant */
    const char *why;
} SIG[] = {
    {"progress", "\"summary\":\"s\",\"completed\":1,\"total\":4,\"unit\":\"files\"",
     "\"completed\":1", "missing required field \"summary\""},
    {"status", "\"status\":\"compiling\"", "\"status\":\"\"", "non-empty string"},
    {"needs_input", "\"request_id\":\"q1\",\"question\":\"which?\",\"choices\":[\"a\"]",
     "\"request_id\":\"q1\",\"question\":\"which?\",\"choices\":\"a\"", "must be an array"},
    {"blocked", "\"reason\":\"no access\"", "\"reason\":\"x\",\"eta\":3", "unknown field"},
    {"ready_for_verification", "\"summary\":\"done\",\"evidence\":{\"tests\":3}", "",
     "missing required field"},
    {"completed_claim", "\"summary\":\"done\"", "\"summary\":5", "non-empty string"},
    {"failed_claim", "\"reason\":\"broke\",\"error\":\"E\"", "\"error\":\"E\"",
     "missing required field \"reason\""},
    {"message", "\"text\":\"hi\"", "\"text\":null", "must be a string"},
    {"usage", "\"input_tokens\":10,\"output_tokens\":3", "\"input_tokens\":1.5",
     "non-negative integer"},
    {"diagnostic", "\"message\":\"m\",\"level\":\"warning\"",
     "\"message\":\"m\",\"level\":\"loud\"", "not allowed"},
};

static char *obs(const char *signal, const char *fields)
{
    static char payload[1024];
    snprintf(payload, sizeof payload,
             "\"observation_id\":\"o1\",\"source\":\"sdk\",\"confidence\":\"authoritative\","
             "\"signal\":{\"type\":\"%s\"%s%s}",
             signal, *fields ? "," : "", fields);
    return record("observation.recorded", 2, payload);
}

TEST(every_signal)
{
    /* proves: S1-020 S1-019 */
    ASSERT_EQ(vg_journal_signal_count(), VG_ARRAY_LEN(SIG));
    for (size_t i = 0; i < VG_ARRAY_LEN(SIG); i++) {
        ASSERT_STREQ(vg_journal_signal_name(i), SIG[i].signal);
        ASSERT_OK(check(obs(SIG[i].signal, SIG[i].valid), E));
        refused(obs(SIG[i].signal, SIG[i].invalid), SIG[i].why);
        /* usage and diagnostic are not surfaced; the eight agent signals are */
        int surfaced =
            strcmp(SIG[i].signal, "usage") != 0 && strcmp(SIG[i].signal, "diagnostic") != 0;
        ASSERT_EQ(vg_journal_signal_surfaced(SIG[i].signal), surfaced);
    }
    refused(obs("telepathy", ""), "unknown type \"telepathy\"");
    refused(record("observation.recorded", 2,
                   "\"observation_id\":\"o1\",\"source\":\"sdk\",\"confidence\":\"high\","
                   "\"signal\":{\"summary\":\"s\"}"),
            "has no \"type\"");
    ASSERT_EQ(vg_journal_signal_surfaced("telepathy"), -1);
}

int main(void)
{
    RUN(every_type_valid);
    RUN(missing_fields_refused);
    RUN(invalid_records_refused);
    RUN(every_signal);
    return 0;
}
