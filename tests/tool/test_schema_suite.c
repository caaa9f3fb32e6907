/*
 * test_schema_suite.c: runs the official JSON Schema Test Suite (draft 7, Debian package
 * json-schema-test-suite) against vigil's validator. Prints pass/total per file and overall;
 * fails when a file of a supported keyword has a failing case, or when the suite is missing.
 * Remote references (refRemote.json) are served from the suite's remotes/ folder through the
 * compile-time resolver, the way a host would serve its own schema documents.
 */
/* proves: S0-048, S4-068 (arguments are validated against the tool's JSON Schema) */
#include "helpers/test.h"

#include "base/buf.h"
#include "tool/schema.h"

#include <dirent.h>

#ifndef VG_SCHEMA_SUITE_DIR
#define VG_SCHEMA_SUITE_DIR "/usr/share/json-schema-test-suite"
#endif

/* Files whose failures are reported but do not fail the test. Keep this short. */
static const char *const non_gating[] = {
    NULL,
};

static int is_gating(const char *file)
{
    for (size_t i = 0; non_gating[i]; i++)
        if (strcmp(non_gating[i], file) == 0)
            return 0;
    return 1;
}

#define REMOTE_PREFIX "http://localhost:1234/"

/* Serves http://localhost:1234/<path> from the suite's remotes/ folder. */
static json_t *resolve_remote(void *user, const char *uri, vigil_error *err)
{
    char path[1024];
    json_error_t jerr;
    VG_UNUSED(user);
    if (strncmp(uri, REMOTE_PREFIX, strlen(REMOTE_PREFIX)) != 0 || strstr(uri, "..")) {
        VG_FAIL(err, VIGIL_ENOTFOUND, "no such remote \"%s\"", uri);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/remotes/%s", VG_SCHEMA_SUITE_DIR, uri + strlen(REMOTE_PREFIX));
    json_t *doc = json_load_file(path, 0, &jerr);
    if (!doc)
        VG_FAIL(err, VIGIL_ENOTFOUND, "cannot load %s: %s", path, jerr.text);
    return doc;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run one file; returns the number of failed cases and adds to *pass / *total. */
static int run_file(const char *dir, const char *name, int *pass, int *total)
{
    char path[1024];
    json_error_t jerr;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_t *groups = json_load_file(path, 0, &jerr);
    if (!groups) /* bignum.json: integers beyond 64 bits, which jansson reads only as reals */
        groups = json_load_file(path, JSON_DECODE_INT_AS_REAL, &jerr);
    if (!groups || !json_is_array(groups))
        TEST_FAIL_("cannot load %s: %s", path, jerr.text);
    struct vg_schema_options opts = {resolve_remote, NULL};
    int failed = 0;
    size_t gi;
    json_t *group;
    json_array_foreach (groups, gi, group) {
        const char *gdesc = json_string_value(json_object_get(group, "description"));
        json_t *tests = json_object_get(group, "tests");
        struct vg_schema *s = NULL;
        vigil_error err = {0};
        vigil_code rc = vg_schema_compile_ex(json_object_get(group, "schema"), &opts, &s, &err);
        size_t ti;
        json_t *t;
        json_array_foreach (tests, ti, t) {
            const char *tdesc = json_string_value(json_object_get(t, "description"));
            int expect = json_is_true(json_object_get(t, "valid"));
            int got = -1;
            (*total)++;
            if (rc == VIGIL_OK) {
                vigil_error verr = {0};
                struct vg_buf errors;
                vg_buf_init(&errors, 1 << 16);
                vigil_code vrc = vg_schema_validate(s, json_object_get(t, "data"), &errors, &verr);
                got = vrc == VIGIL_OK ? 1 : vrc == VIGIL_EINVAL ? 0 : -1;
                /* Every violation also shows in the list, and the list is empty when valid. */
                if (got == 0 && (errors.len == 0 || !strstr(errors.data, verr.message)))
                    got = -2;
                if (got == 1 && errors.len != 0)
                    got = -2;
                vg_buf_release(&errors);
                if (got == 0 && expect == 1)
                    fprintf(stderr, "  %s: %s / %s: unexpectedly invalid: %s\n", name, gdesc, tdesc,
                            verr.message);
            }
            if (got == expect) {
                (*pass)++;
            } else {
                failed++;
                if (rc != VIGIL_OK)
                    fprintf(stderr, "  %s: %s / %s: schema did not compile: %s\n", name, gdesc,
                            tdesc, err.message);
                else if (got != 0)
                    fprintf(stderr, "  %s: %s / %s: expected %s, got %d\n", name, gdesc, tdesc,
                            expect ? "valid" : "invalid", got);
            }
        }
        vg_schema_free(s);
    }
    json_decref(groups);
    return failed;
}

/* Run every *.json of a folder in name order; returns the gating files that failed. */
static int run_dir(const char *dir, const char *label, int gate, int *pass_all, int *total_all)
{
    DIR *d = opendir(dir);
    if (!d)
        TEST_FAIL_("the JSON Schema Test Suite is missing: %s not found (install the Debian "
                   "package json-schema-test-suite: scripts/deps.sh test)",
                   dir);
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < VG_ARRAY_LEN(names)) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0)
            names[n++] = vg_strdup(e->d_name);
    }
    closedir(d);
    ASSERT(n > 0);
    qsort(names, n, sizeof names[0], cmp_names);

    int gating_failures = 0;
    for (size_t i = 0; i < n; i++) {
        int pass = 0, total = 0;
        int failed = run_file(dir, names[i], &pass, &total);
        int gating = gate && is_gating(names[i]);
        char shown[300];
        snprintf(shown, sizeof shown, "%s%s", label, names[i]);
        printf("| %-34s | %4d/%-4d | %s |\n", shown, pass, total,
               failed ? (gating ? "FAIL" : "not gating") : "");
        if (failed && gating)
            gating_failures++;
        *pass_all += pass;
        *total_all += total;
        vg_free(names[i]);
    }
    return gating_failures;
}

TEST(official_suite_draft7)
{
    int pass = 0, total = 0, failures;
    printf("| %-34s | %9s | %s |\n", "file", "pass", "note");
    printf("|------------------------------------|-----------|------|\n");
    failures = run_dir(VG_SCHEMA_SUITE_DIR "/tests/draft7", "", 1, &pass, &total);
    printf("| %-34s | %4d/%-4d |   |\n", "**total (gating)**", pass, total);
    /* optional/: reported for information (format/ is skipped: `format` is annotation only). */
    int opass = 0, ototal = 0;
    run_dir(VG_SCHEMA_SUITE_DIR "/tests/draft7/optional", "optional/", 0, &opass, &ototal);
    printf("| %-34s | %4d/%-4d |   |\n", "total (optional, not gating)", opass, ototal);
    fflush(stdout);
    ASSERT_EQ(failures, 0);
}

int main(void)
{
    RUN(official_suite_draft7);
    return 0;
}
