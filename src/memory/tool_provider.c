/*
 * tool_provider.c: the memory tools as a tool provider of the same kind as the tool layer's
 * built-ins (transactional: the executor runs each call inside the transaction that records
 * the finished operation). Every call goes through the memory manager, so permissions hold
 * whatever the model asks: a refused write is a not_allowed tool error with the manager's
 * message, a familiar block answers "pending". The provider owns its memory manager and
 * embedder (the runtime gives its configured one, see vg_runtime_embedder; else offline), so
 * the vector cache lives as long as the runtime's executor.
 */
#include "base/common.h"

#include "memory/memory_int.h"
#include "memory/tool_provider.h"
#include "tool/tool.h"

#define WAKES                                                                                      \
    "\"allowed_wake_reasons\":[\"subscription\",\"timer\",\"user_initiated\","                     \
    "\"recovery_catchup\",\"manual\"],"
#define COMMON(mut, idem, ents, tok)                                                               \
    "\"capabilities\":[],\"risk\":\"low\"," WAKES                                                  \
    "\"scope\":{\"rule\":\"agent\",\"arguments\":[]},\"idempotency\":\"" idem "\","                \
    "\"mutating\":" mut ",\"tool_class\":\"agent_self\","                                          \
    "\"side_effects\":{\"entity_types\":[" ents "],\"tokens\":[" tok "]},"                         \
    "\"requires_approval\":false,\"preview\":false}"
#define LABEL "\"label\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":120}"
#define WRITE_OUT                                                                                  \
    "\"output_schema\":{\"type\":\"object\",\"required\":[\"status\",\"label\"],"                  \
    "\"properties\":{\"status\":{\"type\":\"string\"},\"label\":{\"type\":\"string\"}}},"

static const char contracts[] =
    "["
    "{\"name\":\"memory_read\",\"version\":\"1.0.0\","
    "\"description\":\"Search your memory (core, working and archival blocks, and summarized "
    "older conversation) for a query; returns the best matches.\","
    "\"input_schema\":{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"query\"],\"properties\":{"
    "\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":2000},"
    "\"k\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50}}},"
    "\"output_schema\":{\"type\":\"object\",\"required\":[\"results\"],"
    "\"properties\":{\"results\":{\"type\":\"array\"}}}," COMMON(
        "false", "idempotent", "",
        "") ","
            "{\"name\":\"memory_write\",\"version\":\"1.0.0\","
            "\"description\":\"Write a memory block (replace its content, or create it; tier "
            "defaults "
            "to archival). Read-only blocks refuse; blocks that need your human's approval queue "
            "the "
            "change as pending.\","
            "\"input_schema\":{\"type\":\"object\",\"additionalProperties\":false,"
            "\"required\":[\"label\",\"content\"],\"properties\":{" LABEL ","
            "\"content\":{\"type\":\"string\",\"maxLength\":262144},"
            "\"tier\":{\"type\":\"string\",\"enum\":[\"working\",\"archival\"]}}}," WRITE_OUT COMMON(
                "true", "idempotent", "\"memory_block\"",
                "\"AGENT_MEMORY_CHANGED\"") ","
                                            "{\"name\":\"memory_append\",\"version\":\"1.0.0\","
                                            "\"description\":\"Add text to the end of a memory "
                                            "block (the only change append-only "
                                            "blocks accept).\","
                                            "\"input_schema\":{\"type\":\"object\","
                                            "\"additionalProperties\":false,"
                                            "\"required\":[\"label\",\"text\"],\"properties\":"
                                            "{" LABEL ","
                                            "\"text\":{\"type\":\"string\",\"minLength\":1,"
                                            "\"maxLength\":65536}}}," WRITE_OUT COMMON(
                                                "true", "non_idempotent", "\"memory_block\"",
                                                "\"AGENT_MEMORY_CHANGED\"") ","
                                                                            "{\"name\":\"memory_"
                                                                            "list\",\"version\":"
                                                                            "\"1.0.0\","
                                                                            "\"description\":"
                                                                            "\"List your memory "
                                                                            "blocks (label, tier, "
                                                                            "permission, pinned, "
                                                                            "loaded and a "
                                                                            "preview), optionally "
                                                                            "of one tier.\","
                                                                            "\"input_schema\":{"
                                                                            "\"type\":\"object\","
                                                                            "\"additionalProperties"
                                                                            "\":false,"
                                                                            "\"properties\":{"
                                                                            "\"tier\":{\"type\":"
                                                                            "\"string\",\"enum\":["
                                                                            "\"core\",\"working\","
                                                                            "\"archival\"]}}},"
                                                                            "\"output_schema\":{"
                                                                            "\"type\":\"object\","
                                                                            "\"required\":["
                                                                            "\"blocks\"],"
                                                                            "\"properties\":{"
                                                                            "\"blocks\":{\"type\":"
                                                                            "\"array\"}}}," COMMON(
                                                                                "false",
                                                                                "idempotent", "",
                                                                                "") ","
                                                                                    "{\"name\":"
                                                                                    "\"memory_"
                                                                                    "load\","
                                                                                    "\"version\":"
                                                                                    "\"1.0.0\","
                                                                                    "\"description"
                                                                                    "\":\"Load a "
                                                                                    "working "
                                                                                    "memory block "
                                                                                    "into your "
                                                                                    "context.\","
                                                                                    "\"input_"
                                                                                    "schema\":{"
                                                                                    "\"type\":"
                                                                                    "\"object\","
                                                                                    "\"additionalPr"
                                                                                    "operties\":"
                                                                                    "false,"
                                                                                    "\"required\":["
                                                                                    "\"label\"],"
                                                                                    "\"properties\""
                                                                                    ":{" LABEL "}},"
                                                                                    "\"output_"
                                                                                    "schema\":{"
                                                                                    "\"type\":"
                                                                                    "\"object\","
                                                                                    "\"required\":["
                                                                                    "\"status\"],"
                                                                                    "\"properties\""
                                                                                    ":{\"status\":{"
                                                                                    "\"type\":"
                                                                                    "\"string\"}}}"
                                                                                    "," COMMON(
                                                                                        "true",
                                                                                        "idempoten"
                                                                                        "t",
                                                                                        "\"memory_"
                                                                                        "block\"",
                                                                                        "") ","
                                                                                            "{\"nam"
                                                                                            "e\":"
                                                                                            "\"memo"
                                                                                            "ry_"
                                                                                            "unload"
                                                                                            "\","
                                                                                            "\"vers"
                                                                                            "ion\":"
                                                                                            "\"1.0."
                                                                                            "0\","
                                                                                            "\"desc"
                                                                                            "riptio"
                                                                                            "n\":"
                                                                                            "\"Unlo"
                                                                                            "ad a "
                                                                                            "workin"
                                                                                            "g "
                                                                                            "memory"
                                                                                            " block"
                                                                                            " from "
                                                                                            "your "
                                                                                            "contex"
                                                                                            "t (it "
                                                                                            "stays "
                                                                                            "stored"
                                                                                            ").\","
                                                                                            "\"inpu"
                                                                                            "t_"
                                                                                            "schema"
                                                                                            "\":{"
                                                                                            "\"type"
                                                                                            "\":"
                                                                                            "\"obje"
                                                                                            "ct\","
                                                                                            "\"addi"
                                                                                            "tional"
                                                                                            "Proper"
                                                                                            "ties\""
                                                                                            ":false"
                                                                                            ","
                                                                                            "\"requ"
                                                                                            "ired\""
                                                                                            ":["
                                                                                            "\"labe"
                                                                                            "l\"],"
                                                                                            "\"prop"
                                                                                            "erties"
                                                                                            "\":"
                                                                                            "{" LABEL
                                                                                            "}},"
                                                                                            "\"outp"
                                                                                            "ut_"
                                                                                            "schema"
                                                                                            "\":{"
                                                                                            "\"type"
                                                                                            "\":"
                                                                                            "\"obje"
                                                                                            "ct\","
                                                                                            "\"requ"
                                                                                            "ired\""
                                                                                            ":["
                                                                                            "\"stat"
                                                                                            "us\"],"
                                                                                            "\"prop"
                                                                                            "erties"
                                                                                            "\":{"
                                                                                            "\"stat"
                                                                                            "us\":{"
                                                                                            "\"type"
                                                                                            "\":"
                                                                                            "\"stri"
                                                                                            "ng\"}}"
                                                                                            "}"
                                                                                            "," COMMON(
                                                                                                "tr"
                                                                                                "u"
                                                                                                "e",
                                                                                                "id"
                                                                                                "em"
                                                                                                "po"
                                                                                                "te"
                                                                                                "n"
                                                                                                "t",
                                                                                                "\""
                                                                                                "me"
                                                                                                "mo"
                                                                                                "ry"
                                                                                                "_b"
                                                                                                "lo"
                                                                                                "ck"
                                                                                                "\"",
                                                                                                "") "]";

struct mem_provider {
    struct vg_tool_provider base; /* must stay first */
    struct vg_env *env;
    struct vg_embedder *emb; /* owned when own_emb */
    int own_emb;
    struct vg_memory *m;
};

json_t *vg_memory_tool_contracts(void)
{
    return json_loads(contracts, 0, NULL);
}

static vigil_code p_list(struct vg_tool_provider *p, json_t **out, vigil_error *err)
{
    if (!(*out = vg_memory_tool_contracts()))
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory listing memory tools");
    return VIGIL_OK;
}

typedef vigil_code (*handler)(struct vg_memory *, const char *, json_t *, json_t **, vigil_error *);

static const struct {
    const char *name;
    handler fn;
} handlers[] = {
    {"memory_read", vg_memory_tool_read},     {"memory_write", vg_memory_tool_write},
    {"memory_append", vg_memory_tool_append}, {"memory_list", vg_memory_tool_list},
    {"memory_load", vg_memory_tool_load},     {"memory_unload", vg_memory_tool_unload},
};

static vigil_code p_call(struct vg_tool_provider *p, const struct vg_tool_request *q,
                         struct vg_tool_response *r, vigil_error *err)
{
    struct mem_provider *mp = (struct mem_provider *)p;
    for (size_t i = 0; i < VG_ARRAY_LEN(handlers); i++) {
        if (strcmp(q->tool, handlers[i].name) != 0)
            continue;
        if (q->preview_only) {
            r->result = json_pack("{s:s, s:O}", "would_call", q->tool, "arguments", q->args);
            return r->result ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
        }
        /* The manager works on the executor's env (for a write, its transaction is open
         * around us, so a networked embedder is left for p_after_commit). */
        mp->m->env = q->env;
        vigil_error e = {0};
        json_t *out = NULL;
        vigil_code rc = handlers[i].fn(mp->m, q->agent_id, q->args, &out, &e);
        switch (rc) {
        case VIGIL_OK:
            r->result = out;
            if (json_object_get(out, "block_id"))
                r->changed_entity_ids = json_pack("[s]", vg_memory_str(out, "block_id"));
            return VIGIL_OK;
        case VIGIL_EDENIED:
            vg_tool_response_fail(r, VG_TOOL_NOT_ALLOWED, "%s", e.message);
            return VIGIL_OK;
        case VIGIL_EINVAL:
        case VIGIL_ETOOBIG:
            vg_tool_response_fail(r, VG_TOOL_INVALID_ARGUMENTS, "%s", e.message);
            return VIGIL_OK;
        case VIGIL_ENOTFOUND:
            vg_tool_response_fail(r, VG_TOOL_FAILED, "%s", e.message);
            return VIGIL_OK;
        default:
            vg_error_copy(err, &e);
            return rc;
        }
    }
    vg_tool_response_fail(r, VG_TOOL_UNKNOWN_TOOL, "no memory tool \"%s\"", q->tool);
    return VIGIL_OK;
}

/* A write inside the executor's transaction leaves a networked embedder alone (block.c,
 * vg_memory_may_embed) and its block waiting for a vector. Once that transaction has committed
 * the vector is made here, so the call still returns with its block embedded, and no write
 * lock was held during the request. If the embedder is down the block keeps waiting for the
 * pass after the run. */
static void p_after_commit(struct vg_tool_provider *p, const struct vg_tool_request *q)
{
    struct mem_provider *mp = (struct mem_provider *)p;
    if (!mp->emb || (mp->emb->methods->caps & VG_EMBED_CAP_OFFLINE))
        return;
    vigil_error ignore = {0};
    mp->m->env = q->env;
    vg_memory_embed_pending(mp->m, q->agent_id, 16, NULL, &ignore);
}

static void p_destroy(struct vg_tool_provider *p)
{
    struct mem_provider *mp = (struct mem_provider *)p;
    vg_memory_free(mp->m);
    if (mp->own_emb)
        vg_embed_close(mp->emb);
    vg_free(mp);
}

static const struct vg_tool_provider_methods methods = {
    .version = 2,
    .name = "memory",
    .caps = VG_TOOL_PROVIDER_CAP_TRANSACTIONAL,
    .list = p_list,
    .call = p_call,
    .destroy = p_destroy,
    .after_commit = p_after_commit,
};

/* A provider over env with embedder, owning it when own (then closed on failure too). */
static vigil_code provider_new(struct vg_env *env, struct vg_embedder *embedder, int own,
                               struct vg_tool_provider **out, vigil_error *err)
{
    struct mem_provider *mp = vg_calloc(1, sizeof *mp);
    vigil_code rc = mp ? vg_memory_new(env, embedder, &mp->m, err)
                       : VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating the memory tools");
    if (rc) {
        if (own)
            vg_embed_close(embedder);
        vg_free(mp);
        return rc;
    }
    mp->base.methods = &methods;
    mp->env = env;
    mp->emb = embedder;
    mp->own_emb = own;
    *out = &mp->base;
    return VIGIL_OK;
}

vigil_code vg_memory_tool_provider_own(struct vg_env *env, struct vg_embedder *embedder,
                                       struct vg_tool_provider **out, vigil_error *err)
{
    return provider_new(env, embedder, 1, out, err);
}

vigil_code vg_memory_tool_provider(struct vg_env *env, struct vg_embedder *embedder,
                                   struct vg_tool_provider **out, vigil_error *err)
{
    if (embedder)
        return provider_new(env, embedder, 0, out, err);
    /* The offline embedder: an env without a runtime's config. */
    vigil_code rc = vg_embed_hash_new(0, &embedder, err);
    return rc ? rc : provider_new(env, embedder, 1, out, err);
}
