/*
 * test_mcp_cli.c: the `vigil` command end to end ($VIGIL_CLI, the built binary): `vigil mcp
 * list|tools|call` and their exit statuses, then an agent whose allowlist names everything__*
 * calling an MCP tool through `vigil tool call` (the CLI's gate path), the result in its
 * journal. The checks that need the everything server skip (77) without it, or fail when
 * VIGIL_REQUIRE_MCP=1.
 */
#include "helpers/test.h"

#include "agent/agent.h"
#include "mcp/mcp_helpers.h"
#include "runtime/runtime.h"

#include <jansson.h>
#include <sys/wait.h>

static char dir[1024], out[1 << 16];

/* Run `vigil ARGS` (a shell fragment) with the test's store and config; stdout into out, the
 * exit status returned. */
static int vigil(const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "VIGIL_STORE='%s/vigil.db' VIGIL_CONFIG='%s/config.yaml' '%s' %s "
             "2>'%s/stderr'",
             dir, dir, getenv("VIGIL_CLI"), args, dir);
    FILE *p = popen(cmd, "r");
    ASSERT(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Whether the last command's stderr holds needle. */
static int err_holds(const char *needle)
{
    char path[1100], text[4096] = "";
    snprintf(path, sizeof path, "%s/stderr", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    return strstr(text, needle) != NULL;
}

static void write_config(const char *text)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs(text, f);
    fclose(f);
}

/* Whether any of the store's files (database, WAL) holds needle. */
static int store_holds(const char *needle)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "grep -qa '%s' '%s'/vigil.db*", needle, dir);
    return system(cmd) == 0;
}

/* Whether the message record_id in the test's store mentions needle. */
static int stored_result_has(const char *record_id, const char *needle)
{
    char store[1100];
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    json_t *m = NULL;
    snprintf(store, sizeof store, "%s/vigil.db", dir);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = store};
    ASSERT_EQ(vigil_runtime_open(&o, &rt, &err), VIGIL_OK);
    if (vg_message_get(vg_runtime_env(rt), record_id, &m, &err))
        TEST_FAIL_("%s", err.message);
    char *text = json_dumps(m, 0);
    int found = text && strstr(text, needle) && strstr(text, "toolResult");
    free(text);
    json_decref(m);
    vigil_runtime_close(rt);
    return found;
}

TEST(commands_without_a_server)
{
    write_config("model:\n  provider: scripted\n");
    ASSERT_EQ(vigil("mcp list"), 0);
    ASSERT_STREQ(out, ""); /* the note is on stderr: nothing for a script to mistake */
    ASSERT(err_holds("no MCP servers are declared"));
    ASSERT_EQ(vigil("mcp tools nope"), 3); /* not found */
    ASSERT_EQ(vigil("mcp call"), 2);       /* usage */
    ASSERT_EQ(vigil("mcp frobnicate"), 2);
    write_config("mcp_servers:\n  Bad Name:\n    command: [x]\n");
    ASSERT_EQ(vigil("mcp list"), 2); /* invalid config */
    write_config("mcp_servers:\n  gone:\n    command: [/nonexistent/server]\n");
    ASSERT_EQ(vigil("mcp list --json"), 0);
    ASSERT(strstr(out, "\"not started\""));  /* declared, nothing started */
    ASSERT_EQ(vigil("mcp list --check"), 9); /* a server that does not answer: trial E26 d */
    ASSERT(err_holds("1 of 1 MCP server(s) did not answer"));
    ASSERT_NE(vigil("mcp call gone t '{}'"), 0);
    /* The reason names the command and what is wrong with it, not only "status 127". */
    ASSERT(err_holds("\"/nonexistent/server\": no such file"));
    ASSERT_EQ(vigil("mcp call gone t '[1'"), 2); /* arguments not JSON */
}

/* An agent applied from a manifest that names an MCP server (vigil's fault server) calls the
 * server's tool in `vigil chat`, under the scripted provider: the tool is offered as
 * helper__ok, the call goes through the gate and its result is in the store. A second agent's
 * chat, which may call no MCP tool, starts no server. `vigil mcp list|tools|call` reach the
 * manifest's server, list says where it is declared, and --agent narrows to one agent's. */
TEST(a_manifest_server_in_vigil_chat)
{
    char cfg[2048], path[1200], starts[1200], id[64], args[1400];
    snprintf(starts, sizeof starts, "%s/starts", dir);
    snprintf(path, sizeof path, "%s/cassette.json", dir);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fputs("{\"vigil_cassette\": 1, \"exchanges\": [{\"response\": {\"tool_calls\": [{\"id\": "
          "\"c1\", \"name\": \"helper__ok\", \"arguments\": {}}]}}, {\"response\": {\"text\": "
          "\"done\"}}]}",
          f);
    fclose(f);
    snprintf(cfg, sizeof cfg, "model:\n  provider: scripted\n  cassette: \"%s\"\n", path);
    write_config(cfg);
    snprintf(path, sizeof path, "%s/helper.yaml", dir);
    f = fopen(path, "w");
    ASSERT(f);
    fprintf(f,
            "name: helper-agent\ntools: [\"helper__*\"]\nmcp_servers:\n  helper:\n"
            "    command: [node, \"%s/tests/mcp/fault_server.js\"]\n"
            "    env: {FAULT_STARTS_FILE: \"%s\"}\n",
            VIGIL_SOURCE_DIR, starts);
    fclose(f);
    ASSERT_EQ(vigil("init"), 0);
    snprintf(args, sizeof args, "agent apply '%s' --json", path);
    ASSERT_EQ(vigil(args), 0);
    json_t *a = json_loads(out, 0, NULL);
    if (json_is_array(a)) { /* one report per manifest */
        json_t *first = json_incref(json_array_get(a, 0));
        json_decref(a);
        a = first;
    }
    ASSERT(a);
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(a, "id")));
    json_decref(a);
    snprintf(args, sizeof args, "chat %s -m hi", id);
    ASSERT_EQ(vigil(args), 0);
    ASSERT(strstr(out, "done"));
    ASSERT_EQ(mcp_count_lines(starts), 1);
    ASSERT(store_holds("ok: 1")); /* the tool's result, journaled */
    ASSERT_EQ(vigil("agent create --name plain --config '{\"tools\": [\"set_report\"]}' --json"),
              0);
    a = json_loads(out, 0, NULL);
    snprintf(path, sizeof path, "%s/plain.json", dir); /* each chat is a process: its cassette */
    f = fopen(path, "w");
    ASSERT(f);
    fputs("{\"vigil_cassette\": 1, \"exchanges\": [{\"response\": {\"text\": \"plain\"}}]}", f);
    fclose(f);
    snprintf(cfg, sizeof cfg, "model:\n  provider: scripted\n  cassette: \"%s\"\n", path);
    write_config(cfg);
    snprintf(args, sizeof args, "chat %s -m hi", json_string_value(json_object_get(a, "id")));
    ASSERT_EQ(vigil(args), 0);
    ASSERT(strstr(out, "plain"));
    ASSERT_EQ(mcp_count_lines(starts), 1); /* a chat that may call no MCP tool starts no server */
    /* `vigil mcp` reaches a manifest's server too, and says where each is declared; --agent
     * narrows to the config file's and that agent's. */
    ASSERT_EQ(vigil("mcp list --json"), 0);
    ASSERT(strstr(out, "\"helper\"") && strstr(out, "agent \\\"helper-agent\\\""));
    ASSERT_EQ(vigil("mcp list"), 0);
    ASSERT(strstr(out, "(agent \"helper-agent\")"));
    ASSERT_EQ(mcp_count_lines(starts), 1); /* list starts nothing */
    snprintf(args, sizeof args, "mcp tools helper --agent %s --json", id);
    ASSERT_EQ(vigil(args), 0);
    ASSERT(strstr(out, "\"helper__ok\""));
    ASSERT_EQ(vigil("mcp call helper ok '{}'"), 0);
    ASSERT(strstr(out, "ok: 1"));
    snprintf(args, sizeof args, "mcp list --agent %s --json",
             json_string_value(json_object_get(a, "id")));
    ASSERT_EQ(vigil(args), 0);
    ASSERT(!strstr(out, "helper")); /* the plain agent declares none, the config file none */
    snprintf(args, sizeof args, "mcp call helper ok '{}' --agent %s",
             json_string_value(json_object_get(a, "id")));
    ASSERT_EQ(vigil(args), 3);
    ASSERT_EQ(vigil("mcp list --agent no-such-agent"), 3);
    json_decref(a);
    for (const char *const *x =
             (const char *const[]){"vigil.db", "vigil.db-wal", "vigil.db-shm", NULL};
         *x; x++) { /* a fresh store for the next test */
        snprintf(path, sizeof path, "%s/%s", dir, *x);
        remove(path);
    }
}

/* proves: S2-025 */
TEST(everything_by_hand_and_through_an_agent)
{
    char everything[1024], cfg[2048], id[64], args[3200];
    mcp_npm_bin("mcp-server-everything", everything, sizeof everything);
    snprintf(cfg, sizeof cfg,
             "model:\n  provider: scripted\nmcp_servers:\n  everything:\n    command: [\"%s\"]\n"
             "    env:\n      API_TOKEN: \"${VIGIL_TEST_MCP_SECRET}\"\n",
             everything);
    setenv("VIGIL_TEST_MCP_SECRET", "tok-7d1e-secret", 1);
    write_config(cfg);
    ASSERT_EQ(vigil("mcp list --check"), 0);
    ASSERT(strstr(out, "13 tools"));
    ASSERT_EQ(vigil("mcp tools everything --json"), 0);
    ASSERT(strstr(out, "\"everything__echo\""));
    ASSERT_EQ(vigil("mcp call everything echo '{\"message\":\"hi\"}'"), 0);
    ASSERT(strstr(out, "Echo: hi"));
    ASSERT_EQ(vigil("mcp call everything no-such-tool '{}'"), 1); /* the call failed */
    /* The name `mcp tools` printed works too: vigil's name stands for the server's. */
    ASSERT_EQ(vigil("mcp call everything everything__echo '{\"message\":\"ho\"}'"), 0);
    ASSERT(strstr(out, "Echo: ho"));
    /* An agent allowlisting everything__* calls it through the gate; the journal has it. */
    ASSERT_EQ(vigil("init"), 0);
    ASSERT_EQ(vigil("agent create --name mcp-user --config '{\"tools\":[\"everything__*\"]}' "
                    "--json"),
              0);
    json_t *a = json_loads(out, 0, NULL);
    ASSERT(a);
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(a, "id")));
    json_decref(a);
    snprintf(args, sizeof args, "tool call %s everything__echo '{\"message\":\"hi\"}'", id);
    ASSERT_EQ(vigil(args), 0);
    ASSERT(strstr(out, "Echo: hi"));
    json_t *o = json_loads(out, 0, NULL);
    ASSERT(o);
    ASSERT_STREQ(json_string_value(json_object_get(o, "status")), "success");
    /* The toolResult message the gate recorded in the store holds the result. */
    char result_id[201];
    snprintf(result_id, sizeof result_id, "%s", json_string_value(json_object_get(o, "result_id")));
    json_decref(o);
    ASSERT(stored_result_has(result_id, "Echo: hi"));
    snprintf(args, sizeof args, "tool list %s", id);
    ASSERT_EQ(vigil(args), 0);
    ASSERT(strstr(out, "everything__get_sum"));
    ASSERT(strstr(out, "mcp:everything")); /* each tool's source */
    ASSERT_EQ(vigil("tool list"), 0);      /* no agent: every registered tool */
    ASSERT(strstr(out, "set_report") && strstr(out, "built-in"));
    ASSERT(strstr(out, "everything__echo"));
    /* Refused before the server is asked: arguments that break the tool's schema. */
    snprintf(args, sizeof args, "tool call %s everything__echo '{\"message\":5}'", id);
    ASSERT_EQ(vigil(args), 2);
    ASSERT(strstr(out, "invalid_arguments"));
    /* The secret reached the server's environment (get-env returns all of it: only the
     * inherited allow-list and what is declared) but no byte of it is in the store's files. */
    ASSERT_EQ(vigil("mcp call everything get-env '{}'"), 0);
    ASSERT(strstr(out, "API_TOKEN"));
    ASSERT(strstr(out, "tok-7d1e-secret"));
    ASSERT(!strstr(out, "VIGIL_TEST_MCP_SECRET")); /* vigil's own variables stay out */
    ASSERT(!store_holds("tok-7d1e-secret"));
}

int main(void)
{
    if (!getenv("VIGIL_CLI"))
        mcp_skip("VIGIL_CLI (the built binary) is not set");
    snprintf(dir, sizeof dir, "%s", vg_test_tmpdir("mcp_cli"));
    RUN(commands_without_a_server);
    RUN(a_manifest_server_in_vigil_chat);
    RUN(everything_by_hand_and_through_an_agent);
    return 0;
}
