/*
 * test_manifest.c: the manifest reader against the suite in tests/manifest/files: every valid
 * file reads with no problem and survives a YAML round trip (to_yaml then read gives the same
 * manifest); every invalid file reports exactly the problems its FILE.expect lists, one per
 * line as "LINE:COLUMN: text the message starts with or contains", in any order. Then apply:
 * create, unchanged, update, dry run, duplicate names across a directory, export round trip.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "helpers/rt.h"
#include "helpers/test.h"
#include "manifest/manifest.h"
#include "os/fs.h"
#include "tool/schema.h"

#include <dirent.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "helpers/pg_env.h"
#include "runtime/runtime.h"

#define FILES VIGIL_SOURCE_DIR "/tests/manifest/files"

static char *slurp(const char *path, size_t *len)
{
    char *text = NULL;
    ASSERT_OK(vg_fs_read_file(path, 1 << 20, &text, len, E));
    return text;
}

static int is_manifest(const char *n)
{
    size_t l = strlen(n);
    return (l > 5 && !strcmp(n + l - 5, ".yaml")) || (l > 5 && !strcmp(n + l - 5, ".json"));
}

/* Every manifest file of a suite folder, in name order, to fn. */
static int each_file(const char *dir, void (*fn)(const char *path, const char *name))
{
    struct dirent **list = NULL;
    int n = scandir(dir, &list, NULL, alphasort), seen = 0;
    ASSERT(n > 0);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        if (is_manifest(list[i]->d_name)) {
            fn(path, list[i]->d_name);
            seen++;
        }
        free(list[i]);
    }
    free(list);
    return seen;
}

static void check_valid(const char *path, const char *name)
{
    size_t len = 0;
    char *text = slurp(path, &len);
    json_t *doc = NULL, *again = NULL, *problems = json_array();
    vigil_error err = {0};
    if (vg_manifest_parse(text, len, name, &doc, NULL, problems, &err))
        TEST_FAIL_("%s should be valid: %s", name, err.message);
    ASSERT_EQ(json_array_size(problems), 0);
    char *yaml = vg_manifest_to_yaml(doc);
    ASSERT(yaml);
    if (vg_manifest_parse(yaml, strlen(yaml), "roundtrip.yaml", &again, NULL, problems, &err))
        TEST_FAIL_("%s: its YAML does not read back: %s\n%s", name, err.message, yaml);
    if (!json_equal(doc, again))
        TEST_FAIL_("%s: its YAML reads back different:\n%s", name, yaml);
    vg_free(yaml);
    vg_free(text);
    json_decref(doc);
    json_decref(again);
    json_decref(problems);
}

/* Does one problem ("L:C: message") match an expectation line ("L:C: text")? */
static int matches(const char *got, const char *want)
{
    const char *sp = strchr(want, ' ');
    if (!sp || strncmp(got, want, (size_t)(sp - want + 1)))
        return 0;
    return strstr(got, sp + 1) != NULL;
}

static void check_invalid(const char *path, const char *name)
{
    size_t len = 0, elen = 0;
    char expect_path[4200], got[256][640];
    char *text = slurp(path, &len);
    snprintf(expect_path, sizeof expect_path, "%s.expect", path);
    char *expect = slurp(expect_path, &elen);
    json_t *doc = NULL, *problems = json_array(), *p;
    vigil_error err = {0};
    vigil_code rc = vg_manifest_parse(text, len, name, &doc, NULL, problems, &err);
    if (rc != VIGIL_EINVAL && rc != VIGIL_EPARSE)
        TEST_FAIL_("%s should be invalid, got %s", name, vigil_code_name(rc));
    /* The error message is the first problem, placed: "FILE:LINE:COLUMN: ...". */
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s:", name);
    ASSERT(!strncmp(err.message, prefix, strlen(prefix)));
    size_t n = json_array_size(problems), want_n = 0;
    ASSERT(n > 0 && n < 256);
    json_array_foreach (problems, want_n, p)
        snprintf(got[want_n], sizeof got[0], "%d:%d: %s",
                 (int)json_integer_value(json_object_get(p, "line")),
                 (int)json_integer_value(json_object_get(p, "column")),
                 json_string_value(json_object_get(p, "message")));
    want_n = 0;
    for (char *line = expect, *nl; line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        int found = 0;
        for (size_t i = 0; i < n && !found; i++)
            found = matches(got[i], line);
        if (!found) {
            for (size_t i = 0; i < n; i++)
                fprintf(stderr, "  %s: %s\n", name, got[i]);
            TEST_FAIL_("%s: no problem \"%s\"", name, line);
        }
        want_n++;
        if (!nl)
            break;
    }
    if (want_n != n) {
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, "  %s: %s\n", name, got[i]);
        TEST_FAIL_("%s: %zu problems, %zu expected", name, n, want_n);
    }
    vg_free(text);
    vg_free(expect);
    json_decref(problems);
}

TEST(valid_files_read_and_round_trip)
{
    ASSERT(each_file(FILES "/valid", check_valid) >= 4);
}

TEST(invalid_files_report_each_problem_at_its_place)
{
    ASSERT(each_file(FILES "/invalid", check_invalid) >= 14);
}

/* The embedded schema is the published one. */
TEST(embedded_schema_is_the_published_file)
{
    size_t len = 0;
    char *text = slurp(VIGIL_SOURCE_DIR "/share/schema/manifest.schema.json", &len);
    json_error_t je;
    json_t *published = json_loads(text, 0, &je), *embedded = vg_manifest_schema();
    ASSERT(published && embedded);
    if (!json_equal(published, embedded))
        TEST_FAIL_("the schema compiled in differs from share/schema/manifest.schema.json: "
                   "rebuild (cmake/embed_text.cmake writes it)");
    json_decref(published);
    json_decref(embedded);
    vg_free(text);
}

/* Every process that creates or applies an agent keeps the compiled manifest schema for its
 * life. POSIX regular expressions expand a bounded repeat ({1,64}, {1,200}) into that many
 * copies: the schema's few such patterns made it 783 KB instead of 227 KB
 * (docs/internals/PERF.md, session 33); lengths are bounded by maxLength instead. */
TEST(the_compiled_manifest_schema_is_small)
{
    json_t *schema = vg_manifest_schema();
    ASSERT(schema);
    struct vg_schema *compiled = NULL;
    size_t before = mallinfo2().uordblks;
    ASSERT_OK(vg_schema_compile(schema, &compiled, E));
    size_t used = mallinfo2().uordblks - before;
    if (used > 320 * 1024) /* 227 KB; with the bounded repeats 783 KB */
        TEST_FAIL_("the compiled manifest schema holds %zu bytes", used);
    vg_schema_free(compiled);
    json_decref(schema);
}

/* The lengths the patterns used to bound hold as maxLength. */
TEST(names_in_the_manifest_keep_their_length_limits)
{
    json_t *schema = vg_manifest_schema();
    struct vg_schema *compiled = NULL;
    ASSERT_OK(vg_schema_compile(schema, &compiled, E));
    char kind[80], glob[220];
    memset(kind, 'k', sizeof kind);
    memset(glob, 'g', sizeof glob);
    struct {
        const char *field;
        size_t ok_len;
    } cases[] = {{"kind", 64}, {"tags", 64}, {"tools", 200}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = cases[i].ok_len == 200 ? glob : kind;
        for (size_t len = cases[i].ok_len; len <= cases[i].ok_len + 1; len++) {
            json_t *v = json_stringn(text, len);
            json_t *doc = strcmp(cases[i].field, "kind")
                              ? json_pack("{s:s, s:[o]}", "name", "n", cases[i].field, v)
                              : json_pack("{s:s, s:o}", "name", "n", cases[i].field, v);
            struct vg_buf lines;
            vg_buf_init(&lines, VG_BUF_DEFAULT_MAX);
            vigil_error verr = {0};
            vigil_code rc = vg_schema_validate(compiled, doc, &lines, &verr);
            if ((len == cases[i].ok_len) != (rc == VIGIL_OK))
                TEST_FAIL_("%s of %zu characters: %s", cases[i].field, len,
                           rc ? "refused" : "accepted");
            vg_buf_release(&lines);
            json_decref(doc);
        }
    }
    vg_schema_free(compiled);
    json_decref(schema);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ASSERT_OK(vg_fs_write_file(path, text, strlen(text), E));
}

static json_t *apply(struct test_rt *t, const char *path, int dry, vigil_code want)
{
    json_t *out = NULL, *problems = json_array();
    vigil_error err = {0};
    vigil_code rc = vg_manifest_apply_path(t->env, path, dry, &out, problems, &err);
    if (rc != want)
        TEST_FAIL_("apply %s: %s (%s)", path, vigil_code_name(rc), err.message);
    json_decref(problems);
    return out;
}

static const char *action_of(json_t *report, size_t i)
{
    return json_string_value(json_object_get(json_array_get(report, i), "action"));
}

/* proves: S2-029 */
TEST(apply_creates_then_is_unchanged_then_updates)
{
    struct test_rt t;
    test_rt_open(&t, "manifest_apply");
    const char *dir = vg_test_tmpdir("manifest_apply_files");
    write_file(dir, "a.yaml",
               "name: alpha\nprompt: one\ntools: [set_report]\n"
               "limits: {max_steps: 4}\n");
    write_file(dir, "b.json", "{\"name\": \"beta\", \"visibility\": \"public\"}");

    json_t *r = apply(&t, dir, 1, VIGIL_OK); /* dry run: nothing written */
    ASSERT_STREQ(action_of(r, 0), "created");
    ASSERT(json_is_null(json_object_get(json_array_get(r, 0), "id")));
    json_decref(r);
    json_t *list = NULL;
    ASSERT_OK(vg_agent_list(t.env, NULL, 10, &list, E));
    ASSERT_EQ(json_array_size(json_object_get(list, "items")), 0);
    json_decref(list);

    r = apply(&t, dir, 0, VIGIL_OK);
    ASSERT_STREQ(action_of(r, 0), "created");
    ASSERT_STREQ(action_of(r, 1), "created");
    const char *id = json_string_value(json_object_get(json_array_get(r, 0), "id"));
    json_t *agent = NULL;
    int64_t rev = 0, rev2 = 0;
    ASSERT_OK(vg_agent_get(t.env, id, &agent, &rev, E));
    ASSERT_EQ(json_integer_value(json_object_get(
                  json_object_get(json_object_get(agent, "config"), "limits"), "max_steps")),
              4);
    json_decref(agent);

    json_t *r2 = apply(&t, dir, 0, VIGIL_OK); /* the same again: nothing written */
    ASSERT_STREQ(action_of(r2, 0), "unchanged");
    ASSERT_STREQ(action_of(r2, 1), "unchanged");
    ASSERT_OK(vg_agent_get(t.env, id, &agent, &rev2, E));
    ASSERT_EQ(rev2, rev);
    json_decref(agent);
    json_decref(r2);

    write_file(dir, "a.yaml", "name: alpha\nprompt: two\ntools: [set_report]\n");
    r2 = apply(&t, dir, 0, VIGIL_OK);
    ASSERT_STREQ(action_of(r2, 0), "updated");
    json_t *changed = json_object_get(json_array_get(r2, 0), "changes");
    ASSERT_EQ(json_array_size(changed), 2); /* prompt, and limits removed */
    ASSERT_STREQ(json_string_value(json_array_get(changed, 0)), "prompt");
    ASSERT_STREQ(json_string_value(json_array_get(changed, 1)), "limits");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(r2, 0), "id")), id);
    json_decref(r2);
    /* The stored definition follows the file, under a new version (the record's revision). */
    int64_t rev3 = 0;
    ASSERT_OK(vg_agent_get(t.env, id, &agent, &rev3, E));
    ASSERT(rev3 > rev2);
    ASSERT_STREQ(json_string_value(json_object_get(agent, "prompt")), "two");
    ASSERT(!json_object_get(json_object_get(agent, "config"), "limits"));
    json_decref(agent);
    /* An update is an ordinary change of the record spine: it replays from its records. */
    ASSERT_OK(vg_spine_verify(t.env, id, NULL, E));

    /* Export applies back unchanged. */
    json_t *m = NULL;
    ASSERT_OK(vg_manifest_export(t.env, id, &m, E));
    char *yaml = vg_manifest_to_yaml(m);
    write_file(dir, "a.yaml", yaml);
    r2 = apply(&t, dir, 0, VIGIL_OK);
    ASSERT_STREQ(action_of(r2, 0), "unchanged");
    json_decref(r2);
    vg_free(yaml);
    json_decref(m);
    json_decref(r);
    test_rt_close(&t);
}

/* An agent's config takes the application's own fields in its extension map, each key
 * namespaced: kept with the agent (beside its schema version, model and prompt), exported,
 * applied back unchanged; a key without a namespace is refused on every way in (create, a
 * manifest), and so is any other free-form field (a key no manifest field sets): nothing is
 * written. proves: S0-088 S0-082 (the prompt is kept as its text, DESIGN 3.1) */
TEST(extension_fields_are_namespaced_kept_and_exported)
{
    struct test_rt t;
    test_rt_open(&t, "manifest_extension");
    const char *dir = vg_test_tmpdir("manifest_extension_files");
    char id[37];
    vigil_agent_spec spec = {
        .name = "extended",
        .model = "claude-sonnet-4-5",
        .prompt = "You keep the board.",
        .config_json = "{\"extension\":{\"acme.color\":\"blue\",\"acme.ratio\":0.8,"
                       "\"acme.big\":1e300,\"acme.whole\":2.0,"
                       "\"com.example.board\":{\"id\":7,\"lanes\":[\"todo\",\"done\"]}}}"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, id, E));
    json_t *agent = NULL;
    ASSERT_OK(vg_agent_get(t.env, id, &agent, NULL, E));
    ASSERT(json_integer_value(json_object_get(agent, "schema_version")) >= 1);
    ASSERT_STREQ(json_string_value(json_object_get(agent, "model")), "claude-sonnet-4-5");
    ASSERT_STREQ(json_string_value(json_object_get(agent, "prompt")), "You keep the board.");
    json_t *ext = json_object_get(json_object_get(agent, "config"), "extension");
    ASSERT_STREQ(json_string_value(json_object_get(ext, "acme.color")), "blue");
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(ext, "com.example.board"), "id")),
              7);
    json_decref(agent);
    json_t *m = NULL;
    ASSERT_OK(vg_manifest_export(t.env, id, &m, E));
    char *yaml = vg_manifest_to_yaml(m);
    ASSERT_CONTAINS(yaml, "acme.color");
    /* Reals are written with the fewest digits that read back (as the rest of vigil writes
     * them), not 0.80000000000000004, and stay reals when read back. */
    ASSERT_CONTAINS(yaml, "acme.ratio: 0.8\n");
    ASSERT_CONTAINS(yaml, "acme.big: 1e300\n");
    ASSERT_CONTAINS(yaml, "acme.whole: 2.0\n");
    write_file(dir, "extended.yaml", yaml);
    json_t *r = apply(&t, dir, 0, VIGIL_OK);
    ASSERT_STREQ(action_of(r, 0), "unchanged");
    json_decref(r);
    vg_free(yaml);
    json_decref(m);

    static const char *const bad[] = {
        "{\"extension\":{\"color\":\"blue\"}}", "{\"extension\":{\".color\":1}}",
        "{\"extension\":{\"acme.\":1}}", "{\"extension\":{\"Acme.color\":1}}"};
    for (size_t i = 0; i < VG_ARRAY_LEN(bad); i++) {
        vigil_agent_spec b = {.name = "refused", .config_json = bad[i]};
        vigil_error err = {0};
        char bid[37];
        ASSERT_CODE(VIGIL_EINVAL, vigil_agent_create(t.rt, &b, bid, &err));
        ASSERT_CONTAINS(err.message, "extension");
    }
    vigil_agent_spec loose = {.name = "refused", .config_json = "{\"color\":\"blue\"}"};
    vigil_error lerr = {0};
    char lid[37];
    ASSERT_CODE(VIGIL_EINVAL, vigil_agent_create(t.rt, &loose, lid, &lerr));
    ASSERT_CONTAINS(lerr.message, "unknown key \"color\"");
    write_file(dir, "extended.yaml", "name: extended\nextension: {color: blue}\n");
    r = apply(&t, dir, 0, VIGIL_EINVAL);
    json_decref(r);
    ASSERT_OK(vg_agent_get(t.env, id, &agent, NULL, E));
    ext = json_object_get(json_object_get(agent, "config"), "extension");
    ASSERT_STREQ(json_string_value(json_object_get(ext, "acme.color")), "blue");
    ASSERT(!json_object_get(ext, "color"));
    json_decref(agent);
    json_t *list = NULL;
    ASSERT_OK(vg_agent_list(t.env, NULL, 10, &list, E));
    ASSERT_EQ(json_array_size(json_object_get(list, "items")), 1);
    json_decref(list);
    test_rt_close(&t);
}

TEST(duplicate_names_in_a_directory_apply_nothing)
{
    struct test_rt t;
    test_rt_open(&t, "manifest_dup");
    const char *dir = vg_test_tmpdir("manifest_dup_files");
    write_file(dir, "1.yaml", "name: twin\n");
    write_file(dir, "2.yaml", "prompt: p\nname: twin\n");
    json_t *problems = json_array(), *out = NULL, *list = NULL;
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EINVAL, vg_manifest_apply_path(t.env, dir, 0, &out, problems, &err));
    ASSERT_CONTAINS(err.message, "2.yaml:2:7: /name: agent name \"twin\" is already used by");
    ASSERT_EQ(json_array_size(problems), 1);
    ASSERT_OK(vg_agent_list(t.env, NULL, 10, &list, E));
    ASSERT_EQ(json_array_size(json_object_get(list, "items")), 0);
    json_decref(list);
    json_decref(problems);
    test_rt_close(&t);
}

struct other_apply {
    vigil_runtime *rt;
    const char *path;
    vigil_code rc;
    char message[256];
    atomic_int done;
};

static void *other_apply_main(void *p)
{
    struct other_apply *o = p;
    vigil_error err = {0};
    json_t *out = NULL, *problems = json_array();
    o->rc = vg_manifest_apply_path(vg_runtime_env(o->rt), o->path, 0, &out, problems, &err);
    snprintf(o->message, sizeof o->message, "%s", err.message);
    json_decref(out);
    json_decref(problems);
    atomic_store(&o->done, 1);
    return NULL;
}

/* Two applies of one new name on two connections (two deploy jobs, two daemons of a fleet):
 * on PostgreSQL they ran at once and both created it (E30 of trial E); the second now waits
 * for the first and finds the agent it created. */
TEST(two_applies_of_one_name_at_once_create_one_agent)
{
    const char *uri = getenv("VIGIL_PG_URI");
    if (!uri || !*uri) {
        fprintf(stderr, "skipped: no VIGIL_PG_URI for the two connections\n");
        return;
    }
    struct test_rt t;
    char waiting[32] = "0";
    setenv("VIGIL_TEST_RT_PG", "1", 1);
    test_rt_open(&t, "manifest_apply_race");
    unsetenv("VIGIL_TEST_RT_PG");
    const char *dir = vg_test_tmpdir("manifest_apply_race_files");
    write_file(dir, "race.yaml", "name: race\ntools: [set_report]\n");
    json_decref(apply(&t, dir, 0, VIGIL_OK)); /* the lock's record exists */
    write_file(dir, "race.yaml", "name: race2\ntools: [set_report]\n");
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    ASSERT_OK(vg_store_begin(t.env->store, E)); /* this apply's transaction stays open */
    json_decref(apply(&t, dir, 0, VIGIL_OK));
    struct other_apply oa = {.rt = other, .path = dir};
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, other_apply_main, &oa), 0);
    for (int i = 0; !atomic_load(&oa.done) && !strcmp(waiting, "0"); i++) {
        ASSERT(i < 20000); /* 20 s */
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        vg_test_pg_value("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                         " AND datname = current_database()",
                         waiting, sizeof waiting);
    }
    ASSERT(strcmp(waiting, "0")); /* it waited, not went through */
    ASSERT_OK(vg_store_commit(t.env->store, E));
    ASSERT_EQ(pthread_join(th, NULL), 0);
    if (oa.rc)
        TEST_FAIL_("the other apply failed: %s (%s)", vigil_code_name(oa.rc), oa.message);
    json_t *list = NULL;
    ASSERT_OK(vg_agent_list(t.env, NULL, 10, &list, E));
    ASSERT_EQ(json_array_size(json_object_get(list, "items")), 2); /* race and race2, once */
    json_decref(list);
    vigil_runtime_close(other);
    test_rt_close(&t);
}

int main(void)
{
    RUN(valid_files_read_and_round_trip);
    RUN(invalid_files_report_each_problem_at_its_place);
    RUN(embedded_schema_is_the_published_file);
    RUN(the_compiled_manifest_schema_is_small);
    RUN(names_in_the_manifest_keep_their_length_limits);
    RUN(apply_creates_then_is_unchanged_then_updates);
    RUN(duplicate_names_in_a_directory_apply_nothing);
    RUN(two_applies_of_one_name_at_once_create_one_agent);
    RUN(extension_fields_are_namespaced_kept_and_exported);
    return 0;
}
