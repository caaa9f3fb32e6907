/*
 * env.c: the notifier that holds tokens until their transaction ends, and the JSON record
 * helpers every domain module uses to read and write the store.
 */
#include "base/common.h"

#include "base/json.h"

#include "runtime/env.h"

#include <jansson.h>

static void notifier_clear(struct vg_notifier *nt)
{
    for (size_t i = 0; i < nt->n; i++)
        vg_free(nt->tokens[i]);
    nt->n = 0;
    nt->overflow = 0;
}

static void deliver(struct vg_notifier *nt)
{
    if (nt->fn && nt->overflow) {
        static const char *const resync[] = {"RESYNC"};
        nt->fn(nt->fn_user, resync, 1);
    } else if (nt->fn && nt->n) {
        nt->fn(nt->fn_user, (const char *const *)nt->tokens, nt->n);
    }
    notifier_clear(nt);
}

static void on_tx_end(void *user, int committed)
{
    struct vg_env *env = user;
    if (committed)
        deliver(&env->notify);
    else
        notifier_clear(&env->notify);
}

void vg_env_bind(struct vg_env *env)
{
    vg_store_set_tx_hook(env->store, on_tx_end, env);
}

void vg_env_notify(struct vg_env *env, const char *const *tokens, size_t n)
{
    struct vg_notifier *nt = &env->notify;
    for (size_t i = 0; i < n; i++) {
        if (nt->n == nt->cap) {
            size_t cap = nt->cap ? nt->cap * 2 : 16;
            char **p = vg_realloc(nt->tokens, cap * sizeof *p);
            if (!p) {
                nt->overflow = 1;
                return;
            }
            nt->tokens = p;
            nt->cap = cap;
        }
        char *t = vg_strdup(tokens[i]);
        if (!t) {
            nt->overflow = 1;
            return;
        }
        nt->tokens[nt->n++] = t;
    }
    if (!vg_store_in_tx(env->store))
        deliver(nt);
}

void vg_env_release(struct vg_env *env)
{
    notifier_clear(&env->notify);
    vg_free(env->notify.tokens);
    env->notify.tokens = NULL;
    env->notify.cap = 0;
    vg_free(env->pointers);
    env->pointers = NULL;
}

static vigil_code dump(json_t *body, char **out, vigil_error *err)
{
    *out = vg_json_dump(body, 1);
    if (!*out)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory encoding a record");
    return VIGIL_OK;
}

vigil_code vg_env_put_json(struct vg_env *env, const char *kind, const char *id,
                           const char *owner, const char *k1, const char *k2, int64_t seq,
                           json_t *body, unsigned flags, vigil_error *err)
{
    char *text = NULL;
    vigil_code rc = dump(body, &text, err);
    if (rc)
        return rc;
    struct vg_record r = {.kind = kind, .id = id, .owner = owner, .k1 = k1, .k2 = k2,
                          .seq = seq, .at = vg_env_now(env), .body = text};
    rc = vg_store_put(env->store, &r, flags, NULL, err);
    vg_free(text);
    return rc;
}

vigil_code vg_env_update_json(struct vg_env *env, const char *kind, const char *id,
                              const char *owner, const char *k1, const char *k2, int64_t seq,
                              json_t *body, int64_t expected_rev, vigil_error *err)
{
    char *text = NULL;
    vigil_code rc = dump(body, &text, err);
    if (rc)
        return rc;
    struct vg_record r = {.kind = kind, .id = id, .owner = owner, .k1 = k1, .k2 = k2,
                          .seq = seq, .at = vg_env_now(env), .body = text};
    rc = vg_store_update(env->store, &r, expected_rev, err);
    vg_free(text);
    return rc;
}

vigil_code vg_env_put_text(struct vg_env *env, const char *kind, const char *id, const char *owner,
                           const char *k1, const char *k2, int64_t seq, const char *body,
                           unsigned flags, vigil_error *err)
{
    struct vg_record r = {.kind = kind, .id = id, .owner = owner, .k1 = k1, .k2 = k2,
                          .seq = seq, .at = vg_env_now(env), .body = body};
    return vg_store_put(env->store, &r, flags, NULL, err);
}

vigil_code vg_env_update_text(struct vg_env *env, const char *kind, const char *id,
                              const char *owner, const char *k1, const char *k2, int64_t seq,
                              const char *body, int64_t expected_rev, vigil_error *err)
{
    struct vg_record r = {.kind = kind, .id = id, .owner = owner, .k1 = k1, .k2 = k2,
                          .seq = seq, .at = vg_env_now(env), .body = body};
    return vg_store_update(env->store, &r, expected_rev, err);
}

struct get_ctx {
    json_t *body;
    int64_t rev;
    int bad; /* 1: not a JSON object; 2: out of memory while parsing */
};

static int get_cb(void *user, const struct vg_record *r)
{
    struct get_ctx *g = user;
    json_error_t je;
    g->body = json_loads(r->body, 0, &je);
    g->rev = r->rev;
    if (!g->body)
        g->bad = json_error_code(&je) == json_error_out_of_memory ? 2 : 1;
    else if (!json_is_object(g->body))
        g->bad = 1;
    return 1;
}

vigil_code vg_env_get_json(struct vg_env *env, const char *kind, const char *id, json_t **out,
                           int64_t *rev, vigil_error *err)
{
    struct get_ctx g = {0};
    vigil_code rc = vg_store_get(env->store, kind, id, get_cb, &g, err);
    if (rc)
        return rc;
    if (g.bad == 2)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %s \"%s\"", kind, id);
    if (g.bad) {
        json_decref(g.body);
        return VG_FAIL(err, VIGIL_ECORRUPT, "%s \"%s\" has a body that is not a JSON object",
                       kind, id);
    }
    *out = g.body;
    if (rev)
        *rev = g.rev;
    return VIGIL_OK;
}
