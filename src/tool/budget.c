/*
 * budget.c: per-agent, per-UTC-day budgets (docs/tools.md): tokens, cost, steps, tool calls
 * and wall time. Limits come from the agent's config.budgets over the defaults below; usage is
 * one budget_usage record per agent and day, updated with compare-and-swap so two writers never
 * lose a charge. Exhaustion is an answer (budget_exceeded), never a failure of the caller.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/jscan.h"
#include "base/json.h"
#include "env/env.h"
#include "tool/tool.h"

static const struct {
    const char *name; /* usage field and config.budgets key */
    int64_t dflt;     /* default daily limit */
} kinds[VG_BUDGET_KIND_COUNT] = {
    [VG_BUDGET_TOKENS] = {"tokens", 2000000},
    [VG_BUDGET_COST] = {"cost_micros", 10000000}, /* $10 */
    [VG_BUDGET_STEPS] = {"steps", 1000},
    [VG_BUDGET_TOOL_CALLS] = {"tool_calls", 1000},
    [VG_BUDGET_WALL_MS] = {"wall_ms", 4 * 3600 * 1000},
};

const char *vg_budget_kind_name(enum vg_budget_kind k)
{
    return (unsigned)k < VG_BUDGET_KIND_COUNT ? kinds[k].name : "?";
}

static void day_of(struct vg_env *env, char day[11])
{
    char at[32];
    vg_time_format_ms(at, vg_env_now(env));
    memcpy(day, at, 10);
    day[10] = '\0';
}

/* The limits an agent record (borrowed) sets. */
static void limits_of(const json_t *agent, int64_t limits[VG_BUDGET_KIND_COUNT])
{
    json_t *b = json_object_get(json_object_get(agent, "config"), "budgets");
    for (int k = 0; k < VG_BUDGET_KIND_COUNT; k++) {
        json_t *v = json_object_get(b, kinds[k].name);
        if (k == VG_BUDGET_COST && !v && json_object_get(b, "cost_usd")) {
            json_t *usd = json_object_get(b, "cost_usd"); /* dollars, the friendly spelling */
            limits[k] = json_is_number(usd) ? (int64_t)(json_number_value(usd) * 1e6)
                        : json_is_null(usd) ? -1
                                            : kinds[k].dflt;
            continue;
        }
        limits[k] = !v                  ? kinds[k].dflt
                    : json_is_null(v)   ? -1
                    : json_is_number(v) ? (int64_t)json_number_value(v)
                                        : kinds[k].dflt;
    }
}

vigil_code vg_budget_limits(struct vg_env *env, const char *agent_id,
                            int64_t limits[VG_BUDGET_KIND_COUNT], vigil_error *err)
{
    json_t *agent = NULL;
    vigil_code rc = vg_agent_get_shared(env, agent_id, &agent, err);
    if (rc)
        return rc;
    limits_of(agent, limits);
    json_decref(agent);
    return VIGIL_OK;
}

/*
 * Today's usage of one agent. The record is read on every model call and every tool call
 * (a check and a charge each), and rewritten at each charge, so its text never repeats and
 * jansson would parse it anew each time: the usual record (the usage fields, the agent and the
 * day, nothing else) is read with the scanner and written as its canonical text directly.
 * Anything else (a record written by hand with more fields) is read with jansson and keeps
 * those fields when charged (body).
 */
struct usage {
    struct vg_env *env;
    int64_t v[VG_BUDGET_KIND_COUNT];
    int64_t rev;  /* 0: no record yet */
    json_t *body; /* the record when it is not the usual one, else NULL */
    int bad;      /* 1: not JSON, 2: out of memory */
};

static int kind_of(const char *key, size_t len)
{
    for (int k = 0; k < VG_BUDGET_KIND_COUNT; k++)
        if (vg_jscan_key_is(key, len, kinds[k].name))
            return k;
    return -1;
}

/* 0 when the text is the usual record, its fields in v; -1 otherwise. */
static int scan_usage(const char *text, int64_t v[VG_BUDGET_KIND_COUNT])
{
    struct vg_jscan s;
    const char *key;
    size_t len;
    unsigned seen = 0;
    int r, k;
    vg_jscan_init(&s, text, strlen(text));
    if (vg_jscan_enter(&s, '{') < 0)
        return -1;
    while ((r = vg_jscan_next(&s, &key, &len)) == 1) {
        if ((k = kind_of(key, len)) >= 0) {
            if (seen & (1u << k) || vg_jscan_int(&s, &v[k]) < 0)
                return -1;
            seen |= 1u << k;
        } else if ((vg_jscan_key_is(key, len, "agent_id") || vg_jscan_key_is(key, len, "day")) &&
                   vg_jscan_peek(&s) == '"') {
            if (vg_jscan_skip(&s) < 0)
                return -1;
        } else {
            return -1;
        }
    }
    return r < 0 || vg_jscan_end(&s) < 0 || seen != (1u << VG_BUDGET_KIND_COUNT) - 1 ? -1 : 0;
}

static int usage_cb(void *user, const struct vg_record *r)
{
    struct usage *u = user;
    u->rev = r->rev;
    if (scan_usage(r->body, u->v) == 0)
        return 1;
    vigil_code rc = vg_env_parse_json(u->env, r->body, &u->body);
    if (rc || !json_is_object(u->body)) {
        u->bad = rc == VIGIL_ENOMEM ? 2 : 1;
        return 1;
    }
    for (int k = 0; k < VG_BUDGET_KIND_COUNT; k++)
        u->v[k] = json_integer_value(json_object_get(u->body, kinds[k].name));
    return 1;
}

static vigil_code load(struct vg_env *env, const char *agent_id, const char *day, char id[300],
                       struct usage *u, vigil_error *err)
{
    *u = (struct usage){.env = env};
    snprintf(id, 300, "%s:%s", agent_id, day);
    vigil_error miss = {0};
    vigil_code rc = vg_error_unless_missing(
        err, &miss, vg_store_get(env->store, "budget_usage", id, usage_cb, u, &miss));
    if (rc == VIGIL_ENOTFOUND)
        return VIGIL_OK; /* nothing used today */
    if (!rc && u->bad) {
        json_decref(u->body);
        u->body = NULL;
        rc = u->bad == 2
                 ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a budget")
                 : VG_FAIL(err, VIGIL_ECORRUPT, "budget_usage \"%s\" is not a JSON object", id);
    }
    return rc;
}

/* The usage as a JSON object of its own (the caller's). */
static json_t *usage_json(const struct usage *u, const char *agent_id, const char *day)
{
    if (u->body)
        return json_incref(u->body);
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "agent_id", agent_id, "day", day,
                     "tokens", (json_int_t)u->v[VG_BUDGET_TOKENS], "cost_micros",
                     (json_int_t)u->v[VG_BUDGET_COST], "steps", (json_int_t)u->v[VG_BUDGET_STEPS],
                     "tool_calls", (json_int_t)u->v[VG_BUDGET_TOOL_CALLS], "wall_ms",
                     (json_int_t)u->v[VG_BUDGET_WALL_MS]);
}

/* The usual record's canonical text (keys sorted), what vg_env_put_json would write. */
static void usage_text(struct vg_buf *b, const struct usage *u, const char *agent_id,
                       const char *day)
{
    static const struct {
        const char *key;
        int kind; /* -1: agent_id, -2: day */
    } order[] = {{"agent_id", -1},
                 {"cost_micros", VG_BUDGET_COST},
                 {"day", -2},
                 {"steps", VG_BUDGET_STEPS},
                 {"tokens", VG_BUDGET_TOKENS},
                 {"tool_calls", VG_BUDGET_TOOL_CALLS},
                 {"wall_ms", VG_BUDGET_WALL_MS}};
    vg_buf_putc(b, '{');
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        vg_json_put_key(b, order[i].key, i == 0);
        if (order[i].kind >= 0)
            vg_json_put_int(b, u->v[order[i].kind]);
        else
            vg_json_put_string(b, order[i].kind == -1 ? agent_id : day);
    }
    vg_buf_putc(b, '}');
}

/* Write the charged usage, compare-and-swap on the revision read. */
static vigil_code usage_write(struct vg_env *env, const char *agent_id, const char *day,
                              const char *id, struct usage *u, vigil_error *err)
{
    if (u->body) {
        for (int k = 0; k < VG_BUDGET_KIND_COUNT; k++)
            json_object_set_new(u->body, kinds[k].name, json_integer(u->v[k]));
        return u->rev == 0
                   ? vg_env_put_json(env, "budget_usage", id, agent_id, day, "", 0, u->body, 0, err)
                   : vg_env_update_json(env, "budget_usage", id, agent_id, day, "", 0, u->body,
                                        u->rev, err);
    }
    struct vg_buf b;
    vg_buf_init(&b, 4096);
    usage_text(&b, u, agent_id, day);
    vigil_code rc = b.fail        ? VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a budget")
                    : u->rev == 0 ? vg_env_put_text(env, "budget_usage", id, agent_id, day, "", 0,
                                                    b.data, 0, err)
                                  : vg_env_update_text(env, "budget_usage", id, agent_id, day, "",
                                                       0, b.data, u->rev, err);
    vg_buf_release(&b);
    return rc;
}

vigil_code vg_budget_usage(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err)
{
    char id[300], day[11];
    int64_t lim[VG_BUDGET_KIND_COUNT];
    struct usage u;
    json_t *body = NULL, *l = json_object();
    day_of(env, day);
    vigil_code rc = vg_budget_limits(env, agent_id, lim, err);
    if (!rc && !(rc = load(env, agent_id, day, id, &u, err))) {
        body = usage_json(&u, agent_id, day);
        json_decref(u.body);
        if (!body)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a budget");
    }
    for (int k = 0; !rc && k < VG_BUDGET_KIND_COUNT; k++)
        json_object_set_new(l, kinds[k].name, lim[k] < 0 ? json_null() : json_integer(lim[k]));
    if (!rc && json_object_set(body, "limits", l))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a budget");
    json_decref(l);
    if (rc) {
        json_decref(body);
        return rc;
    }
    *out = body;
    return VIGIL_OK;
}

vigil_code vg_budget_check_agent(struct vg_env *env, const char *agent_id, const json_t *agent,
                                 const struct vg_budget_charge *pending, const char **exceeded,
                                 vigil_error *err)
{
    char id[300], day[11];
    int64_t lim[VG_BUDGET_KIND_COUNT];
    struct usage u;
    day_of(env, day);
    limits_of(agent, lim);
    vigil_code rc = load(env, agent_id, day, id, &u, err);
    if (rc)
        return rc;
    *exceeded = NULL;
    for (int k = 0; pending && k < VG_BUDGET_KIND_COUNT; k++)
        u.v[k] += pending->v[k];
    for (int k = 0; k < VG_BUDGET_KIND_COUNT && !*exceeded; k++)
        if (lim[k] >= 0 && u.v[k] >= lim[k])
            *exceeded = kinds[k].name;
    json_decref(u.body);
    return VIGIL_OK;
}

vigil_code vg_budget_check(struct vg_env *env, const char *agent_id, const char **exceeded,
                           vigil_error *err)
{
    json_t *agent = NULL;
    vigil_code rc = vg_agent_get_shared(env, agent_id, &agent, err);
    if (!rc)
        rc = vg_budget_check_agent(env, agent_id, agent, NULL, exceeded, err);
    json_decref(agent);
    return rc;
}

vigil_code vg_budget_charge(struct vg_env *env, const char *agent_id,
                            const struct vg_budget_charge *c, vigil_error *err)
{
    vigil_code rc = VIGIL_ECONFLICT;
    char day[11];
    day_of(env, day);
    for (int attempt = 0; attempt < 16 && rc == VIGIL_ECONFLICT; attempt++) {
        char id[300];
        struct usage u;
        vigil_error e2 = {0};
        if ((rc = load(env, agent_id, day, id, &u, err)))
            return rc;
        for (int k = 0; k < VG_BUDGET_KIND_COUNT; k++)
            u.v[k] += c->v[k];
        rc = usage_write(env, agent_id, day, id, &u, &e2);
        json_decref(u.body);
        if (rc == VIGIL_EEXISTS)
            rc = VIGIL_ECONFLICT; /* another writer created it first: read again */
        if (rc && rc != VIGIL_ECONFLICT)
            vg_error_copy(err, &e2);
    }
    if (rc == VIGIL_ECONFLICT)
        return VG_FAIL(err, VIGIL_ECONFLICT, "budget of agent \"%s\" kept changing under us",
                       agent_id);
    return rc;
}
