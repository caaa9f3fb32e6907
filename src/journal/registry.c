/*
 * registry.c: the two registries of the journal as tables. The record registry lists every
 * record type with its payload schema, whether it may be written, an optional cross-field check
 * and the fold function that routes it in replay. The signal registry lists the signals carried
 * by observation.recorded with their payload schema, whether they are surfaced in the protocol
 * descriptor and how replay projects them. Validation, surfacing and replay all read these
 * tables; there is no per-type switch anywhere else. Validation is clean-slate: unknown types,
 * unknown or missing fields and wrong types are refused, never tolerated.
 */
#include "base/common.h"

#include "base/buf.h"
#include "base/hash.h"
#include "base/json.h"
#include "journal/journal_int.h"
#include "os/clock.h"
#include "os/ids.h"

#include <pthread.h>

/* ---- enumerations -------------------------------------------------------------------------- */

static const char *const SCOPES[] = {"system", "agent", "task", "artifact", NULL};
static const char *const SOURCES_MSG[] = {"operator", "daemon", "system", "owner", NULL};
static const char *const DELIVERY_STATUS[] = {"attempted", "delivered", "failed", "skipped", NULL};
static const char *const TRANSPORTS[] = {"model", "process", "adapter", "none", NULL};
static const char *const OBS_SOURCES[] = {
    "pty", "mcp",    "sdk", "provider-output", "terminal-heuristic", "filesystem",
    "git", "daemon", NULL};
static const char *const CONFIDENCE[] = {"authoritative", "high",       "medium",
                                         "low",           "diagnostic", NULL};
static const char *const ACTIONS[] = {"reject",       "record-only",        "emit-message",
                                      "update-state", "route-owner-effect", NULL};
static const char *const POLICY_KINDS[] = {
    "approval-requested", "approval-granted",        "approval-denied",
    "budget-refusal",     "kill-switch-refusal",     "spawn-admitted",
    "spawn-denied",       "spawn-awaiting-approval", NULL};
static const char *const LIFECYCLES[] = {"queued",      "running",  "completed", "failed",
                                         "interrupted", "canceled", "crashed",   NULL};
static const char *const ATTENTION[] = {
    "none", "autonomous", "awaiting-operator", "awaiting-system", "blocked", NULL};
static const char *const ACTIVITIES[] = {"idle",          "planning",  "reasoning",
                                         "communicating", "editing",   "executing",
                                         "testing",       "reviewing", NULL};
static const char *const TARGET_KINDS[] = {"file", "command", "tool", "artifact", "unknown", NULL};
static const char *const TOOL_STATUS[] = {"running",  "succeeded", "failed", "denied",
                                          "canceled", "crashed",   NULL};
static const char *const HEADER_KINDS[] = {JOURNAL_HEADER_KIND, NULL};
static const char *const PROJECTIONS[] = {"timeline-item", NULL};
static const char *const DIAG_LEVELS[] = {"debug", "info", "warning", "error", NULL};

#define END                                                                                        \
    {                                                                                              \
        NULL, 0, 0, NULL, NULL                                                                     \
    }
#define REQ(n, t)                                                                                  \
    {                                                                                              \
        n, t, 1, NULL, NULL                                                                        \
    }
#define OPT(n, t)                                                                                  \
    {                                                                                              \
        n, t, 0, NULL, NULL                                                                        \
    }
#define REQ_ENUM(n, e)                                                                             \
    {                                                                                              \
        n, JT_ENUM, 1, e, NULL                                                                     \
    }
#define OPT_ENUM(n, e)                                                                             \
    {                                                                                              \
        n, JT_ENUM, 0, e, NULL                                                                     \
    }
#define OPT_OBJ(n, s)                                                                              \
    {                                                                                              \
        n, JT_OBJ, 0, NULL, s                                                                      \
    }
#define REQ_ARR_OF(n, s)                                                                           \
    {                                                                                              \
        n, JT_ARR, 1, NULL, s                                                                      \
    }

/* ---- signal payloads ----------------------------------------------------------------------- */

static const struct jfield SIG_PROGRESS[] = {REQ("summary", JT_STR),   OPT("detail", JT_TEXT),
                                             OPT("completed", JT_INT), OPT("total", JT_INT),
                                             OPT("unit", JT_STR),      END};
static const struct jfield SIG_STATUS[] = {REQ("status", JT_STR), OPT("message", JT_TEXT), END};
static const struct jfield SIG_NEEDS_INPUT[] = {REQ("request_id", JT_STR), REQ("question", JT_STR),
                                                OPT("choices", JT_ARR), END};
static const struct jfield SIG_BLOCKED[] = {REQ("reason", JT_STR), OPT("needs", JT_TEXT), END};
static const struct jfield SIG_CLAIM[] = {REQ("summary", JT_STR), OPT("evidence", JT_ANY), END};
static const struct jfield SIG_FAILED[] = {REQ("reason", JT_STR), OPT("error", JT_TEXT), END};
static const struct jfield SIG_MESSAGE[] = {REQ("text", JT_TEXT), OPT("channel", JT_STR), END};
static const struct jfield SIG_USAGE[] = {OPT("input_tokens", JT_INT), OPT("output_tokens", JT_INT),
                                          OPT("cached_tokens", JT_INT), END};
static const struct jfield SIG_DIAGNOSTIC[] = {REQ("message", JT_TEXT),
                                               OPT_ENUM("level", DIAG_LEVELS), END};

/* The signal registry: the single table for validation, surfacing and replay projection. */
static const struct jsignal SIGNALS[] = {
    {"progress", "agent-signal.progress.v1", 1, SP_PROGRESS, "summary", SIG_PROGRESS},
    {"status", "agent-signal.status.v1", 1, SP_STATUS, "status", SIG_STATUS},
    {"needs_input", "agent-signal.needs-input.v1", 1, SP_NEEDS_INPUT, "question", SIG_NEEDS_INPUT},
    {"blocked", "agent-signal.blocked.v1", 1, SP_BLOCKED, "reason", SIG_BLOCKED},
    {"ready_for_verification", "agent-signal.ready-for-verification.v1", 1, SP_CLAIM, "summary",
     SIG_CLAIM},
    {"completed_claim", "agent-signal.completed-claim.v1", 1, SP_CLAIM, "summary", SIG_CLAIM},
    {"failed_claim", "agent-signal.failed-claim.v1", 1, SP_FAILURE, "reason", SIG_FAILED},
    {"message", "agent-signal.message.v1", 1, SP_CHAT, "text", SIG_MESSAGE},
    {"usage", NULL, 0, SP_NONE, NULL, SIG_USAGE},
    {"diagnostic", NULL, 0, SP_NONE, NULL, SIG_DIAGNOSTIC},
};

const char *vg_journal_projection_item(enum signal_projection p)
{
    static const char *const names[] = {[SP_NONE] = NULL,         [SP_PROGRESS] = "progress",
                                        [SP_STATUS] = "status",   [SP_NEEDS_INPUT] = "needs-input",
                                        [SP_BLOCKED] = "blocked", [SP_CLAIM] = "claim",
                                        [SP_FAILURE] = "failure", [SP_CHAT] = "chat"};
    return (unsigned)p < VG_ARRAY_LEN(names) ? names[p] : NULL;
}

/* ---- record payloads ----------------------------------------------------------------------- */

static const struct jfield F_HEADER[] = {REQ_ENUM("kind", HEADER_KINDS),
                                         REQ("agent_id", JT_STR),
                                         REQ("run_key", JT_STR),
                                         REQ("wake_reason", JT_STR),
                                         REQ("protocol_descriptor", JT_OBJ),
                                         OPT("thread_id", JT_STR),
                                         OPT("parent_run_id", JT_STR),
                                         OPT("model", JT_STR),
                                         OPT("limits", JT_OBJ),
                                         OPT("transport_state", JT_OBJ),
                                         OPT("working_directory", JT_STR),
                                         END};
static const struct jfield F_MSG[] = {REQ("message_id", JT_STR),
                                      REQ_ENUM("source", SOURCES_MSG),
                                      REQ("message_type", JT_STR),
                                      REQ("payload", JT_ANY),
                                      REQ("mutates_context", JT_BOOL),
                                      OPT("step", JT_INT),
                                      END};
static const struct jfield F_DELIVERY[] = {
    REQ("message_id", JT_STR), REQ_ENUM("status", DELIVERY_STATUS),
    REQ_ENUM("transport", TRANSPORTS), OPT("reason", JT_TEXT), END};
static const struct jfield F_OBS[] = {REQ("observation_id", JT_STR),
                                      REQ_ENUM("source", OBS_SOURCES),
                                      REQ_ENUM("confidence", CONFIDENCE),
                                      {"signal", JT_SIGNAL, 0, NULL, NULL},
                                      OPT("raw_text", JT_TEXT),
                                      OPT("payload", JT_OBJ),
                                      OPT("step", JT_INT),
                                      END};
static const struct jfield F_POLICY[] = {REQ_ENUM("kind", POLICY_KINDS), OPT("tool", JT_STR),
                                         OPT("operation_id", JT_STR), END};
static const struct jfield F_DECISION[] = {REQ("decision_id", JT_STR),
                                           OPT("observation_id", JT_STR),
                                           OPT("message_id", JT_STR),
                                           REQ_ENUM("action", ACTIONS),
                                           OPT("reason", JT_TEXT),
                                           OPT_OBJ("policy", F_POLICY),
                                           END};
/* A tool's several decisions (a spawn call's, up to 64) as one record: each item is what a
 * decision.recorded record's payload would be. */
static const struct jfield F_DECISIONS[] = {REQ_ARR_OF("decisions", F_DECISION), END};
static const struct jfield F_STATE[] = {OPT_ENUM("lifecycle", LIFECYCLES),
                                        OPT_ENUM("attention", ATTENTION),
                                        OPT_ENUM("activity", ACTIVITIES),
                                        OPT("current_input_request_id", JT_STR_NULL),
                                        OPT("summary", JT_TEXT),
                                        OPT("error", JT_TEXT),
                                        END};
static const struct jfield F_UNITS[] = {OPT("completed", JT_INT), OPT("total", JT_INT),
                                        OPT("unit", JT_STR), END};
static const struct jfield F_PROGRESS[] = {OPT("summary", JT_TEXT), OPT("detail", JT_TEXT),
                                           OPT_OBJ("units", F_UNITS), END};
static const struct jfield F_TELEMETRY[] = {
    OPT("input_tokens", JT_INT), OPT("output_tokens", JT_INT),    OPT("cached_tokens", JT_INT),
    OPT("total_tokens", JT_INT), OPT("cost_micros", JT_INT),      OPT("model_calls", JT_INT),
    OPT("tool_calls", JT_INT),   OPT("active_tool_name", JT_STR), END};
static const struct jfield F_CAPS[] = {OPT("terminal_attached", JT_BOOL), OPT("streaming", JT_BOOL),
                                       OPT("tool_call_active", JT_BOOL),
                                       OPT("filesystem_mutating", JT_BOOL), END};
static const struct jfield F_TARGET[] = {REQ_ENUM("kind", TARGET_KINDS), OPT("label", JT_TEXT),
                                         OPT("path", JT_TEXT), END};
static const struct jfield F_MODEL_CALL[] = {REQ("provider", JT_STR),
                                             REQ("model", JT_STR),
                                             REQ("latency_ms", JT_INT),
                                             REQ("input_tokens", JT_INT),
                                             REQ("output_tokens", JT_INT),
                                             REQ("cached_tokens", JT_INT),
                                             REQ("cost_micros", JT_INT),
                                             REQ("attempts", JT_INT),
                                             OPT("stop_reason", JT_STR),
                                             OPT("error_code", JT_STR),
                                             END};
static const struct jfield F_TOOL_CALL[] = {
    REQ("tool_call_id", JT_STR), REQ("name", JT_STR), OPT("operation_id", JT_STR),
    REQ_ENUM("status", TOOL_STATUS), OPT("input", JT_ANY), OPT("output", JT_ANY),
    OPT("error_code", JT_STR), OPT("duration_ms", JT_INT),
    /* as stored: the toolResult message that holds the output (output_ref.c) */
    OPT("output_message", JT_STR),
    /* a call a program made through the sandbox's bridge: its key
       (vg_journal_tool_call_started_via) */
    OPT("via", JT_STR), END};
static const struct jfield F_ACTIVITY[] = {
    OPT_ENUM("activity", ACTIVITIES),    OPT_OBJ("progress", F_PROGRESS),
    OPT_OBJ("telemetry", F_TELEMETRY),   OPT_OBJ("capabilities", F_CAPS),
    OPT_OBJ("current_target", F_TARGET), OPT_OBJ("model_call", F_MODEL_CALL),
    OPT_OBJ("tool_call", F_TOOL_CALL),   END};
static const struct jfield F_EFFECT[] = {
    REQ("effect_id", JT_STR),         OPT("observation_id", JT_STR),
    REQ_ENUM("owner_entity", SCOPES), REQ("effect_type", JT_STR),
    OPT("workflow_event_id", JT_STR), OPT("entity_event_id", JT_STR),
    OPT("payload", JT_OBJ),           END};
static const struct jfield F_PROJECTION[] = {REQ_ENUM("projection", PROJECTIONS),
                                             REQ("payload", JT_OBJ), END};

/* ---- cross-field checks -------------------------------------------------------------------- */

static vigil_code check_state(const json_t *rec, vigil_error *err)
{
    const json_t *req = json_object_get(rec, "current_input_request_id");
    if (!json_object_get(rec, "lifecycle") && !json_object_get(rec, "attention") &&
        !json_object_get(rec, "activity") && !req)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "state.changed changes nothing: it needs lifecycle, attention, activity "
                       "or current_input_request_id");
    if (json_is_string(req)) {
        /* Awaiting input is not a lifecycle: running + awaiting-operator + the request id. */
        const char *att = vg_jstr(rec, "attention");
        const char *lc = vg_jstr(rec, "lifecycle");
        if (!att || strcmp(att, "awaiting-operator") != 0)
            return VG_FAIL(err, VIGIL_EINVAL,
                           "state.changed with an input request needs attention "
                           "\"awaiting-operator\"");
        if (lc && strcmp(lc, "running") != 0)
            return VG_FAIL(err, VIGIL_EINVAL,
                           "state.changed with an input request needs lifecycle \"running\", "
                           "not \"%s\"",
                           lc);
    }
    return VIGIL_OK;
}

static vigil_code check_activity(const json_t *rec, vigil_error *err)
{
    static const char *const any[] = {"activity",       "progress",   "telemetry", "capabilities",
                                      "current_target", "model_call", "tool_call"};
    for (size_t i = 0; i < VG_ARRAY_LEN(any); i++)
        if (json_object_get(rec, any[i]))
            return VIGIL_OK;
    return VG_FAIL(err, VIGIL_EINVAL, "activity.updated carries nothing");
}

/* ---- replay routing (fold functions) ------------------------------------------------------- */

static int set_copy(json_t *dst, const json_t *src, const char *key)
{
    json_t *v = json_object_get(src, key);
    return json_object_set(dst, key, v ? v : json_null());
}

/* A timeline item {sequence, occurred_at, item} that the caller fills further (new ref). */
static json_t *item_new(const json_t *rec, const char *item)
{
    json_t *it = json_object();
    if (!it)
        return NULL;
    if (json_object_set(it, "sequence", json_object_get(rec, "sequence")) ||
        json_object_set(it, "occurred_at", json_object_get(rec, "occurred_at")) ||
        json_object_set_new(it, "item", json_string(item))) {
        json_decref(it);
        return NULL;
    }
    return it;
}

/* Append an item (stolen) to the bounded timeline and, in replay, the full one. */
static vigil_code timeline_push(struct fold *f, json_t *it, vigil_error *err)
{
    if (!it)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building the timeline");
    json_t *tl = json_object_get(f->proj, "timeline");
    if (f->full_timeline && json_array_append(f->full_timeline, it)) {
        json_decref(it);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building the timeline");
    }
    if (json_array_append_new(tl, it))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building the timeline");
    while (json_array_size(tl) > TIMELINE_KEEP)
        json_array_remove(tl, 0);
    if (json_object_set_new(f->proj, "timeline_count",
                            json_integer(vg_jint(f->proj, "timeline_count") + 1)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory building the timeline");
    return VIGIL_OK;
}

/* Add an id to a processed set: count and a SHA-256 chain over the ids in order. */
static vigil_code processed_add(struct fold *f, const char *set, json_t *full, const char *id,
                                vigil_error *err)
{
    json_t *o = json_object_get(f->proj, set);
    const char *prev = vg_jstr(o, "digest");
    const char *parts[2] = {prev ? prev : "", id};
    char hex[VG_SHA256_HEX_LEN + 1];
    vg_sha256_hex_parts(hex, parts, 2);
    if (json_object_set_new(o, "digest", json_string(hex)) ||
        json_object_set_new(o, "count", json_integer(vg_jint(o, "count") + 1)) ||
        (full && json_array_append_new(full, json_string(id))))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory folding processed ids");
    return VIGIL_OK;
}

static vigil_code apply_header(struct fold *f, const json_t *rec, vigil_error *err)
{
    static const char *const keys[] = {"run_key", "wake_reason", "thread_id", "parent_run_id",
                                       "model"};
    json_t *p = f->proj;
    int bad = json_object_set(p, "run_id", json_object_get(rec, "run_id")) ||
              json_object_set(p, "agent_id", json_object_get(rec, "agent_id")) ||
              json_object_set(p, "scope", json_object_get(rec, "scope")) ||
              json_object_set(p, "started_at", json_object_get(rec, "occurred_at")) ||
              json_object_set_new(p, "lifecycle", json_string("running"));
    for (size_t i = 0; i < VG_ARRAY_LEN(keys) && !bad; i++)
        bad = set_copy(p, rec, keys[i]);
    if (bad)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory folding the header");
    json_t *it = item_new(rec, "started");
    if (it && (set_copy(it, rec, "run_key") || set_copy(it, rec, "wake_reason"))) {
        json_decref(it);
        it = NULL;
    }
    return timeline_push(f, it, err);
}

static vigil_code apply_message(struct fold *f, const json_t *rec, vigil_error *err)
{
    vigil_code rc =
        processed_add(f, "processed_messages", f->full_messages, vg_jstr(rec, "message_id"), err);
    if (rc)
        return rc;
    json_t *it = item_new(rec, "message");
    if (it && (set_copy(it, rec, "message_id") || set_copy(it, rec, "source") ||
               set_copy(it, rec, "message_type"))) {
        json_decref(it);
        it = NULL;
    }
    return timeline_push(f, it, err);
}

static vigil_code apply_delivery(struct fold *f, const json_t *rec, vigil_error *err)
{
    json_t *it = item_new(rec, "delivery");
    if (it && (set_copy(it, rec, "message_id") || set_copy(it, rec, "status") ||
               set_copy(it, rec, "transport"))) {
        json_decref(it);
        it = NULL;
    }
    return timeline_push(f, it, err);
}

static vigil_code apply_observation(struct fold *f, const json_t *rec, vigil_error *err)
{
    vigil_code rc = processed_add(f, "processed_observations", f->full_observations,
                                  vg_jstr(rec, "observation_id"), err);
    if (rc)
        return rc;
    const json_t *sig = json_object_get(rec, "signal");
    if (!sig)
        return VIGIL_OK;
    /* The signal registry decides whether and how the signal shows in the timeline. */
    const struct jsignal *s = vg_journal_signal_find(vg_jstr(sig, "type"));
    const char *item = s ? vg_journal_projection_item(s->projection) : NULL;
    if (!item)
        return VIGIL_OK;
    json_t *it = item_new(rec, item);
    json_t *text = json_object_get(sig, s->text_field);
    /* The quoted field is stored as "text" so every item reads the same way. */
    if (it && (set_copy(it, rec, "observation_id") ||
               json_object_set(it, "signal", json_object_get(sig, "type")) ||
               json_object_set(it, "text", text ? text : json_null()) ||
               (s->projection == SP_NEEDS_INPUT && set_copy(it, sig, "request_id")))) {
        json_decref(it);
        it = NULL;
    }
    return timeline_push(f, it, err);
}

/* A decision's timeline item: the record's (rec) sequence and time, the decision's (d) fields. */
static vigil_code push_decision(struct fold *f, const json_t *rec, const json_t *d,
                                vigil_error *err)
{
    json_t *it = item_new(rec, "decision");
    if (it && (set_copy(it, d, "decision_id") || set_copy(it, d, "action") ||
               set_copy(it, d, "reason"))) {
        json_decref(it);
        it = NULL;
    }
    const json_t *pol = json_object_get(d, "policy");
    if (it && pol && json_object_set(it, "policy", json_object_get(pol, "kind"))) {
        json_decref(it);
        it = NULL;
    }
    return timeline_push(f, it, err);
}

static vigil_code apply_decision(struct fold *f, const json_t *rec, vigil_error *err)
{
    return push_decision(f, rec, rec, err);
}

/* Each decision of the record is a timeline item, as if each were a decision.recorded (the
 * items share the record's sequence). */
static vigil_code apply_decisions(struct fold *f, const json_t *rec, vigil_error *err)
{
    const json_t *d;
    size_t i;
    vigil_code rc = VIGIL_OK;
    json_array_foreach (json_object_get(rec, "decisions"), i, d)
        if (!rc)
            rc = push_decision(f, rec, d, err);
    return rc;
}

static vigil_code check_decisions(const json_t *rec, vigil_error *err)
{
    return json_array_size(json_object_get(rec, "decisions"))
               ? VIGIL_OK
               : VG_FAIL(err, VIGIL_EINVAL, "decisions.recorded holds no decision");
}

static vigil_code apply_state(struct fold *f, const json_t *rec, vigil_error *err)
{
    static const char *const keys[] = {
        "lifecycle", "attention", "activity", "current_input_request_id", "summary", "error"};
    json_t *it = item_new(rec, "state");
    if (!it)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory folding a state change");
    for (size_t i = 0; i < VG_ARRAY_LEN(keys); i++) {
        json_t *v = json_object_get(rec, keys[i]);
        if (!v)
            continue;
        if (json_object_set(f->proj, keys[i], v) || json_object_set(it, keys[i], v)) {
            json_decref(it);
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory folding a state change");
        }
    }
    const char *lc = vg_jstr(rec, "lifecycle");
    if (lc && strcmp(lc, "queued") != 0 && strcmp(lc, "running") != 0 &&
        json_object_set(f->proj, "ended_at", json_object_get(rec, "occurred_at"))) {
        json_decref(it);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory folding a state change");
    }
    return timeline_push(f, it, err);
}

/* activity.updated never reaches the timeline or the semantic state: only the latest one is
 * kept, so pruning older ones changes nothing that replay reports. */
static vigil_code apply_activity(struct fold *f, const json_t *rec, vigil_error *err)
{
    static const char *const base[] = {"record_id", "type",     "schema_version",
                                       "run_id",    "owner_id", "scope"};
    /* The record's own fields but the base ones, sharing their values with the record (no
     * deep copy): nothing changes a folded record or a projection's latest_activity in place,
     * it is replaced whole by the next activity. */
    json_t *la = json_object();
    const char *key;
    json_t *value;
    int bad = !la;
    json_object_foreach ((json_t *)rec, key, value) {
        size_t i = 0;
        while (i < VG_ARRAY_LEN(base) && strcmp(key, base[i]) != 0)
            i++;
        if (!bad && i == VG_ARRAY_LEN(base))
            bad = json_object_set(la, key, value) != 0;
    }
    if (bad) {
        json_decref(la);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory folding activity");
    }
    if (json_object_set_new(f->proj, "latest_activity", la))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory folding activity");
    return VIGIL_OK;
}

static vigil_code apply_effect(struct fold *f, const json_t *rec, vigil_error *err)
{
    json_t *it = item_new(rec, "owner-effect");
    if (it && (set_copy(it, rec, "effect_id") || set_copy(it, rec, "effect_type") ||
               set_copy(it, rec, "owner_entity"))) {
        json_decref(it);
        it = NULL;
    }
    return timeline_push(f, it, err);
}

/* Reserved: a projection record never overrides earlier records, so replay ignores it. */
static vigil_code apply_projection(struct fold *f, const json_t *rec, vigil_error *err)
{
    return VIGIL_OK;
}

/* The record registry. */
static const struct jrecord_type TYPES[] = {
    {"journal.header", 1, 1, F_HEADER, NULL, apply_header},
    {"message.accepted", 1, 1, F_MSG, NULL, apply_message},
    {"message.delivery", 1, 1, F_DELIVERY, NULL, apply_delivery},
    {"observation.recorded", 1, 1, F_OBS, NULL, apply_observation},
    {"decision.recorded", 1, 1, F_DECISION, NULL, apply_decision},
    {"decisions.recorded", 1, 1, F_DECISIONS, check_decisions, apply_decisions},
    {"state.changed", 1, 1, F_STATE, check_state, apply_state},
    {"activity.updated", 1, 1, F_ACTIVITY, check_activity, apply_activity},
    {"owner-effect.recorded", 1, 1, F_EFFECT, NULL, apply_effect},
    {"projection.recorded", 1, 0, F_PROJECTION, NULL, apply_projection},
};

int vg_journal_tool_status_final(const char *s)
{
    for (size_t i = 1; s && TOOL_STATUS[i]; i++) /* TOOL_STATUS[0] is "running" */
        if (strcmp(TOOL_STATUS[i], s) == 0)
            return 1;
    return 0;
}

const char *vg_journal_tool_status_of(int is_error, const char *error_code)
{
    /* The gate's refusals (docs/tools.md, "Error codes": exit 10 but unsafe_target, which the
     * tool itself answers): nothing ran, so the call was denied, not failed. */
    static const char *const refusals[] = {"not_allowed",     "out_of_scope",          "killed",
                                           "budget_exceeded", "confirmation_required", "rejected"};
    for (size_t i = 0; error_code && i < VG_ARRAY_LEN(refusals); i++)
        if (!strcmp(error_code, refusals[i]))
            return "denied";
    if (error_code && !strcmp(error_code, "canceled")) /* its run was cancelled while it ran */
        return "canceled";
    return is_error || (error_code && *error_code) ? "failed" : "succeeded";
}

const struct jrecord_type *vg_journal_type_find(const char *name)
{
    for (size_t i = 0; name && i < VG_ARRAY_LEN(TYPES); i++)
        if (strcmp(TYPES[i].name, name) == 0)
            return &TYPES[i];
    return NULL;
}

const struct jsignal *vg_journal_signal_find(const char *name)
{
    for (size_t i = 0; name && i < VG_ARRAY_LEN(SIGNALS); i++)
        if (strcmp(SIGNALS[i].name, name) == 0)
            return &SIGNALS[i];
    return NULL;
}

size_t vg_journal_type_count(void)
{
    return VG_ARRAY_LEN(TYPES);
}
const char *vg_journal_type_name(size_t i)
{
    return i < VG_ARRAY_LEN(TYPES) ? TYPES[i].name : NULL;
}
size_t vg_journal_signal_count(void)
{
    return VG_ARRAY_LEN(SIGNALS);
}
const char *vg_journal_signal_name(size_t i)
{
    return i < VG_ARRAY_LEN(SIGNALS) ? SIGNALS[i].name : NULL;
}
int vg_journal_signal_surfaced(const char *name)
{
    const struct jsignal *s = vg_journal_signal_find(name);
    return s ? s->surfaced : -1;
}

static json_t *build_descriptor(void)
{
    json_t *d = json_object(), *sigs = json_array(), *msgs = json_array();
    if (!d || !sigs || !msgs)
        goto fail;
    for (size_t i = 0; i < VG_ARRAY_LEN(SIGNALS); i++) {
        if (!SIGNALS[i].surfaced)
            continue;
        json_t *s =
            json_pack("{s:s,s:s}", "type", SIGNALS[i].name, "schema", SIGNALS[i].schema_key);
        if (!s || json_array_append_new(sigs, s))
            goto fail;
    }
    static const char *const mtypes[] = {"prompt", "chat", "command", "wake-delta"};
    for (size_t i = 0; i < VG_ARRAY_LEN(mtypes); i++)
        if (json_array_append_new(msgs, json_string(mtypes[i])))
            goto fail;
    if (json_object_set(d, "signals", sigs) || json_object_set(d, "messages", msgs))
        goto fail;
    json_decref(sigs);
    json_decref(msgs);
    return d;
fail:
    json_decref(sigs);
    json_decref(msgs);
    json_decref(d);
    return NULL;
}

json_t *vg_journal_protocol_descriptor(void)
{
    /* The same for every run of the process: built once and shared (jansson counts references
     * atomically; no one changes it). A build that failed is not kept. */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static json_t *built;
    pthread_mutex_lock(&lock);
    if (!built)
        built = build_descriptor();
    json_t *d = json_incref(built);
    pthread_mutex_unlock(&lock);
    return d;
}

/* ---- validation ---------------------------------------------------------------------------- */

static const char *jtype_name(enum jtype t)
{
    switch (t) {
    case JT_STR:
        return "a non-empty string";
    case JT_TEXT:
        return "a string";
    case JT_STR_NULL:
        return "a string or null";
    case JT_INT:
        return "a non-negative integer";
    case JT_BOOL:
        return "a boolean";
    case JT_OBJ:
        return "an object";
    case JT_ARR:
        return "an array";
    case JT_ANY:
        return "a JSON value";
    case JT_ENUM:
        return "one of the allowed names";
    case JT_SIGNAL:
        return "a signal object";
    }
    return "?";
}

/* Where a field sits in a record ("activity.updated.model_call"), as a chain of names written
 * out only for an error message: records are checked at every append. */
struct where {
    const struct where *up; /* NULL at the record itself */
    const char *name;       /* the field's name (at the top: the record type) */
    const char *tag;        /* a signal's type, written "name(tag)", or NULL */
};

static void where_text(const struct where *w, char *out, size_t n)
{
    size_t used = 0;
    if (w->up) {
        where_text(w->up, out, n);
        used = strlen(out);
    }
    if (used < n && w->tag)
        snprintf(out + used, n - used, "%s%s(%s)", w->up ? "." : "", w->name, w->tag);
    else if (used < n)
        snprintf(out + used, n - used, "%s%s", w->up ? "." : "", w->name);
}

static vigil_code check_fields(const struct where *w, const json_t *obj,
                               const struct jfield *fields, const char *const *skip,
                               vigil_error *err);

static vigil_code check_signal(const struct where *w, const json_t *v, vigil_error *err)
{
    static const char *const skip[] = {"type", NULL};
    const char *type = vg_jstr(v, "type");
    const struct jsignal *s = vg_journal_signal_find(type);
    char at[160];
    if (!type || !s) {
        where_text(w, at, sizeof at);
        return !type ? VG_FAIL(err, VIGIL_EINVAL, "%s.signal has no \"type\"", at)
                     : VG_FAIL(err, VIGIL_EINVAL, "%s.signal has unknown type \"%.60s\"", at, type);
    }
    struct where sub = {w, "signal", s->name};
    return check_fields(&sub, v, s->fields, skip, err);
}

/* Each item of an array field (fd, its sub) is an object with sub's fields (an error names the
 * array, not the item: records are checked at every append). */
static vigil_code check_items(const struct where *w, const struct jfield *fd, const json_t *v,
                              vigil_error *err)
{
    struct where sub = {w, fd->name, NULL};
    const json_t *item;
    size_t i;
    json_array_foreach (v, i, item) {
        char where[160];
        if (!json_is_object(item)) {
            where_text(&sub, where, sizeof where);
            return VG_FAIL(err, VIGIL_EINVAL, "%s item %zu must be an object", where, i);
        }
        vigil_code rc = check_fields(&sub, item, fd->sub, NULL, err);
        if (rc)
            return rc;
    }
    return VIGIL_OK;
}

static vigil_code check_value(const struct where *w, const struct jfield *fd, const json_t *v,
                              vigil_error *err)
{
    char where[160];
    int ok = 0;
    switch (fd->type) {
    case JT_STR:
        ok = json_is_string(v) && json_string_length(v) > 0;
        break;
    case JT_TEXT:
        ok = json_is_string(v);
        break;
    case JT_STR_NULL:
        ok = json_is_string(v) || json_is_null(v);
        break;
    case JT_INT:
        ok = json_is_integer(v) && json_integer_value(v) >= 0;
        break;
    case JT_BOOL:
        ok = json_is_boolean(v);
        break;
    case JT_OBJ:
        ok = json_is_object(v);
        break;
    case JT_ARR:
        ok = json_is_array(v);
        break;
    case JT_ANY:
        ok = 1;
        break;
    case JT_SIGNAL:
        ok = json_is_object(v);
        break;
    case JT_ENUM:
        ok = json_is_string(v);
        if (ok) {
            ok = 0;
            for (const char *const *e = fd->enums; *e && !ok; e++)
                ok = strcmp(*e, json_string_value(v)) == 0;
            if (!ok) {
                where_text(w, where, sizeof where);
                return VG_FAIL(err, VIGIL_EINVAL, "%s field \"%s\": \"%.60s\" is not allowed",
                               where, fd->name, json_string_value(v));
            }
        }
        break;
    }
    if (!ok) {
        where_text(w, where, sizeof where);
        return VG_FAIL(err, VIGIL_EINVAL, "%s field \"%s\" must be %s", where, fd->name,
                       jtype_name(fd->type));
    }
    if (fd->type == JT_SIGNAL)
        return check_signal(w, v, err);
    if (fd->type == JT_OBJ && fd->sub) {
        struct where sub = {w, fd->name, NULL};
        return check_fields(&sub, v, fd->sub, NULL, err);
    }
    if (fd->type == JT_ARR && fd->sub)
        return check_items(w, fd, v, err);
    return VIGIL_OK;
}

/* Every key of obj must be a declared field (or in skip); every required field present. */
static vigil_code check_fields(const struct where *w, const json_t *obj,
                               const struct jfield *fields, const char *const *skip,
                               vigil_error *err)
{
    char where[160];
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)obj, key, v) {
        int skipped = 0;
        for (const char *const *s = skip; s && *s && !skipped; s++)
            skipped = strcmp(*s, key) == 0;
        if (skipped)
            continue;
        const struct jfield *fd = fields;
        while (fd->name && strcmp(fd->name, key) != 0)
            fd++;
        if (!fd->name) {
            where_text(w, where, sizeof where);
            return VG_FAIL(err, VIGIL_EINVAL, "%s has unknown field \"%.60s\"", where, key);
        }
        vigil_code rc = check_value(w, fd, v, err);
        if (rc)
            return rc;
    }
    for (const struct jfield *fd = fields; fd->name; fd++)
        if (fd->required && !json_object_get(obj, fd->name)) {
            where_text(w, where, sizeof where);
            return VG_FAIL(err, VIGIL_EINVAL, "%s is missing required field \"%s\"", where,
                           fd->name);
        }
    return VIGIL_OK;
}

static const char *const BASE_KEYS[] = {"record_id",      "sequence",    "type",
                                        "schema_version", "run_id",      "owner_id",
                                        "scope",          "occurred_at", NULL};

/* base: also check the base fields' values. build_record (journal.c) takes them from the run,
 * whose header record was checked in full when it was opened (the ids, owner and scope every
 * later record repeats), or makes them itself (the record id, the time, the version). */
static vigil_code validate(const json_t *rec, int base, vigil_error *err)
{
    if (!json_is_object(rec))
        return VG_FAIL(err, VIGIL_EINVAL, "a journal record must be a JSON object");
    const char *type = vg_jstr(rec, "type");
    if (!type)
        return VG_FAIL(err, VIGIL_EINVAL, "journal record has no \"type\"");
    const struct jrecord_type *t = vg_journal_type_find(type);
    if (!t)
        return VG_FAIL(err, VIGIL_EINVAL, "unknown journal record type \"%.60s\"", type);
    if (base) {
        const char *rid = vg_jstr(rec, "record_id");
        if (!rid || !vg_id_valid(rid))
            return VG_FAIL(err, VIGIL_EINVAL, "%s field \"record_id\" must be a UUID", type);
        const char *run = vg_jstr(rec, "run_id");
        if (!run || !vg_id_valid(run))
            return VG_FAIL(err, VIGIL_EINVAL, "%s field \"run_id\" must be a UUID", type);
    }
    const json_t *seq = json_object_get(rec, "sequence");
    if (!json_is_integer(seq) || json_integer_value(seq) < 1)
        return VG_FAIL(err, VIGIL_EINVAL, "%s field \"sequence\" must be an integer >= 1", type);
    int is_header = strcmp(type, "journal.header") == 0;
    if (is_header != (json_integer_value(seq) == 1))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "sequence 1 must be journal.header and only it, not "
                       "%s at sequence %lld",
                       type, (long long)json_integer_value(seq));
    const char *owner = vg_jstr(rec, "owner_id");
    if (base) {
        const json_t *ver = json_object_get(rec, "schema_version");
        if (!json_is_integer(ver) || json_integer_value(ver) != t->schema_version)
            return VG_FAIL(err, VIGIL_EINVAL, "%s needs schema_version %d", type,
                           t->schema_version);
        if (!owner || !*owner || strlen(owner) > 200)
            return VG_FAIL(err, VIGIL_EINVAL, "%s field \"owner_id\" must be 1..200 bytes", type);
        const char *scope = vg_jstr(rec, "scope");
        int scope_ok = 0;
        for (const char *const *s = SCOPES; scope && *s && !scope_ok; s++)
            scope_ok = strcmp(*s, scope) == 0;
        if (!scope_ok)
            return VG_FAIL(err, VIGIL_EINVAL, "%s field \"scope\" is not a known owner kind", type);
        const char *at = vg_jstr(rec, "occurred_at");
        int64_t ms;
        if (!at || vg_time_parse_ms(at, &ms) != 0)
            return VG_FAIL(err, VIGIL_EINVAL, "%s field \"occurred_at\" must be an RFC 3339 time",
                           type);
    }
    struct where top = {NULL, type, NULL};
    vigil_code rc = check_fields(&top, rec, t->fields, BASE_KEYS, err);
    if (rc == VIGIL_OK && t->check)
        rc = t->check(rec, err);
    if (rc == VIGIL_OK && is_header && (!owner || strcmp(vg_jstr(rec, "agent_id"), owner) != 0))
        rc = VG_FAIL(err, VIGIL_EINVAL, "journal.header agent_id differs from owner_id");
    return rc;
}

vigil_code vg_journal_validate(const json_t *rec, vigil_error *err)
{
    return validate(rec, 1, err);
}

vigil_code vg_journal_validate_built(const json_t *rec, vigil_error *err)
{
    return validate(rec, 0, err);
}

vigil_code vg_journal_validate_text(const char *text, size_t len, vigil_error *err)
{
    vg_alloc_install_json();
    if (len > JOURNAL_MAX_LINE)
        return VG_FAIL(err, VIGIL_ETOOBIG, "journal record is larger than %zu bytes",
                       JOURNAL_MAX_LINE);
    json_error_t je;
    json_t *rec = vg_jload(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!rec && vg_json_oom(&je))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory parsing a journal record");
    if (!rec)
        return VG_FAIL(err, VIGIL_EPARSE, "journal record is not JSON: %s", je.text);
    vigil_code rc = vg_journal_validate(rec, err);
    json_decref(rec);
    return rc;
}

/* ---- the fold ------------------------------------------------------------------------------ */

json_t *vg_journal_proj_new(void)
{
    /* Keys in sorted order: they keep their places when set, so the canonical writer, which
     * sorts, finds them in order (a projection is written at every commit of a run). */
    return json_pack("{s:s,s:n,s:s,s:n,s:n,s:n,s:i,s:n,s:s,s:n,s:n,s:{s:i,s:s},s:{s:i,s:s},"
                     "s:n,s:n,s:n,s:n,s:n,s:n,s:[],s:i,s:n}",
                     "activity", "idle", "agent_id", "attention", "none",
                     "current_input_request_id", "ended_at", "error", "last_sequence", 0,
                     "latest_activity", "lifecycle", "queued", "model", "parent_run_id",
                     "processed_messages", "count", 0, "digest", "", "processed_observations",
                     "count", 0, "digest", "", "run_id", "run_key", "scope", "started_at",
                     "summary", "thread_id", "timeline", "timeline_count", 0, "wake_reason");
}

vigil_code vg_journal_fold(struct fold *f, const json_t *rec, vigil_error *err)
{
    const struct jrecord_type *t = vg_journal_type_find(vg_jstr(rec, "type"));
    if (!t)
        return VG_FAIL(err, VIGIL_EINVAL, "unknown journal record type");
    int64_t seq = vg_jint(rec, "sequence"), last = vg_jint(f->proj, "last_sequence");
    if (seq <= last)
        return VG_FAIL(err, VIGIL_EINVAL, "%s at sequence %lld does not follow sequence %lld",
                       t->name, (long long)seq, (long long)last);
    const char *run = vg_jstr(f->proj, "run_id");
    if (run && strcmp(run, vg_jstr(rec, "run_id")) != 0)
        return VG_FAIL(err, VIGIL_EINVAL, "%s at sequence %lld belongs to run \"%s\", not \"%s\"",
                       t->name, (long long)seq, vg_jstr(rec, "run_id"), run);
    if (run && strcmp(vg_jstr(f->proj, "agent_id"), vg_jstr(rec, "owner_id")) != 0)
        return VG_FAIL(err, VIGIL_EINVAL, "%s at sequence %lld has another owner", t->name,
                       (long long)seq);
    vigil_code rc = t->apply(f, rec, err);
    if (rc)
        return rc;
    if (json_object_set_new(f->proj, "last_sequence", json_integer(seq)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory folding a record");
    return VIGIL_OK;
}

/* Not json_dumps: jansson ignores some failed writes of its own buffer, so an allocation
 * failure could yield well-formed-looking but wrong text; vg_buf's failure is sticky. And
 * vigil's own writer (base/json.c) skips jansson's key copies and callback chunks: records and
 * the run's projection are written three times per agent step. */
char *vg_journal_canonical(const json_t *v)
{
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    int rc = vg_json_put_canonical(&b, v);
    if (rc != 0 || b.fail != VIGIL_OK) {
        vg_buf_release(&b);
        return NULL;
    }
    return vg_buf_detach(&b, NULL);
}

vigil_code vg_journal_check_text(const char *text, vigil_error *err)
{
    json_error_t je;
    json_t *rec = vg_jload(text, strlen(text), 0, &je);
    if (!rec && vg_json_oom(&je))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory checking a record");
    if (!rec)
        return VG_FAIL(err, VIGIL_ECORRUPT, "a record built as text does not parse: %s", je.text);
    vigil_code rc = vg_journal_validate(rec, err);
    char *again = rc == VIGIL_OK ? vg_journal_canonical(rec) : NULL;
    if (rc == VIGIL_OK && !again)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory checking a record");
    else if (rc == VIGIL_OK && strcmp(again, text) != 0)
        rc = VG_FAIL(err, VIGIL_ECORRUPT, "a record built as text is not canonical: %.200s", text);
    vg_free(again);
    json_decref(rec);
    return rc;
}

const char *vg_journal_class(const json_t *rec)
{
    const char *type = vg_jstr(rec, "type");
    if (strcmp(type, "message.accepted") == 0)
        return "message";
    if (strcmp(type, "observation.recorded") == 0) {
        const char *sig = vg_jstr(json_object_get(rec, "signal"), "type");
        if (sig && strcmp(sig, "message") == 0)
            return "message";
    }
    return type;
}

/* ---- JSON helpers -------------------------------------------------------------------------- */

/* One parse; a parse during which any allocation failed is discarded as out of memory,
 * because jansson's lexer drops bytes it cannot store instead of failing. */
static json_t *load_once(const char *text, size_t len, size_t flags, json_error_t *je)
{
    unsigned long before = vg_alloc_failures();
    json_t *v = json_loadb(text, len, flags, je);
    if (vg_alloc_failures() != before) {
        json_decref(v);
        snprintf(je->text, sizeof je->text, "%s", "out of memory");
        je->text[JSON_ERROR_TEXT_LENGTH - 1] = (char)json_error_out_of_memory;
        return NULL;
    }
    return v;
}

json_t *vg_jload(const char *text, size_t len, size_t flags, json_error_t *je)
{
    json_error_t local;
    if (!je)
        je = &local;
    json_t *v = load_once(text, len, flags, je);
    if (!v && vg_json_oom(je))
        v = load_once(text, len, flags, je);
    return v;
}

const char *vg_jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

int64_t vg_jint(const json_t *o, const char *key)
{
    return (int64_t)json_integer_value(json_object_get(o, key));
}

vigil_code vg_jparse(const char *text, const char *what, json_t **out, vigil_error *err)
{
    *out = NULL;
    if (!text)
        return VIGIL_OK;
    json_error_t je;
    json_t *v = vg_jload(text, strlen(text), JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v && vg_json_oom(&je))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory parsing %s", what);
    if (!v)
        return VG_FAIL(err, VIGIL_EPARSE, "%s is not valid JSON: %s", what, je.text);
    *out = v;
    return VIGIL_OK;
}

int vg_jset_str(json_t *o, const char *key, const char *s)
{
    if (!s)
        return 0;
    json_t *v = json_string(s);
    if (!v)
        return -1;
    return json_object_set_new(o, key, v);
}
