/*
 * test_mcp_contract.c: the parts of the MCP client that need no server: the message reader on
 * the byte-exact captures of the reference servers (tests/fixtures/mcp, from ../shared), tool
 * names, contracts from annotations and config overrides, the schema dialect rule, results
 * as the model reads them, and the mcp_servers config section.
 */
#include "helpers/test.h"

#include "mcp/mcp.h"
#include "mcp/proc.h"
#include "os/fs.h"
#include "tool/tool.h"

static json_t *fixture_tools(void)
{
    json_error_t je;
    json_t *f =
        json_load_file(VIGIL_SOURCE_DIR "/tests/fixtures/mcp/everything_tools_list.json", 0, &je);
    ASSERT(f);
    json_t *t = json_incref(json_object_get(f, "tools"));
    json_decref(f);
    return t;
}

static json_t *tool_named(json_t *tools, const char *name)
{
    size_t i;
    json_t *t;
    json_array_foreach (tools, i, t)
        if (!strcmp(json_string_value(json_object_get(t, "name")), name))
            return t;
    TEST_FAIL_("no tool %s in the fixture", name);
}

/* Every line of every capture: what servers sent reads as a valid message; what clients sent
 * too, but for the one malformed request of 01 (cut off mid-object). */
TEST(the_message_reader_reads_every_capture)
{
    static const char *const files[] = {
        "01_everything_minimal_client", "02_everything_full_client_caps",
        "03_everything_preinit_and_version_fallback", "04_everything_old_protocol_version",
        "05_sdk_server_pagination_cancel_listchanged"};
    int invalid = 0, server_requests = 0, lines = 0;
    for (size_t f = 0; f < VG_ARRAY_LEN(files); f++) {
        char path[512], *text = NULL, *save = NULL;
        size_t len = 0;
        vigil_error err = {0};
        snprintf(path, sizeof path, "%s/tests/fixtures/mcp/%s.transcript", VIGIL_SOURCE_DIR,
                 files[f]);
        ASSERT_EQ(vg_fs_read_file(path, 1 << 20, &text, &len, &err), VIGIL_OK);
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            struct vg_mcp_msg m;
            enum vg_mcp_msg_kind k = vg_mcp_msg_parse(line + 3, strlen(line + 3), &m);
            lines++;
            if (k == VG_MCP_INVALID) {
                invalid++;
                ASSERT(!strncmp(line, "-> ", 3)); /* ours, never the server's */
            }
            if (k == VG_MCP_REQUEST && !strncmp(line, "<- ", 3)) {
                server_requests++;
                ASSERT(json_is_integer(m.id) || json_is_string(m.id));
            }
            vg_mcp_msg_release(&m);
        }
        vg_free(text);
    }
    ASSERT(lines > 150);
    ASSERT_EQ(invalid, 1);
    ASSERT(server_requests >= 3); /* roots/list, ping with id 0, elicitation */
}

TEST(the_message_reader_refuses_what_is_not_json_rpc)
{
    static const char *const bad[] = {
        "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]",     /* a batch */
        "{\"id\":1,\"result\":{}}",                           /* no jsonrpc */
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"x\"}", /* null request id */
        "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"result\":{}}",     /* real id */
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{\"code\":1,\"message\":\"m\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"x\",\"message\":\"m\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1}",                      /* neither */
        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":3}", /* params not structured */
        "not json at all",
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(bad); i++) {
        struct vg_mcp_msg m;
        if (vg_mcp_msg_parse(bad[i], strlen(bad[i]), &m) != VG_MCP_INVALID)
            TEST_FAIL_("read as valid: %s", bad[i]);
        ASSERT(m.why[0]);
        vg_mcp_msg_release(&m);
    }
    /* Member order is free; an error may carry id null; ids keep their type. */
    struct vg_mcp_msg m;
    const char *ok = "{\"error\":{\"code\":-32700,\"message\":\"Parse error\"},\"id\":null,"
                     "\"jsonrpc\":\"2.0\"}";
    ASSERT_EQ(vg_mcp_msg_parse(ok, strlen(ok), &m), VG_MCP_RESPONSE);
    vg_mcp_msg_release(&m);
    ok = "{\"jsonrpc\":\"2.0\",\"id\":\"0\",\"method\":\"ping\"}";
    ASSERT_EQ(vg_mcp_msg_parse(ok, strlen(ok), &m), VG_MCP_REQUEST);
    ASSERT(json_is_string(m.id));
    vg_mcp_msg_release(&m);
}

TEST(tool_names_are_server__tool_in_vigils_alphabet)
{
    char out[80];
    ASSERT_EQ(vg_mcp_tool_name("everything", "get-sum", out, sizeof out), 0);
    ASSERT_STREQ(out, "everything__get_sum");
    ASSERT_EQ(vg_mcp_tool_name("fs", "Read File.v2", out, sizeof out), 0);
    ASSERT_STREQ(out, "fs__read_file.v2");
    char longname[70];
    memset(longname, 'a', 63);
    longname[63] = '\0';
    ASSERT_EQ(vg_mcp_tool_name("fs", longname, out, sizeof out), -1);
}

static json_t *contract(json_t *tool, const char *overrides)
{
    json_t *ov = overrides ? json_loads(overrides, 0, NULL) : NULL, *c = NULL;
    vigil_error err = {0};
    if (vg_mcp_tool_contract("everything", tool, ov, &c, &err))
        TEST_FAIL_("%s", err.message);
    json_decref(ov);
    /* Whatever the contract is, the executor's own parser accepts it. */
    struct vg_tool_def *d = NULL;
    if (vg_tool_def_parse(c, &d, &err))
        TEST_FAIL_("the contract does not parse: %s", err.message);
    vg_tool_def_free(d);
    return c;
}

#define FIELD(c, k) json_string_value(json_object_get((c), (k)))

TEST(contracts_come_from_annotations_and_overrides)
{
    json_t *tools = fixture_tools();
    json_t *c = contract(tool_named(tools, "echo"), NULL); /* readOnly, idempotent */
    ASSERT_STREQ(FIELD(c, "name"), "everything__echo");
    ASSERT(json_is_false(json_object_get(c, "mutating")));
    ASSERT_STREQ(FIELD(c, "risk"), "low");
    ASSERT_STREQ(FIELD(c, "idempotency"), "idempotent");
    ASSERT_STREQ(FIELD(c, "tool_class"), "mcp");
    ASSERT(!json_object_get(json_object_get(c, "input_schema"), "$schema"));
    json_decref(c);
    c = contract(tool_named(tools, "toggle-simulated-logging"), NULL); /* all hints false */
    ASSERT(json_is_true(json_object_get(c, "mutating")));
    ASSERT_STREQ(FIELD(c, "risk"), "medium");
    ASSERT_STREQ(FIELD(c, "idempotency"), "non_idempotent");
    json_decref(c);
    /* No annotations: mutating, non-idempotent, medium. destructiveHint: high (approval). */
    json_t *bare = json_pack("{s:s, s:{s:s}}", "name", "wipe", "inputSchema", "type", "object");
    c = contract(bare, NULL);
    ASSERT(json_is_true(json_object_get(c, "mutating")));
    ASSERT_STREQ(FIELD(c, "risk"), "medium");
    ASSERT_STREQ(FIELD(c, "idempotency"), "non_idempotent");
    ASSERT_STREQ(FIELD(c, "description"), "wipe");
    json_decref(c);
    json_object_set_new(bare, "annotations", json_pack("{s:b}", "destructiveHint", 1));
    c = contract(bare, NULL);
    ASSERT_STREQ(FIELD(c, "risk"), "high");
    struct vg_tool_def *d = NULL;
    vigil_error err = {0};
    ASSERT_EQ(vg_tool_def_parse(c, &d, &err), VIGIL_OK);
    ASSERT(d->requires_approval);
    vg_tool_def_free(d);
    json_decref(c);
    /* A person's override wins over the server's hints. */
    c = contract(bare, "{\"risk\": \"low\", \"mutating\": false, \"idempotent\": true}");
    ASSERT_STREQ(FIELD(c, "risk"), "low");
    ASSERT(json_is_false(json_object_get(c, "mutating")));
    ASSERT_STREQ(FIELD(c, "idempotency"), "idempotent");
    json_decref(c);
    json_decref(bare);
    json_decref(tools);
}

TEST(every_everything_tool_but_the_task_only_one_is_served)
{
    json_t *tools = fixture_tools(), *t, *c;
    size_t i;
    int served = 0;
    vigil_error err = {0};
    json_array_foreach (tools, i, t) {
        c = NULL;
        vigil_code rc = vg_mcp_tool_contract("everything", t, NULL, &c, &err);
        if (!strcmp(FIELD(t, "name"), "simulate-research-query")) {
            ASSERT_EQ(rc, VIGIL_EUNSUPPORTED);
            ASSERT(strstr(err.message, "task"));
        } else {
            ASSERT_EQ(rc, VIGIL_OK);
            json_decref(contract(t, NULL));
            served++;
        }
        json_decref(c);
    }
    ASSERT_EQ(served, 16); /* the capture holds the 4 tools of a client with every capability */
    json_decref(tools);
}

static int dialect_ok(const char *schema)
{
    char why[160] = "";
    json_t *s = json_loads(schema, 0, NULL);
    ASSERT(s);
    int r = vg_mcp_schema_dialect_ok(s, why, sizeof why);
    ASSERT(r == 0 || why[0]);
    json_decref(s);
    return r == 0;
}

TEST(schemas_draft_7_cannot_honour_are_refused)
{
    /* No $schema: 2020-12. Keywords draft 7 would ignore are refused wherever they nest. */
    ASSERT(!dialect_ok("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"}]}"));
    ASSERT(!dialect_ok("{\"properties\":{\"a\":{\"unevaluatedProperties\":false}}}"));
    ASSERT(!dialect_ok("{\"$defs\":{\"x\":{}},\"$ref\":\"#/$defs/x\"}"));
    ASSERT(!dialect_ok("{\"anyOf\":[{\"dependentRequired\":{\"a\":[\"b\"]}}]}"));
    ASSERT(!dialect_ok("{\"items\":[{\"type\":\"string\"}]}"));
    ASSERT(!dialect_ok("{\"properties\":{\"a\":{\"$ref\":\"#/definitions/a\","
                       "\"maxLength\":3}},\"definitions\":{\"a\":{}}}"));
    ASSERT(!dialect_ok("{\"$schema\":\"https://example.com/my-dialect\"}"));
    /* What reads the same in both dialects, and names that only look like keywords. */
    ASSERT(dialect_ok("{\"type\":\"object\",\"properties\":{\"prefixItems\":{\"type\":"
                      "\"string\"}},\"required\":[\"prefixItems\"]}"));
    ASSERT(dialect_ok("{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
                      "\"type\":\"object\",\"additionalProperties\":false}"));
    /* A draft-07 schema is draft 7, whatever keywords it carries. */
    ASSERT(dialect_ok("{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
                      "\"$defs\":{}}"));
    json_t *t = json_pack("{s:s, s:{s:s, s:[{s:s}]}}", "name", "t", "inputSchema", "type", "array",
                          "prefixItems", "type", "string");
    json_t *c = NULL;
    vigil_error err = {0};
    ASSERT_EQ(vg_mcp_tool_contract("srv", t, NULL, &c, &err), VIGIL_EUNSUPPORTED);
    ASSERT(strstr(err.message, "prefixItems"));
    ASSERT(strstr(err.message, "srv__t"));
    json_decref(t);
}

TEST(results_are_read_as_text)
{
    const char *r =
        "{\"content\":["
        "{\"type\":\"text\",\"text\":\"hello\"},"
        "{\"type\":\"image\",\"data\":\"AAAA\",\"mimeType\":\"image/png\"},"
        "{\"type\":\"resource_link\",\"uri\":\"demo://r/1\",\"name\":\"r1\","
        "\"mimeType\":\"text/plain\"},"
        "{\"type\":\"resource\",\"resource\":{\"uri\":\"demo://r/2\",\"text\":\"inside\"}},"
        "{\"type\":\"resource\",\"resource\":{\"uri\":\"demo://r/3\",\"mimeType\":"
        "\"application/gzip\",\"blob\":\"AAAAAAAA\"}},"
        "{\"type\":\"hologram\"}],"
        "\"structuredContent\":{\"t\":1}}";
    json_t *res = json_loads(r, 0, NULL);
    json_t *m = vg_mcp_result_for_model(res, 1 << 20);
    ASSERT_STREQ(FIELD(m, "text"), "hello\n[image: image/png, 3 bytes]\n"
                                   "[resource link: r1 <demo://r/1> text/plain]\n"
                                   "[resource <demo://r/2>]\ninside\n"
                                   "[resource <demo://r/3>: application/gzip, 6 bytes]");
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(m, "structured"), "t")), 1);
    json_decref(m);
    /* Capped. */
    m = vg_mcp_result_for_model(res, 3);
    ASSERT(!strncmp(FIELD(m, "text"), "hel\n[... ", 9));
    json_decref(m);
    json_decref(res);
}

TEST(the_config_section_is_checked)
{
    static const char *const bad[] = {
        "{\"Bad\": {\"command\": [\"x\"]}}",
        "{\"a__b\": {\"command\": [\"x\"]}}",
        "{\"s\": {\"command\": []}}",
        "{\"s\": {\"command\": [\"x\"], \"url\": \"http://x\"}}",
        "{\"s\": {}}",
        "{\"s\": {\"command\": [\"x\"], \"colour\": 1}}",
        "{\"s\": {\"command\": [\"x\"], \"env\": {\"A\": 1}}}",
        "{\"s\": {\"command\": [\"x\"], \"timeout_ms\": 0}}",
        "{\"s\": {\"command\": [\"x\"], \"tools\": {\"t\": {\"risk\": \"extreme\"}}}}",
        "{\"s\": {\"command\": [\"x\"], \"tools\": {\"t\": {\"approve\": true}}}}",
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(bad); i++) {
        struct vg_mcp_conf *c = NULL;
        vigil_error err = {0};
        json_t *j = json_loads(bad[i], 0, NULL);
        ASSERT(j);
        if (vg_mcp_conf_parse(j, &c, &err) != VIGIL_EINVAL)
            TEST_FAIL_("accepted: %s", bad[i]);
        ASSERT(strstr(err.message, "mcp_servers"));
        json_decref(j);
    }
    struct vg_mcp_conf *c = NULL;
    vigil_error err = {0};
    json_t *j =
        json_loads("{\"fs\": {\"command\": [\"srv\", \"--root\", \"/tmp\"], \"cwd\": "
                   "\"/\", \"env\": {\"K\": \"${V}\"}, \"tools\": {\"write_file\": "
                   "{\"risk\": \"high\"}}}, \"web\": {\"url\": \"http://127.0.0.1:1/mcp\"}}",
                   0, NULL);
    ASSERT_EQ(vg_mcp_conf_parse(j, &c, &err), VIGIL_OK);
    ASSERT_EQ(c->n, 2);
    const struct vg_mcp_server_conf *fs = vg_mcp_conf_find(c, "fs");
    ASSERT_STREQ(fs->argv[2], "/tmp");
    ASSERT(!fs->argv[3]);
    ASSERT_STREQ(fs->env[0], "K=${V}");
    ASSERT_EQ(fs->timeout_ms, 60000);
    ASSERT_STREQ(vg_mcp_conf_find(c, "web")->url, "http://127.0.0.1:1/mcp");
    ASSERT(!vg_mcp_conf_find(c, "nope"));
    vg_mcp_conf_free(c);
    json_decref(j);
}

/* Revision 2026-07-28's Mcp-Name header: plain visible ASCII as written; a non-ASCII name,
 * control characters, surrounding spaces, or a plain value that looks like the sentinel go in
 * the Base64 sentinel form (the spec's own example: "Hello, 世界"). */
TEST(mcp_name_headers_take_the_base64_form_when_needed)
{
    static const char *const cases[][2] = {
        {"get-sum", "get-sum"},
        {"Hello, \xe4\xb8\x96\xe7\x95\x8c", "=?base64?SGVsbG8sIOS4lueVjA==?="},
        {"tab\there", "=?base64?dGFiCWhlcmU=?="},
        {" lead", "=?base64?IGxlYWQ=?="},
        {"=?base64?eA==?=", "=?base64?PT9iYXNlNjQ/ZUE9PT89?="},
        {"", ""},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(cases); i++) {
        char *v = vg_mcp_header_value(cases[i][0]);
        ASSERT(v);
        ASSERT_STREQ(v, cases[i][1]);
        vg_free(v);
    }
}

int main(void)
{
    RUN(the_message_reader_reads_every_capture);
    RUN(the_message_reader_refuses_what_is_not_json_rpc);
    RUN(tool_names_are_server__tool_in_vigils_alphabet);
    RUN(contracts_come_from_annotations_and_overrides);
    RUN(every_everything_tool_but_the_task_only_one_is_served);
    RUN(schemas_draft_7_cannot_honour_are_refused);
    RUN(results_are_read_as_text);
    RUN(the_config_section_is_checked);
    RUN(mcp_name_headers_take_the_base64_form_when_needed);
    return 0;
}
