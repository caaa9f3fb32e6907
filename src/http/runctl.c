/*
 * runctl.c: a person's controls over one run over HTTP, as `vigil runs cancel|rerun|resume`
 * (cli/cmd-runctl.c, docs/runs.md): POST /v1/runs/{run}/cancel, /rerun and /resume. {run} is
 * named as every /v1/runs/{run} route names it (a run id, a run key, or a unique start of one of
 * 8+ characters: the library resolves it). Kept apart from routes.c so the run controls stay
 * one block in the route table and one file here.
 */
#include "base/common.h"

#include "http/http_int.h"

/* A new run was queued: the daemon's wake loop looks now instead of at its next poll. */
static void poke(struct vg_req *r)
{
    if (r->h->o.poke)
        r->h->o.poke(r->h->o.poke_user);
}

/* POST /v1/runs/{run}/cancel {"by"?}: a queued run never starts ("queued"); a running one stops
 * at its next safe point ("requested"). A run that ended, or a chat turn: ESTATE (409). */
void vg_http_run_cancel(struct vg_req *r)
{
    vigil_error err = {0};
    int bad = 0, queued = 0;
    const char *by = vg_req_str(r, "by", &bad);
    if (bad) {
        vg_req_error(r, VIGIL_EINVAL, "\"by\" must be a string");
        return;
    }
    vigil_code rc = vigil_run_cancel(r->rt, r->params[0], by ? by : "http", &queued, &err);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    vg_req_value(r, 200,
                 json_pack("{s:s, s:s}", "cancelled", queued ? "queued" : "requested", "message",
                           queued ? "cancelled: it will not start"
                                  : "cancel requested: it stops at its next safe point"));
}

/* The body of rerun and resume: {"prompt"?}. The CLI overrides only the prompt so far
 * (docs/runs.md): a model or tool allowlist is refused rather than silently ignored. */
static int again_body(struct vg_req *r, const char **prompt)
{
    int bad = 0;
    *prompt = vg_req_str(r, "prompt", &bad);
    if (bad) {
        vg_req_error(r, VIGIL_EINVAL, "\"prompt\" must be a string");
        return 0;
    }
    if (r->body && (json_object_get(r->body, "model") || json_object_get(r->body, "tools"))) {
        vg_req_error(r, VIGIL_EINVAL,
                     "only the prompt can be overridden in a re-run so far, not the model or "
                     "the tool allowlist");
        return 0;
    }
    return 1;
}

/* POST /v1/runs/{run}/rerun and /resume {"prompt"?}: 202 with the new run's key. */
void vg_http_run_again(struct vg_req *r)
{
    vigil_error err = {0};
    const char *prompt = NULL;
    char key[65];
    if (!again_body(r, &prompt))
        return;
    int resume = !strcmp(strrchr(r->path, '/') + 1, "resume");
    vigil_code rc = resume ? vigil_run_resume(r->rt, r->params[0], prompt, key, &err)
                           : vigil_run_rerun(r->rt, r->params[0], prompt, key, &err);
    if (rc) {
        vg_req_fail(r, rc, &err);
        return;
    }
    poke(r);
    vg_req_value(r, 202, json_pack("{s:s}", "run_key", key));
}
