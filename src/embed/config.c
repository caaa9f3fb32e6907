/*
 * config.c: the embedder a runtime uses, chosen from the config (docs/memory.md: the built-in
 * offline embedder unless a provider is configured). embed.provider picks builtin, openai or
 * ollama; the HTTP adapters need a model and a vector size, which known models supply and
 * embed.dimensions overrides. The OpenAI key comes only from OPENAI_API_KEY, never the file.
 */
#include "base/common.h"

#include "config/config.h"
#include "embed/embed.h"
#include "os/fs.h"

/* Sizes of common embedding models, so a config naming one needs no embed.dimensions. */
static const struct {
    const char *model;
    int dim;
} known_dims[] = {
    {"text-embedding-3-small", 1536}, {"text-embedding-3-large", 3072},
    {"text-embedding-ada-002", 1536}, {"nomic-embed-text", 768},
    {"mxbai-embed-large", 1024},      {"all-minilm", 384},
    {"snowflake-arctic-embed", 1024}, {"bge-m3", 1024},
};

/* The known size of model ("name" or "name:tag"), or 0. */
static int dim_of(const char *model)
{
    size_t n = strcspn(model, ":");
    for (size_t i = 0; i < VG_ARRAY_LEN(known_dims); i++)
        if (strlen(known_dims[i].model) == n && strncmp(known_dims[i].model, model, n) == 0)
            return known_dims[i].dim;
    return 0;
}

vigil_code vg_embed_from_config(const struct vg_config *cfg, struct vg_clock *clock,
                                struct vg_embedder **out, vigil_error *err)
{
    const char *provider = "builtin", *model = NULL, *base_url = NULL;
    int64_t dims = 0, timeout = 0;
    vigil_code rc = VIGIL_OK;
    (void)clock; /* unused: the HTTP adapters make one attempt and never wait */

    if (cfg) {
        rc = vg_config_string(cfg, "embed.provider", "builtin", &provider, err);
        if (!rc)
            rc = vg_config_string(cfg, "embed.model", NULL, &model, err);
        if (!rc)
            rc = vg_config_string(cfg, "embed.base_url", NULL, &base_url, err);
        if (!rc)
            rc = vg_config_int(cfg, "embed.dimensions", 0, &dims, err);
        if (!rc)
            rc = vg_config_int(cfg, "embed.timeout_ms", 0, &timeout, err);
        if (rc)
            return rc;
    }
    if (strcmp(provider, "builtin") == 0) {
        /* The offline embedder has its own size; embed.dimensions picks another one. */
        if (dims < 0 || dims > 65536)
            return VG_FAIL(err, VIGIL_EINVAL, "embed.dimensions must be 1..65536, got %lld",
                           (long long)dims);
        return vg_embed_hash_new((int)dims, out, err);
    }
    int openai = strcmp(provider, "openai") == 0;
    if (!openai && strcmp(provider, "ollama") != 0)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "embed.provider \"%s\" is unknown (builtin, openai or ollama)", provider);
    if (!model || !*model)
        model = openai ? "text-embedding-3-small" : "nomic-embed-text";
    if (dims == 0)
        dims = dim_of(model);
    if (dims == 0)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "embed.dimensions is needed for embedding model \"%s\" (its vector size)",
                       model);
    if (dims < 1 || dims > 65536)
        return VG_FAIL(err, VIGIL_EINVAL, "embed.dimensions must be 1..65536, got %lld",
                       (long long)dims);
    if (timeout < 0 || timeout > INT32_MAX)
        return VG_FAIL(err, VIGIL_EINVAL, "embed.timeout_ms must be non-negative milliseconds");
    /* The adapters add /v1/embeddings or /api/embed themselves; a base URL copied from
     * model.base_url (".../v1") names the same server, so its /v1 is dropped. */
    char base[1024] = "";
    if (base_url) {
        size_t n = strlen(base_url);
        while (n > 0 && base_url[n - 1] == '/')
            n--;
        if (n >= 3 && strncmp(base_url + n - 3, "/v1", 3) == 0)
            n -= 3;
        if (n >= sizeof base)
            return VG_FAIL(err, VIGIL_EINVAL, "embed.base_url is too long");
        memcpy(base, base_url, n);
        base[n] = '\0';
    }
    struct vg_embed_http_options o = {.base_url = base,
                                      .api_key = openai ? vg_os_getenv("OPENAI_API_KEY") : NULL,
                                      .model = model,
                                      .dimension = (int)dims,
                                      .timeout_ms = (long)timeout};
    return openai ? vg_embed_openai_new(&o, out, err) : vg_embed_ollama_new(&o, out, err);
}
