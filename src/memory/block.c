/*
 * block.c: memory blocks, the permission rules, the event log and pending mutations.
 *
 * Every mutation is optimistic: read the block, decide by its permission, compute the new
 * content and its embedding outside any transaction (an embedder may be a network call), then
 * write block, event, text index and vector in one transaction guarded by the block's revision.
 * A concurrent change makes the guarded update fail with ECONFLICT and the whole step is
 * retried from the read, so no write is lost and no transaction waits on a network.
 */
#include "base/common.h"

#include "base/json.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "memory/memory_int.h"

/* Hand a local error report to the caller's and return its code. */
static vigil_code pass(vigil_error *dst, const vigil_error *src)
{
    vg_error_copy(dst, src);
    return src->code;
}

static const char *const tier_names[VG_TIER_COUNT] = {"core", "working", "archival"};
static const char *const perm_names[VG_PERM_COUNT] = {"read_only", "familiar", "append",
                                                      "read_write"};

const char *vg_mem_tier_name(enum vg_mem_tier t)
{
    return (unsigned)t < VG_TIER_COUNT ? tier_names[t] : "unknown";
}

int vg_mem_tier_parse(const char *s, enum vg_mem_tier *out)
{
    for (int i = 0; s && i < VG_TIER_COUNT; i++)
        if (strcmp(s, tier_names[i]) == 0) {
            *out = (enum vg_mem_tier)i;
            return 0;
        }
    return -1;
}

const char *vg_mem_perm_name(enum vg_mem_perm p)
{
    return (unsigned)p < VG_PERM_COUNT ? perm_names[p] : "unknown";
}

int vg_mem_perm_parse(const char *s, enum vg_mem_perm *out)
{
    for (int i = 0; s && i < VG_PERM_COUNT; i++)
        if (strcmp(s, perm_names[i]) == 0) {
            *out = (enum vg_mem_perm)i;
            return 0;
        }
    return -1;
}

vigil_code vg_memory_new(struct vg_env *env, struct vg_embedder *embedder, struct vg_memory **out,
                         vigil_error *err)
{
    struct vg_memory *m = vg_calloc(1, sizeof *m);
    if (!m)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the memory manager");
    m->env = env;
    m->embedder = embedder;
    *out = m;
    return VIGIL_OK;
}

void vg_memory_free(struct vg_memory *m)
{
    if (!m)
        return;
    vg_vec_cache_free(m->cache);
    for (int i = 0; i < VG_TIER_COUNT; i++)
        json_decref(m->listed[i].blocks);
    vg_memory_systems_free(m->systems);
    for (size_t i = 0; i < VG_ARRAY_LEN(m->embedded); i++) {
        vg_free(m->embedded[i].text);
        vg_free(m->embedded[i].vec);
    }
    vg_free(m);
}

void vg_memory_default_thread(const char *agent_id, char out[VG_RECORD_ID_MAX])
{
    snprintf(out, VG_RECORD_ID_MAX, "%s:session:default", agent_id);
}

void vg_memory_block_id(const char *agent_id, const char *label, char out[VG_BLOCK_ID_LEN])
{
    const char *parts[] = {agent_id, label};
    char hex[VG_SHA256_HEX_LEN + 1];
    vg_sha256_hex_parts(hex, parts, 2);
    snprintf(out, VG_BLOCK_ID_LEN, "mb_%s", hex);
}

vigil_code vg_memory_check_label(const char *label, vigil_error *err)
{
    size_t n = label ? strlen(label) : 0;
    if (n == 0 || n > VG_MEMORY_LABEL_MAX)
        return VG_FAIL(err, VIGIL_EINVAL, "a memory label needs 1 to %d bytes",
                       VG_MEMORY_LABEL_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)label[i] < 0x20 || label[i] == 0x7f)
            return VG_FAIL(err, VIGIL_EINVAL, "memory label \"%s\" has a control character", label);
    /* A label names a block in resource URIs and anything that maps labels to paths: no "/",
     * and not "." or ".." (a model wrote "../../etc": trial E29). The manifest's rule is this
     * one too (share/schema/manifest.schema.json). */
    if (strchr(label, '/') || !strcmp(label, ".") || !strcmp(label, ".."))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "memory label \"%s\" may not hold \"/\" or be \".\" or \"..\"", label);
    return VIGIL_OK;
}

vigil_code vg_memory_check_content(const char *content, vigil_error *err)
{
    if (content && strlen(content) > VG_MEMORY_CONTENT_MAX)
        return VG_FAIL(err, VIGIL_ETOOBIG, "memory content is longer than %d bytes",
                       VG_MEMORY_CONTENT_MAX);
    return VIGIL_OK;
}

vigil_code vg_memory_read_block(struct vg_memory *m, const char *agent_id, const char *label,
                                json_t **out, int64_t *rev, vigil_error *err)
{
    char id[VG_BLOCK_ID_LEN];
    vg_memory_block_id(agent_id, label, id);
    vigil_code rc = vg_env_get_json(m->env, "memory_block", id, out, rev, err);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no memory block \"%s\"", label);
    return rc;
}

const char *vg_memory_str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* ---- per-agent counters --------------------------------------------------------------------- */

/* agent_id's counters (owned) and their revision, 0 when it has none yet (a new record). */
static vigil_code meta_read(struct vg_memory *m, const char *agent_id, json_t **meta, int64_t *rev,
                            vigil_error *err)
{
    *rev = 0;
    vigil_code rc = vg_env_get_json(m->env, "memory_meta", agent_id, meta, rev, err);
    if (rc != VIGIL_ENOTFOUND)
        return rc;
    *meta = json_pack("{s:s, s:I, s:I}", "agent_id", agent_id, "event_no", (json_int_t)0, "vec_gen",
                      (json_int_t)0);
    return *meta ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing memory");
}

static vigil_code meta_write(struct vg_memory *m, const char *agent_id, json_t *meta, int64_t rev,
                             vigil_error *err)
{
    return rev ? vg_env_update_json(m->env, "memory_meta", agent_id, agent_id, "", "", 0, meta, rev,
                                    err)
               : vg_env_put_json(m->env, "memory_meta", agent_id, agent_id, "", "", 0, meta, 0,
                                 err);
}

vigil_code vg_memory_meta_bump(struct vg_memory *m, const char *agent_id, int vectors,
                               int64_t *event_no, vigil_error *err)
{
    struct vg_memory_meta_batch *b = &m->meta_batch;
    int batched = b->agent_id && !strcmp(b->agent_id, agent_id);
    json_t *meta = batched ? b->meta : NULL;
    int64_t rev = batched ? b->rev : 0;
    vigil_code rc = meta ? VIGIL_OK : meta_read(m, agent_id, &meta, &rev, err);
    if (rc)
        return rc;
    if (batched) {
        b->meta = meta;
        b->rev = rev;
    }
    json_int_t no = json_integer_value(json_object_get(meta, "event_no")) + (event_no ? 1 : 0);
    json_int_t gen = json_integer_value(json_object_get(meta, "vec_gen")) + (vectors ? 1 : 0);
    if (json_object_set_new(meta, "event_no", json_integer(no)) ||
        json_object_set_new(meta, "vec_gen", json_integer(gen)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing memory");
    if (!rc && !batched)
        rc = meta_write(m, agent_id, meta, rev, err);
    if (!rc && event_no)
        *event_no = no;
    if (!batched)
        json_decref(meta);
    return rc;
}

/* End the counters' batch: written when rc is OK and they were bumped; returns rc or the
 * write's failure. */
static vigil_code meta_batch_end(struct vg_memory *m, vigil_code rc, vigil_error *err)
{
    struct vg_memory_meta_batch *b = &m->meta_batch;
    if (!rc && b->meta)
        rc = meta_write(m, b->agent_id, b->meta, b->rev, err);
    json_decref(b->meta);
    *b = (struct vg_memory_meta_batch){0};
    return rc;
}

/* ---- the event log -------------------------------------------------------------------------- */

/* Append one immutable event (inside the caller's transaction). extra (borrowed) is merged. */
vigil_code vg_memory_event(struct vg_memory *m, const char *agent_id, const char *block_id,
                           const char *label, const char *type, const char *old_content,
                           const char *new_content, json_t *extra, vigil_error *err)
{
    char id[37], at[32];
    int64_t no = 0;
    vigil_code rc = vg_memory_meta_bump(m, agent_id, 0, &no, err);
    if (rc)
        return rc;
    vg_ids_new(m->env->ids, id);
    vg_time_format_ms(at, vg_env_now(m->env));
    json_t *ev =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s?, s:s, s:I}", "id", id, "agent_id", agent_id,
                  "block_id", block_id, "label", label, "type", type, "old_content", old_content,
                  "new_content", new_content, "at", at, "event_no", (json_int_t)no);
    if (!ev || (extra && json_object_update(ev, extra))) {
        json_decref(ev);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing a memory event");
    }
    rc = vg_env_put_json(m->env, "memory_event", id, agent_id, label, type, no, ev, 0, err);
    json_decref(ev);
    return rc;
}

/* ---- vectors and the text index (inside the caller's transaction) ---------------------------- */

static vigil_code index_block(struct vg_memory *m, const char *agent_id, const char *block_id,
                              const char *label, const char *tier, const char *content,
                              const float *vec, vigil_error *err)
{
    struct vg_buf text;
    vg_buf_init(&text, VG_MEMORY_CONTENT_MAX + 512);
    vg_buf_printf(&text, "%s\n%s", label, content ? content : "");
    vigil_code rc = vg_buf_finish(&text, err);
    if (!rc)
        rc = vg_store_text_index(m->env->store, "memory_block", block_id, agent_id, text.data, err);
    vg_buf_release(&text);
    if (rc)
        return rc;
    /* The old vector describes old content: it goes whatever happens next. */
    rc = vg_store_remove(m->env->store, "memory_vector", block_id, err);
    if (rc && rc != VIGIL_ENOTFOUND)
        return rc;
    if (!vec) {
        json_t *todo = json_object();
        if (!todo)
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing memory");
        rc = vg_env_put_json(m->env, "memory_embed_todo", block_id, agent_id, "", "",
                             vg_env_now(m->env), todo, VG_PUT_IF_ABSENT, err);
        json_decref(todo);
        return rc;
    }
    return vg_memory_put_vector(m, agent_id, block_id, label, tier, vec, err);
}

vigil_code vg_memory_put_vector(struct vg_memory *m, const char *agent_id, const char *block_id,
                                const char *label, const char *tier, const float *vec,
                                vigil_error *err)
{
    int dim = vg_embed_dimension(m->embedder);
    char *text = NULL;
    vigil_code rc = vg_vec_encode(vec, dim, &text, err);
    if (rc)
        return rc;
    json_t *body = json_pack("{s:s, s:s, s:s, s:i, s:s}", "block_id", block_id, "label", label,
                             "model", vg_embed_model(m->embedder), "dim", dim, "v", text);
    vg_free(text);
    if (!body)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory storing a vector");
    rc = vg_env_put_json(m->env, "memory_vector", block_id, agent_id, vg_embed_model(m->embedder),
                         tier, dim, body, 0, err);
    json_decref(body);
    if (!rc) {
        rc = vg_store_remove(m->env->store, "memory_embed_todo", block_id, err);
        if (rc == VIGIL_ENOTFOUND)
            rc = VIGIL_OK;
    }
    if (!rc)
        rc = vg_memory_meta_bump(m, agent_id, 1, NULL, err);
    return rc;
}

int vg_memory_may_embed(struct vg_memory *m)
{
    return m->embedder &&
           ((m->embedder->methods->caps & VG_EMBED_CAP_OFFLINE) || !vg_store_in_tx(m->env->store));
}

/* Texts longer than this are not kept with their vectors (a persona's blocks are far shorter). */
#define EMBEDDED_TEXT_MAX 16384

/* The vector an offline embedder gave text before, copied into v; 0 when none is kept. */
static int embedded_before(struct vg_memory *m, const char *text, float *v, int dim)
{
    if (!(m->embedder->methods->caps & VG_EMBED_CAP_OFFLINE))
        return 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(m->embedded); i++)
        if (m->embedded[i].text && strcmp(m->embedded[i].text, text) == 0) {
            memcpy(v, m->embedded[i].vec, sizeof *v * (size_t)dim);
            return 1;
        }
    return 0;
}

static void embedded_keep(struct vg_memory *m, const char *text, size_t len, const float *v,
                          int dim)
{
    if (!(m->embedder->methods->caps & VG_EMBED_CAP_OFFLINE) || len > EMBEDDED_TEXT_MAX)
        return;
    struct vg_memory_embedded *e = &m->embedded[m->embedded_next];
    char *t = vg_strndup(text, len);
    float *copy = vg_malloc(sizeof *copy * (size_t)dim);
    if (!t || !copy) {
        vg_free(t);
        vg_free(copy);
        return;
    }
    memcpy(copy, v, sizeof *copy * (size_t)dim);
    vg_free(e->text);
    vg_free(e->vec);
    *e = (struct vg_memory_embedded){t, copy};
    m->embedded_next = (m->embedded_next + 1) % (int)VG_ARRAY_LEN(m->embedded);
}

/* Embed one text, or return NULL (owned vector otherwise) when there is no embedder, it fails
 * or it may not be called now: the block is then stored without a vector and embedded later
 * (vg_memory_embed_pending, after each run). */
float *vg_memory_embed_text(struct vg_memory *m, const char *label, const char *content)
{
    if (!vg_memory_may_embed(m))
        return NULL;
    int dim = vg_embed_dimension(m->embedder);
    float *v = vg_malloc(sizeof *v * (size_t)dim);
    if (!v)
        return NULL;
    struct vg_buf text;
    vg_buf_init(&text, VG_MEMORY_CONTENT_MAX + 512);
    vg_buf_printf(&text, "%s\n%s", label, content ? content : "");
    const char *t = text.data;
    vigil_error e = {0};
    if (!text.fail && embedded_before(m, t, v, dim)) {
        vg_buf_release(&text);
        return v;
    }
    if (text.fail || vg_embed(m->embedder, &t, 1, v, &e)) {
        vg_free(v);
        v = NULL;
    } else {
        embedded_keep(m, t, text.len, v, dim);
    }
    vg_buf_release(&text);
    return v;
}

/* ---- create, apply, delete ------------------------------------------------------------------ */

static vigil_code do_create(struct vg_memory *m, const struct vg_memory_block_in *in,
                            const char *actor, const float *vec, vigil_error *err)
{
    char id[VG_BLOCK_ID_LEN], at[32];
    const char *tier = vg_mem_tier_name(in->tier);
    vg_memory_block_id(in->agent_id, in->label, id);
    int64_t now = vg_env_now(m->env);
    vg_time_format_ms(at, now);
    json_t *body =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:I, s:s, s:s, s:I}", "id", id,
                  "agent_id", in->agent_id, "tier", tier, "label", in->label, "content",
                  in->content ? in->content : "", "permission", vg_mem_perm_name(in->permission),
                  "pinned", in->pinned, "loaded", in->tier == VG_TIER_WORKING, "last_used_ms",
                  (json_int_t)now, "created_at", at, "updated_at", at, "version", (json_int_t)1);
    json_t *extra = json_pack("{s:s, s:s, s:s}", "actor", actor ? actor : "agent", "tier", tier,
                              "permission", vg_mem_perm_name(in->permission));
    vigil_code rc = VIGIL_OK;
    if (!body || !extra) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating a memory block");
        goto out;
    }
    if ((rc = vg_store_begin(m->env->store, err)))
        goto out;
    rc = vg_env_put_json(m->env, "memory_block", id, in->agent_id, tier, in->label, now, body, 0,
                         err);
    if (rc == VIGIL_EEXISTS)
        rc = VG_FAIL(err, VIGIL_EEXISTS, "memory block \"%s\" already exists", in->label);
    if (!rc)
        rc = vg_memory_event(m, in->agent_id, id, in->label, "create", NULL, in->content, extra,
                             err);
    if (!rc)
        rc = index_block(m, in->agent_id, id, in->label, tier, in->content, vec, err);
    rc = vg_store_end(m->env->store, rc, err);
out:
    json_decref(body);
    json_decref(extra);
    return rc;
}

static vigil_code check_block_in(const struct vg_memory_block_in *in, vigil_error *err)
{
    vigil_code rc;
    if (!in->agent_id || !*in->agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "a memory block needs an agent id");
    if ((rc = vg_memory_check_label(in->label, err)) ||
        (rc = vg_memory_check_content(in->content, err)))
        return rc;
    if ((unsigned)in->tier >= VG_TIER_COUNT || (unsigned)in->permission >= VG_PERM_COUNT)
        return VG_FAIL(err, VIGIL_EINVAL, "unknown memory tier or permission");
    return VIGIL_OK;
}

vigil_code vg_memory_create(struct vg_memory *m, const struct vg_memory_block_in *in,
                            const char *actor, vigil_error *err)
{
    vigil_code rc = check_block_in(in, err);
    if (rc)
        return rc;
    float *vec = vg_memory_embed_text(m, in->label, in->content);
    rc = do_create(m, in, actor, vec, err);
    vg_free(vec);
    return rc;
}

vigil_code vg_memory_create_missing(struct vg_memory *m, const struct vg_memory_block_in *in,
                                    size_t n, const char *actor, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    float **vecs = vg_calloc(n ? n : 1, sizeof *vecs);
    if (!vecs)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating memory blocks");
    for (size_t i = 0; !rc && i < n; i++)
        rc = check_block_in(&in[i], err);
    /* Embedded before the transaction: a networked embedder is never asked while the store's
     * write lock is held (vg_memory_may_embed would otherwise leave them to the background). */
    for (size_t i = 0; !rc && i < n; i++)
        vecs[i] = vg_memory_embed_text(m, in[i].label, in[i].content);
    if (!rc && !(rc = vg_store_begin(m->env->store, err))) {
        m->meta_batch.agent_id = n ? in[0].agent_id : NULL;
        for (size_t i = 0; !rc && i < n; i++) {
            rc = do_create(m, &in[i], actor, vecs[i], err); /* its own savepoint */
            if (rc == VIGIL_EEXISTS) /* made by another writer first: left as it is */
                rc = VIGIL_OK;
        }
        rc = meta_batch_end(m, rc, err);
        rc = vg_store_end(m->env->store, rc, err);
    }
    for (size_t i = 0; i < n; i++)
        vg_free(vecs[i]);
    vg_free(vecs);
    return rc;
}

/*
 * Replace a block's content at revision rev (inside the caller's transaction): block update,
 * event of `type` with old and new content, text index and vector.
 */
vigil_code vg_memory_apply(struct vg_memory *m, json_t *block, int64_t rev, const char *new_content,
                           const char *type, json_t *extra, const float *vec, vigil_error *err)
{
    char at[32];
    const char *agent = vg_memory_str(block, "agent_id");
    char label[VG_MEMORY_LABEL_MAX + 1], id[VG_BLOCK_ID_LEN], tier[16];
    snprintf(label, sizeof label, "%s", vg_memory_str(block, "label"));
    snprintf(id, sizeof id, "%s", vg_memory_str(block, "id"));
    snprintf(tier, sizeof tier, "%s", vg_memory_str(block, "tier"));
    char *old = vg_strdup(vg_memory_str(block, "content"));
    if (!old)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing memory");
    int64_t now = vg_env_now(m->env);
    vg_time_format_ms(at, now);
    json_int_t version = json_integer_value(json_object_get(block, "version")) + 1;
    vigil_code rc = VIGIL_OK;
    if (json_object_set_new(block, "content", json_string(new_content)) ||
        json_object_set_new(block, "updated_at", json_string(at)) ||
        json_object_set_new(block, "last_used_ms", json_integer(now)) ||
        json_object_set_new(block, "version", json_integer(version)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing memory");
    if (!rc)
        rc = vg_memory_update_block(m, block, rev, err);
    if (!rc)
        rc = vg_memory_event(m, agent, id, label, type, old, new_content, extra, err);
    if (!rc)
        rc = index_block(m, agent, id, label, tier, new_content, vec, err);
    vg_free(old);
    return rc;
}

vigil_code vg_memory_update_block(struct vg_memory *m, json_t *block, int64_t rev, vigil_error *err)
{
    struct vg_record *cur = NULL;
    const char *id = vg_memory_str(block, "id");
    /* seq (the creation time) is kept: read it from the stored record. */
    vigil_code rc = vg_store_get_copy(m->env->store, "memory_block", id, &cur, err);
    if (rc)
        return rc;
    rc = vg_env_update_json(m->env, "memory_block", id, cur->owner, vg_memory_str(block, "tier"),
                            vg_memory_str(block, "label"), cur->seq, block, rev, err);
    vg_free(cur);
    return rc;
}

vigil_code vg_memory_drop(struct vg_memory *m, json_t *block, int64_t rev, const char *type,
                          json_t *extra, vigil_error *err)
{
    const char *agent = vg_memory_str(block, "agent_id"), *id = vg_memory_str(block, "id");
    int64_t cur_rev = 0;
    json_t *cur = NULL;
    /* The store's remove has no revision guard: check it in the transaction first. */
    vigil_code rc = vg_env_get_json(m->env, "memory_block", id, &cur, &cur_rev, err);
    json_decref(cur);
    if (rc)
        return rc;
    if (cur_rev != rev)
        return VG_FAIL(err, VIGIL_ECONFLICT, "memory block \"%s\" was changed meanwhile",
                       vg_memory_str(block, "label"));
    rc = vg_store_remove(m->env->store, "memory_block", id, err);
    if (!rc)
        rc = vg_memory_event(m, agent, id, vg_memory_str(block, "label"), type,
                             vg_memory_str(block, "content"), NULL, extra, err);
    if (!rc)
        rc = vg_store_text_index(m->env->store, "memory_block", id, agent, NULL, err);
    if (!rc) {
        rc = vg_store_remove(m->env->store, "memory_vector", id, err);
        if (!rc)
            rc = vg_memory_meta_bump(m, agent, 1, NULL, err);
        if (rc == VIGIL_ENOTFOUND)
            rc = VIGIL_OK;
    }
    if (!rc) {
        rc = vg_store_remove(m->env->store, "memory_embed_todo", id, err);
        if (rc == VIGIL_ENOTFOUND)
            rc = VIGIL_OK;
    }
    return rc;
}

/* ---- the agent's writes --------------------------------------------------------------------- */

enum op { OP_WRITE, OP_APPEND, OP_DELETE };
static const char *const op_names[] = {"write", "append", "delete"};

static vigil_code queue_pending(struct vg_memory *m, json_t *block, enum op op, const char *text,
                                json_t **out, vigil_error *err)
{
    char id[37], at[32];
    const char *agent = vg_memory_str(block, "agent_id"), *label = vg_memory_str(block, "label");
    int64_t now = vg_env_now(m->env);
    vg_ids_new(m->env->ids, id);
    vg_time_format_ms(at, now);
    json_t *p =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s, s:s, s:s, s:s}", "id", id, "agent_id",
                  agent, "block_id", vg_memory_str(block, "id"), "label", label, "op", op_names[op],
                  "text", text, "old_content", vg_memory_str(block, "content"), "status", "pending",
                  "delivery", "", "created_at", at);
    json_t *extra =
        json_pack("{s:s, s:s, s:s}", "pending_id", id, "op", op_names[op], "actor", "agent");
    vigil_code rc = VIGIL_OK;
    if (!p || !extra) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory queueing a memory change");
        goto out;
    }
    if ((rc = vg_store_begin(m->env->store, err)))
        goto out;
    rc = vg_env_put_json(m->env, "memory_pending", id, agent, "pending", "", now, p, 0, err);
    if (!rc)
        rc = vg_memory_event(m, agent, vg_memory_str(block, "id"), label, "pending",
                             vg_memory_str(block, "content"), op == OP_DELETE ? NULL : text, extra,
                             err);
    rc = vg_store_end(m->env->store, rc, err);
    if (!rc && out)
        *out = json_pack("{s:s, s:s, s:s, s:s, s:s}", "status", "pending", "pending_id", id,
                         "block_id", vg_memory_str(block, "id"), "label", label, "message",
                         "this block needs the human's approval: the change waits as a pending "
                         "mutation and you will be told the outcome");
out:
    json_decref(p);
    json_decref(extra);
    return rc;
}

static json_t *result(const char *status, json_t *block)
{
    return json_pack("{s:s, s:s, s:s}", "status", status, "block_id", vg_memory_str(block, "id"),
                     "label", vg_memory_str(block, "label"));
}

static vigil_code agent_op(struct vg_memory *m, const char *agent_id, const char *label, enum op op,
                           const char *text, const char *tier_name, json_t **out, vigil_error *err)
{
    vigil_code rc;
    enum vg_mem_tier tier = VG_TIER_ARCHIVAL;
    if (!agent_id || !*agent_id)
        return VG_FAIL(err, VIGIL_EINVAL, "a memory write needs an agent id");
    if ((rc = vg_memory_check_label(label, err)) || (rc = vg_memory_check_content(text, err)))
        return rc;
    if (op != OP_DELETE && !text)
        return VG_FAIL(err, VIGIL_EINVAL, "a memory write needs content");
    if (tier_name && vg_mem_tier_parse(tier_name, &tier))
        return VG_FAIL(err, VIGIL_EINVAL, "unknown memory tier \"%s\": core, working or archival",
                       tier_name);
    if (tier_name && tier == VG_TIER_CORE && op != OP_DELETE) {
        /* Core blocks are configuration's (seeded or set by the human), never the agent's. */
        json_t *existing = NULL;
        rc = vg_memory_read_block(m, agent_id, label, &existing, NULL, NULL);
        json_decref(existing);
        if (rc == VIGIL_ENOTFOUND)
            return VG_FAIL(err, VIGIL_EDENIED,
                           "core memory blocks are created by configuration, not by the agent");
    }
    for (int attempt = 0; attempt < 8; attempt++) {
        json_t *block = NULL;
        int64_t rev = 0;
        vigil_error local = {0};
        rc = vg_memory_read_block(m, agent_id, label, &block, &rev, &local);
        if (rc == VIGIL_ENOTFOUND) {
            if (op != OP_WRITE && op != OP_APPEND)
                return VG_FAIL(err, VIGIL_ENOTFOUND, "no memory block \"%s\"", label);
            struct vg_memory_block_in in = {.agent_id = agent_id,
                                            .tier = tier,
                                            .label = label,
                                            .content = text,
                                            .permission = VG_PERM_READ_WRITE};
            float *vec = vg_memory_embed_text(m, label, text);
            rc = do_create(m, &in, "agent", vec, &local);
            vg_free(vec);
            if (rc == VIGIL_EEXISTS)
                continue; /* created meanwhile: decide again by its permission */
            if (rc)
                return pass(err, &local);
            char id[VG_BLOCK_ID_LEN];
            vg_memory_block_id(agent_id, label, id);
            if (out)
                *out = json_pack("{s:s, s:s, s:s, s:s}", "status", "created", "block_id", id,
                                 "label", label, "tier", vg_mem_tier_name(tier));
            return VIGIL_OK;
        }
        if (rc)
            return pass(err, &local);
        enum vg_mem_perm perm = VG_PERM_READ_ONLY;
        vg_mem_perm_parse(vg_memory_str(block, "permission"), &perm);
        if (perm == VG_PERM_READ_ONLY) {
            json_decref(block);
            return VG_FAIL(err, VIGIL_EDENIED, "memory block \"%s\" is read-only", label);
        }
        if (perm == VG_PERM_APPEND && op != OP_APPEND) {
            json_decref(block);
            return VG_FAIL(err, VIGIL_EDENIED,
                           "memory block \"%s\" is append-only: add to it with memory_append",
                           label);
        }
        if (perm == VG_PERM_FAMILIAR) {
            rc = queue_pending(m, block, op, text, out, err);
            json_decref(block);
            return rc;
        }
        char *content = NULL;
        if (op == OP_APPEND)
            content = vg_memory_join(vg_memory_str(block, "content"), text);
        else if (op == OP_WRITE)
            content = vg_strdup(text);
        if (op != OP_DELETE && !content) {
            json_decref(block);
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing memory");
        }
        float *vec = op == OP_DELETE ? NULL : vg_memory_embed_text(m, label, content);
        json_t *extra = json_pack("{s:s}", "actor", "agent");
        if (!extra) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory writing memory");
        } else if (!(rc = vg_store_begin(m->env->store, &local))) {
            if (op == OP_DELETE)
                rc = vg_memory_drop(m, block, rev, "delete", extra, &local);
            else
                rc = vg_memory_apply(m, block, rev, content, op == OP_APPEND ? "append" : "update",
                                     extra, vec, &local);
            rc = vg_store_end(m->env->store, rc, &local);
        }
        json_decref(extra);
        vg_free(vec);
        vg_free(content);
        if (rc == VIGIL_ECONFLICT) {
            json_decref(block);
            continue;
        }
        if (!rc && out)
            *out = result(op == OP_DELETE ? "deleted" : "applied", block);
        json_decref(block);
        if (rc)
            return pass(err, &local);
        return VIGIL_OK;
    }
    return VG_FAIL(err, VIGIL_EBUSY, "memory block \"%s\" keeps changing: try again", label);
}

char *vg_memory_join(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *s = vg_malloc(na + nb + 2);
    if (!s)
        return NULL;
    memcpy(s, a, na);
    size_t o = na;
    if (na && a[na - 1] != '\n')
        s[o++] = '\n';
    memcpy(s + o, b, nb + 1);
    return s;
}

vigil_code vg_memory_write(struct vg_memory *m, const char *agent_id, const char *label,
                           const char *content, const char *tier, json_t **out, vigil_error *err)
{
    return agent_op(m, agent_id, label, OP_WRITE, content, tier, out, err);
}

vigil_code vg_memory_append(struct vg_memory *m, const char *agent_id, const char *label,
                            const char *text, json_t **out, vigil_error *err)
{
    return agent_op(m, agent_id, label, OP_APPEND, text, NULL, out, err);
}

vigil_code vg_memory_delete(struct vg_memory *m, const char *agent_id, const char *label,
                            json_t **out, vigil_error *err)
{
    return agent_op(m, agent_id, label, OP_DELETE, NULL, NULL, out, err);
}

/* ---- reads ---------------------------------------------------------------------------------- */

vigil_code vg_memory_get(struct vg_memory *m, const char *agent_id, const char *label, json_t **out,
                         vigil_error *err)
{
    return vg_memory_read_block(m, agent_id, label, out, NULL, err);
}

struct collect {
    json_t *items;
    int failed;
    struct vg_env *env;
    int shared; /* the memo's values themselves: the caller only reads them */
};

static int collect_cb(void *user, const struct vg_record *r)
{
    struct collect *c = user;
    json_t *body = NULL;
    /* The env's memo: an agent's blocks are read at every step and rarely change. */
    vigil_code rc = c->shared ? vg_env_parse_json_shared(c->env, r->body, &body)
                              : vg_env_parse_json(c->env, r->body, &body);
    if (rc || json_array_append_new(c->items, body)) {
        c->failed = 1;
        return 1;
    }
    return 0;
}

static vigil_code collect(struct vg_memory *m, const struct vg_query *q, json_t *into, int shared,
                          vigil_error *err)
{
    struct collect c = {into, 0, m->env, shared};
    vigil_code rc = vg_store_scan(m->env->store, q, collect_cb, &c, err);
    if (!rc && c.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %s records", q->kind);
    return rc;
}

static int ids_cb(void *user, const struct vg_record *r)
{
    struct collect *c = user;
    if (json_array_append_new(c->items, json_string(r->id))) {
        c->failed = 1;
        return 1;
    }
    return 0;
}

vigil_code vg_memory_collect_ids(struct vg_memory *m, const struct vg_query *q, json_t *into,
                                 vigil_error *err)
{
    struct collect c = {into, 0, m->env, 0};
    vigil_code rc = vg_store_scan(m->env->store, q, ids_cb, &c, err);
    if (!rc && c.failed)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading %s records", q->kind);
    return rc;
}

static int label_cmp(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    return strcmp(vg_memory_str(x, "label"), vg_memory_str(y, "label"));
}

static void sort_by_label(json_t *items)
{
    (void)vg_json_array_sort(items, label_cmp); /* out of memory: unsorted but complete, and
                                                 * order is cosmetic for the caller */
}

vigil_code vg_memory_collect(struct vg_memory *m, const struct vg_query *q, json_t *into,
                             vigil_error *err)
{
    return collect(m, q, into, 0, err);
}

static vigil_code list_tiers(struct vg_memory *m, const char *agent_id, const char *tier,
                             int shared, json_t **out, vigil_error *err)
{
    enum vg_mem_tier t;
    if (tier && vg_mem_tier_parse(tier, &t))
        return VG_FAIL(err, VIGIL_EINVAL, "unknown memory tier \"%s\": core, working or archival",
                       tier);
    json_t *items = json_array();
    if (!items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing memory");
    vigil_code rc = VIGIL_OK;
    for (int i = 0; !rc && i < VG_TIER_COUNT; i++) {
        if (tier && (int)t != i)
            continue;
        struct vg_query q = {
            .kind = "memory_block", .owner = agent_id, .k1 = vg_mem_tier_name((enum vg_mem_tier)i)};
        json_t *tier_items = json_array();
        rc = tier_items ? collect(m, &q, tier_items, shared, err)
                        : VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing memory");
        /* By label within the tier, so the order (and the prompt built from it) does not
         * depend on which blocks were created in the same millisecond. */
        if (!rc)
            sort_by_label(tier_items);
        if (!rc && json_array_extend(items, tier_items))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing memory");
        json_decref(tier_items);
    }
    if (rc) {
        json_decref(items);
        return rc;
    }
    *out = items;
    return VIGIL_OK;
}

vigil_code vg_memory_list(struct vg_memory *m, const char *agent_id, const char *tier, json_t **out,
                          vigil_error *err)
{
    return list_tiers(m, agent_id, tier, 0, out, err);
}

static int change_mark(struct vg_memory *m, struct vg_store_change_mark *mark)
{
    vigil_error ignored = {0};
    mark->kind = "memory_block";
    return vg_store_control(m->env->store, VG_STORE_CTRL_CHANGE_MARK, mark, &ignored) == VIGIL_OK;
}

vigil_code vg_memory_list_shared(struct vg_memory *m, const char *agent_id, const char *tier,
                                 json_t **out, vigil_error *err)
{
    enum vg_mem_tier t;
    if (!tier || vg_mem_tier_parse(tier, &t) || strlen(agent_id) >= VG_RECORD_ID_MAX)
        return list_tiers(m, agent_id, tier, 1, out, err);
    struct vg_memory_listed *kept = &m->listed[t];
    struct vg_store_change_mark mark;
    if (kept->blocks && change_mark(m, &mark) && mark.foreign == kept->mark.foreign &&
        mark.own == kept->mark.own && strcmp(kept->agent_id, agent_id) == 0) {
        *out = json_incref(kept->blocks);
        return VIGIL_OK;
    }
    vigil_code rc = list_tiers(m, agent_id, tier, 1, out, err);
    json_decref(kept->blocks);
    kept->blocks = NULL;
    /* The mark after the scan: its snapshot is taken now, and is the one the scan read. */
    if (!rc && change_mark(m, &kept->mark)) {
        kept->blocks = json_incref(*out);
        snprintf(kept->agent_id, sizeof kept->agent_id, "%s", agent_id);
    }
    return rc;
}

static vigil_code set_loaded(struct vg_memory *m, const char *agent_id, const char *label,
                             int loaded, vigil_error *err)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        json_t *block = NULL;
        int64_t rev = 0;
        vigil_code rc = vg_memory_read_block(m, agent_id, label, &block, &rev, err);
        if (rc)
            return rc;
        if (strcmp(vg_memory_str(block, "tier"), "working") != 0) {
            json_decref(block);
            return VG_FAIL(err, VIGIL_EINVAL,
                           "memory block \"%s\" is not a working block: only working blocks "
                           "load and unload",
                           label);
        }
        vigil_error local = {0};
        if (json_object_set_new(block, "loaded", json_boolean(loaded)) ||
            json_object_set_new(block, "last_used_ms", json_integer(vg_env_now(m->env))))
            rc = VG_FAIL(&local, VIGIL_ENOMEM, "out of memory updating memory");
        if (!rc)
            rc = vg_memory_update_block(m, block, rev, &local);
        json_decref(block);
        if (rc == VIGIL_ECONFLICT)
            continue;
        return rc ? pass(err, &local) : VIGIL_OK;
    }
    return VG_FAIL(err, VIGIL_EBUSY, "memory block \"%s\" keeps changing: try again", label);
}

vigil_code vg_memory_load(struct vg_memory *m, const char *agent_id, const char *label,
                          vigil_error *err)
{
    return set_loaded(m, agent_id, label, 1, err);
}

vigil_code vg_memory_unload(struct vg_memory *m, const char *agent_id, const char *label,
                            vigil_error *err)
{
    return set_loaded(m, agent_id, label, 0, err);
}

vigil_code vg_memory_history(struct vg_memory *m, const char *agent_id, const char *label,
                             json_t **out, vigil_error *err)
{
    json_t *items = json_array();
    if (!items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading memory history");
    struct vg_query q = {.kind = "memory_event", .owner = agent_id, .k1 = label};
    vigil_code rc = vg_memory_collect(m, &q, items, err);
    if (rc) {
        json_decref(items);
        return rc;
    }
    *out = items;
    return VIGIL_OK;
}
