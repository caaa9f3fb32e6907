/*
 * test_limits.c: a manifest's limits are what the loop enforces for that agent, in a wake run
 * by the daemon's runner as in a chat turn (tests/cli/test_manifest.sh covers chat): the
 * scripted model would ask for tools four times, and max_steps: 2 ends the run first.
 */
#include "base/common.h"

#include "helpers/rt.h"
#include "manifest/manifest.h"
#include "os/fs.h"
#include "runtime/wake_runner.h"
#include "wake/wake.h"

static const char cassette[] =
    "{\"vigil_cassette\":1,\"exchanges\":["
    "{\"response\":{\"tool_calls\":[{\"id\":\"a\",\"name\":\"set_report\",\"arguments\":"
    "{\"scope\":\"current\",\"markdown\":\"1\"}}]}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"b\",\"name\":\"set_report\",\"arguments\":"
    "{\"scope\":\"current\",\"markdown\":\"2\"}}]}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"c\",\"name\":\"set_report\",\"arguments\":"
    "{\"scope\":\"current\",\"markdown\":\"3\"}}]}},"
    "{\"response\":{\"tool_calls\":[{\"id\":\"d\",\"name\":\"set_report\",\"arguments\":"
    "{\"scope\":\"current\",\"markdown\":\"4\"}}]}},"
    "{\"response\":{\"text\":\"done\"}}]}";

/* Apply a manifest, run one manual wake through the loop runner; the run's record (owned). */
static json_t *wake_once(const char *manifest, const char *name)
{
    struct test_rt t;
    struct vg_wake w;
    char key[65], path[4200], *text = NULL;
    enum vg_enqueue_result res;
    char files[200];
    snprintf(files, sizeof files, "%s_files", name);
    const char *dir = vg_test_tmpdir(files);
    snprintf(path, sizeof path, "%s/cassette.json", dir);
    ASSERT_OK(vg_fs_write_file(path, cassette, strlen(cassette), E));
    setenv("VIGIL_MODEL_PROVIDER", "scripted", 1);
    setenv("VIGIL_MODEL_CASSETTE", path, 1);
    unsetenv("VIGIL_CONFIG");
    snprintf(path, sizeof path, "%s/agent.yaml", dir);
    ASSERT_OK(vg_fs_write_file(path, manifest, strlen(manifest), E));
    test_rt_open(&t, name);
    json_t *report = NULL, *problems = json_array();
    ASSERT_OK(vg_manifest_apply_path(t.env, path, 0, &report, problems, E));
    const char *a = json_string_value(json_object_get(json_array_get(report, 0), "id"));
    ASSERT_OK(vg_wake_init(&w, t.env, NULL, E));
    struct vg_wake_req m = {.reason = VG_REASON_MANUAL, .agent_id = a};
    ASSERT_OK(vg_wake_enqueue(&w, &m, key, &res, E));
    int ran = 0;
    ASSERT_OK(vg_wake_drain(&w, vg_wake_runner_loop(), 0, &ran, E));
    ASSERT_EQ(ran, 1);
    ASSERT_OK(vigil_runs_list(t.rt, a, NULL, NULL, 10, &text, E));
    json_t *runs = json_loads(text, 0, NULL);
    json_t *run = json_incref(json_array_get(json_object_get(runs, "items"), 0));
    ASSERT(run != NULL);
    vigil_free(text);
    json_decref(runs);
    json_decref(report);
    json_decref(problems);
    vg_wake_release(&w);
    test_rt_close(&t);
    return run;
}

TEST(max_steps_from_the_manifest_ends_a_wake_run)
{
    json_t *run = wake_once("name: limited\ntools: [set_report]\nlimits: {max_steps: 2}\n",
                            "manifest_limits_steps");
    /* Two steps, then the one extra step the loop allows to wrap up: never the fifth. */
    ASSERT_EQ(json_integer_value(json_object_get(run, "steps")), 3);
    json_decref(run);
}

TEST(without_limits_the_same_wake_runs_to_its_end)
{
    json_t *run = wake_once("name: free\ntools: [set_report]\n", "manifest_limits_none");
    ASSERT_EQ(json_integer_value(json_object_get(run, "steps")), 5);
    ASSERT_STREQ(json_string_value(json_object_get(run, "status")), "completed");
    json_decref(run);
}

int main(void)
{
    RUN(max_steps_from_the_manifest_ends_a_wake_run);
    RUN(without_limits_the_same_wake_runs_to_its_end);
    return 0;
}
