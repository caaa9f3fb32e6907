/*
 * test_scripted.c: the scripted provider (replay, request checking, streaming through the
 * callbacks, scripted errors and retries, echo mode), the record wrapper (a real exchange
 * through a loopback server recorded and replayed), building a provider from config, and the
 * price table.
 */
#include "model/model_test.h"

#include "config/config.h"
#include "os/fs.h"

static void write_text(const char *path, const char *text)
{
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
}

static const char *cassette_2 =
    "{\"vigil_cassette\":1,\"exchanges\":["
    " {\"request\":{\"model\":\"m1\",\"messages\":[{\"role\":\"user\",\"text\":\"weather?\"}]},"
    "  \"response\":{\"text_blocks\":[\"Let me look.\"],\"tool_calls\":[{\"id\":\"t1\","
    "\"name\":\"get_weather\",\"arguments\":{\"location\":\"Paris\"}}],\"stop_reason\":\"tool_"
    "use\","
    "\"usage\":{\"input_tokens\":10,\"output_tokens\":5},\"model\":\"m1\"}},"
    " {\"response\":{\"text\":\"It is sunny in Paris today.\"}}"
    "]}";

static struct vg_model *scripted(const char *path, int check, struct vg_test_clock *tc,
                                 struct vg_ids *ids)
{
    struct vg_model *m = NULL;
    struct vg_model_options o = {.provider = "scripted",
                                 .cassette = path,
                                 .check_requests = check,
                                 .clock = &tc->base,
                                 .ids = ids};
    ASSERT_OK(vg_model_new(&o, &m, E));
    return m;
}

/* proves: S4-044 */
TEST(replays_in_order_and_streams)
{
    char path[512];
    struct vg_test_clock tc;
    vg_test_clock_init(&tc, 0);
    struct vg_ids *ids = vg_ids_seeded(&tc.base, 1);
    snprintf(path, sizeof(path), "%s/c.json", vg_test_tmpdir("scripted_replay"));
    write_text(path, cassette_2);
    struct vg_model *m = scripted(path, 1, &tc, ids);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "weather?"};
    struct vg_model_request req = {.model = "m1", .messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);

    ASSERT_STREQ(vg_model_name(m), "scripted");
    ASSERT_OK(vg_model_stream(m, &req, &cb, &r, E));
    ASSERT_EQ(r->scripted, 1);
    ASSERT_STREQ(r->provider, "scripted");
    ASSERT_STREQ(r->text, "Let me look.");
    ASSERT_STREQ(rec.text.data, "Let me look.");
    ASSERT_EQ(rec.text_calls, 3); /* word by word */
    ASSERT_EQ(r->n_tool_calls, 1);
    ASSERT_STREQ(r->tool_calls[0].arguments, "{\"location\":\"Paris\"}");
    ASSERT_STREQ(rec.args[0].data, "{\"location\":\"Paris\"}");
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_TOOL_USE);
    ASSERT_EQ(r->usage.input_tokens, 10);
    vg_model_response_free(r);

    ASSERT_OK(vg_model_complete(m, &req, &r, E)); /* step 2 records no request: no check */
    ASSERT_STREQ(r->text, "It is sunny in Paris today.");
    ASSERT_EQ(r->stop_reason, VG_MODEL_STOP_END_TURN);
    vg_model_response_free(r);

    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_model_complete(m, &req, &r, &err));
    ASSERT_CONTAINS(err.message, "no exchange left for request 3");
    recorder_release(&rec);
    vg_model_free(m);
    vg_ids_free(ids);
}

/* Two models of one process on the same cassette (the daemon's worker threads each keep a
 * runtime) take turns from one position, in call order; once both are closed a new one starts
 * again at the first exchange (trial C4 of session 30: each started at exchange 1). */
TEST(the_position_in_a_cassette_is_the_processes)
{
    char path[512];
    struct vg_test_clock tc;
    vg_test_clock_init(&tc, 0);
    struct vg_ids *ids = vg_ids_seeded(&tc.base, 1);
    snprintf(path, sizeof(path), "%s/c.json", vg_test_tmpdir("scripted_shared"));
    write_text(path, "{\"vigil_cassette\":1,\"exchanges\":[{\"response\":{\"text\":\"one\"}},"
                     "{\"response\":{\"text\":\"two\"}},{\"response\":{\"text\":\"three\"}}]}");
    struct vg_model *a = scripted(path, 0, &tc, ids), *b = scripted(path, 0, &tc, ids);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "hi"};
    struct vg_model_request req = {.model = "m1", .messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    const char *want[] = {"one", "two", "three"};
    struct vg_model *by[] = {a, b, a};
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(vg_model_complete(by[i], &req, &r, E));
        ASSERT_STREQ(r->text, want[i]);
        vg_model_response_free(r);
    }
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_model_complete(b, &req, &r, &err));
    ASSERT_CONTAINS(err.message, "request 4");
    vg_model_free(a);
    vg_model_free(b);
    struct vg_model *c = scripted(path, 0, &tc, ids);
    ASSERT_OK(vg_model_complete(c, &req, &r, E));
    ASSERT_STREQ(r->text, "one");
    vg_model_response_free(r);
    vg_model_free(c);
    vg_ids_free(ids);
}

TEST(request_mismatch_names_the_step)
{
    char path[512];
    struct vg_test_clock tc;
    vg_test_clock_init(&tc, 0);
    struct vg_ids *ids = vg_ids_seeded(&tc.base, 1);
    snprintf(path, sizeof(path), "%s/c.json", vg_test_tmpdir("scripted_mismatch"));
    write_text(path, cassette_2);
    struct vg_model *m = scripted(path, 1, &tc, ids);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "something else"};
    struct vg_model_request req = {.model = "m1", .messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EINVAL, vg_model_complete(m, &req, &r, &err));
    ASSERT_CONTAINS(err.message, "request 1 does not match");
    ASSERT_CONTAINS(err.message, "messages[0].text");
    vg_model_free(m);

    m = scripted(path, 0, &tc, ids); /* checking off: replays anyway */
    ASSERT_OK(vg_model_complete(m, &req, &r, E));
    ASSERT_STREQ(r->text, "Let me look.");
    vg_model_response_free(r);
    vg_model_free(m);
    vg_ids_free(ids);
}

TEST(scripted_errors_go_through_the_retry_loop)
{
    char path[512];
    struct vg_test_clock tc;
    vg_test_clock_init(&tc, 0);
    struct vg_ids *ids = vg_ids_seeded(&tc.base, 1);
    snprintf(path, sizeof(path), "%s/c.json", vg_test_tmpdir("scripted_errors"));
    write_text(path, "{\"exchanges\":[{\"error\":{\"code\":\"ERATELIMIT\",\"message\":\"slow "
                     "down\",\"retry_after_ms\":5000}},{\"error\":{\"code\":\"EAUTH\"}},"
                     "{\"response\":{\"text\":\"ok\"}}]}");
    struct vg_model *m = scripted(path, 1, &tc, ids);
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "hi"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    vigil_error err = {0};

    ASSERT_CODE(VIGIL_EAUTH, vg_model_complete(m, &req, &r, &err)); /* 429, wait, then 401 */
    ASSERT_EQ(tc.slept_ms, 5000);
    ASSERT_CONTAINS(err.message, "step 2");
    ASSERT_OK(vg_model_complete(m, &req, &r, E));
    ASSERT_STREQ(r->text, "ok");
    vg_model_response_free(r);
    vg_model_free(m);
    vg_ids_free(ids);
}

TEST(echo_without_cassette_is_labelled)
{
    struct vg_model *m = NULL;
    struct vg_model_options o = {0};
    ASSERT_OK(vg_model_new(&o, &m, E)); /* no provider: scripted */
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "hello"};
    struct vg_model_request req = {.messages = &msg, .n_messages = 1};
    struct vg_model_response *r = NULL;
    ASSERT_OK(vg_model_complete(m, &req, &r, E));
    ASSERT_EQ(r->scripted, 1);
    ASSERT_CONTAINS(r->text, "scripted model");
    ASSERT_CONTAINS(r->text, "hello");
    vg_model_response_free(r);
    vg_model_free(m);
}

TEST(bad_cassettes)
{
    char path[512];
    struct vg_model *m = NULL;
    vigil_error err = {0};
    snprintf(path, sizeof(path), "%s/bad.json", vg_test_tmpdir("scripted_bad"));
    write_text(path, "{\"exchanges\": [ {\n oops");
    struct vg_model_options o = {.provider = "scripted", .cassette = path};
    ASSERT_CODE(VIGIL_EPARSE, vg_model_new(&o, &m, &err));
    ASSERT_CONTAINS(err.message, "line 2");
    o.cassette = "/nonexistent/cassette.json";
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_model_new(&o, &m, &err));
    o.provider = "nope";
    ASSERT_CODE(VIGIL_EINVAL, vg_model_new(&o, &m, &err));
    ASSERT_CONTAINS(err.message, "unknown model provider \"nope\"");
}

/* proves: S4-044 */
TEST(record_then_replay_round_trip)
{
    char path[512], base[128];
    struct vg_test_clock tc;
    vg_test_clock_init(&tc, 0);
    struct vg_ids *ids = vg_ids_seeded(&tc.base, 3);
    char *sse = vg_test_fixture("model/openai/03_tool_parallel_stream.response.sse", NULL);
    struct vg_ts_response rs[] = {{.headers = "Content-Type: text/event-stream\r\n", .body = sse}};
    struct vg_test_server *srv = vg_test_server_start(rs, 1);
    snprintf(base, sizeof(base), "%s/v1", vg_test_server_url(srv));
    snprintf(path, sizeof(path), "%s/rec.json", vg_test_tmpdir("scripted_record"));
    struct vg_model_options o = {.provider = "openai",
                                 .model = "gpt-4o",
                                 .base_url = base,
                                 .api_key = "k",
                                 .record = path,
                                 .clock = &tc.base,
                                 .ids = ids};
    struct vg_model *m = NULL;
    ASSERT_OK(vg_model_new(&o, &m, E));
    ASSERT_STREQ(vg_model_name(m), "openai");
    struct vg_model_tool weather = {"get_weather", "Get the weather.", WEATHER_SCHEMA, 0};
    struct vg_model_message msg = {.role = VG_MODEL_USER, .text = "Paris and Tokyo?"};
    struct vg_model_request req = {
        .system = "sys", .messages = &msg, .n_messages = 1, .tools = &weather, .n_tools = 1};
    struct vg_model_response *real = NULL, *replayed = NULL;
    struct recorder rec;
    struct vg_model_stream_cb cb = recorder_init(&rec);
    ASSERT_OK(vg_model_stream(m, &req, &cb, &real, E));
    ASSERT_EQ(real->scripted, 0);
    vg_model_free(m);
    vg_test_server_stop(srv);

    m = scripted(path, 1, &tc, ids);
    recorder_release(&rec);
    cb = recorder_init(&rec);
    ASSERT_OK(vg_model_stream(m, &req, &cb, &replayed, E));
    ASSERT_EQ(replayed->scripted, 1);
    ASSERT_STREQ(replayed->text, real->text);
    ASSERT_EQ(replayed->n_tool_calls, 2);
    for (size_t i = 0; i < 2; i++) {
        ASSERT_STREQ(replayed->tool_calls[i].id, real->tool_calls[i].id);
        ASSERT_STREQ(replayed->tool_calls[i].arguments, real->tool_calls[i].arguments);
        ASSERT_STREQ(rec.args[i].data, real->tool_calls[i].arguments);
    }
    ASSERT_EQ(replayed->stop_reason, real->stop_reason);
    ASSERT_EQ(replayed->usage.input_tokens, real->usage.input_tokens);
    ASSERT_EQ(replayed->usage.output_tokens, real->usage.output_tokens);
    ASSERT_STREQ(replayed->response_id, real->response_id);
    vg_model_response_free(replayed);

    /* A different request against the recording is caught. */
    struct vg_model_request other = req;
    other.system = "another";
    vg_model_free(m);
    m = scripted(path, 1, &tc, ids);
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_model_complete(m, &other, &replayed, &err));
    ASSERT_CONTAINS(err.message, "\"system\"");
    vg_model_response_free(real);
    recorder_release(&rec);
    vg_model_free(m);
    vg_ids_free(ids);
    vg_free(sse);
}

/* proves: S4-016 */
TEST(provider_chosen_by_config_without_rebuild)
{
    struct vg_config *cfg = NULL;
    struct vg_model *m = NULL;
    const char *yaml = "model:\n  provider: anthropic\n  name: claude-x\n  max_retries: 4\n"
                       "  base_url: http://127.0.0.1:1/v1\n";
    ASSERT_OK(vg_config_parse(yaml, strlen(yaml), "c.yaml", &cfg, E));
    ASSERT_OK(vg_model_from_config(cfg, NULL, NULL, &m, E));
    ASSERT_STREQ(vg_model_name(m), "anthropic");
    ASSERT_STREQ(vg_model_default_model(m), "claude-x");
    ASSERT(vg_model_caps(m) & VG_MODEL_CAP_PROMPT_CACHE);
    vg_model_free(m);
    ASSERT_OK(vg_config_set_string(cfg, "model.provider", "openai", E));
    ASSERT_OK(vg_model_from_config(cfg, NULL, NULL, &m, E));
    ASSERT_STREQ(vg_model_name(m), "openai");
    ASSERT(vg_model_caps(m) & VG_MODEL_CAP_STREAM);
    vg_model_free(m);
    vg_config_free(cfg);

    ASSERT_OK(vg_config_new(&cfg, E)); /* nothing configured: scripted */
    ASSERT_OK(vg_model_from_config(cfg, NULL, NULL, &m, E));
    ASSERT_STREQ(vg_model_name(m), "scripted");
    vg_model_free(m);
    vg_config_free(cfg);
}

/* The hosted APIs refuse every request without a key, so a provider pointed at one without its
 * key is refused when it is made, naming the variable, before any run starts; a server of
 * one's own (a base URL) may need no key. proves: S4-017 */
TEST(a_hosted_api_without_its_key_is_refused_when_made)
{
    static const struct {
        const char *provider, *var;
    } cases[] = {{"openai", "OPENAI_API_KEY"}, {"anthropic", "ANTHROPIC_API_KEY"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *saved = getenv(cases[i].var);
        char *keep = saved ? strdup(saved) : NULL;
        struct vg_model *m = NULL;
        vigil_error err = {0};
        struct vg_model_options o = {.provider = cases[i].provider, .model = "m"};
        ASSERT_EQ(setenv(cases[i].var, "", 1), 0);
        ASSERT_CODE(VIGIL_EINVAL, vg_model_new(&o, &m, &err));
        ASSERT_CONTAINS(err.message, cases[i].var);
        ASSERT(m == NULL);
        ASSERT_EQ(unsetenv(cases[i].var), 0);
        ASSERT_CODE(VIGIL_EINVAL, vg_model_new(&o, &m, &err));
        o.base_url = "http://127.0.0.1:1/v1"; /* a local server: no key needed */
        ASSERT_OK(vg_model_new(&o, &m, E));
        ASSERT(vg_model_caps(m) & VG_MODEL_CAP_NAMED_MODEL);
        vg_model_free(m);
        o.base_url = NULL;
        ASSERT_EQ(setenv(cases[i].var, "sk-test", 1), 0);
        ASSERT_OK(vg_model_new(&o, &m, E));
        vg_model_free(m);
        if (keep)
            ASSERT_EQ(setenv(cases[i].var, keep, 1), 0);
        else
            ASSERT_EQ(unsetenv(cases[i].var), 0);
        free(keep);
    }
    struct vg_model *m = NULL;
    ASSERT_OK(vg_model_new(&(struct vg_model_options){.provider = "scripted"}, &m, E));
    ASSERT(!(vg_model_caps(m) & VG_MODEL_CAP_NAMED_MODEL)); /* it needs no model id */
    vg_model_free(m);
}

TEST(cost_from_price_table)
{
    struct vg_config *cfg = NULL;
    const char *yaml = "model:\n  prices:\n    gpt-4o: {input: 2.5, output: 10}\n"
                       "    claude-sonnet-4: {input: 3, output: 15, cache_read: 0.3, "
                       "cache_write: 3.75}\n";
    ASSERT_OK(vg_config_parse(yaml, strlen(yaml), "c.yaml", &cfg, E));
    struct vg_model_usage u = {.input_tokens = 1000000,
                               .output_tokens = 100000,
                               .cache_read_tokens = 1000000,
                               .cache_write_tokens = 0};
    double usd = 0;
    ASSERT(vg_model_cost_usd(cfg, "claude-sonnet-4-20250514", &u, &usd)); /* prefix match */
    ASSERT(usd > 4.799 && usd < 4.801);
    ASSERT(vg_model_cost_usd(cfg, "gpt-4o", &u, &usd));
    ASSERT(usd > 6.0 - 0.001 && usd < 6.0 + 0.001); /* cache reads at the input price */
    ASSERT(!vg_model_cost_usd(cfg, "llama3.2", &u, &usd));
    vg_config_free(cfg);
}

TEST(request_json_is_stable)
{
    struct vg_model_tool_call c = {"id1", "f", "{\"a\":1}"};
    struct vg_model_message msgs[] = {
        {.role = VG_MODEL_USER, .text = "q"},
        {.role = VG_MODEL_ASSISTANT, .tool_calls = &c, .n_tool_calls = 1},
        {.role = VG_MODEL_TOOL, .tool_call_id = "id1", .text = "r", .is_error = 1}};
    struct vg_model_request req = {
        .model = "m", .messages = msgs, .n_messages = 3, .max_tokens = 5};
    char *j = NULL;
    ASSERT_OK(vg_model_request_to_json(&req, &j, E));
    ASSERT_STREQ(j, "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"text\":\"q\"},{\"role\":"
                    "\"assistant\",\"tool_calls\":[{\"arguments\":\"{\\\"a\\\":1}\",\"id\":"
                    "\"id1\",\"name\":\"f\"}]},{\"is_error\":true,\"role\":\"tool\",\"text\":\"r\","
                    "\"tool_call_id\":\"id1\"}],\"model\":\"m\"}");
    vg_free(j);
}

int main(void)
{
    vg_alloc_install_json();
    RUN(replays_in_order_and_streams);
    RUN(the_position_in_a_cassette_is_the_processes);
    RUN(request_mismatch_names_the_step);
    RUN(scripted_errors_go_through_the_retry_loop);
    RUN(echo_without_cassette_is_labelled);
    RUN(bad_cassettes);
    RUN(record_then_replay_round_trip);
    RUN(provider_chosen_by_config_without_rebuild);
    RUN(a_hosted_api_without_its_key_is_refused_when_made);
    RUN(cost_from_price_table);
    RUN(request_json_is_stable);
    return 0;
}
