/*
 * budget.c: per-agent, per-UTC-day budgets (docs/tools.md): tokens, cost, steps, tool calls
 * and wall time. Limits come from the agent's config.budgets over the defaults below; usage is
 * one budget_usage record per agent and day, updated with compare-and-swap so two writers never
 * lose a charge. Exhaustion is an answer (budget_exceeded), never a failure of the caller.
 */
#include "base/common.h"

#include "agent/agent.h"
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

vigil_code vg_budget_limits(struct vg_env *env, const char *agent_id,
                            int64_t limits[VG_BUDGET_KIND_COUNT], vigil_error *err)
{
    json_t *agent = NULL;
    vigil_code rc = vg_agent_get_shared(env, agent_id, &agent, err);
    if (rc)
        return rc;
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
    json_decref(agent);
    return VIGIL_OK;
}

static vigil_code load(struct vg_env *env, const char *agent_id, char id[300], json_t **body,
                       int64_t *rev, vigil_error *err)
{
    char day[11];
    day_of(env, day);
    snprintf(id, 300, "%s:%s", agent_id, day);
    vigil_code rc = vg_env_get_json(env, "budget_usage", id, body, rev, err);
    if (rc == VIGIL_ENOTFOUND) {
        *rev = 0;
        *body = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "agent_id", agent_id, "day", day,
                          "tokens", (json_int_t)0, "cost_micros", (json_int_t)0, "steps",
                          (json_int_t)0, "tool_calls", (json_int_t)0, "wall_ms", (json_int_t)0);
        rc = *body ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading a budget");
    }
    return rc;
}

vigil_code vg_budget_usage(struct vg_env *env, const char *agent_id, json_t **out, vigil_error *err)
{
    char id[300];
    int64_t rev, lim[VG_BUDGET_KIND_COUNT];
    json_t *body = NULL, *l = json_object();
    vigil_code rc = vg_budget_limits(env, agent_id, lim, err);
    if (!rc)
        rc = load(env, agent_id, id, &body, &rev, err);
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

vigil_code vg_budget_check(struct vg_env *env, const char *agent_id, const char **exceeded,
                           vigil_error *err)
{
    char id[300];
    int64_t rev, lim[VG_BUDGET_KIND_COUNT];
    json_t *body = NULL;
    vigil_code rc = vg_budget_limits(env, agent_id, lim, err);
    if (!rc)
        rc = load(env, agent_id, id, &body, &rev, err);
    if (rc)
        return rc;
    *exceeded = NULL;
    for (int k = 0; k < VG_BUDGET_KIND_COUNT && !*exceeded; k++)
        if (lim[k] >= 0 && json_integer_value(json_object_get(body, kinds[k].name)) >= lim[k])
            *exceeded = kinds[k].name;
    json_decref(body);
    return VIGIL_OK;
}

vigil_code vg_budget_charge(struct vg_env *env, const char *agent_id,
                            const struct vg_budget_charge *c, vigil_error *err)
{
    vigil_code rc = VIGIL_ECONFLICT;
    char day[11];
    day_of(env, day);
    for (int attempt = 0; attempt < 16 && rc == VIGIL_ECONFLICT; attempt++) {
        char id[300];
        int64_t rev = 0;
        json_t *body = NULL;
        vigil_error e2 = {0};
        if ((rc = load(env, agent_id, id, &body, &rev, err)))
            return rc;
        for (int k = 0; k < VG_BUDGET_KIND_COUNT; k++) {
            json_int_t now = json_integer_value(json_object_get(body, kinds[k].name));
            json_object_set_new(body, kinds[k].name, json_integer(now + c->v[k]));
        }
        if (rev == 0)
            rc = vg_env_put_json(env, "budget_usage", id, agent_id, day, "", 0, body, 0, &e2);
        else
            rc = vg_env_update_json(env, "budget_usage", id, agent_id, day, "", 0, body, rev, &e2);
        json_decref(body);
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
