/*
 * export.c: a stored agent as a manifest that applies back to the same agent, and the YAML
 * writer for it. Memory seeds, timers and subscriptions are printed as the agent has them now
 * (state.c). Only what a manifest can say is exported; config keys set by other means
 * (`vigil agent create --config`) are left out, so applying the export removes them. Secrets
 * are stored as ${NAME} references and exported as such: no value is ever in the store.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/buf.h"
#include "base/json.h"
#include "manifest/manifest_int.h"

/* The sections with effects as the agent has them now, not as its manifest last said: its
 * seeds' blocks with their content today (a seed never overwrites a block, and a person or the
 * agent may have changed it since), and every timer and subscription it has, whoever added
 * them. now[i] (owned) is section keys[i]'s. */
static const char *const state_keys[] = {"memory", "timers", "subscriptions"};

static vigil_code state_now(struct vg_env *env, const char *agent_id, const json_t *config,
                            json_t *now[3], vigil_error *err)
{
    json_t *it;
    size_t j;
    vigil_code rc =
        vg_manifest_blocks_of(env, agent_id, json_object_get(config, "memory"), &now[0], err);
    if (!rc)
        rc = vg_manifest_timers_of(env, agent_id, &now[1], err);
    if (!rc)
        rc = vg_manifest_subs_of(env, agent_id, &now[2], err);
    json_array_foreach (now[2], j, it)
        json_object_del(it, "id"); /* the manifest's own ids follow from its order */
    return rc;
}

/* The value of a config key in the export (borrowed), or NULL to leave it out: a section with
 * effects when the agent has some, or when its manifest named it (then an empty list, so the
 * export keeps owning them); every other key as stored. */
static json_t *exported(const json_t *config, const char *key, json_t *now[3])
{
    for (size_t i = 0; i < VG_ARRAY_LEN(state_keys); i++)
        if (!strcmp(key, state_keys[i]))
            return json_array_size(now[i]) || json_object_get(config, key) ? now[i] : NULL;
    return json_object_get(config, key);
}

vigil_code vg_manifest_export(struct vg_env *env, const char *agent_id, json_t **out,
                              vigil_error *err)
{
    static const char *const top[] = {"name", "kind", "mode", "prompt", "model", "visibility"};
    json_t *agent = NULL, *now[3] = {NULL, NULL, NULL};
    vigil_code rc = vg_agent_get(env, agent_id, &agent, NULL, err);
    if (rc)
        return rc;
    json_t *m = json_object(), *config = json_object_get(agent, "config");
    rc = m ? state_now(env, agent_id, config, now, err)
           : VG_FAIL(err, VIGIL_ENOMEM, "out of memory exporting an agent");
    for (size_t i = 0; !rc && i < VG_ARRAY_LEN(top); i++) {
        json_t *v = json_object_get(agent, top[i]);
        if (v && !json_is_null(v) && json_object_set(m, top[i], v))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory exporting an agent");
    }
    for (size_t i = 0; !rc && vg_manifest_config_keys[i]; i++) {
        json_t *v = exported(config, vg_manifest_config_keys[i], now);
        if (v && json_object_set(m, vg_manifest_config_keys[i], v))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory exporting an agent");
    }
    for (size_t i = 0; i < VG_ARRAY_LEN(now); i++)
        json_decref(now[i]);
    json_decref(agent);
    if (rc) {
        json_decref(m);
        return rc;
    }
    *out = m;
    return VIGIL_OK;
}

/* ---- YAML ---------------------------------------------------------------------------------- */

static void indent(struct vg_buf *b, int n)
{
    for (int i = 0; i < n; i++)
        vg_buf_putc(b, ' ');
}

/* Keys are written plain when YAML cannot read them as anything but that text. */
static void put_key(struct vg_buf *b, const char *k)
{
    int plain = (*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_';
    for (const char *p = k; plain && *p; p++)
        plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                *p == '_' || *p == '-' || *p == '.';
    if (plain && strcmp(k, "true") && strcmp(k, "false") && strcmp(k, "null"))
        vg_buf_puts(b, k);
    else
        vg_json_put_string(b, k);
    vg_buf_putc(b, ':');
}

/* A scalar or an empty container, inline. Strings are double-quoted: JSON's escapes are YAML's. */
static int put_inline(struct vg_buf *b, const json_t *v)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_STRING:
        vg_json_put_string(b, json_string_value(v));
        return 1;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        vg_buf_puts(b, num);
        return 1;
    case JSON_REAL: /* the fewest digits that read back, "2.0" staying a real; JSON's is YAML's */
        vg_json_put_real(b, json_real_value(v));
        return 1;
    case JSON_TRUE:
        vg_buf_puts(b, "true");
        return 1;
    case JSON_FALSE:
        vg_buf_puts(b, "false");
        return 1;
    case JSON_NULL:
        vg_buf_puts(b, "null");
        return 1;
    case JSON_OBJECT:
        if (json_object_size(v))
            return 0;
        vg_buf_puts(b, "{}");
        return 1;
    case JSON_ARRAY:
        if (json_array_size(v))
            return 0;
        vg_buf_puts(b, "[]");
        return 1;
    }
    return 0;
}

static void put_block(struct vg_buf *b, const json_t *v, int depth, int first_inline);

/* After "key:" or "-": a scalar on the same line, a container on the next lines. */
static void put_value(struct vg_buf *b, const json_t *v, int depth, int in_seq)
{
    int container =
        (json_is_object(v) && json_object_size(v)) || (json_is_array(v) && json_array_size(v));
    if (!container || (in_seq && json_is_object(v)))
        vg_buf_putc(b, ' ');
    if (put_inline(b, v)) {
        vg_buf_putc(b, '\n');
        return;
    }
    if (in_seq && json_is_object(v)) { /* "- key: v" then the other keys under it */
        put_block(b, v, depth, 1);
        return;
    }
    vg_buf_putc(b, '\n');
    put_block(b, v, depth, 0);
}

static void put_block(struct vg_buf *b, const json_t *v, int depth, int first_inline)
{
    const char *k;
    json_t *e;
    size_t i;
    if (json_is_array(v)) {
        json_array_foreach (v, i, e) {
            indent(b, depth * 2);
            vg_buf_putc(b, '-');
            put_value(b, e, depth + 1, 1);
        }
        return;
    }
    int first = 1;
    json_object_foreach ((json_t *)v, k, e) {
        if (!(first && first_inline))
            indent(b, depth * 2);
        first = 0;
        put_key(b, k);
        put_value(b, e, depth + 1, 0);
    }
}

char *vg_manifest_to_yaml(const json_t *manifest)
{
    struct vg_buf b;
    vg_buf_init(&b, VG_BUF_DEFAULT_MAX);
    vg_buf_puts(&b, "# vigil agent manifest (docs/manifests.md)\n");
    put_block(&b, manifest, 0, 0);
    char *out = b.fail ? NULL : vg_strndup(b.data, b.len);
    vg_buf_release(&b);
    return out;
}
