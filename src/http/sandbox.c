/*
 * sandbox.c: the code sandbox over HTTP, as `vigil sandbox check|run` (cli/cmd-sandbox.c,
 * docs/sandbox.md): GET /v1/sandbox and POST /v1/sandbox/run. A run is the same confined
 * execution execute_code makes inside the daemon's turns; with "agent" it goes through that
 * agent's gate (execute_code granted, its budgets, kill switches, limits and working folder)
 * and is recorded in its history as a call made by hand; without, it has the config's limits
 * and no host tools. It may take the program's whole wall-clock limit: the route runs on a
 * worker thread (vg_http_route_waits).
 */
#include "base/common.h"

#include "http/http_int.h"

void vg_http_sandbox_check(struct vg_req *r)
{
    vigil_error err = {0};
    char *out = NULL;
    vigil_code rc = vigil_sandbox_check(r->rt, &out, &err);
    vg_req_answer(r, rc, out, &err);
}

/* POST /v1/sandbox/run {"code", "language"?, "agent"?}: 200 with the run's answer, whether
 * the program succeeded or not ({"ok": ...}); a refusal by the agent's gate before anything
 * ran is its code's status, with the answer, code and message. */
void vg_http_sandbox_run(struct vg_req *r)
{
    vigil_error err = {0};
    int bad = 0;
    char agent[64] = "", *out = NULL;
    const char *code = vg_req_str(r, "code", &bad), *language = vg_req_str(r, "language", &bad);
    const char *who = vg_req_str(r, "agent", &bad);
    if (bad || !code) {
        vg_req_error(r, VIGIL_EINVAL,
                     "send {\"code\": \"...\"} (and optionally \"language\": \"lua\", "
                     "\"typescript\" or \"javascript\", \"agent\": an id or a name)");
        return;
    }
    if (who && vg_http_agent_id(r, who, agent, sizeof agent))
        return;
    size_t len = json_string_length(json_object_get(r->body, "code")); /* a NUL is the code's */
    vigil_code rc =
        vigil_sandbox_run_language(r->rt, who ? agent : NULL, language, code, len, &out, &err);
    json_t *v = out ? json_loads(out, 0, NULL) : NULL;
    vigil_free(out);
    if (!v) {
        vg_req_answer(r, rc, NULL, &err);
        return;
    }
    if (rc) {
        json_object_set_new(v, "code", json_string(vigil_code_name(rc)));
        json_object_set_new(v, "message", json_string(err.message));
    }
    vg_req_value(r, rc ? vigil_code_http_status(rc) : 200, v);
}
