/*
 * mcp_helpers.c: see mcp_helpers.h.
 */
#include "mcp/mcp_helpers.h"

#include "base/common.h"

#include "helpers/test.h"
#include "mcp/mcp.h"

#include <unistd.h>

static int64_t sc_now_ms(struct vg_clock *c)
{
    return 1800000000000LL + ((struct step_clock *)c)->mono_ns / 1000000;
}

static int64_t sc_mono_ns(struct vg_clock *c)
{
    struct step_clock *s = (struct step_clock *)c;
    s->mono_ns += s->step_ms * 1000000;
    return s->mono_ns;
}

static void sc_sleep_ms(struct vg_clock *c, int64_t ms)
{
    ((struct step_clock *)c)->mono_ns += ms * 1000000;
}

static const struct vg_clock_methods step_methods = {1, "step", sc_now_ms, sc_mono_ns, sc_sleep_ms};

void step_clock_init(struct step_clock *c)
{
    memset(c, 0, sizeof *c);
    c->base.methods = &step_methods;
    c->mono_ns = 1000000000LL;
}

void step_clock_advance(struct step_clock *c, int64_t ms)
{
    c->mono_ns += ms * 1000000;
}

void mcp_skip(const char *why)
{
    const char *req = getenv("VIGIL_REQUIRE_MCP");
    if (req && !strcmp(req, "1")) {
        fprintf(stderr, "FAIL: VIGIL_REQUIRE_MCP=1 but %s (run scripts/npm.sh)\n", why);
        exit(1);
    }
    fprintf(stderr, "skip: %s (scripts/npm.sh installs the MCP servers)\n", why);
    exit(77);
}

void mcp_need_node(void)
{
    if (system("node --version >/dev/null 2>&1") != 0)
        mcp_skip("node is not installed");
}

const char *mcp_npm_bin(const char *bin, char *out, size_t n)
{
    const char *dir = getenv("VIGIL_MCP_NPM_DIR");
    if (dir && *dir)
        snprintf(out, n, "%s/node_modules/.bin/%s", dir, bin);
    else
        snprintf(out, n, "%s/.deps/npm/node_modules/.bin/%s", VIGIL_SOURCE_DIR, bin);
    if (access(out, X_OK) != 0) {
        char why[600];
        snprintf(why, sizeof why, "%s is not installed at %s", bin, out);
        mcp_skip(why);
    }
    mcp_need_node();
    return out;
}

struct vg_mcp_conf *mcp_conf_of(const char *json)
{
    struct vg_mcp_conf *c = NULL;
    vigil_error err = {0};
    json_t *j = json_loads(json, 0, NULL);
    ASSERT(j);
    if (vg_mcp_conf_parse(j, &c, &err))
        TEST_FAIL_("%s", err.message);
    json_decref(j);
    return c;
}

void mcp_quiet(void *user, const char *server, const char *line)
{
    (void)user, (void)server, (void)line;
}

json_t *mcp_call(struct vg_mcp_client *c, const char *tool, const char *args)
{
    json_t *a = json_loads(args, 0, NULL), *res = NULL;
    vigil_error err = {0};
    if (vg_mcp_client_call(c, tool, a, &res, &err))
        TEST_FAIL_("%s: %s", tool, err.message);
    json_decref(a);
    return res;
}

const char *mcp_first_text(json_t *res)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
}

int mcp_count_lines(const char *path)
{
    int n = 0, ch;
    FILE *f = fopen(path, "r");
    while (f && (ch = fgetc(f)) != EOF)
        n += ch == '\n';
    if (f)
        fclose(f);
    return n;
}
