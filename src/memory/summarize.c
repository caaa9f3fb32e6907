/*
 * summarize.c: the deterministic fallback summarizer and the fixed prompt contract of the
 * model summarizer. The fallback is extractive: for each message its role and first sentence
 * (or first line), cut to a share of the token limit, so the result is bounded and the same
 * for the same input on every device.
 */
#include "base/common.h"

#include "memory/compact.h"
#include "memory/memory_int.h"

const char vg_summary_prompt[] =
    "Summarize the conversation span below for your own later use. Keep: facts learned about "
    "the user and the world, decisions made, commitments and open tasks, tool outcomes that "
    "matter, and anything the user asked to remember. Drop greetings and filler. Write plain "
    "sentences in the third person, at most %d tokens. Do not invent anything.";

/* Append the first sentence of s, at most max bytes, cut at a UTF-8 boundary. */
static void first_sentence(struct vg_buf *b, const char *s, size_t max)
{
    size_t n = 0;
    while (n < max && s[n]) {
        char c = s[n++];
        if (c == '\n' ||
            ((c == '.' || c == '!' || c == '?') && (s[n] == ' ' || s[n] == '\n' || s[n] == '\0')))
            break;
    }
    while (n > 0 && s[n] && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        n--;
    vg_buf_append(b, s, n);
}

static vigil_code extractive(struct vg_summarizer *s, json_t *messages, int depth, int max_tokens,
                             char **out, vigil_error *err)
{
    size_t n = json_array_size(messages);
    size_t cap = (size_t)(max_tokens > 0 ? max_tokens : 400) * 4;
    size_t per = n ? cap / n : cap;
    if (per < 48)
        per = 48;
    struct vg_buf b;
    vg_buf_init(&b, cap + 256);
    vg_buf_printf(&b, "[%s summary of %zu %s]", depth >= 2 ? "depth-2" : "extractive", n,
                  depth >= 2 ? "summaries" : "messages");
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(messages, i);
        const char *content = vg_memory_str(m, "content");
        while (*content == ' ' || *content == '\n' || *content == '[')
            content++; /* skip our own header when summarizing summaries */
        if (depth >= 2) {
            const char *close = strchr(content, ']');
            if (close)
                content = close + 1;
            while (*content == ' ' || *content == '\n')
                content++;
        }
        if (!*content)
            continue;
        if (b.len + 16 > cap)
            break;
        vg_buf_printf(&b, "\n- %s: ", vg_memory_str(m, "kind"));
        size_t room = cap > b.len ? cap - b.len : 0;
        first_sentence(&b, content, per < room ? per : room);
    }
    vigil_code rc = vg_buf_finish(&b, err);
    if (!rc && !(*out = vg_buf_detach(&b, NULL)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory summarizing");
    vg_buf_release(&b);
    return rc;
}

static const struct vg_summarizer_methods extractive_methods = {
    .version = 1,
    .name = "extractive",
    .summarize = extractive,
};

static struct vg_summarizer extractive_instance = {&extractive_methods};

struct vg_summarizer *vg_summarizer_extractive(void)
{
    return &extractive_instance;
}
