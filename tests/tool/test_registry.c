/*
 * test_registry.c: the contract file (validated against its JSON Schema and parsed), parity
 * between the registry and the file field by field, contract parsing errors, and per-agent
 * resolution by names, globs and capabilities.
 */
#include "tool/tool_helpers.h"

#include "os/fs.h"
#include "tool/schema.h"

static json_t *load_doc(const char *rel)
{
    char path[4096], *text = NULL;
    size_t len = 0;
    json_error_t je;
    snprintf(path, sizeof path, "%s/%s", VIGIL_SOURCE_DIR, rel);
    ASSERT_OK(vg_fs_read_file(path, 1 << 20, &text, &len, E));
    json_t *v = json_loads(text, 0, &je);
    if (!v)
        TEST_FAIL_("%s: %s at line %d", rel, je.text, je.line);
    vg_free(text);
    return v;
}

/* proves: S0-051 S0-052 */
TEST(contract_file_validates_against_its_schema)
{
    json_t *file = load_doc("docs/agent_tools/tool_contracts.json");
    json_t *schema = load_doc("docs/agent_tools/tool_contracts.schema.json");
    struct vg_schema *s = NULL;
    ASSERT_OK(vg_schema_compile(schema, &s, E));
    ASSERT_OK(vg_schema_validate(s, file, NULL, E));
    ASSERT_OK(vg_tool_contracts_check(file, E));
    /* the schema has teeth: a risk outside the enum and a missing field are refused */
    json_t *bad = json_deep_copy(file);
    json_t *t0 = json_array_get(json_object_get(bad, "tools"), 0);
    json_object_set_new(t0, "risk", json_string("extreme"));
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_schema_validate(s, bad, NULL, &err));
    ASSERT_CODE(VIGIL_EINVAL, vg_tool_contracts_check(bad, &err));
    json_object_set_new(t0, "risk", json_string("low"));
    json_object_del(t0, "idempotency");
    ASSERT_CODE(VIGIL_EINVAL, vg_schema_validate(s, bad, NULL, &err));
    /* duplicate names */
    json_array_append(json_object_get(bad, "tools"),
                      json_array_get(json_object_get(file, "tools"), 1));
    ASSERT_CODE(VIGIL_EEXISTS, vg_tool_contracts_check(bad, &err));
    json_decref(bad);
    vg_schema_free(s);
    json_decref(schema);
    json_decref(file);
}

/* Differences between a registry listing and a contract file, one line each into buf. */
static int parity_diff(json_t *registry, json_t *file_tools, struct vg_buf *buf)
{
    int diffs = 0;
    size_t i;
    json_t *r, *f;
    json_array_foreach (registry, i, r) {
        const char *name = json_string_value(json_object_get(r, "name"));
        json_t *match = NULL;
        size_t j;
        json_array_foreach (file_tools, j, f)
            if (!strcmp(json_string_value(json_object_get(f, "name")), name))
                match = f;
        if (!match) {
            vg_buf_printf(buf, "%s: in the registry, not in the file\n", name);
            diffs++;
            continue;
        }
        struct vg_tool_def *d = NULL;
        ASSERT_OK(vg_tool_def_parse(match, &d, E)); /* normalized like the registry */
        const char *k;
        json_t *v;
        json_object_foreach (r, k, v)
            if (!json_equal(v, json_object_get(d->contract, k))) {
                vg_buf_printf(buf, "%s: field %s differs\n", name, k);
                diffs++;
            }
        json_object_foreach (d->contract, k, v)
            if (!json_object_get(r, k)) {
                vg_buf_printf(buf, "%s: field %s only in the file\n", name, k);
                diffs++;
            }
        vg_tool_def_free(d);
    }
    json_array_foreach (file_tools, i, f) {
        const char *name = json_string_value(json_object_get(f, "name"));
        int found = 0;
        size_t j;
        json_array_foreach (registry, j, r)
            found |= !strcmp(json_string_value(json_object_get(r, "name")), name);
        if (!found) {
            vg_buf_printf(buf, "%s: in the file, not in the registry\n", name);
            diffs++;
        }
    }
    return diffs;
}

/* proves: S0-053 */
TEST(registry_and_contract_file_are_one_to_one)
{
    struct test_rt t;
    struct vg_buf buf;
    json_t *reg = NULL;
    test_rt_open(&t, "tool_parity");
    ASSERT_OK(vg_tool_executor_contracts(executor(&t), &reg, E));
    json_t *file = load_doc("docs/agent_tools/tool_contracts.json");
    json_t *tools = json_object_get(file, "tools");
    vg_buf_init(&buf, 1 << 16);
    int n = parity_diff(reg, tools, &buf);
    if (n)
        TEST_FAIL_("registry and contract file differ:\n%s", buf.data);
    ASSERT_EQ(json_array_size(reg),
              11); /* 2 built-ins + 2 orchestrator + 6 memory tools + execute_code */
    /* the check catches a changed risk, a missing tool and an extra tool */
    json_t *changed = json_deep_copy(tools);
    json_object_set_new(json_array_get(changed, 0), "risk", json_string("high"));
    vg_buf_reset(&buf);
    ASSERT_EQ(parity_diff(reg, changed, &buf), 1);
    ASSERT_CONTAINS(buf.data, "field risk differs");
    json_array_remove(changed, 0);
    vg_buf_reset(&buf);
    ASSERT(parity_diff(reg, changed, &buf) >= 1);
    ASSERT_CONTAINS(buf.data, "in the registry, not in the file");
    json_decref(changed);
    vg_buf_release(&buf);
    json_decref(file);
    json_decref(reg);
    test_rt_close(&t);
}

TEST(bad_contracts_are_refused_with_the_field)
{
    static const char *const bad[][2] = {
        {"{\"description\":\"x\"}", "no valid name"},
        {"{\"name\":\"Bad Name\",\"description\":\"x\"}", "no valid name"},
        {"{\"name\":\"t\"}", "needs a description"},
        {"{\"name\":\"t\",\"description\":\"x\",\"risk\":\"huge\"}", "risk"},
        {"{\"name\":\"t\",\"description\":\"x\",\"colour\":1}", "unknown contract field"},
        {"{\"name\":\"t\",\"description\":\"x\",\"scope\":{\"rule\":\"target\"}}",
         "scope.arguments"},
        {"{\"name\":\"t\",\"description\":\"x\",\"allowed_wake_reasons\":[\"whenever\"]}",
         "unknown wake reason"},
        {"{\"name\":\"t\",\"description\":\"x\",\"mutating\":\"yes\"}", "booleans"},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(bad); i++) {
        json_t *c = json_loads(bad[i][0], 0, NULL);
        struct vg_tool_def *d = NULL;
        vigil_error err = {0};
        ASSERT(c);
        ASSERT_CODE(VIGIL_EINVAL, vg_tool_def_parse(c, &d, &err));
        ASSERT_CONTAINS(err.message, bad[i][1]);
        json_decref(c);
    }
    /* defaults: a high-risk tool needs approval; mutating and non-idempotent unless said */
    json_t *c = json_pack("{s:s, s:s, s:s}", "name", "t", "description", "x", "risk", "high");
    struct vg_tool_def *d = NULL;
    ASSERT_OK(vg_tool_def_parse(c, &d, E));
    ASSERT_EQ(d->requires_approval, 1);
    ASSERT_EQ(d->mutating, 1);
    ASSERT_EQ(d->idem, VG_IDEM_NON_IDEMPOTENT);
    ASSERT_EQ(d->scope_rule, VG_SCOPE_UNSCOPED);
    vg_tool_def_free(d);
    json_decref(c);
}

static vigil_code noop_tool(void *user, const vigil_tool_call_info *call, const char *args,
                            char **out, vigil_error *err)
{
    return VIGIL_OK;
}

static int has_tool(json_t *list, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (list, i, v)
        if (!strcmp(json_string_value(json_object_get(v, "name")), name))
            return 1;
    return 0;
}

/* proves: S0-047 S2-003 S2-004 */
TEST(agents_see_only_tools_their_manifest_and_capabilities_allow)
{
    struct test_rt t;
    char a[37], b[37], c[37], d[37];
    json_t *v = NULL;
    test_rt_open(&t, "tool_resolution");
    host_reset();
    register_host_tools(t.rt);
    /* glob: host_* with only the read capability: host_write needs taskWrite */
    make_agent(&t, "{\"tools\":[\"host_*\"],\"capabilities\":[\"taskRead\"]}", a);
    ASSERT_OK(vg_tool_executor_visible_tools(executor(&t), a, NULL, &v, E));
    ASSERT(has_tool(v, "host_read"));
    ASSERT(has_tool(v, "host_sync"));
    ASSERT(!has_tool(v, "host_write"));
    ASSERT(!has_tool(v, "set_report"));
    /* what the model gets: name, description, input schema, sorted */
    json_t *first = json_array_get(v, 0);
    ASSERT_EQ(json_object_size(first), 3);
    ASSERT(json_is_object(json_object_get(first, "input_schema")));
    ASSERT(strcmp(json_string_value(json_object_get(first, "name")),
                  json_string_value(json_object_get(json_array_get(v, 1), "name"))) < 0);
    json_decref(v);
    /* exact names */
    make_agent(&t, "{\"tools\":[\"set_report\",\"host_read\"],\"capabilities\":[\"taskRead\"]}", b);
    ASSERT_OK(vg_tool_executor_visible_tools(executor(&t), b, NULL, &v, E));
    ASSERT_EQ(json_array_size(v), 2);
    json_decref(v);
    /* no manifest tools: nothing */
    make_agent(&t, "{}", c);
    ASSERT_OK(vg_tool_executor_visible_tools(executor(&t), c, NULL, &v, E));
    ASSERT_EQ(json_array_size(v), 0);
    json_decref(v);
    /* a read-only allowlist never reaches a write tool */
    make_agent(&t, "{\"tools\":[\"*_read\"],\"capabilities\":[\"taskRead\",\"taskWrite\"]}", d);
    int may = 1;
    ASSERT_OK(vg_tool_agent_may_call(executor(&t), d, "host_write", &may, E));
    ASSERT_EQ(may, 0);
    ASSERT_OK(vg_tool_agent_may_call(executor(&t), d, "host_read", &may, E));
    ASSERT_EQ(may, 1);
    /* a second registration of a name is refused */
    vigil_tool_def dup = {.name = "host_read", .description = "again"};
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EEXISTS, vigil_tool_register(t.rt, &dup, noop_tool, NULL, &err));
    test_rt_close(&t);
}

TEST(error_code_table_is_complete)
{
    for (int c = 1; c < VG_TOOL_CODE_COUNT; c++) {
        enum vg_tool_code back = VG_TOOL_OK;
        ASSERT(*vg_tool_code_name((enum vg_tool_code)c));
        ASSERT(vg_tool_code_parse(vg_tool_code_name((enum vg_tool_code)c), &back));
        ASSERT_EQ(back, c);
        ASSERT_NE(vg_tool_code_vigil((enum vg_tool_code)c), VIGIL_OK);
    }
    ASSERT_STREQ(vg_tool_code_name(VG_TOOL_FAILED), "tool_failed");
    ASSERT_EQ(vg_tool_code_vigil(VG_TOOL_KILLED), VIGIL_EKILLED);
    ASSERT_EQ(vg_tool_code_vigil(VG_TOOL_BUDGET_EXCEEDED), VIGIL_EBUDGET);
    ASSERT_EQ(vg_tool_code_vigil(VG_TOOL_CONFIRMATION_REQUIRED), VIGIL_ECONFIRM);
}

int main(void)
{
    RUN(contract_file_validates_against_its_schema);
    RUN(registry_and_contract_file_are_one_to_one);
    RUN(bad_contracts_are_refused_with_the_field);
    RUN(agents_see_only_tools_their_manifest_and_capabilities_allow);
    RUN(error_code_table_is_complete);
    return 0;
}
