/*
 * runtime.c: implements the runtime and agent sections of include/vigil.h on top of the store
 * and the agent spine. Public functions check their arguments, keep `err` untouched on success
 * and turn internal JSON into owned text.
 */
#include "base/common.h"

#include "base/json.h"
#include "base/stats.h"

#include "agent/agent.h"
#include "config/config.h"
#include "memory/loop_adapter.h"
#include "model/model.h"
#include "os/fs.h"
#include "runtime/options.h"
#include "runtime/runtime_int.h"
#include "sync/sync.h"
#include "tool/tool.h"
#include "wake/wake.h"

#include <limits.h>
#include <sodium.h>
#include <stdlib.h>

/* The store's end-of-transaction port: a commit that wrote wakes the waiters of
 * vigil_stats_wait_commit (the daemon's event stream), so it need not poll for this process's
 * own writes. */
static void signal_commit(void *user, int committed)
{
    if (committed && vg_store_tx_wrote(user))
        vg_stats_committed();
}

static void deliver_to_hook(void *user, const char *const *tokens, size_t n)
{
    vigil_runtime *rt = user;
    if (rt->hook)
        rt->hook(rt->hook_user, tokens, n);
}

void vigil_runtime_options_default(vigil_runtime_options *o)
{
    if (o)
        *o = (vigil_runtime_options){.size = sizeof *o};
}

/* The caller's options in this library's layout (vigil.h: the size field): the fields the caller
 * did not know are zero, their defaults. */
static vigil_code options_read(const vigil_runtime_options *in, vigil_runtime_options *o,
                               vigil_error *err)
{
    vigil_runtime_options_default(o);
    if (!in)
        return VIGIL_OK;
    vigil_code rc =
        vg_options_read(in, in->size ? in->size : VIGIL_RUNTIME_OPTIONS_SIZE_0_1, o, sizeof *o,
                        VIGIL_RUNTIME_OPTIONS_SIZE_0_1, "vigil_runtime_options", err);
    o->size = sizeof *o;
    return rc;
}

/* The folder holding a SQLite store's file, where the data beside it goes (the sandbox's
 * working folders); NULL for a store with no file of its own. */
static char *store_folder(const char *uri)
{
    const char *path = strncmp(uri, "sqlite:", 7) ? uri : uri + 7;
    if (strstr(uri, "://") || !*path || !strcmp(path, ":memory:"))
        return NULL;
    char dir[4096], abs[PATH_MAX];
    vg_fs_dirname(path, dir, sizeof dir);
    return vg_strdup(realpath(dir, abs) ? abs : dir); /* the daemon may change its folder */
}

vigil_code vg_runtime_open_with(const vigil_runtime_options *opts_in, struct vg_clock *clock,
                                struct vg_ids *ids, vigil_runtime **out, vigil_error *err)
{
    vigil_runtime_options given, *opts = &given;
    vigil_code rc = options_read(opts_in, &given, err);
    vigil_runtime *rt = NULL;
    if (rc != VIGIL_OK)
        goto fail;
    if (!opts_in || !opts->store_uri || !*opts->store_uri) {
        rc = VG_FAIL(err, VIGIL_EINVAL, "no store given: set store_uri");
        goto fail;
    }
    if (sodium_init() < 0) {
        rc = VG_FAIL(err, VIGIL_ERROR, "could not initialize libsodium");
        goto fail;
    }
    vg_alloc_install_json();
    if (!ids && !(ids = vg_ids_real(clock))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening a runtime");
        goto fail;
    }
    if (!(rt = vg_calloc(1, sizeof *rt)) ||
        (opts->config_path && !(rt->config_path = vg_strdup(opts->config_path)))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening a runtime");
        goto fail;
    }
    struct vg_store_options so = {.create_if_missing = opts->create_if_missing,
                                  .read_only = opts->read_only,
                                  .busy_timeout_ms = opts->busy_timeout_ms};
    if ((rc = vg_store_open(opts->store_uri, &so, &rt->env.store, err)))
        goto fail;
    if (!(rt->store_uri = vg_strdup(opts->store_uri))) {
        vg_store_close(rt->env.store);
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening a runtime");
        goto fail;
    }
    rt->data_dir = store_folder(opts->store_uri);
    rt->env.clock = clock;
    rt->env.ids = ids;
    rt->env.owner = rt;
    rt->env.notify.fn = deliver_to_hook;
    rt->env.notify.fn_user = rt;
    vg_store_set_tx_hook(rt->env.store, signal_commit, rt->env.store);
    vg_runtime_judge_wire(rt);
    /* A store that has joined multi-device sync logs every synced write (docs/sync.md). */
    if ((rc = vg_sync_attach(&rt->env, err))) {
        vigil_runtime_close(rt);
        return rc;
    }
    *out = rt;
    return VIGIL_OK;
fail:
    vg_ids_free(ids);
    if (rt)
        vg_free(rt->config_path);
    vg_free(rt);
    return rc;
}

/* The program's vigil_clock as the clock port every module reads. */
struct program_clock {
    struct vg_clock base; /* must stay first */
    vigil_clock c;
};

static int64_t program_now_ms(struct vg_clock *c)
{
    const struct program_clock *p = (const struct program_clock *)c;
    return p->c.now_ms(p->c.user);
}

static int64_t program_mono_ns(struct vg_clock *c)
{
    const struct program_clock *p = (const struct program_clock *)c;
    return p->c.mono_ns ? p->c.mono_ns(p->c.user) : p->c.now_ms(p->c.user) * 1000000;
}

static void program_sleep_ms(struct vg_clock *c, int64_t ms)
{
    const struct program_clock *p = (const struct program_clock *)c;
    if (p->c.sleep_ms)
        p->c.sleep_ms(p->c.user, ms);
    else
        vg_clock_sleep_ms(vg_clock_real(), ms);
}

static const struct vg_clock_methods program_clock_methods = {
    .version = 1,
    .name = "program",
    .now_ms = program_now_ms,
    .mono_ns = program_mono_ns,
    .sleep_ms = program_sleep_ms,
};

vigil_code vigil_runtime_open(const vigil_runtime_options *opts, vigil_runtime **out,
                              vigil_error *err)
{
    vigil_runtime_options o;
    struct program_clock *pc = NULL;
    if (!out)
        return VG_FAIL(err, VIGIL_EINVAL, "no place for the runtime handle");
    vigil_code rc = options_read(opts, &o, err);
    if (rc)
        return rc;
    if (o.clock && !o.clock->now_ms)
        return VG_FAIL(err, VIGIL_EINVAL, "vigil_runtime_options.clock: now_ms is required");
    if (o.clock) {
        if (!(pc = vg_calloc(1, sizeof *pc)))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory opening a runtime");
        *pc = (struct program_clock){.base = {&program_clock_methods}, .c = *o.clock};
    }
    rc = vg_runtime_open_with(opts, pc ? &pc->base : vg_clock_real(), NULL, out, err);
    if (rc)
        vg_free(pc);
    else
        (*out)->own_clock = pc ? &pc->base : NULL;
    return rc;
}

void vigil_runtime_read_batch(vigil_runtime *rt, int on)
{
    if (rt)
        vg_store_read_batch(rt->env.store, on);
}

void vigil_runtime_read_anchor(vigil_runtime *rt, int on)
{
    if (rt)
        vg_store_read_anchor(rt->env.store, on);
}

void vigil_runtime_close(vigil_runtime *rt)
{
    if (!rt)
        return;
    vigil_runtime_upkeep(rt);      /* a turn's left waiting: never skipped */
    vg_runtime_compactor_stop(rt); /* its pass reads rt's store, config and clock */
    vg_memory_loop_free(rt->memory);
    vg_model_free(rt->model);
    vg_config_free(rt->config);
    vg_free(rt->data_dir);
    vg_free(rt->store_uri);
    vg_free(rt->config_path);
    vg_tool_executor_free(rt->tools);
    vg_runtime_tool_sources_free(rt);
    vg_store_close(rt->env.store);
    vg_env_release(&rt->env);
    vg_ids_free(rt->env.ids);
    vg_free(rt->own_clock);
    vg_free(rt);
    /* What the runtime held is free now: back to the system, not left resident under what the
     * process does next (its exit included, where Debian's libcurl's libraries fault their
     * pages back in: the process's peak was there, PERF.md session 35). */
    vg_alloc_release_free();
}

void vigil_set_notify_hook(vigil_runtime *rt, vigil_notify_cb cb, void *user)
{
    rt->hook = cb;
    rt->hook_user = user;
}

void vigil_set_wake_context(vigil_runtime *rt, vigil_wake_context_fn fn, void *user)
{
    rt->wake_context = fn;
    rt->wake_context_user = user;
}

struct vg_env *vg_runtime_env(vigil_runtime *rt)
{
    return &rt->env;
}

vigil_code vg_runtime_json_out(json_t *value, char **out, vigil_error *err)
{
    char *text = vg_json_dump(value, 1);
    json_decref(value);
    if (!text)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a reply");
    *out = text;
    return VIGIL_OK;
}

#define CHECK_RT(rt)                                                                               \
    do {                                                                                           \
        if (!(rt))                                                                                 \
            return VG_FAIL(err, VIGIL_EINVAL, "no runtime given");                                 \
    } while (0)

vigil_code vigil_agent_create(vigil_runtime *rt, const vigil_agent_spec *spec, char out_id[37],
                              vigil_error *err)
{
    CHECK_RT(rt);
    if (!spec || !out_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no agent spec or id buffer given");
    /* The fields a manifest sets, checked as a manifest's are: what is stored exports to a
     * manifest that applies again (trial F2 of session 32: the CLI checked, the library not). */
    vigil_code rc = spec->config_json ? vigil_agent_config_check(spec->config_json, err) : VIGIL_OK;
    return rc ? rc : vg_agent_create(&rt->env, spec, out_id, err);
}

/* An active agent's earliest timer firing as "next_timer_at" (and its timer's id) in its state,
 * so `agent show` says when it wakes next without `timer list` (trial G12). */
static vigil_code add_next_timer(vigil_runtime *rt, const char *agent_id, json_t *show,
                                 vigil_error *err)
{
    json_t *timers = NULL, *t, *first = NULL, *state = json_object_get(show, "state");
    const char *lc =
        json_string_value(json_object_get(json_object_get(show, "agent"), "lifecycle"));
    size_t i;
    if (!json_is_object(state) || !lc || strcmp(lc, "active"))
        return VIGIL_OK;
    vigil_code rc = vg_timer_list(&rt->env, agent_id, &timers, err);
    json_array_foreach (timers, i, t) {
        json_t *ms = json_object_get(t, "next_run_ms");
        if (!rc && json_is_integer(ms) && !json_is_string(json_object_get(t, "error")) &&
            (!first ||
             json_integer_value(ms) < json_integer_value(json_object_get(first, "next_run_ms"))))
            first = t;
    }
    if (!rc && first &&
        (json_object_set(state, "next_timer_at", json_object_get(first, "next_run_at")) ||
         json_object_set(state, "next_timer_id", json_object_get(first, "id"))))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing an agent");
    json_decref(timers);
    return rc;
}

vigil_code vigil_agent_show(vigil_runtime *rt, const char *agent_id, char **out_json,
                            vigil_error *err)
{
    json_t *v = NULL;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (!rc)
        rc = vg_agent_show(&rt->env, agent_id, &v, err);
    json_t *runtime = json_object_get(v, "runtime");
    const char *st = json_string_value(json_object_get(runtime, "run_status"));
    if (!rc && st && !strcmp(st, "running"))
        rc = vg_runtime_note_gone_holder(rt, agent_id, runtime, err);
    if (!rc)
        rc = add_next_timer(rt, agent_id, v, err);
    if (rc)
        json_decref(v);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_report_get(vigil_runtime *rt, const char *agent_id, const char *scope, int history,
                            char **out_json, vigil_error *err)
{
    json_t *v = NULL;
    if (history < 0)
        return VG_FAIL(err, VIGIL_EINVAL, "history is a count of earlier reports, 0 or more");
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (!rc)
        rc = vg_report_get(&rt->env, agent_id, scope ? scope : "current", history, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_agent_list(vigil_runtime *rt, const char *cursor, int limit, char **out_json,
                            vigil_error *err)
{
    json_t *v = NULL;
    CHECK_RT(rt);
    vigil_code rc = vg_agent_list(&rt->env, cursor, limit, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_agent_list_visible(vigil_runtime *rt, const char *cursor, int limit,
                                    int include_internal, char **out_json, vigil_error *err)
{
    json_t *v = NULL;
    CHECK_RT(rt);
    vigil_code rc = vg_agent_list_some(&rt->env, cursor, limit, !include_internal, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_agent_list_lifecycle(vigil_runtime *rt, const char *lifecycle, const char *cursor,
                                      int limit, int include_internal, char **out_json,
                                      vigil_error *err)
{
    json_t *v = NULL;
    CHECK_RT(rt);
    vigil_code rc =
        vg_agent_list_in(&rt->env, lifecycle, cursor, limit, !include_internal, &v, err);
    return rc ? rc : vg_runtime_json_out(v, out_json, err);
}

vigil_code vigil_agent_pause(vigil_runtime *rt, const char *agent_id, const char *reason,
                             vigil_error *err)
{
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc)
        return rc;
    return vg_agent_transition(&rt->env, agent_id, VIGIL_LIFECYCLE_DORMANT, reason, err);
}

vigil_code vigil_agent_slots_set(vigil_runtime *rt, const char *agent_id, const char *slots_json,
                                 vigil_error *err)
{
    json_t *slots = slots_json ? json_loads(slots_json, 0, NULL) : NULL, *changes = NULL;
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (!rc && (!json_is_object(slots) || !json_object_size(slots)))
        rc = VG_FAIL(err, VIGIL_EINVAL, "slots must be a JSON object naming at least one slot");
    if (!rc && !(changes = json_pack("{s:O}", "slots", slots)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory setting slots");
    if (!rc)
        rc = vg_state_update(&rt->env, agent_id, changes, VG_STATE_ANY_REVISION, NULL, err);
    json_decref(changes);
    json_decref(slots);
    return rc;
}

vigil_code vigil_agent_resume(vigil_runtime *rt, const char *agent_id, const char *reason,
                              vigil_error *err)
{
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc)
        return rc;
    return vg_agent_transition(&rt->env, agent_id, VIGIL_LIFECYCLE_ACTIVE, reason, err);
}

vigil_code vigil_agent_destroy(vigil_runtime *rt, const char *agent_id, const char *reason,
                               vigil_error *err)
{
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    if (rc || (rc = vg_store_begin(rt->env.store, err)))
        return rc;
    /* With its timers and subscriptions, in one transaction: nothing wakes it any more. */
    rc = vg_agent_transition(&rt->env, agent_id, VIGIL_LIFECYCLE_DESTROYED, reason, err);
    if (!rc)
        rc = vg_wake_forget_agent(&rt->env, agent_id, NULL, err);
    /* Its pending approvals too: it will never act on one, so none waits for a person who
     * would approve it in vain (trial H13). */
    if (!rc)
        rc = vg_approval_reject_pending(&rt->env, agent_id, "the agent was destroyed", NULL, err);
    return vg_store_end(rt->env.store, rc, err);
}

vigil_code vigil_agent_delete(vigil_runtime *rt, const char *agent_id, vigil_error *err)
{
    vigil_code rc = vg_runtime_agent_check(rt, agent_id, err);
    return rc ? rc : vg_agent_delete(&rt->env, agent_id, err);
}

vigil_code vigil_agent_lifecycle(vigil_runtime *rt, const char *agent_id, vigil_lifecycle *out,
                                 vigil_error *err)
{
    CHECK_RT(rt);
    if (!agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no agent id given");
    if (!out)
        return VG_FAIL(err, VIGIL_EINVAL, "no lifecycle output given");
    if (!*agent_id)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no agent \"\"");
    /* The agent record's k1 column answers without parsing its body. */
    vigil_code rc = vg_agent_lifecycle(&rt->env, agent_id, out, err);
    if (rc == VIGIL_EINVAL) /* an id the store cannot even hold (too long): still no agent */
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no agent \"%.80s\"", agent_id);
    return rc;
}

vigil_code vg_runtime_agent_check(vigil_runtime *rt, const char *agent_id, vigil_error *err)
{
    vigil_lifecycle lc;
    return vigil_agent_lifecycle(rt, agent_id, &lc, err);
}
