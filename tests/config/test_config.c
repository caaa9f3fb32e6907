/*
 * test_config.c: the config file (YAML and JSON), typed lookups by dotted key, the environment
 * overrides and their precedence over the file, the default path rules, and clear errors for a
 * malformed file (with its line), a value of the wrong type, or a secret in the file.
 */
#include "helpers/test.h"

#include "config/config.h"
#include "os/fs.h"

static void write_text(const char *path, const char *text)
{
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
}

static void clear_env(void)
{
    const char *vars[] = {"VIGIL_CONFIG",
                          "VIGIL_MODEL_PROVIDER",
                          "VIGIL_MODEL_BASE_URL",
                          "VIGIL_MODEL",
                          "VIGIL_MODEL_CASSETTE",
                          "VIGIL_MODEL_RECORD",
                          "VIGIL_MODEL_MAX_RETRIES",
                          "VIGIL_MODEL_TIMEOUT_MS"};
    for (size_t i = 0; i < VG_ARRAY_LEN(vars); i++)
        unsetenv(vars[i]);
}

TEST(yaml_values_and_lookups)
{
    struct vg_config *c = NULL;
    const char *yaml = "model:\n"
                       "  provider: openai\n"
                       "  base_url: \"http://localhost:11434/v1\"\n"
                       "  max_retries: 5\n"
                       "  check_requests: false\n"
                       "  name: '123'\n"
                       "agent:\n"
                       "  max_tool_rounds: 20\n"
                       "  context_budget: 0.8\n"
                       "runtime:\n"
                       "  allowed_hosts: [api.anthropic.com, api.moonshot.ai]\n"
                       "  nothing: ~\n";
    ASSERT_OK(vg_config_parse(yaml, strlen(yaml), "c.yaml", &c, E));
    ASSERT_STREQ(vg_config_get_string(c, "model.provider", NULL), "openai");
    ASSERT_STREQ(vg_config_get_string(c, "model.base_url", NULL), "http://localhost:11434/v1");
    ASSERT_EQ(vg_config_get_int(c, "model.max_retries", 0), 5);
    ASSERT_EQ(vg_config_get_bool(c, "model.check_requests", 1), 0);
    ASSERT_STREQ(vg_config_get_string(c, "model.name", NULL), "123"); /* quoted: a string */
    ASSERT_EQ(vg_config_get_int(c, "agent.max_tool_rounds", 0), 20);
    ASSERT(vg_config_get_double(c, "agent.context_budget", 0) == 0.8);
    ASSERT_EQ(json_array_size(vg_config_get(c, "runtime.allowed_hosts")), 2);
    ASSERT(json_is_null(vg_config_get(c, "runtime.nothing")));
    /* Defaults for missing keys and for values of another type. */
    ASSERT_STREQ(vg_config_get_string(c, "model.cassette", "dflt"), "dflt");
    ASSERT_EQ(vg_config_get_int(c, "model.provider", 7), 7);
    ASSERT_EQ(vg_config_get_int(c, "no.such.key", 9), 9);
    ASSERT(vg_config_path(c) == NULL);
    vg_config_free(c);
}

TEST(json_file)
{
    struct vg_config *c = NULL;
    const char *json = "{\"model\": {\"provider\": \"anthropic\", \"timeout_ms\": 1000}}";
    ASSERT_OK(vg_config_parse(json, strlen(json), "c.json", &c, E));
    ASSERT_STREQ(vg_config_get_string(c, "model.provider", NULL), "anthropic");
    ASSERT_EQ(vg_config_get_int(c, "model.timeout_ms", 0), 1000);
    vg_config_free(c);
}

/* proves: S4-062 */
TEST(malformed_files_name_the_line)
{
    struct vg_config *c = NULL;
    vigil_error err = {0};
    const char *yaml = "model:\n  provider: openai\n  name: [unclosed\n";
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(yaml, strlen(yaml), "bad.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "bad.yaml");
    ASSERT_CONTAINS(err.message, "line ");
    const char *json = "{\n \"model\": {\n  \"provider\": \"x\",,\n }\n}";
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(json, strlen(json), "bad.json", &c, &err));
    ASSERT_CONTAINS(err.message, "line 3");
    /* libfyaml counts from 1: its place is shown as it is (the plain scalar "a" runs on). */
    const char *yaml2 = "model:\n  provider: a\n   bad indent: b\n";
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(yaml2, strlen(yaml2), "bad2.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "at line 2, column 13: invalid multiline plain key");
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse("- a\n- b\n", 8, "list.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "top level must be a mapping");
}

/* An unclosed [ or { is found at the end of the text, past the last line: the error points at
 * the bracket still open, on a line the file has. */
TEST(unclosed_brackets_point_at_the_bracket)
{
    struct vg_config *c = NULL;
    vigil_error err = {0};
    const char *one = "model: [unclosed";
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(one, strlen(one), "c5.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "\"c5.yaml\" at line 1, column 8: flow sequence without a");
    const char *inner = "a: 1\nmodel: [1, {x: 2\n\n";
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(inner, strlen(inner), "c6.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "at line 2, column 12:");
    const char *quote = "a: 1\nb: \"open\n";
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(quote, strlen(quote), "c7.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "at line 2, column");
}

/* A fuzz finding: libfyaml loops forever on some inputs with control bytes; they are refused
 * before parsing. */
TEST(control_bytes_and_bad_utf8_are_refused)
{
    struct vg_config *c = NULL;
    vigil_error err = {0};
    const char *hang = "%,f\xa5ll:\ne%,d%d%l:l\n\x1a}}ll:\n\x1a}}";
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(hang, strlen(hang), "h.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "line 1: invalid UTF-8");
    const char *hang2 = "%\xf7\xb7\xb7\xb7"; /* a lead byte past U+10FFFF: libfyaml hangs */
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(hang2, strlen(hang2), "h2.yaml", &c, &err));
    const char *surrogate = "a: \xed\xa0\x80\n";
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(surrogate, strlen(surrogate), "s.yaml", &c, &err));
    const char *ctl = "a: 1\nb: \x01\n";
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(ctl, strlen(ctl), "c.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "line 2: control character 0x01");
    /* libfyaml 0.7.12 crashes on this one (fuzz/fuzz_config.c); tabs are refused. */
    const char *tab = "a: 1\n? a:\t:\n";
    ASSERT_CODE(VIGIL_EPARSE, vg_config_parse(tab, strlen(tab), "t.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "line 2: a tab character (indent and separate with spaces");
    const char *escaped = "a: \"x\\ty\"\n";
    ASSERT_OK(vg_config_parse(escaped, strlen(escaped), "e.yaml", &c, E));
    ASSERT_STREQ(vg_config_get_string(c, "a", NULL), "x\ty");
    vg_config_free(c);
    const char *utf = "name: \"café ☕\"\n";
    ASSERT_OK(vg_config_parse(utf, strlen(utf), "u.yaml", &c, E));
    ASSERT_STREQ(vg_config_get_string(c, "name", NULL), "café ☕");
    vg_config_free(c);
}

/* proves: S4-062 */
TEST(wrong_type_names_the_key)
{
    struct vg_config *c = NULL;
    vigil_error err = {0};
    const char *yaml = "model:\n  max_retries: three\n";
    ASSERT_CODE(VIGIL_EINVAL, vg_config_parse(yaml, strlen(yaml), "t.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "\"model.max_retries\" must be an integer");
}

/* A misspelled key in the file is refused with its name and where it is, not left to read as
 * its default (`provder: openai` used to leave the scripted model answering). */
TEST(unknown_keys_in_the_file_are_refused)
{
    struct vg_config *c = NULL;
    vigil_error err = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/typo.yaml", vg_test_tmpdir("config_unknown"));
    write_text(path, "model:\n  provder: openai\n  name: gpt-4o\n");
    ASSERT_CODE(VIGIL_EINVAL, vg_config_load(path, &c, &err));
    ASSERT_CONTAINS(err.message, "unknown key \"provder\" under model");
    ASSERT_CONTAINS(err.message, path);
    write_text(path, "bogus_key: 1\nmodel: {provider: openai}\n");
    ASSERT_CODE(VIGIL_EINVAL, vg_config_load(path, &c, &err));
    ASSERT_CONTAINS(err.message, "unknown key \"bogus_key\" at the top level");
    write_text(path, "sandbox: {enabled: true, limit: {wall_ms: 5}}\n");
    ASSERT_CODE(VIGIL_EINVAL, vg_config_load(path, &c, &err));
    ASSERT_CONTAINS(err.message, "unknown key \"limit\" under sandbox");
    /* Every documented section and key still loads. */
    write_text(path, "store: x.db\nmodel: {provider: openai, prices: {m: {input: 1}}}\n"
                     "embed: {provider: builtin}\nagent: {max_tool_rounds: 3}\n"
                     "sandbox: {accept_missing: [userns], limits: {wall_ms: 5}}\n"
                     "mcp_servers: {}\ncommand_tools: {}\n");
    ASSERT_OK(vg_config_load(path, &c, E));
    vg_config_free(c);
}

/* proves: S4-061 */
TEST(api_keys_are_refused_in_the_file)
{
    struct vg_config *c = NULL;
    vigil_error err = {0};
    const char *yaml = "model:\n  provider: openai\n  api_key: sk-secret\n";
    ASSERT_CODE(VIGIL_EINVAL, vg_config_parse(yaml, strlen(yaml), "k.yaml", &c, &err));
    ASSERT_CONTAINS(err.message, "environment");
}

TEST(environment_overrides_the_file)
{
    struct vg_config *c = NULL;
    char path[512];
    clear_env();
    snprintf(path, sizeof(path), "%s/config.yaml", vg_test_tmpdir("config_env"));
    write_text(path, "model:\n  provider: openai\n  name: gpt-4o\n  max_retries: 1\n"
                     "  base_url: http://file\n");
    setenv("VIGIL_MODEL_PROVIDER", "anthropic", 1);
    setenv("VIGIL_MODEL", "claude-sonnet-4", 1);
    setenv("VIGIL_MODEL_MAX_RETRIES", "4", 1);
    setenv("VIGIL_MODEL_TIMEOUT_MS", "2500", 1);
    setenv("VIGIL_MODEL_CASSETTE", "/tmp/c.json", 1);
    ASSERT_OK(vg_config_load(path, &c, E));
    ASSERT_STREQ(vg_config_path(c), path);
    ASSERT_STREQ(vg_config_get_string(c, "model.provider", NULL), "anthropic");
    ASSERT_STREQ(vg_config_get_string(c, "model.name", NULL), "claude-sonnet-4");
    ASSERT_STREQ(vg_config_get_string(c, "model.base_url", NULL), "http://file");
    ASSERT_STREQ(vg_config_get_string(c, "model.cassette", NULL), "/tmp/c.json");
    ASSERT_EQ(vg_config_get_int(c, "model.max_retries", 0), 4);
    ASSERT_EQ(vg_config_get_int(c, "model.timeout_ms", 0), 2500);
    vg_config_free(c);

    setenv("VIGIL_MODEL_MAX_RETRIES", "lots", 1);
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_config_load(path, &c, &err));
    ASSERT_CONTAINS(err.message, "VIGIL_MODEL_MAX_RETRIES");
    clear_env();
}

TEST(default_path_rules)
{
    struct vg_config *c = NULL;
    char want[512], got[512];
    const char *dir = vg_test_tmpdir("config_default");
    clear_env();
    setenv("XDG_CONFIG_HOME", dir, 1);
    ASSERT_OK(vg_config_default_path(got, sizeof(got), E));
    snprintf(want, sizeof(want), "%s/vigil/config.yaml", dir);
    ASSERT_STREQ(got, want);
    ASSERT_OK(vg_config_load(NULL, &c, E)); /* a missing default file is fine */
    ASSERT(vg_config_path(c) == NULL);
    ASSERT_STREQ(vg_config_get_string(c, "model.provider", "scripted"), "scripted");
    vg_config_free(c);

    char sub[512];
    snprintf(sub, sizeof(sub), "%s/vigil", dir);
    ASSERT_OK(vg_fs_mkdir_p(sub, E));
    write_text(want, "model:\n  provider: openai\n");
    ASSERT_OK(vg_config_load(NULL, &c, E));
    ASSERT_STREQ(vg_config_get_string(c, "model.provider", NULL), "openai");
    vg_config_free(c);

    char other[512];
    snprintf(other, sizeof(other), "%s/other.json", dir);
    write_text(other, "{\"model\":{\"provider\":\"anthropic\"}}");
    setenv("VIGIL_CONFIG", other, 1); /* VIGIL_CONFIG wins over XDG */
    ASSERT_OK(vg_config_load(NULL, &c, E));
    ASSERT_STREQ(vg_config_get_string(c, "model.provider", NULL), "anthropic");
    vg_config_free(c);

    vigil_error err = {0};
    setenv("VIGIL_CONFIG", "/nonexistent/vigil.yaml", 1); /* explicit and missing: an error */
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_config_load(NULL, &c, &err));
    ASSERT_CONTAINS(err.message, "/nonexistent/vigil.yaml");
    unsetenv("XDG_CONFIG_HOME");
    clear_env();
}

TEST(set_values)
{
    struct vg_config *c = NULL;
    ASSERT_OK(vg_config_new(&c, E));
    ASSERT_OK(vg_config_set_string(c, "a.b.c", "x", E));
    ASSERT_OK(vg_config_set_int(c, "a.n", 3, E));
    ASSERT_STREQ(vg_config_get_string(c, "a.b.c", NULL), "x");
    ASSERT_EQ(vg_config_get_int(c, "a.n", 0), 3);
    const char *s = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_config_string(c, "a.n", NULL, &s, &err));
    ASSERT_CODE(VIGIL_EINVAL, vg_config_set_string(c, "a..b", "x", &err));
    vg_config_free(c);
}

/* A file loaded again is parsed once (config.c shares the last parse): what one load's owner
 * changes stays its own, and an edit of the file, even to text of the same length, is read. */
TEST(a_file_loaded_again_reads_its_edits)
{
    struct vg_config *a = NULL, *b = NULL, *c = NULL;
    char path[512];
    clear_env();
    snprintf(path, sizeof(path), "%s/config.yaml", vg_test_tmpdir("config_again"));
    write_text(path, "model:\n  provider: openai\nmcp_servers:\n  s0: {command: [x]}\n");
    ASSERT_OK(vg_config_load(path, &a, E));
    ASSERT_OK(vg_config_set_string(a, "model.provider", "changed", E));
    ASSERT_OK(vg_config_load(path, &b, E));
    ASSERT_STREQ(vg_config_get_string(b, "model.provider", NULL), "openai");
    ASSERT_STREQ(vg_config_get_string(a, "model.provider", NULL), "changed");
    write_text(path, "model:\n  provider: ollama\nmcp_servers:\n  s0: {command: [x]}\n");
    ASSERT_OK(vg_config_load(path, &c, E));
    ASSERT_STREQ(vg_config_get_string(c, "model.provider", NULL), "ollama");
    vg_config_free(a);
    vg_config_free(b);
    vg_config_free(c);
}

/* An empty file, or one of comments only, is a config with every key at its default, as a
 * missing file is (trial K10: it was "malformed config" with no reason). */
TEST(an_empty_file_is_an_empty_config)
{
    const char *texts[] = {"", "\n", "# my config, to fill in later\n", "---\n"};
    for (size_t i = 0; i < VG_ARRAY_LEN(texts); i++) {
        struct vg_config *c = NULL;
        ASSERT_OK(vg_config_parse(texts[i], strlen(texts[i]), "c.yaml", &c, E));
        ASSERT_STREQ(vg_config_get_string(c, "model.provider", "dflt"), "dflt");
        vg_config_free(c);
    }
    char path[512];
    struct vg_config *c = NULL;
    clear_env();
    snprintf(path, sizeof(path), "%s/config.yaml", vg_test_tmpdir("config_empty"));
    write_text(path, "# model: {provider: openai}\n");
    ASSERT_OK(vg_config_load(path, &c, E));
    ASSERT_STREQ(vg_config_get_string(c, "model.provider", "dflt"), "dflt");
    vg_config_free(c);
}

int main(void)
{
    vg_alloc_install_json();
    RUN(yaml_values_and_lookups);
    RUN(json_file);
    RUN(malformed_files_name_the_line);
    RUN(unclosed_brackets_point_at_the_bracket);
    RUN(control_bytes_and_bad_utf8_are_refused);
    RUN(wrong_type_names_the_key);
    RUN(unknown_keys_in_the_file_are_refused);
    RUN(api_keys_are_refused_in_the_file);
    RUN(environment_overrides_the_file);
    RUN(default_path_rules);
    RUN(set_values);
    RUN(a_file_loaded_again_reads_its_edits);
    RUN(an_empty_file_is_an_empty_config);
    return 0;
}
