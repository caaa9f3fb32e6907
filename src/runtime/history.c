/*
 * history.c: the run history and journal sections of include/vigil.h, each a thin call into
 * src/journal with the runtime's store.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/json.h"
#include "journal/journal.h"
#include "loop/window.h"
#include "orch/orch.h"
#include "runtime/runtime_int.h"
#include "wake/wake.h"

#define NEED(cond, what)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return VG_FAIL(err, VIGIL_EINVAL, "%s", what);                                         \
    } while (0)

/*
 * An agent with no record here may still be known from journals imported into this store:
 * VIGIL_OK when it has a run, the not-found error otherwise.
 */
static vigil_code known_from_journals(vigil_runtime *rt, const char *agent_id,
                                      const vigil_error *missing, vigil_error *err)
{
    char *text = NULL;
    vigil_code rc = vg_journal_runs_list(rt->env.store, agent_id, NULL, NULL, 1, &text, err);
    if (rc)
        return rc;
    json_t *page = json_loads(text, 0, NULL);
    int none = !page || json_array_size(json_object_get(page, "items")) == 0;
    json_decref(page);
    vigil_free(text);
    if (none) {
        vg_error_copy(err, missing);
        return missing->code;
    }
    return VIGIL_OK;
}

vigil_code vg_runtime_note_gone_holder(vigil_runtime *rt, const char *agent_id, json_t *obj,
                                       vigil_error *err)
{
    json_t *lease = NULL;
    vigil_error miss = {0};
    vigil_code rc = agent_id
                        ? vg_error_unless_missing(err, &miss,
                                                  vg_env_get_json(&rt->env, "agent_lease", agent_id,
                                                                  &lease, NULL, &miss))
                        : VIGIL_ENOTFOUND;
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    const char *holder = json_string_value(json_object_get(lease, "holder"));
    if (!rc && holder && *holder && vg_wake_lease_holder_gone(lease) &&
        (json_object_set_new(obj, "holder_gone", json_true()) ||
         json_object_set(obj, "holder_pid", json_object_get(lease, "pid"))))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing a run");
    json_decref(lease);
    return rc;
}

/* Each running run of the page whose agent's lease holder is gone says so. A page with no
 * running run is left as it is, not decoded: the decoding was most of a listing's cost
 * (docs/internals/PERF.md, session 34). Whether it has one the scan counted (the runs' k1, the
 * status the listing filters by): searching the page's text for a running status cost some
 * 11,000 instructions of a 172,000-instruction listing of 20 (session 38). */
static vigil_code note_gone_holders(vigil_runtime *rt, int running, char **json_text,
                                    vigil_error *err)
{
    if (!running)
        return VIGIL_OK;
    json_t *page = json_loads(*json_text, 0, NULL), *run;
    size_t i;
    vigil_code rc = page ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing runs");
    int noted = 0;
    json_array_foreach (json_object_get(page, "items"), i, run) {
        const char *st = json_string_value(json_object_get(run, "status"));
        if (rc || !st || strcmp(st, "running"))
            continue;
        rc = vg_runtime_note_gone_holder(rt, json_string_value(json_object_get(run, "agent_id")),
                                         run, err);
        noted |= json_object_get(run, "holder_gone") != NULL;
    }
    if (!rc && noted) {
        vigil_free(*json_text);
        *json_text = NULL;
        return vg_runtime_json_out(page, json_text, err);
    }
    json_decref(page);
    return rc;
}

vigil_code vigil_runs_list(vigil_runtime *rt, const char *agent_id, const char *status,
                           const char *cursor, int limit, char **out_json, vigil_error *err)
{
    NEED(rt && out_json, "runs list needs a runtime and an output");
    status = vg_cancel_spelling(status, "canceled");
    vigil_error missing = {0};
    vigil_code rc = agent_id ? vg_runtime_agent_check(rt, agent_id, &missing) : VIGIL_OK;
    if (rc == VIGIL_ENOTFOUND)
        rc = known_from_journals(rt, agent_id, &missing, err);
    else if (rc)
        vg_error_copy(err, &missing);
    if (rc)
        return rc;
    int running = 0;
    if ((rc = vg_journal_runs_page(rt->env.store, agent_id, status, cursor, limit, out_json,
                                   &running, err)))
        return rc;
    if ((rc = note_gone_holders(rt, running, out_json, err))) {
        vigil_free(*out_json);
        *out_json = NULL;
    }
    return rc;
}

/* The run id a run key names now (its newest run), or null when none has started under it. */
static json_t *run_id_of(vigil_runtime *rt, const char *key)
{
    char id[37];
    vigil_error ignored = {0};
    if (!key || vg_journal_run_resolve(rt->env.store, key, id, &ignored))
        return json_null();
    return json_string(id);
}

/* Parent and children from the spawn records, where the journal has none: a spawned child's
 * run is started by a wake, so its journal names no parent run, and its parent's none of its
 * children (trial C2, C5 of session 30). */
static vigil_code add_lineage(vigil_runtime *rt, json_t *run, const char *key, vigil_error *err)
{
    json_t *parent = NULL, *kids = NULL, *k;
    size_t i;
    const char *agent = json_string_value(json_object_get(run, "agent_id"));
    vigil_code rc = vg_orch_run_lineage(&rt->env, agent, key, &parent, &kids, err);
    if (rc)
        return rc;
    json_array_foreach (kids, i, k)
        json_object_set_new(k, "run_id",
                            run_id_of(rt, json_string_value(json_object_get(k, "run_key"))));
    if (parent)
        json_object_set_new(parent, "run_id",
                            run_id_of(rt, json_string_value(json_object_get(parent, "run_key"))));
    if (parent && json_is_null(json_object_get(run, "parent")) &&
        json_object_set(run, "parent", parent))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing a run");
    if (!rc && json_array_size(kids) && !json_array_size(json_object_get(run, "children")) &&
        json_object_set(run, "children", kids))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing a run");
    json_decref(parent);
    json_decref(kids);
    return rc;
}

/* What a recovery run recovers (trial G12; G8 for a failed run's retry), from its wake-log
 * entry w: a retry of a failed run has a key of its own, and names the failed run's key (its
 * reason_id), its run id and the first attempt's key (operation_key, whose operation ids it
 * reuses); a run cut short (a crash, a stop past its grace) is run again under the same key,
 * so only the run that says "recovery" is the recovering one. Both name the reason the work
 * was first queued for. Nothing for any other run. */
static vigil_code add_recovery(vigil_runtime *rt, json_t *run, json_t *w, vigil_error *err)
{
    const char *reason = json_string_value(json_object_get(w, "reason"));
    const char *run_reason = json_string_value(json_object_get(run, "wake_reason"));
    const char *op_key = json_string_value(json_object_get(w, "operation_key"));
    json_t *orig = json_object_get(w, "original_reason"), *what = NULL;
    int retry = op_key && *op_key;
    if (!reason || strcmp(reason, "recovery") ||
        (!retry && (!run_reason || strcmp(run_reason, "recovery"))))
        return VIGIL_OK;
    const char *failed = json_string_value(json_object_get(w, "reason_id"));
    if (retry)
        what = json_pack("{s:s, s:O?, s:s?, s:o, s:s}", "kind", "retry", "original_reason", orig,
                         "failed_run_key", failed, "failed_run_id", run_id_of(rt, failed),
                         "first_run_key", op_key);
    else
        what = json_pack("{s:s, s:O?, s:O?, s:O?}", "kind", "interrupted", "original_reason", orig,
                         "interrupted_at", json_object_get(w, "interrupted_at"), "recovered_at",
                         json_object_get(w, "recovered_at"));
    if (!what || json_object_set_new(run, "recovers", what))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing a run");
    return VIGIL_OK;
}

/* A re-run's override (its model, tools, prompt) and the run it re-ran, from its wake-log entry,
 * so `runs show` answers "did my override apply" (trial C9 of session 30), and what a recovery
 * run recovers. A run no wake started (a chat turn) has none. */
static vigil_code add_wake_facts(vigil_runtime *rt, json_t *run, const char *key, vigil_error *err)
{
    json_t *w = NULL;
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_env_get_json(&rt->env, "wake_run", key, &w, NULL, &miss));
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK;
    json_t *meta = json_object_get(w, "meta"), *of = json_object_get(meta, "rerun_of");
    if (!rc && json_is_string(of) &&
        (json_object_set(run, "rerun_of", of) ||
         json_object_set(run, "override", json_object_get(meta, "override"))))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing a run");
    if (!rc)
        rc = add_recovery(rt, run, w, err);
    json_decref(w);
    return rc;
}

/* A run that has not started has no journal yet, only its wake-log entry: shown from that
 * (status queued, its agent, reason, run key and queued time), as `runs cancel` finds it (trial
 * C6 of session 30). ENOTFOUND, with the journal's words in `missing`, when no entry names it. */
static vigil_code unstarted_run(vigil_runtime *rt, const char *run, const vigil_error *missing,
                                json_t **out, vigil_error *err)
{
    json_t *w = NULL;
    vigil_error werr = {0};
    vigil_code rc = vg_run_wake_entry(&rt->env, run, &w, &werr);
    if (rc == VIGIL_ENOTFOUND || rc == VIGIL_ESTATE) { /* ESTATE: a chat turn's id, none */
        vg_error_copy(err, missing);
        return missing->code;
    }
    if (rc) { /* a start of several run keys, or the store failing */
        vg_error_copy(err, &werr);
        return rc;
    }
    const char *st = json_string_value(json_object_get(w, "status"));
    const char *orig = json_string_value(json_object_get(w, "original_reason"));
    json_t *reason =
        orig && *orig ? json_object_get(w, "original_reason") : json_object_get(w, "reason");
    json_t *error = json_object_get(w, "skip_reason");
    *out =
        json_pack("{s:n, s:O, s:O, s:s, s:O, s:O, s:O, s:O, s:O?, s:s?, s:O?, s:n, s:[], s:b}",
                  "run_id", "run_key", json_object_get(w, "run_key"), "agent_id",
                  json_object_get(w, "agent_id"), "status",
                  st && !strcmp(st, "started") ? "running"
                  : st                         ? st
                                               : "queued",
                  "wake_reason", reason, "thread_id", json_object_get(w, "thread_id"), "queued_at",
                  json_object_get(w, "created_at"), "input", json_object_get(w, "seed_input"),
                  "error", json_is_string(error) ? error : json_object_get(w, "error"), "model",
                  vg_run_override_model(json_object_get(w, "meta")), "meta",
                  json_object_get(w, "meta"), "parent", "children", "started", 0);
    json_decref(w);
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing a run");
}

/* A run whose trace retention gave up (docs/storage.md, "Growth and retention"): when, and
 * how many records, so it reads as pruned and not as a journal with holes. */
static vigil_code add_pruned(vigil_runtime *rt, json_t *run, vigil_error *err)
{
    int64_t at = 0, records = 0;
    const char *id = json_string_value(json_object_get(run, "run_id"));
    vigil_code rc = vg_journal_trace_pruned(rt->env.store, id, &at, &records, err);
    if (rc || !at)
        return rc;
    char when[32];
    vg_time_format_ms(when, at);
    json_t *p = json_pack("{s:s,s:I}", "at", when, "records", (json_int_t)records);
    if (!p || json_object_set_new(run, "trace_pruned", p))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing a run");
    return VIGIL_OK;
}

vigil_code vigil_run_show(vigil_runtime *rt, const char *run_id, char **out_json, vigil_error *err)
{
    NEED(rt && run_id && out_json, "run show needs a runtime, a run id and an output");
    char *text = NULL, id[37];
    json_t *run = NULL, *decisions = NULL;
    vigil_error missing = {0};
    vigil_code rc = vg_journal_run_resolve(rt->env.store, run_id, id, &missing);
    if (rc == VIGIL_ENOTFOUND)
        rc = unstarted_run(rt, run_id, &missing, &run, err);
    else if (rc)
        vg_error_copy(err, &missing);
    else if (!(rc = vg_journal_run_show(rt->env.store, id, &text, err)) &&
             !(run = json_loads(text, 0, NULL)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing a run");
    vigil_free(text);
    if (rc)
        return rc;
    const char *key = json_string_value(json_object_get(run, "run_key"));
    /* The orchestrator's admissions and denials of this run's spawn requests (issue 31). */
    rc = key ? vg_orch_run_decisions(&rt->env, key, &decisions, err) : VIGIL_OK;
    if (!rc && json_object_set_new(run, "spawn_decisions", decisions ? decisions : json_array()))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing a run");
    if (!rc && key)
        rc = add_lineage(rt, run, key, err);
    if (!rc && key)
        rc = add_wake_facts(rt, run, key, err);
    if (!rc && json_is_string(json_object_get(run, "run_id")))
        rc = add_pruned(rt, run, err);
    const char *st = json_string_value(json_object_get(run, "status"));
    if (!rc && st && !strcmp(st, "running"))
        rc = vg_runtime_note_gone_holder(rt, json_string_value(json_object_get(run, "agent_id")),
                                         run, err);
    if (rc) {
        json_decref(run);
        return rc;
    }
    return vg_runtime_json_out(run, out_json, err);
}

vigil_code vigil_run_messages(vigil_runtime *rt, const char *run_id, const char *cursor, int limit,
                              char **out_json, vigil_error *err)
{
    NEED(rt && run_id && out_json, "run messages needs a runtime, a run id and an output");
    char id[37];
    vigil_code rc = vg_journal_run_resolve(rt->env.store, run_id, id, err);
    return rc ? rc : vg_journal_run_messages(rt->env.store, id, cursor, limit, out_json, err);
}

struct message_by_id {
    const char *id;      /* a message or observation id, as `runs messages` prints it */
    char record_id[129]; /* the journal record that holds it */
};

static int message_by_id_cb(void *user, const struct vg_record *r)
{
    struct message_by_id *f = user;
    if (!strstr(r->body, f->id)) /* most records do not mention it: no parse */
        return 0;
    json_t *b = json_loads(r->body, 0, NULL);
    const char *mid = json_string_value(json_object_get(b, "message_id"));
    const char *oid = json_string_value(json_object_get(b, "observation_id"));
    int hit = (mid && !strcmp(mid, f->id)) || (oid && !strcmp(oid, f->id));
    if (hit)
        snprintf(f->record_id, sizeof f->record_id, "%s", r->id);
    json_decref(b);
    return hit;
}

vigil_code vigil_run_message(vigil_runtime *rt, const char *record_id, char **out_json,
                             vigil_error *err)
{
    NEED(rt && record_id && out_json, "run message needs a runtime, an id and an output");
    vigil_error first = {0};
    vigil_code rc = vg_journal_run_message(rt->env.store, record_id, out_json, &first);
    if (rc != VIGIL_ENOTFOUND) {
        if (rc)
            vg_error_copy(err, &first);
        return rc;
    }
    /* `runs messages` lists each message with its own id (message or observation id) beside
     * its record id: both name it. The journal's message records (kind "journal", k2
     * "message"), newest first, hold the message id in their body. */
    struct message_by_id f = {.id = record_id};
    struct vg_query q = {.kind = "journal", .k2 = "message", .descending = 1};
    if ((rc = vg_store_scan(rt->env.store, &q, message_by_id_cb, &f, err)))
        return rc;
    if (!f.record_id[0]) {
        vg_error_copy(err, &first);
        return first.code;
    }
    return vg_journal_run_message(rt->env.store, f.record_id, out_json, err);
}

vigil_code vigil_run_tools(vigil_runtime *rt, const char *run_id, const char *cursor, int limit,
                           char **out_json, vigil_error *err)
{
    NEED(rt && run_id && out_json, "run tools needs a runtime, a run id and an output");
    char id[37];
    vigil_code rc = vg_journal_run_resolve(rt->env.store, run_id, id, err);
    return rc ? rc : vg_journal_run_tools(rt->env.store, id, cursor, limit, out_json, err);
}

vigil_code vigil_tool_calls_by_hand(vigil_runtime *rt, const char *agent_id, const char *cursor,
                                    int limit, char **out_json, vigil_error *err)
{
    NEED(rt && agent_id && out_json, "tool calls needs a runtime, an agent id and an output");
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    return rc ? rc : vg_journal_hand_calls(rt->env.store, agent_id, cursor, limit, out_json, err);
}

vigil_code vigil_run_follow(vigil_runtime *rt, const char *run_id, const int64_t after[2],
                            int limit, char **out_json, vigil_error *err)
{
    NEED(rt && run_id && after && out_json,
         "run follow needs a runtime, a run id, the sequences seen and an output");
    return vg_journal_run_follow(rt->env.store, run_id, after, limit, out_json, err);
}

vigil_code vigil_run_tool(vigil_runtime *rt, const char *tool_call_id, char **out_json,
                          vigil_error *err)
{
    NEED(rt && tool_call_id && out_json, "run tool needs a runtime, an id and an output");
    return vg_journal_run_tool(rt->env.store, tool_call_id, out_json, err);
}

vigil_code vigil_run_replay(vigil_runtime *rt, const char *run_id, char **out_json,
                            vigil_error *err)
{
    NEED(rt && run_id && out_json, "replay needs a runtime, a run id and an output");
    char id[37];
    vigil_code rc = vg_journal_run_resolve(rt->env.store, run_id, id, err);
    return rc ? rc : vg_journal_replay(rt->env.store, id, out_json, err);
}

vigil_code vigil_journal_export(vigil_runtime *rt, const char *agent_id, const char *folder,
                                int64_t *out_count, vigil_error *err)
{
    NEED(rt && agent_id && folder, "export needs a runtime, an agent and a folder");
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc)
        return rc;
    return vg_runtime_move_export(rt, agent_id, folder, out_count, err);
}

vigil_code vigil_journal_import(vigil_runtime *rt, const char *agent_id, const char *folder,
                                int64_t *out_count, vigil_error *err)
{
    char *text = NULL;
    vigil_code rc = vigil_journal_import_json(rt, agent_id, folder, &text, err);
    json_t *o = rc ? NULL : json_loads(text, 0, NULL);
    if (rc == VIGIL_OK && out_count)
        *out_count = json_integer_value(json_object_get(o, "records")) +
                     json_integer_value(json_object_get(o, "agent_records"));
    json_decref(o);
    vg_free(text);
    return rc;
}

vigil_code vigil_journal_import_json(vigil_runtime *rt, const char *agent_id, const char *folder,
                                     char **out_json, vigil_error *err)
{
    NEED(rt && agent_id && folder && out_json, "import needs a runtime, an agent and a folder");
    return vg_runtime_move_import(rt, agent_id, folder, out_json, err);
}

static int str_is(json_t *v, const char *s)
{
    return json_is_string(v) && !strcmp(json_string_value(v), s);
}

/* One message of a session as vigil_session_messages shows it. */
static int session_item(json_t *items, json_t *m)
{
    static const char *const keys[] = {"id", "kind", "content", "created_at", "run_id"};
    static const char *const meta_keys[][2] = {{"tool_calls", "tool_calls"},
                                               {"tool_call_id", "tool_call_id"},
                                               {"toolName", "tool_name"},
                                               {"is_error", "is_error"}};
    json_t *it = json_object(), *meta = json_object_get(m, "metadata");
    int bad = !it;
    for (size_t i = 0; !bad && i < VG_ARRAY_LEN(keys); i++) {
        json_t *v = json_object_get(m, keys[i]);
        bad = json_object_set(it, keys[i], v ? v : json_null());
    }
    for (size_t i = 0; !bad && json_is_object(meta) && i < VG_ARRAY_LEN(meta_keys); i++) {
        json_t *v = json_object_get(meta, meta_keys[i][0]);
        if (v)
            bad = json_object_set(it, meta_keys[i][1], v);
    }
    /* A tool's answer as the model read it: its result, or its error's code and message, not
     * the journal's envelope of ids. */
    const char *content = json_string_value(json_object_get(m, "content"));
    int is_error = 0;
    char *answer = !bad && content && str_is(json_object_get(m, "kind"), "toolResult")
                       ? vg_window_tool_answer(content, &is_error)
                       : NULL;
    if (answer) {
        bad = json_object_set_new(it, "content", json_string(answer)) ||
              (is_error && json_object_set_new(it, "is_error", json_true()));
        vg_free(answer);
    }
    if (bad)
        json_decref(it);
    return bad || json_array_append_new(items, it);
}

vigil_code vigil_session_messages(vigil_runtime *rt, const char *agent_id, const char *session,
                                  int limit, char **out_json, vigil_error *err)
{
    NEED(rt && agent_id && out_json, "session messages needs a runtime, an agent id and an output");
    NEED(limit >= 0 && limit <= 1000, "limit must be 1..1000 (0: 50)");
    char thread[512];
    json_t *msgs = NULL, *m;
    size_t i;
    session = session && *session ? session : "default";
    NEED(vg_utf8_valid(session) && strlen(session) < 256,
         "a session name is UTF-8, under 256 bytes");
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc)
        return rc;
    vg_loop_session_thread(thread, sizeof thread, agent_id, session);
    if ((rc = vg_message_latest(&rt->env, agent_id, thread, limit ? limit : 50, &msgs, err)))
        return rc;
    json_t *out = json_pack("{s:s, s:s, s:[]}", "agent_id", agent_id, "session", session, "items");
    int bad = !out || vg_message_branch_order(msgs);
    json_array_foreach (msgs, i, m)
        bad = bad || session_item(json_object_get(out, "items"), m);
    if (!bad && !(*out_json = vg_json_dump(out, 1)))
        bad = 1;
    json_decref(msgs);
    json_decref(out);
    return bad ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a session") : VIGIL_OK;
}
