/*
 * reindex.c: a memory block's text index entry made from its stored body, for blocks put into
 * the store as records (an agent brought from another store) rather than written by the
 * memory manager, which indexes each block it writes (block.c, index_block) in the same form.
 */
#include "base/common.h"

#include "base/buf.h"
#include "memory/memory.h"
#include "memory/reindex.h"
#include "store/store.h"

vigil_code vg_memory_index_block_body(struct vg_env *env, const char *block_id,
                                      const char *agent_id, const char *body, vigil_error *err)
{
    json_t *b = NULL;
    if (vg_env_parse_json(env, body, &b))
        return VG_FAIL(err, VIGIL_EPARSE, "memory block \"%s\" is not JSON", block_id);
    const char *label = json_string_value(json_object_get(b, "label"));
    const char *content = json_string_value(json_object_get(b, "content"));
    struct vg_buf text;
    vg_buf_init(&text, VG_MEMORY_CONTENT_MAX + 512);
    vg_buf_printf(&text, "%s\n%s", label ? label : "", content ? content : "");
    vigil_code rc = vg_buf_finish(&text, err);
    if (!rc)
        rc = vg_store_text_index(env->store, "memory_block", block_id, agent_id, text.data, err);
    if (rc == VIGIL_EUNSUPPORTED)
        rc = VIGIL_OK;
    vg_buf_release(&text);
    json_decref(b);
    return rc;
}
