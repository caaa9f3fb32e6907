/*
 * fuzz_memory_search.c: arbitrary bytes as a memory query. They go through the query
 * tokenizer and hybrid-less keyword search, and also, unsplit, as one raw term straight into
 * the store's text search: FTS5 query syntax must never be injectable, so every call has to
 * succeed (a syntax error would mean user text reached the FTS5 parser unquoted).
 */
#include "base/common.h"

#include "memory/memory.h"
#include "runtime/runtime.h"

#include <unistd.h>

static vigil_runtime *rt;
static struct vg_memory *mm;
static char agent[37];

static void setup(void)
{
    char path[256];
    vigil_error err = {0};
    snprintf(path, sizeof path, "/tmp/fuzz_memory_search.%d.db", (int)getpid());
    unlink(path);
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path, .create_if_missing = 1};
    vigil_agent_spec spec = {.name = "fuzz"};
    if (vigil_runtime_open(&o, &rt, &err) || vigil_agent_create(rt, &spec, agent, &err) ||
        vg_memory_new(vg_runtime_env(rt), NULL, &mm, &err))
        abort();
    const char *texts[] = {"alpha beta gamma NEAR OR AND", "\"quoted\" text: col * ^ ( )"};
    for (int i = 0; i < 2; i++) {
        char label[8];
        snprintf(label, sizeof label, "b%d", i);
        json_t *out = NULL;
        if (vg_memory_write(mm, agent, label, texts[i], NULL, &out, &err))
            abort();
        json_decref(out);
    }
}

static int hit_cb(void *user, const char *id, double score)
{
    (void)id;
    (void)score;
    ++*(int *)user;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!rt)
        setup();
    if (size > 4096)
        return 0;
    char *text = vg_strndup((const char *)data, size);
    if (!text)
        return 0;
    vigil_error err = {0};
    json_t *hits = NULL;
    if (vg_memory_search(mm, agent, text, VG_SEARCH_KEYWORD, 5, &hits, &err) != VIGIL_OK) {
        fprintf(stderr, "search failed: %s\n", err.message);
        abort();
    }
    json_decref(hits);
    const char *term[] = {text};
    struct vg_store *s = vg_runtime_env(rt)->store;
    int n = 0;
    if (vg_store_text_search(s, "memory_block", agent, term, 1, 5, hit_cb, &n, &err) != VIGIL_OK) {
        fprintf(stderr, "raw term search failed: %s\n", err.message);
        abort();
    }
    vg_free(text);
    return 0;
}
