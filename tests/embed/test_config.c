/*
 * test_config.c: the embedder chosen from the config (embed.* keys and VIGIL_EMBED_* variables):
 * builtin by default, OpenAI and Ollama against loopback servers speaking their wire formats,
 * bad keys refused by name, and a runtime whose memory writes and searches go through the
 * configured embedder, while a dead embedder never fails a write.
 */
#include "helpers/http_server.h"
#include "helpers/rt.h"

#include "config/config.h"
#include "embed/embed.h"
#include "memory/memory.h"
#include "tool/tool.h"

#include <stdio.h>
#include <stdlib.h>

static void clear_env(void)
{
    unsetenv("VIGIL_EMBED_PROVIDER");
    unsetenv("VIGIL_EMBED_MODEL");
    unsetenv("VIGIL_EMBED_BASE_URL");
    unsetenv("VIGIL_CONFIG");
    unsetenv("OPENAI_API_KEY");
}

static struct vg_config *parse(const char *yaml)
{
    struct vg_config *c = NULL;
    ASSERT_OK(vg_config_parse(yaml, strlen(yaml), "test.yaml", &c, E));
    ASSERT_OK(vg_config_apply_env(c, E));
    return c;
}

TEST(builtin_is_the_default)
{
    clear_env();
    struct vg_embedder *e = NULL, *hash = NULL;
    ASSERT_OK(vg_embed_hash_new(0, &hash, E));
    struct vg_config *c = parse("model:\n  provider: scripted\n");
    ASSERT_OK(vg_embed_from_config(c, NULL, &e, E));
    ASSERT_STREQ(vg_embed_model(e), vg_embed_model(hash));
    ASSERT_EQ(vg_embed_dimension(e), VG_EMBED_HASH_DIM);
    vg_embed_close(e);
    ASSERT_OK(vg_embed_from_config(NULL, NULL, &e, E)); /* no config at all */
    ASSERT_STREQ(vg_embed_model(e), vg_embed_model(hash));
    vg_embed_close(e);
    vg_config_free(c);
    vg_embed_close(hash);
}

TEST(env_selects_openai_over_the_file)
{
    size_t len;
    char *fixture = vg_test_fixture("embed/openai_embeddings.json", &len);
    struct vg_ts_response rs[] = {{.body = fixture, .body_len = len}};
    struct vg_test_server *srv = vg_test_server_start(rs, 1);
    clear_env();
    setenv("VIGIL_EMBED_PROVIDER", "openai", 1);
    setenv("VIGIL_EMBED_MODEL", "text-embedding-3-small", 1);
    setenv("VIGIL_EMBED_BASE_URL", vg_test_server_url(srv), 1);
    setenv("OPENAI_API_KEY", "sk-embed", 1);
    struct vg_config *c = parse("embed:\n  provider: ollama\n  model: other\n  dimensions: 3\n");
    struct vg_embedder *e = NULL;
    ASSERT_OK(vg_embed_from_config(c, NULL, &e, E));
    ASSERT_STREQ(vg_embed_model(e), "text-embedding-3-small");
    ASSERT_EQ(vg_embed_dimension(e), 3);
    ASSERT_EQ(vg_test_server_count(srv), 0); /* building it contacts nobody */
    const char *t = "hello";
    float v[3];
    ASSERT_OK(vg_embed(e, &t, 1, v, E));
    ASSERT(v[0] > 0.59f && v[0] < 0.61f && v[1] > 0.79f && v[1] < 0.81f);
    ASSERT_EQ(vg_test_server_count(srv), 1);
    const struct vg_ts_request *rq = vg_test_server_request(srv, 0);
    ASSERT_STREQ(rq->path, "/v1/embeddings");
    ASSERT_STREQ(vg_ts_header(rq, "authorization"), "Bearer sk-embed");
    ASSERT_CONTAINS(rq->body, "\"model\":\"text-embedding-3-small\"");
    ASSERT_CONTAINS(rq->body, "\"dimensions\":3");
    vg_embed_close(e);
    vg_config_free(c);
    vg_test_server_stop(srv);
    vg_free(fixture);
    clear_env();
}

TEST(file_selects_ollama_without_a_key)
{
    size_t len;
    char *fixture = vg_test_fixture("embed/ollama_embed.json", &len);
    struct vg_ts_response rs[] = {{.body = fixture, .body_len = len}};
    struct vg_test_server *srv = vg_test_server_start(rs, 1);
    clear_env();
    setenv("OPENAI_API_KEY", "sk-not-for-ollama", 1);
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "embed:\n  provider: ollama\n  model: nomic-embed-text\n  base_url: %s/v1/\n"
             "  dimensions: 3\n",
             vg_test_server_url(srv));
    struct vg_config *c = parse(yaml);
    struct vg_embedder *e = NULL;
    ASSERT_OK(vg_embed_from_config(c, NULL, &e, E));
    ASSERT_STREQ(vg_embed_model(e), "nomic-embed-text");
    const char *t = "hello";
    float v[3];
    ASSERT_OK(vg_embed(e, &t, 1, v, E));
    ASSERT(v[2] > 0.59f && v[2] < 0.61f);
    const struct vg_ts_request *rq = vg_test_server_request(srv, 0);
    ASSERT_STREQ(rq->path, "/api/embed");
    ASSERT(vg_ts_header(rq, "authorization") == NULL);
    vg_embed_close(e);
    vg_config_free(c);
    vg_test_server_stop(srv);
    vg_free(fixture);
    clear_env();
}

TEST(known_models_have_a_size_and_bad_keys_are_named)
{
    clear_env();
    struct vg_embedder *e = NULL;
    struct vg_config *c = parse("embed:\n  provider: openai\n");
    ASSERT_OK(vg_embed_from_config(c, NULL, &e, E));
    ASSERT_STREQ(vg_embed_model(e), "text-embedding-3-small");
    ASSERT_EQ(vg_embed_dimension(e), 1536);
    vg_embed_close(e);
    vg_config_free(c);
    c = parse("embed:\n  provider: ollama\n  model: nomic-embed-text:latest\n");
    ASSERT_OK(vg_embed_from_config(c, NULL, &e, E));
    ASSERT_EQ(vg_embed_dimension(e), 768);
    vg_embed_close(e);
    vg_config_free(c);

    vigil_error err = {0};
    c = parse("embed:\n  provider: cohere\n");
    ASSERT_EQ(vg_embed_from_config(c, NULL, &e, &err), VIGIL_EINVAL);
    ASSERT_CONTAINS(err.message, "embed.provider");
    vg_config_free(c);
    c = parse("embed:\n  provider: ollama\n  model: my-own-model\n");
    ASSERT_EQ(vg_embed_from_config(c, NULL, &e, &err), VIGIL_EINVAL);
    ASSERT_CONTAINS(err.message, "embed.dimensions");
    vg_config_free(c);

    const char *bad[] = {"embed:\n  dimensions: many\n", "embed:\n  api_key: sk-x\n"};
    for (size_t i = 0; i < VG_ARRAY_LEN(bad); i++) {
        c = NULL;
        ASSERT_EQ(vg_config_parse(bad[i], strlen(bad[i]), "test.yaml", &c, &err), VIGIL_EINVAL);
        ASSERT_CONTAINS(err.message, "embed.");
    }
}

/* A runtime on a store whose config file names the embedder at base_url. */
static void open_with_embedder(struct test_rt *t, const char *name, const char *base_url,
                               char agent[37])
{
    char path[4300], dir[256];
    clear_env();
    snprintf(dir, sizeof dir, "%s_cfg", name); /* test_rt_open empties its own folder */
    snprintf(path, sizeof path, "%s/config.yaml", vg_test_tmpdir(dir));
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fprintf(f,
            "model:\n  provider: scripted\nembed:\n  provider: openai\n  base_url: %s\n"
            "  dimensions: 3\n  timeout_ms: 2000\n",
            base_url);
    fclose(f);
    setenv("VIGIL_CONFIG", path, 1);
    test_rt_open(t, name);
    vigil_agent_spec spec = {.name = "ada", .config_json = "{\"tools\":[\"memory_*\"]}"};
    ASSERT_OK(vigil_agent_create(t->rt, &spec, agent, E));
    ASSERT_OK(vg_agent_transition(t->env, agent, VIGIL_LIFECYCLE_ACTIVE, "test", E));
}

static void write_block(struct test_rt *t, const char *agent, const char *label,
                        const char *content)
{
    struct vg_tool_executor *x = NULL;
    struct vg_tool_outcome o = {0};
    struct vg_tool_call_ctx ctx = {
        .agent_id = agent, .run_key = label, .thread_id = "chat", .wake_reason = "user_initiated"};
    json_t *args = json_pack("{s:s, s:s}", "label", label, "content", content);
    ASSERT_OK(vg_runtime_tools(t->rt, &x, E));
    ASSERT_OK(vg_tool_executor_call(x, &ctx, "memory_write", args, &o, E));
    json_decref(args);
    if (o.code != VG_TOOL_OK)
        TEST_FAIL_("memory_write: %s %s", o.error_code, o.error_message);
    vg_tool_outcome_release(&o);
}

/* proves: S4-006 */
TEST(runtime_memory_uses_the_configured_embedder)
{
    size_t len;
    char *fixture = vg_test_fixture("embed/openai_embeddings.json", &len);
    struct vg_ts_response rs[] = {{.body = fixture, .body_len = len}};
    struct vg_test_server *srv = vg_test_server_start(rs, 1);
    struct test_rt t;
    char agent[37], *out = NULL;
    open_with_embedder(&t, "embed_cfg_rt", vg_test_server_url(srv), agent);
    write_block(&t, agent, "user:alice", "Alice drinks green tea.");
    size_t after_write = vg_test_server_count(srv);
    ASSERT(after_write >= 1);
    ASSERT_CONTAINS(vg_test_server_request(srv, 0)->body, "Alice drinks green tea.");

    ASSERT_OK(vigil_memory_search(t.rt, agent, "a hot beverage", 5, &out, E));
    ASSERT_CONTAINS(out, "user:alice"); /* no shared word: only the vector can find it */
    vigil_free(out);
    ASSERT(vg_test_server_count(srv) > after_write);
    ASSERT_CONTAINS(vg_test_server_request(srv, vg_test_server_count(srv) - 1)->body,
                    "a hot beverage");
    ASSERT_CONTAINS(vg_test_server_request(srv, 0)->path, "/v1/embeddings");
    test_rt_close(&t);
    vg_test_server_stop(srv);
    vg_free(fixture);
    clear_env();
}

/* proves: S4-065 */
TEST(a_dead_embedder_never_fails_a_write)
{
    struct test_rt t;
    char agent[37], *out = NULL;
    open_with_embedder(&t, "embed_cfg_dead", "http://127.0.0.1:1", agent);
    write_block(&t, agent, "user:bob", "Bob plays the cello.");
    ASSERT_OK(vigil_memory_search(t.rt, agent, "cello", 5, &out, E)); /* keywords alone */
    ASSERT_CONTAINS(out, "user:bob");
    vigil_free(out);
    test_rt_close(&t);
    clear_env();
}

/* proves: S4-065 */
TEST(blocks_written_while_down_are_embedded_after_a_run)
{
    size_t len;
    char *fixture = vg_test_fixture("embed/openai_embeddings.json", &len);
    struct vg_ts_response rs[] = {{.status = 503, .body = "{\"error\":{\"message\":\"down\"}}"},
                                  {.body = fixture, .body_len = len}};
    struct vg_test_server *srv = vg_test_server_start(rs, VG_ARRAY_LEN(rs));
    struct test_rt t;
    char agent[37], *out = NULL;
    open_with_embedder(&t, "embed_cfg_later", vg_test_server_url(srv), agent);
    write_block(&t, agent, "user:alice", "Alice drinks green tea."); /* answered 503 */
    ASSERT_EQ(vg_test_server_count(srv), 1);
    ASSERT_OK(vigil_memory_search(t.rt, agent, "a hot beverage", 5, &out, E));
    ASSERT(strstr(out, "user:alice") == NULL); /* no vector yet, no shared word */
    vigil_free(out);
    ASSERT_OK(vg_runtime_prepare(t.rt, E));
    size_t before = vg_test_server_count(srv);
    vg_runtime_after_run(t.rt); /* the pass after a run embeds what is pending */
    ASSERT_EQ(vg_test_server_count(srv), before + 1);
    ASSERT_CONTAINS(vg_test_server_request(srv, before)->body, "Alice drinks green tea.");
    ASSERT_OK(vigil_memory_search(t.rt, agent, "a hot beverage", 5, &out, E));
    ASSERT_CONTAINS(out, "user:alice");
    vigil_free(out);
    test_rt_close(&t);
    vg_test_server_stop(srv);
    vg_free(fixture);
    clear_env();
}

int main(void)
{
    RUN(builtin_is_the_default);
    RUN(env_selects_openai_over_the_file);
    RUN(file_selects_ollama_without_a_key);
    RUN(known_models_have_a_size_and_bad_keys_are_named);
    RUN(runtime_memory_uses_the_configured_embedder);
    RUN(a_dead_embedder_never_fails_a_write);
    RUN(blocks_written_while_down_are_embedded_after_a_run);
    return 0;
}
