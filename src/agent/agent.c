/*
 * agent.c: agent identity, lifecycle, durable state and local runtime state.
 *
 * Each mutation is one transaction: the snapshot record is updated with a revision check (a
 * stale writer gets ECONFLICT), an agent_change record keeps the new snapshot so the projection
 * can be rebuilt from records (vg_spine_verify), and notification tokens are raised for delivery
 * after the commit.
 *
 * Sections: names; change records; create; read; lifecycle; update; delete; list and show; state;
 * runtime state.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "base/jscan.h"

/* ---- names --------------------------------------------------------------------------------- */

static const char *const lifecycle_names[] = {"created", "active", "dormant", "destroyed"};

const char *vg_lifecycle_name(vigil_lifecycle lc)
{
    if ((unsigned)lc < VG_ARRAY_LEN(lifecycle_names))
        return lifecycle_names[lc];
    return "unknown";
}

const char *vigil_lifecycle_name(vigil_lifecycle lc)
{
    return vg_lifecycle_name(lc);
}

int vg_lifecycle_parse(const char *name, vigil_lifecycle *out)
{
    for (size_t i = 0; name && i < VG_ARRAY_LEN(lifecycle_names); i++) {
        if (strcmp(name, lifecycle_names[i]) == 0) {
            *out = (vigil_lifecycle)i;
            return 0;
        }
    }
    return -1;
}

/* ---- change records ------------------------------------------------------------------------ */

vigil_code vg_spine_record_change(struct vg_env *env, const char *agent_id, const char *target_kind,
                                  const char *target_id, int64_t rev, json_t *snapshot,
                                  vigil_error *err)
{
    char id[37], at[32];
    vg_ids_new(env->ids, id);
    vg_time_format_ms(at, vg_env_now(env));
    json_t *body =
        json_pack("{s:s, s:s, s:s, s:I, s:s, s:O}", "id", id, "target_kind", target_kind,
                  "target_id", target_id, "rev", (json_int_t)rev, "at", at, "snapshot", snapshot);
    if (!body)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory recording a change");
    vigil_code rc = vg_env_put_json(env, "agent_change", id, agent_id, target_kind, target_id, rev,
                                    body, 0, err);
    json_decref(body);
    return rc;
}

/* ---- create -------------------------------------------------------------------------------- */

static int text_ok(const char *s, size_t max)
{
    return s && *s && strlen(s) <= max;
}

int vg_agent_name_has_control(const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; p && *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return 1;
    return 0;
}

static int mode_valid(const char *m)
{
    return !strcmp(m, "autonomous") || !strcmp(m, "interactive") || !strcmp(m, "hybrid");
}

static int kind_valid(const char *k)
{
    if (!text_ok(k, 64))
        return 0;
    for (const char *p = k; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

static json_t *new_state_body(const char *state_id, const char *agent_id, const char *at)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:n, s:n, s:n, s:n, s:n, s:{}, s:I, s:{}}", "id",
                     state_id, "agent_id", agent_id, "revision", (json_int_t)1, "updated_at", at,
                     "last_wake_at", "next_wake_at", "sleep_until", "recent_head_message_id",
                     "latest_summary_message_id", "processed_counter_by_host", "wake_counter",
                     (json_int_t)0, "slots");
}

static json_t *new_runtime_body(const char *agent_id, const char *at)
{
    return json_pack("{s:s, s:s, s:n, s:n, s:n, s:I, s:I, s:s}", "agent_id", agent_id, "run_status",
                     "idle", "active_run_id", "active_session_id", "last_run_started_at",
                     "failure_streak", (json_int_t)0, "hot_message_count", (json_int_t)0,
                     "updated_at", at);
}

vigil_code vg_agent_runtime_put_idle(struct vg_env *env, const char *agent_id, vigil_error *err)
{
    char at[32];
    vg_time_format_ms(at, vg_env_now(env));
    json_t *runtime = new_runtime_body(agent_id, at);
    if (!runtime)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing an agent's runtime state");
    vigil_code rc = vg_env_put_json(env, "agent_runtime", agent_id, agent_id, "", "", 0, runtime,
                                    VG_PUT_IF_ABSENT, err);
    json_decref(runtime);
    return rc;
}

vigil_code vg_agent_names_lock(struct vg_env *env, vigil_error *err)
{
    vigil_code rc =
        vg_env_put_text(env, "agent_names", "lock", "", "", "", 0, "{}", VG_PUT_IF_ABSENT, err);
    return rc ? rc : vg_store_lock_for_write(env->store, "agent_names", "lock", err);
}

struct name_search {
    struct vg_env *env;
    const char *name, *except;
    char *found;
    int plain;          /* the name is written into a body as it is (no JSON escape) */
    vigil_code failure; /* of a body's parse */
};

/* A name of printable ASCII other than a quote and a backslash appears in its agent's JSON
 * text as it is, so a body without it cannot be that agent's: only the bodies that hold it are
 * parsed. Each create checks every live agent, so without this test applying N manifests
 * parsed N*N/2 agent bodies (2,000 manifests: 35 s, 92% of it here). */
static int name_is_plain(const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\')
            return 0;
    return 1;
}

static int name_one(void *user, const struct vg_record *r)
{
    struct name_search *ns = user;
    json_t *agent = NULL;
    if (!strcmp(r->k1, "destroyed") || (ns->except && !strcmp(r->id, ns->except)) ||
        (ns->plain && !strstr(r->body, ns->name)))
        return 0;
    if ((ns->failure = vg_env_parse_json_shared(ns->env, r->body, &agent)))
        return 1;
    const char *n = json_string_value(json_object_get(agent, "name"));
    const char *lc = json_string_value(json_object_get(agent, "lifecycle"));
    if (n && !strcmp(n, ns->name) && !(lc && !strcmp(lc, "destroyed")))
        snprintf(ns->found, 37, "%s", r->id);
    json_decref(agent);
    return ns->found[0] != '\0';
}

/* The store's mark of agent records now, or 0 when it cannot say (VG_STORE_CTRL_CHANGE_MARK). */
static int agent_mark(struct vg_env *env, struct vg_store_change_mark *mark)
{
    vigil_error ignored = {0};
    mark->kind = "agent";
    return vg_store_control(env->store, VG_STORE_CTRL_CHANGE_MARK, mark, &ignored) == VIGIL_OK;
}

/* The live agents' names (env->agent_names), each with its agent's id, under the store's change
 * mark of agent records they were gathered under. Each create checked its name against every
 * live agent, a scan of them all: a hundred agents created by one process scanned 5,050 records
 * (27 M instructions of bench_peer's 100 x 5, docs/internals/PERF.md, Session 40). A process's
 * first create scans as before (a one-shot `vigil agent create` gathers nothing it would not
 * use); its second gathers every live name in its scan; later ones look the name up while the
 * mark holds, and each create adds its own name (agent_names_created). */
struct agent_name {
    char id[37];
    char *name;
};

struct agent_names {
    struct vg_store_change_mark mark;
    int valid;   /* the names below are every live agent's under mark */
    int creates; /* this env's creates so far */
    int failed;  /* out of memory gathering: not valid */
    size_t n, cap;
    struct agent_name *v;
};

static void names_clear(struct agent_names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        vg_free(ns->v[i].name);
    ns->n = 0;
    ns->valid = ns->failed = 0;
}

static void names_free(void *p)
{
    struct agent_names *ns = p;
    if (!ns)
        return;
    names_clear(ns);
    vg_free(ns->v);
    vg_free(ns);
}

static struct agent_names *names_of(struct vg_env *env)
{
    if (!env->agent_names && (env->agent_names = vg_calloc(1, sizeof(struct agent_names))))
        env->agent_names_free = names_free;
    return env->agent_names;
}

static void names_add(struct agent_names *ns, const char *id, const char *name)
{
    if (ns->failed || strlen(id) >= sizeof ns->v->id) {
        ns->failed = 1;
        return;
    }
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 64;
        struct agent_name *v = vg_realloc(ns->v, cap * sizeof *v);
        if (!v) {
            ns->failed = 1;
            return;
        }
        ns->v = v;
        ns->cap = cap;
    }
    if (!(ns->v[ns->n].name = vg_strdup(name))) {
        ns->failed = 1;
        return;
    }
    snprintf(ns->v[ns->n++].id, sizeof ns->v->id, "%s", id);
}

/* Whether the names are every live agent's now. */
static int names_current(struct vg_env *env)
{
    struct agent_names *ns = env->agent_names;
    struct vg_store_change_mark now;
    return ns && ns->valid && agent_mark(env, &now) && now.foreign == ns->mark.foreign &&
           now.own == ns->mark.own;
}

/* An agent record's name and lifecycle, read with the scanner into b (no tree): 0, or -1 when it
 * declines (an escaped key, a name that is not a string), and the caller parses. */
static int name_scan(const char *body, struct vg_buf *b, size_t *name_at, size_t *lc_at)
{
    struct vg_jscan s;
    const char *key;
    size_t len;
    int r;
    *name_at = *lc_at = (size_t)-1;
    vg_jscan_init(&s, body, strlen(body));
    if (vg_jscan_enter(&s, '{') < 0)
        return -1;
    while ((r = vg_jscan_next(&s, &key, &len)) == 1)
        if (vg_jscan_key_is(key, len, "name")        ? vg_jscan_string(&s, b, name_at) < 0
            : vg_jscan_key_is(key, len, "lifecycle") ? vg_jscan_string(&s, b, lc_at) < 0
                                                     : vg_jscan_skip_span(&s) < 0)
            return -1;
    return r;
}

/* Every live agent's name gathered while looking for ns->name (the second create's scan). */
static int name_gather(void *user, const struct vg_record *r)
{
    struct name_search *ns = user;
    struct agent_names *all = ns->env->agent_names;
    struct vg_buf b;
    size_t na, la;
    json_t *agent = NULL;
    const char *n = NULL, *lc = NULL;
    if (!strcmp(r->k1, "destroyed"))
        return 0;
    vg_buf_init(&b, 0);
    if (name_scan(r->body, &b, &na, &la) == 0 && !b.fail) {
        n = na == (size_t)-1 ? NULL : b.data + na;
        lc = la == (size_t)-1 ? NULL : b.data + la;
    } else if ((ns->failure = vg_env_parse_json_shared(ns->env, r->body, &agent))) {
        vg_buf_release(&b);
        return 1;
    } else {
        n = json_string_value(json_object_get(agent, "name"));
        lc = json_string_value(json_object_get(agent, "lifecycle"));
    }
    if (n && !(lc && !strcmp(lc, "destroyed"))) {
        names_add(all, r->id, n);
        if (!ns->found[0] && !strcmp(n, ns->name) && !(ns->except && !strcmp(r->id, ns->except)))
            snprintf(ns->found, 37, "%s", r->id);
    }
    json_decref(agent);
    vg_buf_release(&b);
    return 0;
}

/* The second create's scan: every live name gathered, kept under the mark the scan saw. */
static vigil_code names_gather(struct vg_env *env, struct name_search *ns, vigil_error *err)
{
    struct agent_names *all = env->agent_names;
    struct vg_store_change_mark before, after;
    struct vg_query q = {.kind = "agent"};
    names_clear(all);
    int marked = agent_mark(env, &before);
    vigil_code rc = vg_store_scan(env->store, &q, name_gather, ns, err);
    if (!rc && !ns->failure && !all->failed && marked && agent_mark(env, &after) &&
        before.foreign == after.foreign && before.own == after.own) {
        all->mark = after;
        all->valid = 1;
    } else {
        names_clear(all);
    }
    return rc;
}

vigil_code vg_agent_name_holder(struct vg_env *env, const char *name, const char *except,
                                char found[37], vigil_error *err)
{
    struct name_search ns = {
        .env = env, .name = name, .except = except, .found = found, .plain = name_is_plain(name)};
    struct vg_query q = {.kind = "agent"};
    struct agent_names *all = env->agent_names;
    found[0] = '\0';
    vigil_code rc;
    if (names_current(env)) {
        for (size_t i = 0; i < all->n && !found[0]; i++)
            if (!strcmp(all->v[i].name, name) && !(except && !strcmp(all->v[i].id, except)))
                snprintf(found, 37, "%s", all->v[i].id);
        return VIGIL_OK;
    }
    /* Gathered only where marks can keep them (not on PostgreSQL): else the filtered scan. */
    struct vg_store_change_mark now;
    rc = all && all->creates > 0 && agent_mark(env, &now)
             ? names_gather(env, &ns, err)
             : vg_store_scan(env->store, &q, name_one, &ns, err);
    if (!rc && ns.failure)
        rc = VG_FAIL(err, ns.failure, "reading the agents' names: %s",
                     ns.failure == VIGIL_ENOMEM ? "out of memory" : "an agent record is not JSON");
    return rc;
}

/* Names reach agents wherever ids do (docs/cli.md), so two live agents never share one: the
 * names lock first, so that two processes creating one name take turns and the second sees the
 * first's agent (PostgreSQL; SQLite's writers take turns anyway). Inside the create's
 * transaction. */
static vigil_code name_free(struct vg_env *env, const char *name, vigil_error *err)
{
    char found[37];
    vigil_code rc = vg_agent_names_lock(env, err);
    if (!rc)
        rc = vg_agent_name_holder(env, name, NULL, found, err);
    if (!rc && found[0])
        rc = VG_FAIL(err, VIGIL_EEXISTS, "an agent named \"%s\" already exists (%s)", name, found);
    struct agent_names *all = names_of(env);
    if (all)
        all->creates++;
    return rc;
}

/* After the create's write of its agent record, when the names were current just before it:
 * inside the transaction the mark moves with this connection's own writes only (and again at
 * any undoing), so the names with this one added are every live agent's under the mark now. */
static void agent_names_created(struct vg_env *env, int current, const char *id, const char *name)
{
    struct agent_names *all = env->agent_names;
    struct vg_store_change_mark now;
    if (!current || !all)
        return;
    names_add(all, id, name);
    if (all->failed || !agent_mark(env, &now))
        names_clear(all);
    else
        all->mark = now;
}

/* The record's top-level allowed_scopes says what its config grants (the gate reads the
 * config's): a copy, [] when the config names none. 1 when out of memory. */
static int mirror_scopes(json_t *agent)
{
    json_t *s = json_object_get(json_object_get(agent, "config"), "allowed_scopes");
    return json_object_set_new(agent, "allowed_scopes",
                               json_is_array(s) ? json_deep_copy(s) : json_array()) != 0;
}

vigil_code vg_agent_create(struct vg_env *env, const vigil_agent_spec *spec, char out_id[37],
                           vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    json_t *agent = NULL, *state = NULL, *runtime = NULL, *config = NULL;
    const char *kind = spec->kind ? spec->kind : "assistant";
    const char *mode = spec->mode ? spec->mode : "hybrid";
    char id[37], state_id[37], at[32];

    if (!text_ok(spec->name, 200))
        return VG_FAIL(err, VIGIL_EINVAL, "an agent needs a name of 1 to 200 bytes");
    if (vg_agent_name_has_control(spec->name))
        return VG_FAIL(err, VIGIL_EINVAL, VG_AGENT_NAME_CONTROL_MESSAGE);
    if (!kind_valid(kind))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "invalid agent kind \"%s\": use 1 to 64 of a-z, 0-9, _ and -", kind);
    if (!mode_valid(mode))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "invalid mode \"%s\": use autonomous, interactive or hybrid", mode);
    if (spec->config_json) {
        json_error_t je;
        config = json_loads(spec->config_json, 0, &je);
        if (!config || !json_is_object(config)) {
            rc = VG_FAIL(err, VIGIL_EINVAL, "agent config is not a JSON object: %s",
                         config ? "wrong type" : je.text);
            goto out;
        }
    } else if (!(config = json_object())) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating an agent");
        goto out;
    }

    vg_ids_new(env->ids, id);
    vg_ids_new(env->ids, state_id);
    int64_t now = vg_env_now(env);
    vg_time_format_ms(at, now);
    agent =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s?, s:O, s:[], s:s, s:s, s:s, s:n, "
                  "s:n, s:i}",
                  "id", id, "kind", kind, "name", spec->name, "lifecycle", "created", "mode", mode,
                  "prompt", spec->prompt, "model", spec->model, "config", config, "allowed_scopes",
                  "visibility", "project", "created_at", at, "updated_at", at, "destroyed_at",
                  "lifecycle_reason", "schema_version", VG_AGENT_SCHEMA_VERSION);
    state = new_state_body(state_id, id, at);
    runtime = new_runtime_body(id, at);
    if (!agent || !state || !runtime || mirror_scopes(agent)) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating an agent");
        goto out;
    }

    if ((rc = vg_store_begin(env->store, err)))
        goto out;
    rc = name_free(env, spec->name, err);
    int names = !rc && vg_store_in_tx(env->store) && names_current(env);
    if (!rc)
        rc = vg_env_put_json(env, "agent", id, id, "created", kind, now, agent, 0, err);
    if (!rc)
        agent_names_created(env, names, id, spec->name);
    if (!rc)
        rc = vg_env_put_json(env, "agent_state", state_id, id, "", "", 0, state, 0, err);
    if (!rc)
        rc = vg_env_put_json(env, "agent_runtime", id, id, "", "", 0, runtime, 0, err);
    if (!rc)
        rc = vg_pointer_set(env, id, "agent_state", id, state_id, 0, err);
    if (!rc)
        rc = vg_spine_record_change(env, id, "agent", id, 1, agent, err);
    if (!rc)
        rc = vg_spine_record_change(env, id, "agent_state", state_id, 1, state, err);
    if (!rc) {
        const char *tokens[] = {VIGIL_TOKEN_AGENT_CHANGED, id, VIGIL_TOKEN_AGENT_STATE_CHANGED,
                                state_id};
        vg_env_notify(env, tokens, VG_ARRAY_LEN(tokens));
    }
    rc = vg_store_end(env->store, rc, err);
    if (!rc)
        memcpy(out_id, id, sizeof id);
out:
    json_decref(agent);
    json_decref(state);
    json_decref(runtime);
    json_decref(config);
    return rc;
}

/* ---- read ---------------------------------------------------------------------------------- */

const char *vg_agent_visibility_name(const char *v)
{
    if (v && !strcmp(v, "public"))
        return "external";
    if (v && !strcmp(v, "private"))
        return "internal";
    return v;
}

/* Records of schema 1 spelled visibility internal (the default, listed everywhere) | public |
 * private; schema 2 says project (the default) | external | internal. A record read is moved to
 * schema 2 in memory, and is stored so at its next write. */
static int needs_upgrade(const json_t *agent)
{
    return (int)json_integer_value(json_object_get(agent, "schema_version")) <
           VG_AGENT_SCHEMA_VERSION;
}

static void upgrade(json_t *agent)
{
    if (!needs_upgrade(agent))
        return;
    int64_t was = json_integer_value(json_object_get(agent, "schema_version"));
    if (was < 2) {
        const char *v = json_string_value(json_object_get(agent, "visibility"));
        const char *now = !v || !strcmp(v, "internal") ? "project" : vg_agent_visibility_name(v);
        json_object_set_new(agent, "visibility", json_string(now));
    }
    (void)mirror_scopes(agent); /* out of memory: it says [] as it did */
    json_object_set_new(agent, "schema_version", json_integer(VG_AGENT_SCHEMA_VERSION));
}

int vg_agent_listed(const json_t *agent)
{
    const char *v = json_string_value(json_object_get(agent, "visibility"));
    return !v || strcmp(v, "internal") != 0;
}

static vigil_code agent_get(struct vg_env *env, const char *agent_id, json_t **out, int64_t *rev,
                            int shared, vigil_error *err)
{
    if (!agent_id || !*agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no agent id given");
    vigil_code rc = shared ? vg_env_get_json_shared(env, "agent", agent_id, out, err)
                           : vg_env_get_json(env, "agent", agent_id, out, rev, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no agent \"%s\"", agent_id);
    if (rc)
        return rc;
    /* A shared value is the memo's own and must not change: an old record is read privately,
     * then upgraded (until its next write stores it at the new schema). */
    if (shared && needs_upgrade(*out)) {
        json_decref(*out);
        *out = NULL;
        rc = vg_env_get_json(env, "agent", agent_id, out, rev, err);
        if (rc)
            return rc;
    }
    upgrade(*out);
    return VIGIL_OK;
}

vigil_code vg_agent_get(struct vg_env *env, const char *agent_id, json_t **out, int64_t *rev,
                        vigil_error *err)
{
    return agent_get(env, agent_id, out, rev, 0, err);
}

/* agent_id's slot of the kept agents: the one holding it, or the one it would take (of four
 * places the id hashes to, a free one or the one read longest ago). Four, not two: a hundred
 * agents in 128 slots with two places each still pushed one another out. */
static struct vg_env_kept_agent *kept_slot(struct vg_env *env, const char *agent_id)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)agent_id; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    struct vg_env_kept_agent *take = NULL;
    for (int i = 0; i < 4; i++, h /= VG_ENV_KEPT_AGENTS) {
        struct vg_env_kept_agent *k = &env->kept_agents[h % VG_ENV_KEPT_AGENTS];
        if (k->value && !strcmp(k->id, agent_id))
            return k;
        if (!take || (take->value && (!k->value || k->used < take->used)))
            take = k;
    }
    return take;
}

static uint64_t text_hash(const char *p, size_t *len)
{
    uint64_t h = 1469598103934665603ull;
    const char *q = p;
    for (; *q; q++)
        h = (h ^ (unsigned char)*q) * 1099511628211ull;
    *len = (size_t)(q - p);
    return h;
}

/* One read of an agent record for the keep: its revision and text's hash, and its body parsed
 * unless it is the one the slot already holds. */
struct kept_read {
    struct vg_env *env;
    const struct vg_env_kept_agent *slot; /* the slot's value, when it is agent_id's */
    int64_t rev;
    size_t len;
    uint64_t hash;
    int same;      /* the record is the slot's value */
    json_t *value; /* else its body parsed (shared) */
    vigil_code rc; /* of the parse */
};

static int kept_read_cb(void *user, const struct vg_record *r)
{
    struct kept_read *k = user;
    k->rev = r->rev;
    k->hash = text_hash(r->body, &k->len);
    k->same =
        k->slot && k->slot->rev == r->rev && k->slot->len == k->len && k->slot->hash == k->hash;
    if (!k->same)
        k->rc = vg_env_parse_json_shared(k->env, r->body, &k->value);
    return 1;
}

/* Read agent_id's record into slot k (whose value, if it is agent_id's, the mark no longer
 * vouches for): the same revision and text keep the slot's value under the new mark, with no
 * parse; the run holding that value (the loop's agent) and the slot then share one tree. */
static vigil_code kept_refresh(struct vg_env *env, const char *agent_id,
                               struct vg_env_kept_agent *k, json_t **out, vigil_error *err)
{
    struct vg_store_change_mark before, after;
    struct kept_read r = {.env = env, .slot = k->value && !strcmp(k->id, agent_id) ? k : NULL};
    int marked = agent_mark(env, &before);
    vigil_code rc = vg_store_get(env->store, "agent", agent_id, kept_read_cb, &r, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no agent \"%s\"", agent_id);
    if (rc || (rc = r.rc))
        return rc == VIGIL_EPARSE ? VG_FAIL(err, rc, "agent \"%s\" is not JSON", agent_id) : rc;
    if (!r.same && needs_upgrade(r.value)) { /* an old record: read privately, upgraded */
        json_decref(r.value);
        r.value = NULL;
        if ((rc = agent_get(env, agent_id, &r.value, NULL, 1, err)))
            return rc;
    }
    if (!r.same) {
        json_decref(k->value);
        k->value = r.value;
        k->rev = r.rev;
        k->len = r.len;
        k->hash = r.hash;
        snprintf(k->id, sizeof k->id, "%s", agent_id);
    }
    *out = json_incref(k->value);
    k->used = ++env->kept_agents_tick;
    /* Kept under the mark the read saw: taken before it and still the same after. */
    if (!marked || !agent_mark(env, &after) || before.foreign != after.foreign ||
        before.own != after.own)
        memset(&k->mark, 0xff, sizeof k->mark); /* no mark matches: read again next time */
    else
        k->mark = after;
    return VIGIL_OK;
}

/* A step reads its agent's record four times (the loop's budget gate, its visible tools, its
 * memory, the tool gate): the value read before is served again while no agent record may have
 * changed since (docs/internals/PERF.md, Session 26), for each of the last agents read: with
 * agents taking turns in one thread (vigil_chat_many, a daemon's loop thread), one kept agent
 * was another's at nearly every read (Session 39). When the mark moved (another agent written),
 * the record's revision and text tell whether the kept value still stands (Session 40). */
vigil_code vg_agent_get_shared(struct vg_env *env, const char *agent_id, json_t **out,
                               vigil_error *err)
{
    struct vg_store_change_mark mark;
    int keep = agent_id && *agent_id && strlen(agent_id) < sizeof env->kept_agents->id &&
               (env->kept_agents ||
                (env->kept_agents = vg_calloc(VG_ENV_KEPT_AGENTS, sizeof *env->kept_agents)));
    if (!keep)
        return agent_get(env, agent_id, out, NULL, 1, err);
    struct vg_env_kept_agent *k = kept_slot(env, agent_id);
    if (k->value && !strcmp(k->id, agent_id) && agent_mark(env, &mark) &&
        mark.foreign == k->mark.foreign && mark.own == k->mark.own) {
        k->used = ++env->kept_agents_tick;
        *out = json_incref(k->value);
        return VIGIL_OK;
    }
    return kept_refresh(env, agent_id, k, out, err);
}

struct lifecycle_ctx {
    int found, bad;
    vigil_lifecycle lc;
    const char *kind; /* NULL: any */
    int of_kind;
};

static int lifecycle_cb(void *user, const struct vg_record *r)
{
    struct lifecycle_ctx *c = user;
    c->found = 1;
    c->bad = vg_lifecycle_parse(r->k1, &c->lc) != 0;
    c->of_kind = !c->kind || strcmp(r->k2, c->kind) == 0;
    return 1;
}

vigil_code vg_agent_lifecycle_kind(struct vg_env *env, const char *agent_id, const char *kind,
                                   vigil_lifecycle *out, int *of_kind, vigil_error *err)
{
    /* The agent record's k1 column holds its lifecycle and k2 its kind: no need to parse the
     * body, which this check runs on every append. */
    struct lifecycle_ctx c = {.kind = kind};
    if (!agent_id || !*agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "no agent id given");
    vigil_code rc = vg_store_get(env->store, "agent", agent_id, lifecycle_cb, &c, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no agent \"%s\"", agent_id);
    if (rc)
        return rc;
    if (c.bad)
        return VG_FAIL(err, VIGIL_ECORRUPT, "agent \"%s\" has an unknown lifecycle", agent_id);
    *out = c.lc;
    if (of_kind)
        *of_kind = c.of_kind;
    return VIGIL_OK;
}

vigil_code vg_agent_lifecycle(struct vg_env *env, const char *agent_id, vigil_lifecycle *out,
                              vigil_error *err)
{
    return vg_agent_lifecycle_kind(env, agent_id, NULL, out, NULL, err);
}

struct mode_ctx {
    char *mode; /* 16 bytes, "" until found */
    int unread; /* the scan declined: read with jansson */
    char *body; /* a copy of the body for that read (owned) */
};

static int mode_cb(void *user, const struct vg_record *r)
{
    struct mode_ctx *c = user;
    struct vg_jscan s;
    const char *key;
    size_t len;
    int more;
    vg_jscan_init(&s, r->body, strlen(r->body));
    if (vg_jscan_enter(&s, '{') < 0)
        goto declined;
    while ((more = vg_jscan_next(&s, &key, &len)) == 1) {
        if (!vg_jscan_key_is(key, len, "mode")) {
            if (vg_jscan_skip_span(&s) < 0)
                goto declined;
            continue;
        }
        struct vg_buf b;
        size_t at = 0;
        vg_buf_init(&b, 64);
        int got = vg_jscan_string(&s, &b, &at);
        if (got >= 0 && at != (size_t)-1)
            snprintf(c->mode, 16, "%s", b.data + at);
        vg_buf_release(&b);
        if (got < 0)
            goto declined;
        return 1;
    }
    if (more == 0)
        return 1; /* no mode: an agent made before modes, read as the default */
declined:
    c->unread = 1;
    c->body = vg_strdup(r->body);
    return 1;
}

vigil_code vg_agent_mode(struct vg_env *env, const char *agent_id, char mode[16], vigil_error *err)
{
    struct mode_ctx c = {.mode = mode};
    mode[0] = '\0';
    vigil_code rc = vg_store_get(env->store, "agent", agent_id, mode_cb, &c, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no agent \"%s\"", agent_id);
    if (!rc && c.unread) {
        json_t *agent = c.body ? json_loads(c.body, 0, NULL) : NULL;
        const char *m = json_string_value(json_object_get(agent, "mode"));
        if (!agent)
            rc = VG_FAIL(err, c.body ? VIGIL_ECORRUPT : VIGIL_ENOMEM,
                         "reading the mode of agent \"%s\"", agent_id);
        else if (m)
            snprintf(mode, 16, "%s", m);
        json_decref(agent);
    }
    vg_free(c.body);
    if (!rc && !mode[0])
        snprintf(mode, 16, "hybrid");
    return rc;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

/* allowed[from][to]: created -> active <-> dormant -> destroyed; destroyed is final. */
static const unsigned char allowed[4][4] = {
    /* to:       created active dormant destroyed */
    /* created */ {0, 1, 0, 1},
    /* active  */ {0, 0, 1, 1},
    /* dormant */ {0, 1, 0, 1},
    /* destroyed */ {0, 0, 0, 0},
};

/* The transition of an agent whose record (at revision rev) the caller read in the open
 * transaction; the record is changed in place. */
static vigil_code transition_loaded(struct vg_env *env, const char *agent_id, json_t *agent,
                                    int64_t rev, vigil_lifecycle to, const char *reason,
                                    vigil_error *err)
{
    vigil_lifecycle from;
    char at[32];
    if (vg_lifecycle_parse(json_string_value(json_object_get(agent, "lifecycle")), &from) != 0)
        return VG_FAIL(err, VIGIL_ECORRUPT, "agent \"%s\" has an unknown lifecycle", agent_id);
    if (from == to)
        return VG_FAIL(err, VIGIL_ESTATE, "agent \"%s\" is already %s", agent_id,
                       vg_lifecycle_name(from));
    if (!allowed[from][to])
        return VG_FAIL(err, VIGIL_ESTATE, "agent \"%s\" is %s and cannot become %s%s", agent_id,
                       vg_lifecycle_name(from), vg_lifecycle_name(to),
                       from == VIGIL_LIFECYCLE_DESTROYED ? " (destroyed is final)" : "");
    vg_time_format_ms(at, vg_env_now(env));
    if (json_object_set_new(agent, "lifecycle", json_string(vg_lifecycle_name(to))) ||
        json_object_set_new(agent, "updated_at", json_string(at)) ||
        json_object_set_new(agent, "lifecycle_reason",
                            reason ? json_string(reason) : json_null()) ||
        (to == VIGIL_LIFECYCLE_DESTROYED &&
         json_object_set_new(agent, "destroyed_at", json_string(at))))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory changing agent \"%s\"", agent_id);
    const char *kind = json_string_value(json_object_get(agent, "kind"));
    int64_t created = 0;
    {
        const char *c = json_string_value(json_object_get(agent, "created_at"));
        if (c)
            vg_time_parse_ms(c, &created);
    }
    vigil_code rc = vg_env_update_json(env, "agent", agent_id, agent_id, vg_lifecycle_name(to),
                                       kind ? kind : "", created, agent, rev, err);
    if (!rc)
        rc = vg_spine_record_change(env, agent_id, "agent", agent_id, rev + 1, agent, err);
    if (!rc) {
        const char *tokens[] = {VIGIL_TOKEN_AGENT_CHANGED, agent_id};
        vg_env_notify(env, tokens, VG_ARRAY_LEN(tokens));
    }
    return rc;
}

vigil_code vg_agent_transition(struct vg_env *env, const char *agent_id, vigil_lifecycle to,
                               const char *reason, vigil_error *err)
{
    json_t *agent = NULL;
    int64_t rev = 0;
    vigil_code rc;

    if ((unsigned)to > VIGIL_LIFECYCLE_DESTROYED)
        return VG_FAIL(err, VIGIL_EINVAL, "unknown lifecycle state %d", (int)to);
    if ((rc = vg_store_begin(env->store, err)))
        return rc;
    if (!(rc = vg_agent_get(env, agent_id, &agent, &rev, err)))
        rc = transition_loaded(env, agent_id, agent, rev, to, reason, err);
    rc = vg_store_end(env->store, rc, err);
    json_decref(agent);
    return rc;
}

vigil_code vg_agent_activate_loaded(struct vg_env *env, const char *agent_id, json_t *agent,
                                    int64_t rev, const char *reason, vigil_error *err)
{
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    rc = transition_loaded(env, agent_id, agent, rev, VIGIL_LIFECYCLE_ACTIVE, reason, err);
    return vg_store_end(env->store, rc, err);
}

/* ---- update -------------------------------------------------------------------------------- */

static int visibility_valid(const char *v)
{
    return !strcmp(v, "external") || !strcmp(v, "project") || !strcmp(v, "internal") ||
           !strcmp(v, "public") || !strcmp(v, "private");
}

/* Check the fields an update may set: names it may not set and values of the wrong shape. */
static vigil_code check_update(const json_t *fields, vigil_error *err)
{
    static const char *const settable[] = {"name",  "kind",       "mode",  "prompt",
                                           "model", "visibility", "config"};
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)fields, k, v) {
        size_t i = 0;
        while (i < VG_ARRAY_LEN(settable) && strcmp(k, settable[i]))
            i++;
        const char *s = json_string_value(v);
        if (i == VG_ARRAY_LEN(settable))
            return VG_FAIL(err, VIGIL_EINVAL, "agent field \"%s\" cannot be updated", k);
        if (!strcmp(k, "config")                            ? !json_is_object(v)
            : (!strcmp(k, "prompt") || !strcmp(k, "model")) ? !(s || json_is_null(v))
                                                            : !s)
            return VG_FAIL(err, VIGIL_EINVAL, "agent field \"%s\" has the wrong type", k);
        if ((!strcmp(k, "name") && !text_ok(s, 200)) || (!strcmp(k, "kind") && !kind_valid(s)) ||
            (!strcmp(k, "mode") && !mode_valid(s)) ||
            (!strcmp(k, "visibility") && !visibility_valid(s)))
            return VG_FAIL(err, VIGIL_EINVAL, "invalid agent %s \"%s\"", k, s);
    }
    return VIGIL_OK;
}

vigil_code vg_agent_update(struct vg_env *env, const char *agent_id, const json_t *fields,
                           vigil_error *err)
{
    json_t *agent = NULL;
    int64_t rev = 0, created = 0;
    char at[32];
    vigil_code rc = check_update(fields, err);
    if (rc || (rc = vg_store_begin(env->store, err)))
        return rc;
    if ((rc = vg_agent_get(env, agent_id, &agent, &rev, err)))
        goto out;
    const char *lc = json_string_value(json_object_get(agent, "lifecycle"));
    if (lc && !strcmp(lc, "destroyed")) {
        rc = VG_FAIL(err, VIGIL_ESTATE, "agent \"%s\" is destroyed and cannot change", agent_id);
        goto out;
    }
    vg_time_format_ms(at, vg_env_now(env));
    const char *vis = json_string_value(json_object_get(fields, "visibility"));
    if (json_object_update(agent, (json_t *)fields) ||
        (vis &&
         json_object_set_new(agent, "visibility", json_string(vg_agent_visibility_name(vis)))) ||
        json_object_set_new(agent, "updated_at", json_string(at)) || mirror_scopes(agent) ||
        json_object_set_new(agent, "schema_version", json_integer(VG_AGENT_SCHEMA_VERSION))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory changing agent \"%s\"", agent_id);
        goto out;
    }
    const char *c = json_string_value(json_object_get(agent, "created_at"));
    if (c)
        vg_time_parse_ms(c, &created);
    const char *kind = json_string_value(json_object_get(agent, "kind"));
    rc = vg_env_update_json(env, "agent", agent_id, agent_id, lc ? lc : "created", kind ? kind : "",
                            created, agent, rev, err);
    if (!rc)
        rc = vg_spine_record_change(env, agent_id, "agent", agent_id, rev + 1, agent, err);
    if (!rc) {
        const char *tokens[] = {VIGIL_TOKEN_AGENT_CHANGED, agent_id};
        vg_env_notify(env, tokens, VG_ARRAY_LEN(tokens));
    }
out:
    rc = vg_store_end(env->store, rc, err);
    json_decref(agent);
    return rc;
}

/* ---- delete -------------------------------------------------------------------------------- */

vigil_code vg_agent_delete(struct vg_env *env, const char *agent_id, vigil_error *err)
{
    vigil_lifecycle lc = VIGIL_LIFECYCLE_CREATED;
    int64_t removed = 0;
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    if ((rc = vg_agent_lifecycle(env, agent_id, &lc, err)))
        goto out;
    if (lc != VIGIL_LIFECYCLE_DESTROYED) {
        rc = VG_FAIL(err, VIGIL_ESTATE,
                     "agent \"%s\" is %s: only a destroyed agent can be deleted (destroy it first)",
                     agent_id, vg_lifecycle_name(lc));
        goto out;
    }
    rc = vg_store_remove_owner(env->store, agent_id, &removed, err);
    if (!rc) {
        const char *tokens[] = {VIGIL_TOKEN_AGENT_CHANGED, agent_id};
        vg_env_notify(env, tokens, VG_ARRAY_LEN(tokens));
    }
out:
    return vg_store_end(env->store, rc, err);
}

/* ---- list and show ------------------------------------------------------------------------- */

struct list_ctx {
    json_t *items;
    int listed_only;  /* internal agents are passed over */
    int limit;        /* items wanted on this page */
    int64_t last_seq; /* position of the last item kept on the page */
    char last_id[201];
    int n, failed;
};

static int list_cb(void *user, const struct vg_record *r)
{
    struct list_ctx *c = user;
    json_error_t je;
    json_t *body = json_loads(r->body, 0, &je);
    if (body)
        upgrade(body);
    if (body && c->listed_only && !vg_agent_listed(body)) {
        json_decref(body);
        return 0;
    }
    if (!body || json_array_append_new(c->items, body)) {
        c->failed = 1;
        return 1;
    }
    if (c->n < c->limit) {
        c->last_seq = r->seq;
        snprintf(c->last_id, sizeof c->last_id, "%s", r->id);
    }
    c->n++;
    return c->n > c->limit; /* one more tells whether a next page exists */
}

vigil_code vg_cursor_parse(const char *cursor, int64_t *seq, char *id, size_t id_size,
                           vigil_error *err)
{
    const char *dot = cursor ? strchr(cursor, '.') : NULL;
    char *end = NULL;
    if (!dot || dot == cursor)
        goto bad;
    long long v = strtoll(cursor, &end, 10);
    if (end != dot || !dot[1] || strlen(dot + 1) >= id_size)
        goto bad;
    *seq = v;
    snprintf(id, id_size, "%s", dot + 1);
    return VIGIL_OK;
bad:
    return VG_FAIL(err, VIGIL_EINVAL, "invalid cursor \"%s\": pass a next_cursor value",
                   cursor ? cursor : "");
}

vigil_code vg_agent_list(struct vg_env *env, const char *cursor, int limit, json_t **out,
                         vigil_error *err)
{
    return vg_agent_list_some(env, cursor, limit, 0, out, err);
}

vigil_code vg_agent_each(struct vg_env *env,
                         vigil_code (*fn)(void *user, json_t *agent, vigil_error *err), void *user,
                         vigil_error *err)
{
    char cursor[256] = "";
    vigil_code rc = VIGIL_OK;
    do {
        json_t *page = NULL, *a;
        size_t i;
        if ((rc = vg_agent_list(env, cursor[0] ? cursor : NULL, 500, &page, err)))
            break;
        json_array_foreach (json_object_get(page, "items"), i, a) {
            if ((rc = fn(user, a, err)))
                break;
        }
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        snprintf(cursor, sizeof cursor, "%s", next ? next : "");
        json_decref(page);
    } while (!rc && cursor[0]);
    return rc;
}

vigil_code vg_agent_list_some(struct vg_env *env, const char *cursor, int limit, int listed_only,
                              json_t **out, vigil_error *err)
{
    return vg_agent_list_in(env, NULL, cursor, limit, listed_only, out, err);
}

vigil_code vg_agent_list_in(struct vg_env *env, const char *lifecycle, const char *cursor,
                            int limit, int listed_only, json_t **out, vigil_error *err)
{
    char after_id[201];
    struct vg_query q = {.kind = "agent", .k1 = lifecycle};
    struct list_ctx c = {.listed_only = listed_only};
    vigil_lifecycle lc;
    vigil_code rc;
    if (lifecycle && vg_lifecycle_parse(lifecycle, &lc) != 0)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "invalid lifecycle \"%s\": use created, active, dormant or destroyed",
                       lifecycle);
    if (limit == 0)
        limit = 50;
    if (limit < 1 || limit > 1000)
        return VG_FAIL(err, VIGIL_EINVAL, "limit %d is out of range 1..1000", limit);
    if (cursor && *cursor) {
        if ((rc = vg_cursor_parse(cursor, &q.after_seq, after_id, sizeof after_id, err)))
            return rc;
        q.has_after = 1;
        q.after_id = after_id;
    }
    q.limit = listed_only ? 0 : limit + 1; /* hidden agents do not count towards the page */
    c.limit = limit;
    if (!(c.items = json_array()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing agents");
    rc = vg_store_scan(env->store, &q, list_cb, &c, err);
    if (!rc && c.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing agents");
    if (rc) {
        json_decref(c.items);
        return rc;
    }
    json_t *next = json_null();
    if (c.n > limit) {
        json_array_remove(c.items, (size_t)limit);
        char buf[256];
        snprintf(buf, sizeof buf, "%lld.%s", (long long)c.last_seq, c.last_id);
        next = json_string(buf);
    }
    *out = json_pack("{s:o, s:o}", "items", c.items, "next_cursor", next);
    if (!*out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing agents");
    return VIGIL_OK;
}

/* How the state is read: a copy, a copy locked for writing, or the memo's own value. */
enum state_use { STATE_READ, STATE_WRITE, STATE_SHARED };
static vigil_code state_read(struct vg_env *env, const char *agent_id, enum state_use use,
                             json_t **out, int64_t *revision, vigil_error *err);

/* The report (taken) as readers show it, with whether it is stale (report.c). */
static json_t *report_shown(json_t *report, const json_t *config, int64_t now_ms)
{
    json_t *v = vg_report_view(report, config, now_ms);
    json_decref(report);
    return v;
}

vigil_code vg_agent_show(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err)
{
    json_t *agent = NULL, *state = NULL, *runtime = NULL;
    /* Only read, then encoded: the memo's own values, not copies (a copy of the three cost
     * more than the store's reads of them). */
    vigil_code rc = vg_agent_get_shared(env, agent_id, &agent, err);
    if (!rc)
        rc = state_read(env, agent_id, STATE_SHARED, &state, NULL, err);
    if (!rc) {
        rc = vg_env_get_json_shared(env, "agent_runtime", agent_id, &runtime, err);
        if (rc == VIGIL_ENOTFOUND) { /* lost: what vg_runtime_state_get makes again */
            char at[32];
            vg_time_format_ms(at, vg_env_now(env));
            rc = (runtime = new_runtime_body(agent_id, at))
                     ? VIGIL_OK
                     : VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing agent \"%s\"", agent_id);
        }
    }
    json_t *report = NULL;
    if (!rc) {
        /* The user-facing report of the current scope, when the agent has written one. No
         * error asked for: none is shown, and an absent report (the usual case) had three
         * messages formatted and dropped, some 3,000 instructions an agent read. */
        if (vg_report_current(env, agent_id, "current", &report, NULL) != VIGIL_OK)
            report = json_null();
        else
            report = report_shown(report, json_object_get(agent, "config"), vg_env_now(env));
        if (!report) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing agent \"%s\"", agent_id);
            goto out;
        }
        *out = json_pack("{s:o, s:o, s:o, s:o}", "agent", agent, "state", state, "runtime", runtime,
                         "report", report);
        agent = state = runtime = NULL;
        if (!*out)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory showing agent \"%s\"", agent_id);
    }
out:
    json_decref(agent);
    json_decref(state);
    json_decref(runtime);
    return rc;
}

/* ---- state --------------------------------------------------------------------------------- */

struct wake_count {
    int64_t n, rev;
};

static int wake_count_cb(void *user, const struct vg_record *r)
{
    struct wake_count *c = user;
    c->n = strtoll(r->body, NULL, 10);
    c->rev = r->rev;
    return 1;
}

/* The counter's own record: *found 0 when the agent has had no wake since it came in. */
static vigil_code wake_count_read(struct vg_env *env, const char *agent_id, struct wake_count *c,
                                  int *found, vigil_error *err)
{
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_store_get(env->store, "wake_count", agent_id, wake_count_cb, c, &miss));
    *found = rc == VIGIL_OK;
    return rc == VIGIL_ENOTFOUND ? VIGIL_OK : rc;
}

/* The counter's record at n (rev: the revision read, 0 when there was none). */
static vigil_code wake_count_write(struct vg_env *env, const char *agent_id, int64_t n, int64_t rev,
                                   vigil_error *err)
{
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)n);
    struct vg_record r = {.kind = "wake_count",
                          .id = agent_id,
                          .owner = agent_id,
                          .k1 = "",
                          .k2 = "",
                          .at = vg_env_now(env),
                          .body = text};
    return rev ? vg_store_update(env->store, &r, rev, err)
               : vg_store_put(env->store, &r, 0, NULL, err);
}

static vigil_code state_read_stored(struct vg_env *env, const char *agent_id, enum state_use use,
                                    json_t **out, int64_t *revision, vigil_error *err);

/* The snapshot, showing the counter's own record (a shared snapshot, the memo's own value, is
 * copied first, only then). */
static vigil_code state_read(struct vg_env *env, const char *agent_id, enum state_use use,
                             json_t **out, int64_t *revision, vigil_error *err)
{
    struct wake_count c = {0};
    int found = 0;
    vigil_code rc = state_read_stored(env, agent_id, use, out, revision, err);
    if (rc)
        return rc;
    rc = wake_count_read(env, agent_id, &c, &found, err);
    if (!rc && found && use == STATE_SHARED) {
        json_t *copy = json_deep_copy(*out);
        json_decref(*out);
        if (!(*out = copy))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading state");
    }
    if (!rc && found && json_object_set_new(*out, "wake_counter", json_integer(c.n)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading state");
    if (rc) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

/* A caller set the counter through the snapshot: its record follows, when it has one. */
static vigil_code wake_count_set(struct vg_env *env, const char *agent_id, int64_t n,
                                 vigil_error *err)
{
    struct wake_count c = {0};
    int found = 0;
    vigil_code rc = wake_count_read(env, agent_id, &c, &found, err);
    return rc || !found ? rc : wake_count_write(env, agent_id, n, c.rev, err);
}

vigil_code vg_wake_counter_read(struct vg_env *env, const char *agent_id, int64_t *n, int64_t *rev,
                                vigil_error *err)
{
    struct wake_count c = {0};
    int found = 0;
    vigil_code rc = vg_store_lock_for_write(env->store, "wake_count", agent_id, err);
    if (!rc)
        rc = wake_count_read(env, agent_id, &c, &found, err);
    if (!rc && !found) { /* no wake since it came in: the snapshot's counter */
        json_t *s = NULL;
        /* The lock above held nothing (no row yet): the state's row serializes the first
         * writers, and one that waited for it finds the record the other made. */
        if (!(rc = state_read_stored(env, agent_id, STATE_WRITE, &s, NULL, err)))
            rc = wake_count_read(env, agent_id, &c, &found, err);
        if (!rc && !found)
            c.n = json_integer_value(json_object_get(s, "wake_counter"));
        json_decref(s);
    }
    *n = c.n;
    *rev = found ? c.rev : 0;
    return rc;
}

vigil_code vg_wake_counter_write(struct vg_env *env, const char *agent_id, int64_t n, int64_t rev,
                                 vigil_error *err)
{
    return wake_count_write(env, agent_id, n, rev, err);
}

static vigil_code state_read_stored(struct vg_env *env, const char *agent_id, enum state_use use,
                                    json_t **out, int64_t *revision, vigil_error *err)
{
    char state_id[201];
    vigil_code rc =
        vg_link_pointer_get(env, "agent_state", agent_id, state_id, sizeof state_id, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no agent \"%s\"", agent_id);
    if (!rc && use == STATE_WRITE)
        rc = vg_store_lock_for_write(env->store, "agent_state", state_id, err);
    if (rc)
        return rc;
    if (use == STATE_SHARED)
        return vg_env_get_json_shared(env, "agent_state", state_id, out, err);
    return vg_env_get_json(env, "agent_state", state_id, out, revision, err);
}

vigil_code vg_state_get(struct vg_env *env, const char *agent_id, json_t **out, int64_t *revision,
                        vigil_error *err)
{
    return state_read(env, agent_id, STATE_READ, out, revision, err);
}

vigil_code vg_state_get_for_write(struct vg_env *env, const char *agent_id, json_t **out,
                                  int64_t *revision, vigil_error *err)
{
    return state_read(env, agent_id, STATE_WRITE, out, revision, err);
}

/* Fields a caller may change, and whether each is a time (RFC 3339 text or null). */
static const struct {
    const char *name;
    int is_time;
} state_fields[] = {
    {"last_wake_at", 1},
    {"next_wake_at", 1},
    {"sleep_until", 1},
    {"recent_head_message_id", 0},
    {"latest_summary_message_id", 0},
    {"processed_counter_by_host", 0},
    {"wake_counter", 0},
    {"slots", 0},
};

static vigil_code apply_state_changes(json_t *state, json_t *changes, const char *at,
                                      vigil_error *err)
{
    const char *key;
    json_t *value;
    json_object_foreach (changes, key, value) {
        size_t i;
        for (i = 0; i < VG_ARRAY_LEN(state_fields); i++)
            if (strcmp(key, state_fields[i].name) == 0)
                break;
        if (i == VG_ARRAY_LEN(state_fields))
            return VG_FAIL(err, VIGIL_EINVAL, "unknown state field \"%s\"", key);
        if (state_fields[i].is_time || strstr(key, "_id")) {
            int64_t ms;
            if (!json_is_null(value) && !json_is_string(value))
                return VG_FAIL(err, VIGIL_EINVAL, "state field \"%s\" must be text or null", key);
            if (state_fields[i].is_time && json_is_string(value) &&
                vg_time_parse_ms(json_string_value(value), &ms) != 0)
                return VG_FAIL(err, VIGIL_EINVAL, "state field \"%s\" is not an RFC 3339 time",
                               key);
            if (json_object_set(state, key, value))
                return VG_FAIL(err, VIGIL_ENOMEM, "out of memory updating state");
        } else if (!strcmp(key, "wake_counter")) {
            if (!json_is_integer(value) || json_integer_value(value) < 0)
                return VG_FAIL(err, VIGIL_EINVAL, "wake_counter must be a non-negative integer");
            if (json_object_set(state, key, value))
                return VG_FAIL(err, VIGIL_ENOMEM, "out of memory updating state");
        } else if (!strcmp(key, "processed_counter_by_host")) {
            /* Watermarks only move forward: merge by per-host maximum. */
            json_t *cur = json_object_get(state, key);
            const char *host;
            json_t *n;
            if (!json_is_object(value))
                return VG_FAIL(err, VIGIL_EINVAL, "processed_counter_by_host must be an object");
            json_object_foreach (value, host, n) {
                if (!json_is_integer(n))
                    return VG_FAIL(err, VIGIL_EINVAL, "counter of host \"%s\" is not an integer",
                                   host);
                json_t *old = json_object_get(cur, host);
                if (!old || json_integer_value(old) < json_integer_value(n))
                    if (json_object_set(cur, host, n))
                        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory updating state");
            }
        } else { /* slots: each named slot replaced with its own update stamp */
            json_t *slots = json_object_get(state, "slots");
            const char *slot;
            json_t *v;
            if (!json_is_object(value))
                return VG_FAIL(err, VIGIL_EINVAL, "slots must be an object");
            json_object_foreach (value, slot, v) {
                json_t *entry = json_pack("{s:O, s:s}", "value", v, "updated_at", at);
                if (!entry || json_object_set_new(slots, slot, entry))
                    return VG_FAIL(err, VIGIL_ENOMEM, "out of memory updating state");
            }
        }
    }
    return VIGIL_OK;
}

vigil_code vg_state_update(struct vg_env *env, const char *agent_id, json_t *changes,
                           int64_t expected_revision, int64_t *new_revision, vigil_error *err)
{
    json_t *state = NULL;
    int64_t rev = 0;
    char at[32];
    vigil_code rc;
    if (!json_is_object(changes))
        return VG_FAIL(err, VIGIL_EINVAL, "state changes must be a JSON object");
    if ((rc = vg_store_begin(env->store, err)))
        return rc;
    if ((rc = vg_state_get_for_write(env, agent_id, &state, &rev, err)))
        goto out;
    if (expected_revision != VG_STATE_ANY_REVISION && rev != expected_revision) {
        rc = VG_FAIL(err, VIGIL_ECONFLICT,
                     "state of agent \"%s\" is at revision %lld, not %lld: reread and retry",
                     agent_id, (long long)rev, (long long)expected_revision);
        goto out;
    }
    vg_time_format_ms(at, vg_env_now(env));
    if ((rc = apply_state_changes(state, changes, at, err)))
        goto out;
    if (json_object_set_new(state, "revision", json_integer(rev + 1)) ||
        json_object_set_new(state, "updated_at", json_string(at))) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory updating state");
        goto out;
    }
    const char *state_id = json_string_value(json_object_get(state, "id"));
    rc = vg_env_update_json(env, "agent_state", state_id, agent_id, "", "", 0, state, rev, err);
    if (!rc && json_object_get(changes, "wake_counter"))
        rc = wake_count_set(env, agent_id,
                            json_integer_value(json_object_get(state, "wake_counter")), err);
    if (!rc)
        rc = vg_spine_record_change(env, agent_id, "agent_state", state_id, rev + 1, state, err);
    if (!rc) {
        const char *tokens[] = {VIGIL_TOKEN_AGENT_STATE_CHANGED, agent_id, state_id};
        vg_env_notify(env, tokens, VG_ARRAY_LEN(tokens));
        if (new_revision)
            *new_revision = rev + 1;
    }
out:
    rc = vg_store_end(env->store, rc, err);
    json_decref(state);
    return rc;
}

/* ---- runtime state ------------------------------------------------------------------------- */

vigil_code vg_runtime_state_get(struct vg_env *env, const char *agent_id, json_t **out,
                                int64_t *rev, vigil_error *err)
{
    vigil_code rc = vg_env_get_json(env, "agent_runtime", agent_id, out, rev, err);
    if (rc != VIGIL_ENOTFOUND)
        return rc;
    /* Runtime state is local and holds nothing durable: lost (a crash that took it, a store
     * copied without it), an agent's is made again, idle, and its next wake runs (S3-020). */
    vigil_lifecycle lc;
    vigil_error miss = {0};
    if (vg_agent_lifecycle(env, agent_id, &lc, &miss) != VIGIL_OK)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no agent \"%s\"", agent_id);
    if ((rc = vg_store_begin(env->store, err)))
        return rc;
    rc = vg_store_end(env->store, vg_agent_runtime_put_idle(env, agent_id, err), err);
    return rc ? rc : vg_env_get_json(env, "agent_runtime", agent_id, out, rev, err);
}

/* Merge changes into a runtime state body and stamp it. */
static vigil_code runtime_apply(struct vg_env *env, json_t *rt, json_t *changes, vigil_error *err)
{
    static const char *const fields[] = {"run_status",        "active_run_id",
                                         "active_session_id", "last_run_started_at",
                                         "failure_streak",    "hot_message_count"};
    char at[32];
    const char *key;
    json_t *value;
    json_object_foreach (changes, key, value) {
        size_t i;
        for (i = 0; i < VG_ARRAY_LEN(fields); i++)
            if (!strcmp(key, fields[i]))
                break;
        if (i == VG_ARRAY_LEN(fields))
            return VG_FAIL(err, VIGIL_EINVAL, "unknown runtime state field \"%s\"", key);
        if (json_object_set(rt, key, value))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory updating runtime state");
    }
    vg_time_format_ms(at, vg_env_now(env));
    if (json_object_set_new(rt, "updated_at", json_string(at)))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory updating runtime state");
    return VIGIL_OK;
}

vigil_code vg_runtime_state_update(struct vg_env *env, const char *agent_id, json_t *changes,
                                   vigil_error *err)
{
    json_t *rt = NULL;
    int64_t rev = 0;
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    /* Locked first: a run and an enqueue of the same agent, in two processes, take turns. */
    if (!(rc = vg_store_lock_for_write(env->store, "agent_runtime", agent_id, err)) &&
        !(rc = vg_runtime_state_get(env, agent_id, &rt, &rev, err)) &&
        !(rc = runtime_apply(env, rt, changes, err)))
        /* rt is released below unchanged: the memo may keep it for the next read (the run's
         * start reads what the claim wrote, the next claim what the finish wrote) */
        rc = vg_env_update_json_noted(env, "agent_runtime", agent_id, agent_id, "", "", 0, rt, rev,
                                      err);
    rc = vg_store_end(env->store, rc, err);
    json_decref(rt);
    return rc;
}

vigil_code vg_runtime_state_update_held(struct vg_env *env, const char *agent_id, json_t *held,
                                        int64_t *rev, json_t *changes, vigil_error *err)
{
    vigil_code rc = vg_store_begin(env->store, err);
    if (rc)
        return rc;
    if (!(rc = runtime_apply(env, held, changes, err)))
        rc = vg_env_update_json(env, "agent_runtime", agent_id, agent_id, "", "", 0, held, *rev,
                                err);
    if (!(rc = vg_store_end(env->store, rc, err)))
        (*rev)++;
    return rc;
}
