/*
 * tools.c: the memory tools' handlers: JSON arguments in, JSON result out, each one call into
 * the memory manager, so permissions hold whatever the model asks. The tool layer registers
 * them (name, schema, handler); the schemas are in vg_memory_tool_schemas.
 */
#include "base/common.h"

#include "memory/memory_int.h"

static vigil_code need_string(json_t *args, const char *k, const char **out, vigil_error *err)
{
    json_t *v = json_object_get(args, k);
    if (!json_is_string(v))
        return VG_FAIL(err, VIGIL_EINVAL, "argument \"%s\" must be a string", k);
    *out = json_string_value(v);
    return VIGIL_OK;
}

static const char *opt_string(json_t *args, const char *k)
{
    return json_string_value(json_object_get(args, k));
}

vigil_code vg_memory_tool_read(struct vg_memory *m, const char *agent_id, json_t *args,
                               json_t **out, vigil_error *err)
{
    const char *query = NULL;
    vigil_code rc = need_string(args, "query", &query, err);
    if (rc)
        return rc;
    json_int_t k = json_integer_value(json_object_get(args, "k"));
    json_t *hits = NULL;
    rc = vg_memory_search(m, agent_id, query, VG_SEARCH_HYBRID, k > 0 && k <= 50 ? (int)k : 5,
                          &hits, err);
    if (rc)
        return rc;
    *out = json_pack("{s:o}", "results", hits);
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

vigil_code vg_memory_tool_write(struct vg_memory *m, const char *agent_id, json_t *args,
                                json_t **out, vigil_error *err)
{
    const char *label = NULL, *content = NULL;
    vigil_code rc;
    if ((rc = need_string(args, "label", &label, err)) ||
        (rc = need_string(args, "content", &content, err)))
        return rc;
    return vg_memory_write(m, agent_id, label, content, opt_string(args, "tier"), out, err);
}

vigil_code vg_memory_tool_append(struct vg_memory *m, const char *agent_id, json_t *args,
                                 json_t **out, vigil_error *err)
{
    const char *label = NULL, *text = NULL;
    vigil_code rc;
    if ((rc = need_string(args, "label", &label, err)) ||
        (rc = need_string(args, "text", &text, err)))
        return rc;
    return vg_memory_append(m, agent_id, label, text, out, err);
}

vigil_code vg_memory_tool_list(struct vg_memory *m, const char *agent_id, json_t *args,
                               json_t **out, vigil_error *err)
{
    json_t *blocks = NULL, *items = json_array();
    if (!items)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    vigil_code rc = vg_memory_list(m, agent_id, opt_string(args, "tier"), &blocks, err);
    for (size_t i = 0; !rc && i < json_array_size(blocks); i++) {
        json_t *b = json_array_get(blocks, i);
        const char *content = vg_memory_str(b, "content");
        char preview[161];
        snprintf(preview, sizeof preview, "%.160s", content);
        /* Cut at a UTF-8 boundary so the preview stays valid text. */
        size_t n = strlen(preview);
        while (n > 0 && ((unsigned char)preview[n - 1] & 0xC0) == 0x80)
            n--;
        if (n > 0 && (unsigned char)preview[n - 1] >= 0xC0)
            n--;
        if (strlen(content) > 160)
            preview[n] = '\0';
        json_t *o =
            json_pack("{s:s, s:s, s:s, s:b, s:b, s:s?}", "label", vg_memory_str(b, "label"), "tier",
                      vg_memory_str(b, "tier"), "permission", vg_memory_str(b, "permission"),
                      "pinned", json_is_true(json_object_get(b, "pinned")), "loaded",
                      json_is_true(json_object_get(b, "loaded")), "preview", preview);
        if (!o || json_array_append_new(items, o))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    }
    json_decref(blocks);
    if (rc) {
        json_decref(items);
        return rc;
    }
    *out = json_pack("{s:o}", "blocks", items);
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

static vigil_code load_unload(struct vg_memory *m, const char *agent_id, json_t *args, int load,
                              json_t **out, vigil_error *err)
{
    const char *label = NULL;
    vigil_code rc = need_string(args, "label", &label, err);
    if (!rc)
        rc = load ? vg_memory_load(m, agent_id, label, err)
                  : vg_memory_unload(m, agent_id, label, err);
    if (rc)
        return rc;
    *out = json_pack("{s:s, s:s}", "status", load ? "loaded" : "unloaded", "label", label);
    return *out ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
}

vigil_code vg_memory_tool_load(struct vg_memory *m, const char *agent_id, json_t *args,
                               json_t **out, vigil_error *err)
{
    return load_unload(m, agent_id, args, 1, out, err);
}

vigil_code vg_memory_tool_unload(struct vg_memory *m, const char *agent_id, json_t *args,
                                 json_t **out, vigil_error *err)
{
    return load_unload(m, agent_id, args, 0, out, err);
}
