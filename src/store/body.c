/*
 * body.c: column values out of the stored bodies of the step's records (body.h).
 *
 * Sections: the kinds' fields; members of an object; shapes; pack; unpack.
 */
#include "base/common.h"

#include "base/hash.h"
#include "base/json.h"
#include "os/clock.h"
#include "store/body.h"

/* ---- the kinds' fields ----------------------------------------------------------------------- */

enum source { FROM_ID, FROM_OWNER, FROM_K1, FROM_K2, FROM_SEQ, FROM_AT, FROM_TEXT, FROM_SHAPE };

struct field {
    const char *key;
    size_t klen;
    enum source from;
    const char *text; /* FROM_TEXT: the value's JSON text; FROM_SHAPE: its shape (below) */
};

/* A shape is the value's text with holes: PREV stands for the text of the body's own `prev_id`
 * (a message's previous message, which a tool result's envelope and metadata name again), ID for
 * the row's own id (a tool call's end kept in the message that holds its output), STR
 * for any text a JSON string holds, VAL for one JSON value. A member whose value has the shape
 * is stored as the holes alone, `"key":[h1,h2,...]` (a STR hole as a string), so the keys and
 * constants every such record repeats (a run's telemetry, a model call's, a tool call's
 * envelope) are stored once, here. */
#define PREV "\x01"
#define STR "\x02"
#define VAL "\x03"
#define HASH "\x04" /* the SHA-256 of the body's own content string's value */
#define ID "\x05"   /* the text of the row's own id */
/* An id hole: a UUID's canonical text (36 characters, lowercase) or a SHA-256's hex (64), stored
 * as the base64url text of its bytes (22 or 43 characters): the ids a step's bodies hold. */
#define UUID "\x06"
#define HEX64 "\x07"
/* First in a shape's text: its one hole is stored bare, `"key":"..."`, not in an array. */
#define BARE "\x08"
/* A time as vg_time_format_ms writes it (24 characters), stored as its milliseconds from the
 * row's own time: `-164` for a run's start in its projection. */
#define TIME "\x09"

#define F(key, from, text)                                                                         \
    {                                                                                              \
        key, sizeof key - 1, from, text                                                            \
    }
#define SHAPE(key, shape) F(key, FROM_SHAPE, shape)

/* Each table's order lists its entries in ascending key order (pack and unpack merge them with
 * the stored members in that order); a key may have several entries, one per constant value or
 * shape it often has. At most 31 entries. The tables are part of the stored format: an entry's
 * position is its bit in the marker of every body stored with it, so entries are never moved or
 * changed, only added at the end (and placed in the order); more than 31 would need a marker of
 * their own. */
static const struct field message_fields[] = {
    F("agent_id", FROM_OWNER, NULL),
    F("content", FROM_TEXT, "\"\""),
    F("content_type", FROM_TEXT, "\"application/json\""),
    F("content_type", FROM_TEXT, "\"text/plain\""),
    F("created_at", FROM_AT, NULL),
    F("id", FROM_ID, NULL),
    F("kind", FROM_K2, NULL),
    F("metadata", FROM_TEXT, "null"),
    F("payload_id", FROM_TEXT, "null"),
    F("prev_id", FROM_TEXT, "null"),
    F("seq", FROM_SEQ, NULL),
    F("thread_id", FROM_K1, NULL),
    F("tokens", FROM_TEXT, "0"),
    /* 13: a tool result's envelope (src/tool/executor.c) and metadata; 15 an action's, 16 a
     * model answer's metadata (src/loop) */
    SHAPE("content", "\"{\\\"action_id\\\":\\\"" PREV
                     "\\\",\\\"changed_entity_ids\\\":[],\\\"changed_tokens\\\":[],"
                     "\\\"operation_id\\\":\\\"" STR "\\\",\\\"replayed\\\":false,"
                     "\\\"result\\\":" STR ",\\\"status\\\":\\\"success\\\"}\""),
    SHAPE("metadata", "{\"actionRefId\":\"" PREV "\",\"toolName\":\"" STR "\"}"),
    SHAPE("metadata",
          "{\"actionType\":\"tool_call\",\"argumentsHash\":\"" STR "\",\"operationId\":\"" STR
          "\",\"previewOnly\":false,\"scopeSnapshot\":" VAL ",\"toolName\":\"" STR "\"}"),
    SHAPE("metadata", "{\"model\":\"" STR "\",\"role\":\"assistant\",\"scripted\":false,"
                      "\"stop_reason\":\"" STR "\",\"tool_calls\":" VAL "}"),
    /* 17: an action's metadata whose hash is its content's; 18 a model answer with one call */
    SHAPE("metadata",
          "{\"actionType\":\"tool_call\",\"argumentsHash\":\"" HASH "\",\"operationId\":\"" STR
          "\",\"previewOnly\":false,\"scopeSnapshot\":" VAL ",\"toolName\":\"" STR "\"}"),
    SHAPE("metadata", "{\"model\":\"" STR "\",\"role\":\"assistant\",\"scripted\":false,"
                      "\"stop_reason\":\"" STR "\",\"tool_calls\":[{\"arguments\":\"" STR
                      "\",\"id\":\"" STR "\",\"name\":\"" STR "\"}]}"),
    /* 19-20: the previous message's id and the run's, each a UUID (src/agent/message.c) */
    SHAPE("prev_id", BARE "\"" UUID "\""),
    SHAPE("run_id", BARE "\"" UUID "\""),
    /* 21: 13 with its operation id a SHA-256 (src/tool/executor.c), tried before 13; 22: 17's,
     * tried before 17 */
    SHAPE("content", "\"{\\\"action_id\\\":\\\"" PREV
                     "\\\",\\\"changed_entity_ids\\\":[],\\\"changed_tokens\\\":[],"
                     "\\\"operation_id\\\":\\\"" HEX64 "\\\",\\\"replayed\\\":false,"
                     "\\\"result\\\":" STR ",\\\"status\\\":\\\"success\\\"}\""),
    SHAPE("metadata",
          "{\"actionType\":\"tool_call\",\"argumentsHash\":\"" HASH "\",\"operationId\":\"" HEX64
          "\",\"previewOnly\":false,\"scopeSnapshot\":" VAL ",\"toolName\":\"" STR "\"}"),
};
/* The entry of message_fields that keeps a run_id as its UUID's hole (vg_body_message_run_hole). */
#define MESSAGE_RUN_HOLE 20
static const unsigned char message_order[] = {0,  1,  21, 13, 2, 3, 4,  5,  6,  7,  14, 22,
                                              17, 15, 18, 16, 8, 9, 19, 20, 10, 11, 12};
static const struct field journal_fields[] = {
    F("activity", FROM_TEXT, "\"executing\""),
    F("activity", FROM_TEXT, "\"reasoning\""),
    F("capabilities", FROM_TEXT, "{\"tool_call_active\":false}"),
    F("capabilities", FROM_TEXT, "{\"tool_call_active\":true}"),
    F("occurred_at", FROM_AT, NULL),
    F("owner_id", FROM_OWNER, NULL),
    F("record_id", FROM_ID, NULL),
    F("run_id", FROM_K1, NULL),
    F("schema_version", FROM_TEXT, "1"),
    F("scope", FROM_TEXT, "\"agent\""),
    F("sequence", FROM_SEQ, NULL),
    F("type", FROM_K2, NULL),
    /* 12: an activity's model call (src/loop), 13-14 its tool call's start and end
     * (src/tool/executor.c), 15-16 the run's totals, with and without the active tool */
    SHAPE("model_call",
          "{\"attempts\":" VAL ",\"cached_tokens\":" VAL ",\"cost_micros\":" VAL
          ",\"input_tokens\":" VAL ",\"latency_ms\":" VAL ",\"model\":\"" STR
          "\",\"output_tokens\":" VAL ",\"provider\":\"" STR "\",\"stop_reason\":\"" STR "\"}"),
    SHAPE("tool_call", "{\"input\":" VAL ",\"name\":\"" STR
                       "\",\"status\":\"running\",\"tool_call_id\":\"" STR "\"}"),
    SHAPE("tool_call", "{\"duration_ms\":" VAL ",\"name\":\"" STR "\",\"output_message\":\"" STR
                       "\",\"status\":\"succeeded\",\"tool_call_id\":\"" STR "\"}"),
    SHAPE("telemetry", "{\"cached_tokens\":" VAL ",\"cost_micros\":" VAL ",\"input_tokens\":" VAL
                       ",\"model_calls\":" VAL ",\"output_tokens\":" VAL ",\"tool_calls\":" VAL
                       ",\"total_tokens\":" VAL "}"),
    SHAPE("telemetry",
          "{\"active_tool_name\":\"" STR "\",\"cached_tokens\":" VAL ",\"cost_micros\":" VAL
          ",\"input_tokens\":" VAL ",\"model_calls\":" VAL ",\"output_tokens\":" VAL
          ",\"tool_calls\":" VAL ",\"total_tokens\":" VAL "}"),
    /* 17: a tool call's end kept in its toolResult message (src/journal/ends.c), whose id is
     * the record's and names the output's message: tried before 14 */
    SHAPE("tool_call", "{\"duration_ms\":" VAL ",\"name\":\"" STR "\",\"output_message\":\"" ID
                       "\",\"status\":\"succeeded\",\"tool_call_id\":\"" STR "\"}"),
    /* 18: a tool call's start, whose record id is the call's (a row, or kept in its action
     * message: src/journal/ends.c): tried before 13 */
    SHAPE("tool_call", "{\"input\":" VAL ",\"name\":\"" STR
                       "\",\"status\":\"running\",\"tool_call_id\":\"" ID "\"}"),
    /* 19: 17 kept in a result message whose prev_id is the call's action, the call's id
     * (vg_body_pack_prev): tried before 17 */
    SHAPE("tool_call", "{\"duration_ms\":" VAL ",\"name\":\"" STR "\",\"output_message\":\"" ID
                       "\",\"status\":\"succeeded\",\"tool_call_id\":\"" PREV "\"}"),
    /* 20-22: a run's header names its agent (the owner) and says two constants, its kind and
     * the protocol descriptor every run of this version has (src/journal/registry.c), some 650
     * bytes a run */
    F("agent_id", FROM_OWNER, NULL),
    F("kind", FROM_TEXT, "\"agent-execution-interaction-journal\""),
    F("protocol_descriptor", FROM_TEXT,
      "{\"messages\":[\"prompt\",\"chat\",\"command\",\"wake-delta\"],"
      "\"signals\":[{\"schema\":\"agent-signal.progress.v1\",\"type\":\"progress\"},"
      "{\"schema\":\"agent-signal.status.v1\",\"type\":\"status\"},"
      "{\"schema\":\"agent-signal.needs-input.v1\",\"type\":\"needs_input\"},"
      "{\"schema\":\"agent-signal.blocked.v1\",\"type\":\"blocked\"},"
      "{\"schema\":\"agent-signal.ready-for-verification.v1\","
      "\"type\":\"ready_for_verification\"},"
      "{\"schema\":\"agent-signal.completed-claim.v1\",\"type\":\"completed_claim\"},"
      "{\"schema\":\"agent-signal.failed-claim.v1\",\"type\":\"failed_claim\"},"
      "{\"schema\":\"agent-signal.message.v1\",\"type\":\"message\"}]}"),
};
static const unsigned char journal_order[] = {0, 1, 20, 2,  3,  21, 12, 4,  5,  22, 6, 7,
                                              8, 9, 10, 15, 16, 18, 13, 19, 17, 14, 11};
static const struct field tool_call_fields[] = {
    F("ended_at", FROM_AT, NULL),         F("error_code", FROM_TEXT, "null"),
    F("operation_id", FROM_TEXT, "null"), F("run_id", FROM_K1, NULL),
    F("started_at", FROM_AT, NULL),       F("status", FROM_K2, NULL),
    F("tool_call_id", FROM_ID, NULL),
};
static const unsigned char tool_call_order[] = {0, 1, 2, 3, 4, 5, 6};

/* A run's projection (src/journal/journal.c), rewritten at each commit of the run and kept when it
 * ends: the constants and columns of a finished chat turn's, and the shapes of its newest model
 * call and of the five items its timeline then has. */
#define PROJ_TELEMETRY                                                                             \
    "\"telemetry\":{\"cached_tokens\":" VAL ",\"cost_micros\":" VAL ",\"input_tokens\":" VAL       \
    ",\"model_calls\":" VAL ",\"output_tokens\":" VAL ",\"tool_calls\":" VAL                       \
    ",\"total_tokens\":" VAL "}"
static const struct field projection_fields[] = {
    F("activity", FROM_TEXT, "\"idle\""),
    F("agent_id", FROM_OWNER, NULL),
    F("attention", FROM_TEXT, "\"none\""),
    F("current_input_request_id", FROM_TEXT, "null"),
    F("ended_at", FROM_AT, NULL),
    F("error", FROM_TEXT, "null"),
    SHAPE("latest_activity",
          "{\"activity\":\"reasoning\",\"model_call\":{\"attempts\":" VAL ",\"cached_tokens\":" VAL
          ",\"cost_micros\":" VAL ",\"input_tokens\":" VAL ",\"latency_ms\":" VAL
          ",\"model\":\"" STR "\",\"output_tokens\":" VAL ",\"provider\":\"" STR
          "\",\"stop_reason\":\"" STR "\"},\"occurred_at\":\"" TIME "\",\"sequence\":" VAL
          "," PROJ_TELEMETRY "}"),
    F("lifecycle", FROM_TEXT, "\"completed\""),
    F("parent_run_id", FROM_TEXT, "null"),
    SHAPE("processed_messages", "{\"count\":" VAL ",\"digest\":\"" HEX64 "\"}"),
    SHAPE("processed_observations", "{\"count\":" VAL ",\"digest\":\"" HEX64 "\"}"),
    F("run_id", FROM_ID, NULL),
    SHAPE("run_key", BARE "\"" HEX64 "\""),
    F("scope", FROM_TEXT, "\"agent\""),
    /* a chat turn's: started, the user's message and its delivery, the answer, the end state */
    SHAPE("timeline",
          "[{\"item\":\"started\",\"occurred_at\":\"" TIME "\",\"run_key\":\"" HEX64
          "\",\"sequence\":1,\"wake_reason\":\"" STR
          "\"},{\"item\":\"message\",\"message_id\":\"" UUID
          "\",\"message_type\":\"chat\",\"occurred_at\":\"" TIME "\",\"sequence\":" VAL
          ",\"source\":\"operator\"},{\"item\":\"delivery\",\"message_id\":\"" UUID
          "\",\"occurred_at\":\"" TIME "\",\"sequence\":" VAL
          ",\"status\":\"delivered\",\"transport\":\"model\"},{\"item\":\"chat\",\"observation_"
          "id\":\"" UUID "\",\"occurred_at\":\"" TIME "\",\"sequence\":" VAL
          ",\"signal\":\"message\",\"text\":\"" STR "\"},{\"attention\":\"" STR
          "\",\"item\":\"state\",\"lifecycle\":\"" STR "\",\"occurred_at\":\"" TIME
          "\",\"sequence\":" VAL ",\"summary\":\"" STR "\"}]"),
    F("wake_reason", FROM_TEXT, "\"user\""),
    SHAPE("started_at", BARE "\"" TIME "\""),
};
static const unsigned char projection_order[] = {0, 1,  2,  3,  4,  5,  6,  7, 8,
                                                 9, 10, 11, 12, 13, 16, 14, 15};

/* A run's record (src/journal/history.c): id the run's, owner its agent, k1 its status, at its
 * end. */
static const struct field run_fields[] = {
    F("agent_id", FROM_OWNER, NULL),
    F("cost_micros", FROM_TEXT, "0"),
    F("ended_at", FROM_AT, NULL),
    F("error", FROM_TEXT, "null"),
    F("pruned_activity", FROM_TEXT, "0"),
    F("run_id", FROM_ID, NULL),
    SHAPE("run_key", BARE "\"" HEX64 "\""),
    F("scope", FROM_TEXT, "\"agent\""),
    SHAPE("started_at", BARE "\"" TIME "\""),
    F("status", FROM_K1, NULL),
    SHAPE("usage",
          "{\"cached_tokens\":" VAL ",\"input_tokens\":" VAL ",\"output_tokens\":" VAL "}"),
    F("wake_reason", FROM_TEXT, "\"user\""),
};
static const unsigned char run_order[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

struct kind_fields {
    const char *kind;
    const struct field *f;
    const unsigned char *order; /* the entries' positions in ascending key order */
    int n;
    /* NULL, or a text the body must hold to be packed: a run's projection and record are
     * rewritten as the run goes and only their last versions stay, so only a finished run's (it
     * has an end) is worth the shapes' matching, once, not at every step. */
    const char *when;
};

static const struct kind_fields kinds[] = {
    {"message", message_fields, message_order, (int)VG_ARRAY_LEN(message_fields), NULL},
    {"journal", journal_fields, journal_order, (int)VG_ARRAY_LEN(journal_fields), NULL},
    {"run_tool_call", tool_call_fields, tool_call_order, (int)VG_ARRAY_LEN(tool_call_fields), NULL},
    {"run_projection", projection_fields, projection_order, (int)VG_ARRAY_LEN(projection_fields),
     "\"ended_at\":\""},
    {"run", run_fields, run_order, (int)VG_ARRAY_LEN(run_fields), "\"ended_at\":\""},
};
_Static_assert(VG_ARRAY_LEN(message_order) == VG_ARRAY_LEN(message_fields), "message order");
_Static_assert(VG_ARRAY_LEN(journal_order) == VG_ARRAY_LEN(journal_fields), "journal order");
_Static_assert(VG_ARRAY_LEN(tool_call_order) == VG_ARRAY_LEN(tool_call_fields), "tool order");
_Static_assert(VG_ARRAY_LEN(run_order) == VG_ARRAY_LEN(run_fields), "run order");
_Static_assert(VG_ARRAY_LEN(projection_order) == VG_ARRAY_LEN(projection_fields), "proj order");

static const struct kind_fields *fields_of(const char *kind)
{
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++)
        if (strcmp(kinds[i].kind, kind) == 0)
            return &kinds[i];
    return NULL;
}

/* The JSON text a field's value has when it is the row's. */
static void put_value(struct vg_buf *b, const struct field *f, const struct vg_record *r)
{
    char at[32];
    switch (f->from) {
    case FROM_ID:
        vg_json_put_string(b, r->id);
        break;
    case FROM_OWNER:
        vg_json_put_string(b, r->owner ? r->owner : "");
        break;
    case FROM_K1:
        vg_json_put_string(b, r->k1 ? r->k1 : "");
        break;
    case FROM_K2:
        vg_json_put_string(b, r->k2 ? r->k2 : "");
        break;
    case FROM_SEQ:
        vg_json_put_int(b, r->seq);
        break;
    case FROM_AT:
        vg_time_format_ms(at, r->at);
        vg_buf_putc(b, '"');
        vg_buf_puts(b, at);
        vg_buf_putc(b, '"');
        break;
    case FROM_TEXT:
        vg_buf_puts(b, f->text);
        break;
    case FROM_SHAPE: /* its holes are the body's own (shape_expand) */
        break;
    }
}

/* ---- members of an object -------------------------------------------------------------------- */

#define MAX_MEMBERS 64
#define MARKER "{\"\":"
#define MARKER_LEN 4

/* One top-level member: its text [start, end) is "key":value, its key [key, key + klen). */
struct member {
    const char *start, *end, *key;
    size_t klen;
};

/* The end of the string whose opening quote is just before p, or NULL. */
static const char *string_end(const char *p, const char *end)
{
    for (const char *from = p;;) {
        const char *q = memchr(from, '"', (size_t)(end - from));
        if (!q)
            return NULL;
        size_t escapes = 0;
        while (q - escapes > p && q[-1 - (ptrdiff_t)escapes] == '\\')
            escapes++;
        if (escapes % 2 == 0)
            return q + 1;
        from = q + 1;
    }
}

/* The end of the value at p (before end), or NULL. Not a validation: the members only need to
 * be cut where they were, and pack keeps a text only when unpack gives it back (body.h). */
static const char *value_end(const char *p, const char *end)
{
    int depth = 0;
    while (p && p < end) {
        char c = *p;
        if (c == '"') {
            p = string_end(p + 1, end);
            if (p && depth == 0)
                return p;
            continue;
        }
        if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0)
                return p; /* a scalar ended by a stray closing bracket: members_of refuses it */
            if (--depth == 0)
                return p + 1;
        } else if (c == ',' && depth == 0) {
            return p;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            return NULL;
        }
        p++;
    }
    return p && depth == 0 ? end : NULL; /* a scalar ran to the object's end */
}

static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

/* The members from p to end (the object's closing brace), or -1 when the text is not a flat run
 * of "key":value members with ascending keys, no escapes in keys and no white space. */
static int members_of(const char *p, const char *end, struct member *m)
{
    int n = 0;
    if (p == end)
        return 0;
    for (;;) {
        if (n == MAX_MEMBERS || *p != '"')
            return -1;
        const char *key = p + 1, *q = key;
        while (q < end && *q != '"' && *q != '\\')
            q++;
        if (q + 1 >= end || *q != '"' || q[1] != ':')
            return -1;
        const char *v = value_end(q + 2, end);
        if (!v || v == q + 2)
            return -1;
        m[n] = (struct member){p, v, key, (size_t)(q - key)};
        if (n > 0 && key_cmp(m[n - 1].key, m[n - 1].klen, key, m[n].klen) >= 0)
            return -1;
        n++;
        if (v == end)
            return n;
        if (*v != ',')
            return -1;
        p = v + 1;
    }
}

/* ---- pack ------------------------------------------------------------------------------------ */

/* `"":0,` in front of a text that would otherwise read as packed. */
static int escape_marker(const struct vg_record *r, struct vg_buf *out)
{
    if (strncmp(r->body, MARKER, MARKER_LEN) != 0)
        return 0;
    vg_buf_puts(out, MARKER "0,");
    vg_buf_puts(out, r->body + 1);
    return 1;
}

/* The column text a field's value comes from, or NULL for the others. */
static const char *column_text(const struct field *f, const struct vg_record *r)
{
    switch (f->from) {
    case FROM_ID:
        return r->id;
    case FROM_OWNER:
        return r->owner ? r->owner : "";
    case FROM_K1:
        return r->k1 ? r->k1 : "";
    case FROM_K2:
        return r->k2 ? r->k2 : "";
    default:
        return NULL;
    }
}

/* Whether s is written as a JSON string by quoting it alone (no byte to escape or to check as
 * UTF-8): then its value text can be compared without writing it. */
static int plain(const char *s, size_t n)
{
    /* Eight bytes at a time (every step record's ids and columns come through here): a byte
     * past ASCII has its high bit; then "a byte below x" is (w - x) & ~w in the high bits, and
     * "a byte equal to c" a byte below 1 of w ^ c. */
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    size_t i = 0;
    for (; n - i >= 8; i += 8) {
        uint64_t w, del, quote, slash;
        memcpy(&w, s + i, sizeof w);
        del = w ^ (ones * 0x7f);
        quote = w ^ (ones * '"');
        slash = w ^ (ones * '\\');
        if ((w | ((w - ones * 0x20) & ~w) | ((del - ones) & ~del) | ((quote - ones) & ~quote) |
             ((slash - ones) & ~slash)) &
            highs)
            return 0;
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return 0;
    }
    return 1;
}

/* Whether member m holds field f's value as the row has it. Every step record is checked for
 * each of its kind's fields, so the common values are compared in place; the rest are written
 * into tmp and compared. */
static int holds_row_value(const struct member *m, const struct field *f, const struct vg_record *r,
                           struct vg_buf *tmp)
{
    const char *value = m->key + m->klen + 2, *col = column_text(f, r);
    size_t n = (size_t)(m->end - value);
    char text[32];
    if (f->from == FROM_TEXT)
        return strlen(f->text) == n && memcmp(f->text, value, n) == 0;
    if (f->from == FROM_AT) {
        vg_time_format_ms(text, r->at);
        size_t c = strlen(text);
        return n == c + 2 && value[0] == '"' && memcmp(value + 1, text, c) == 0 &&
               value[c + 1] == '"';
    }
    if (f->from == FROM_SEQ) {
        int c = snprintf(text, sizeof text, "%lld", (long long)r->seq);
        return n == (size_t)c && memcmp(value, text, n) == 0;
    }
    if (col) {
        size_t c = strlen(col);
        if (plain(col, c))
            return n == c + 2 && value[0] == '"' && memcmp(value + 1, col, c) == 0 &&
                   value[c + 1] == '"';
    }
    vg_buf_reset(tmp);
    put_value(tmp, f, r);
    return !tmp->fail && tmp->len == n && memcmp(tmp->data, value, n) == 0;
}

/* ---- shapes --------------------------------------------------------------------------------- */

#define PREV_C '\x01'
#define STR_C '\x02'
#define VAL_C '\x03'
#define HASH_C '\x04'
#define ID_C '\x05'
#define UUID_C '\x06'
#define HEX64_C '\x07'
#define BARE_C '\x08'
#define TIME_C '\x09' /* the last: fixed_len ends a fixed text at any byte up to it */
/* An own-value hole: the text of one of the body's own values (struct own). */
#define OWN_HOLE(c) ((c) == PREV_C || (c) == HASH_C || (c) == ID_C)
#define ID_HOLE(c) ((c) == UUID_C || (c) == HEX64_C)
#define TIME_TEXT_LEN 24

static int is_field(const struct member *m, const char *key)
{
    return m->klen == strlen(key) && memcmp(m->key, key, m->klen) == 0;
}

/* The values of a body's own members that shapes name: its `prev_id` text (without quotes),
 * its `content` string's text, and the SHA-256 of that string's value, found when first asked
 * for. */
struct own {
    const char *prev, *content, *id;
    size_t plen, clen, idlen;
    int64_t at; /* the row's time, which TIME holes count from */
    int hashed; /* 1: hash holds it; -1: content has none */
    char hash[VG_SHA256_HEX_LEN + 1];
};

/* The string member key's text (without its quotes), or NULL. */
static const char *string_member(const struct member *m, int n, const char *key, size_t *len)
{
    for (int i = 0; i < n; i++) {
        if (!is_field(&m[i], key))
            continue;
        const char *v = m[i].key + m[i].klen + 2;
        size_t vn = (size_t)(m[i].end - v);
        if (vn < 2 || v[0] != '"' || v[vn - 1] != '"')
            return NULL;
        *len = vn - 2;
        return v + 1;
    }
    return NULL;
}

/* prev: the prev_id the body's holes stand for when it has none of its own (a record kept in a
 * message, vg_body_pack_prev), or NULL. */
static struct own own_of(const struct member *m, int n, const struct vg_record *r, const char *prev)
{
    struct own o = {0};
    o.at = r->at;
    o.idlen = r->id ? strlen(r->id) : 0;
    o.id = o.idlen && plain(r->id, o.idlen) ? r->id : NULL;
    o.prev = string_member(m, n, "prev_id", &o.plen);
    if (!o.prev && prev) {
        o.prev = prev;
        o.plen = strlen(prev);
    }
    if (o.prev && !plain(o.prev, o.plen))
        o.prev = NULL;
    o.content = string_member(m, n, "content", &o.clen);
    return o;
}

/* The value of JSON string text [p, p + n) into out; 0 for an escape this does not decode
 * (\u: a hash then simply stays stored). */
static int unescape(const char *p, size_t n, struct vg_buf *out)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    for (size_t i = 0; i < n; i++) {
        const char *e;
        if (p[i] != '\\') {
            vg_buf_putc(out, p[i]);
        } else if (i + 1 < n && p[i + 1] && (e = strchr(from, p[i + 1]))) {
            vg_buf_putc(out, to[e - from]);
            i++;
        } else {
            return 0;
        }
    }
    return !out->fail;
}

/* The hash of the body's content value (an action's arguments, whose hash its metadata names),
 * or NULL. */
static const char *content_hash(struct own *o)
{
    if (!o->hashed) {
        struct vg_buf v;
        vg_buf_init(&v, VG_BUF_DEFAULT_MAX);
        o->hashed = o->content && unescape(o->content, o->clen, &v) ? 1 : -1;
        if (o->hashed == 1)
            vg_sha256_hex(o->hash, v.data ? v.data : "", v.len);
        vg_buf_release(&v);
    }
    return o->hashed == 1 ? o->hash : NULL;
}

/* How long the shape's fixed text at s runs, up to its next hole or its end. The holes are the
 * bytes 1 to 9 and a shape's fixed text is JSON text, which holds no byte below 0x20 (BARE, 8,
 * is only ever a shape's first byte, skipped before its text is read), so one comparison finds
 * the end: every step record's pack calls this for each piece of each shape it tries. */
static size_t fixed_len(const char *s)
{
    size_t n = 0;
    while ((unsigned char)s[n] > TIME_C)
        n++;
    return n;
}

/* ---- id holes: a UUID's or a SHA-256's hex text as the base64url text of its bytes ---------- */

#define UUID_TEXT_LEN 36
#define HEX64_TEXT_LEN 64
#define ID_BYTES_MAX 32

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static size_t id_text_len(char c)
{
    return c == UUID_C ? UUID_TEXT_LEN : HEX64_TEXT_LEN;
}

/* Whether position i of a UUID's canonical text is a dash (8-4-4-4-12). */
static int uuid_dash(size_t i)
{
    return i == 8 || i == 13 || i == 18 || i == 23;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The bytes of id hole c's text at p (lowercase hex, a UUID's dashes where they belong) into
 * bytes: their count, or 0 when the text is not one. */
static size_t id_bytes(char c, const char *p, unsigned char *bytes)
{
    size_t n = 0, len = id_text_len(c);
    for (size_t i = 0; i < len; i += 2) {
        if (c == UUID_C && uuid_dash(i) && p[i++] != '-')
            return 0;
        int hi = hex_digit(p[i]), lo = hex_digit(p[i + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        bytes[n++] = (unsigned char)(hi << 4 | lo);
    }
    return n;
}

/* The base64url text (no padding) of n bytes, into b. */
static void put_b64url(struct vg_buf *b, const unsigned char *bytes, size_t n)
{
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        acc = acc << 8 | bytes[i];
        for (bits += 8; bits >= 6; bits -= 6)
            vg_buf_putc(b, b64url[(acc >> (bits - 6)) & 63]);
    }
    if (bits)
        vg_buf_putc(b, b64url[(acc << (6 - bits)) & 63]);
}

static int b64url_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '-' ? 62 : c == '_' ? 63 : -1;
}

/* The bytes of base64url text [p, p + len) that put_b64url writes for n bytes, or 0 (another
 * length, another character, bits past the last byte that are not 0). */
static int b64url_bytes(const char *p, size_t len, unsigned char *bytes, size_t n)
{
    unsigned acc = 0;
    int bits = 0;
    size_t got = 0;
    if (len != (n * 8 + 5) / 6)
        return 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64url_value(p[i]);
        if (v < 0)
            return 0;
        acc = (acc << 6 | (unsigned)v) & 0xfff;
        if ((bits += 6) >= 8) {
            bytes[got++] = (unsigned char)(acc >> (bits - 8));
            bits -= 8;
        }
    }
    return got == n && (acc & ((1u << bits) - 1)) == 0;
}

/* The milliseconds of the time text at p (as vg_time_format_ms writes it, and nothing else) into
 * ms; 0 when it is not one. */
static int time_ms(const char *p, const char *end, int64_t *ms)
{
    char text[TIME_TEXT_LEN + 1], back[32];
    if (end - p < TIME_TEXT_LEN || p[TIME_TEXT_LEN - 1] != 'Z')
        return 0;
    memcpy(text, p, TIME_TEXT_LEN);
    text[TIME_TEXT_LEN] = '\0';
    if (vg_time_parse_ms(text, ms) != 0)
        return 0;
    vg_time_format_ms(back, *ms);
    return strcmp(back, text) == 0;
}

/* The time text of a TIME hole's stored milliseconds [p, e) from the row's time at, into out. */
static int put_time_text(struct vg_buf *out, const char *p, const char *e, int64_t at)
{
    char digits[24], text[32], *stop = NULL;
    size_t n = (size_t)(e - p);
    if (n == 0 || n >= sizeof digits)
        return 0;
    memcpy(digits, p, n);
    digits[n] = '\0';
    long long d = strtoll(digits, &stop, 10);
    if (*stop || !(digits[0] == '-' || (digits[0] >= '0' && digits[0] <= '9')))
        return 0;
    vg_time_format_ms(text, at + d);
    vg_buf_puts(out, text);
    return 1;
}

/* Id hole c's text from its stored base64url text [p, p + len), into out; 0 when it is not what
 * the hole stores. */
static int put_id_text(struct vg_buf *out, char c, const char *p, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char bytes[ID_BYTES_MAX];
    size_t n = id_text_len(c) == UUID_TEXT_LEN ? 16 : 32;
    if (!b64url_bytes(p, len, bytes, n))
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (c == UUID_C && (i == 4 || i == 6 || i == 8 || i == 10))
            vg_buf_putc(out, '-');
        vg_buf_putc(out, hex[bytes[i] >> 4]);
        vg_buf_putc(out, hex[bytes[i] & 15]);
    }
    return 1;
}

/* Whether text [p, p + n) reads back as itself between two quotes: no quote of its own, every
 * backslash escaping the byte after it. */
static int string_hole(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"')
            return 0;
        if (p[i] == '\\' && ++i == n)
            return 0; /* it would escape the closing quote */
    }
    return 1;
}

/* The first place fixed text [s, s + n) occurs in [p, end), or NULL. */
static const char *find_fixed(const char *p, const char *end, const char *s, size_t n)
{
    for (; n && (size_t)(end - p) >= n; p++)
        if (*p == *s && memcmp(p, s, n) == 0)
            return p;
    return NULL;
}

/* The end of the hole of kind c at p, whose shape goes on with s. A value ends where its text
 * does; a string hole where the fixed text after it is first found (at the value's end when
 * nothing follows), and only when it can be stored as a string. */
static const char *hole_end(char c, const char *p, const char *end, const char *s)
{
    size_t n = fixed_len(s);
    const char *e;
    if (c == VAL_C)
        return (e = value_end(p, end)) != p ? e : NULL;
    e = !s[n] ? ((size_t)(end - p) >= n ? end - n : NULL) : find_fixed(p, end, s, n);
    return e && string_hole(p, (size_t)(e - p)) ? e : NULL;
}

/* The text an own-value hole (PREV, HASH, ID) stands for, or NULL. */
static const char *own_text(char c, struct own *o, size_t *len)
{
    if (c == PREV_C) {
        *len = o->plen;
        return o->prev;
    }
    if (c == ID_C) {
        *len = o->idlen;
        return o->id;
    }
    *len = VG_SHA256_HEX_LEN;
    return content_hash(o);
}

/* Whether value [v, end) has shape s (o: the body's own values); its holes, a JSON array, into
 * holes. */
static int shape_match(const char *s, const char *v, const char *end, struct own *o,
                       struct vg_buf *holes)
{
    int nholes = 0;
    vg_buf_putc(holes, '[');
    while (*s) {
        size_t olen;
        const char *t;
        if (OWN_HOLE(*s)) {
            if (!(t = own_text(*s, o, &olen)) || (size_t)(end - v) < olen ||
                memcmp(v, t, olen) != 0)
                return 0;
            v += olen, s++;
        } else if (ID_HOLE(*s)) {
            unsigned char bytes[ID_BYTES_MAX];
            size_t n, tlen = id_text_len(*s);
            if ((size_t)(end - v) < tlen || !(n = id_bytes(*s, v, bytes)))
                return 0;
            if (nholes++)
                vg_buf_putc(holes, ',');
            vg_buf_putc(holes, '"');
            put_b64url(holes, bytes, n);
            vg_buf_putc(holes, '"');
            v += tlen, s++;
        } else if (*s == TIME_C) {
            int64_t ms;
            if (!time_ms(v, end, &ms))
                return 0;
            if (nholes++)
                vg_buf_putc(holes, ',');
            vg_buf_put_i64(holes, ms - o->at);
            v += TIME_TEXT_LEN, s++;
        } else if (*s == STR_C || *s == VAL_C) {
            const char *e = hole_end(*s, v, end, s + 1);
            if (!e)
                return 0;
            if (nholes++)
                vg_buf_putc(holes, ',');
            if (*s == STR_C)
                vg_buf_putc(holes, '"');
            vg_buf_append(holes, v, (size_t)(e - v));
            if (*s++ == STR_C)
                vg_buf_putc(holes, '"');
            v = e;
        } else {
            size_t n = fixed_len(s);
            if ((size_t)(end - v) < n || memcmp(v, s, n) != 0)
                return 0;
            v += n, s += n;
        }
    }
    vg_buf_putc(holes, ']');
    return v == end && !holes->fail;
}

/* The value of shape s from its holes [h, hend) (a JSON array, or the one hole of a BARE
 * shape), into out; 0 when they do not fit it. */
static int shape_expand(const char *s, const char *h, const char *hend, struct own *o,
                        struct vg_buf *out)
{
    int bare = *s == BARE_C;
    if (!bare && (hend - h < 2 || *h != '[' || hend[-1] != ']'))
        return 0;
    const char *p = bare ? h : h + 1, *end = bare ? hend : hend - 1;
    for (s += bare; *s; s++) {
        size_t olen;
        const char *t;
        if (OWN_HOLE(*s)) {
            if (!(t = own_text(*s, o, &olen)))
                return 0;
            vg_buf_append(out, t, olen);
        } else if (*s == STR_C || *s == VAL_C || ID_HOLE(*s) || *s == TIME_C) {
            const char *e = p < end ? value_end(p, end) : NULL;
            if (!e || e == p ||
                (*s != VAL_C && *s != TIME_C && (e - p < 2 || *p != '"' || e[-1] != '"')))
                return 0;
            if (*s == TIME_C && !put_time_text(out, p, e, o->at))
                return 0;
            if (ID_HOLE(*s) && !put_id_text(out, *s, p + 1, (size_t)(e - p - 2)))
                return 0;
            if (*s == STR_C)
                vg_buf_append(out, p + 1, (size_t)(e - p - 2));
            else if (*s == VAL_C)
                vg_buf_append(out, p, (size_t)(e - p));
            p = e < end && *e == ',' ? e + 1 : e;
        } else {
            vg_buf_putc(out, *s);
        }
    }
    return p == end;
}

/* ---- pack ------------------------------------------------------------------------------------ */

/* The entry at position j of k's key order. */
static const struct field *ordered(const struct kind_fields *k, int j)
{
    return &k->f[k->order[j]];
}

/* The entry of k (from order position j on) whose value member m holds, its bit; -1 for none.
 * A shape's holes are left in tmp. */
static int field_held(const struct kind_fields *k, int j, const struct member *m,
                      const struct vg_record *r, struct own *o, struct vg_buf *tmp)
{
    for (; j < k->n && key_cmp(ordered(k, j)->key, ordered(k, j)->klen, m->key, m->klen) == 0;
         j++) {
        const struct field *f = ordered(k, j);
        if (f->from != FROM_SHAPE) {
            if (holds_row_value(m, f, r, tmp))
                return k->order[j];
            continue;
        }
        int bare = f->text[0] == BARE_C;
        vg_buf_reset(tmp);
        if (shape_match(f->text + bare, m->key + m->klen + 2, m->end, o, tmp)) {
            if (bare && tmp->len >= 2) { /* the one hole without the array's brackets */
                memmove(tmp->data, tmp->data + 1, tmp->len - 2);
                tmp->len -= 2;
                tmp->data[tmp->len] = '\0';
            }
            return k->order[j];
        }
    }
    return -1;
}

/* The members of a body that are kept, each behind a comma, into kept; which entries were left
 * out or stored as their holes. */
static unsigned pack_members(const struct kind_fields *k, const struct member *m, int n,
                             const struct vg_record *r, const char *prev, int *prev_used,
                             struct vg_buf *kept)
{
    struct vg_buf tmp;
    unsigned mask = 0;
    struct own o = own_of(m, n, r, prev);
    vg_buf_init(&tmp, VG_BUF_DEFAULT_MAX);
    for (int i = 0, j = 0; i < n; i++) {
        while (j < k->n &&
               key_cmp(ordered(k, j)->key, ordered(k, j)->klen, m[i].key, m[i].klen) < 0)
            j++;
        int found = field_held(k, j, &m[i], r, &o, &tmp);
        if (found >= 0)
            mask |= 1u << found;
        /* A content not stored as it is (left out as the empty string, or stored as holes)
         * cannot be read back in time for a hash to be made from it: unpack's own_of reads
         * only the stored members. ("content" comes before "metadata" in key order.) */
        if (found >= 0 && is_field(&m[i], "content")) {
            o.content = NULL;
            o.hashed = -1;
        }
        if (found < 0 || k->f[found].from == FROM_SHAPE) {
            vg_buf_putc(kept, ',');
            vg_buf_append(kept, m[i].start,
                          found < 0 ? (size_t)(m[i].end - m[i].start) : m[i].klen + 3);
        }
        if (found >= 0 && k->f[found].from == FROM_SHAPE) {
            vg_buf_append(kept, tmp.data, tmp.len);
            *prev_used |= prev && o.prev == prev && strchr(k->f[found].text, PREV_C);
        }
    }
    vg_buf_release(&tmp);
    return mask;
}

int vg_body_pack(const struct vg_record *r, struct vg_buf *out)
{
    return vg_body_pack_prev(r, NULL, out);
}

int vg_body_pack_prev(const struct vg_record *r, const char *prev, struct vg_buf *out)
{
    const struct kind_fields *k = fields_of(r->kind);
    struct member m[MAX_MEMBERS];
    size_t len = strlen(r->body);
    if (!k)
        return 0;
    if (k->when && !strstr(r->body, k->when))
        return escape_marker(r, out);
    int n = len >= 2 && r->body[0] == '{' && r->body[len - 1] == '}'
                ? members_of(r->body + 1, r->body + len - 1, m)
                : -1;
    if (n <= 0)
        return escape_marker(r, out);
    struct vg_buf kept;
    vg_buf_init(&kept, VG_BUF_DEFAULT_MAX);
    int prev_used = 0;
    unsigned mask = pack_members(k, m, n, r, prev, &prev_used, &kept);
    if (mask) {
        vg_buf_puts(out, MARKER);
        vg_buf_put_i64(out, mask);
        vg_buf_append(out, kept.data, kept.len);
        vg_buf_putc(out, '}');
        if (kept.fail && !out->fail)
            out->fail = kept.fail;
    }
    vg_buf_release(&kept);
    return mask ? 1 + prev_used : escape_marker(r, out);
}

/* ---- unpack ---------------------------------------------------------------------------------- */

static void put_field(struct vg_buf *out, const struct field *f, const struct vg_record *r,
                      int *first)
{
    if (!*first)
        vg_buf_putc(out, ',');
    *first = 0;
    vg_json_put_string(out, f->key);
    vg_buf_putc(out, ':');
    put_value(out, f, r);
}

/* Stored members m[*i...] before key f's, copied into out. */
static void put_kept_before(struct vg_buf *out, const struct member *m, int n, int *i,
                            const struct field *f, int *first)
{
    for (; *i < n && (!f || key_cmp(m[*i].key, m[*i].klen, f->key, f->klen) < 0);
         ++*i, *first = 0) {
        if (!*first)
            vg_buf_putc(out, ',');
        vg_buf_append(out, m[*i].start, (size_t)(m[*i].end - m[*i].start));
    }
}

/* Field f's member from its stored holes m (of key f's), into out; 0 when they do not fit. */
static int put_shaped(struct vg_buf *out, const struct field *f, const struct member *m,
                      struct own *o, int *first)
{
    if (!is_field(m, f->key))
        return 0;
    if (!*first)
        vg_buf_putc(out, ',');
    *first = 0;
    vg_buf_append(out, m->start, m->klen + 3);
    return shape_expand(f->text, m->key + m->klen + 2, m->end, o, out);
}

/* unpack_members with the body's own values o. */
static int unpack_fields(const struct kind_fields *k, unsigned long mask, const struct member *m,
                         int n, const struct vg_record *r, struct own *o, struct vg_buf *out)
{
    int first = 1, i = 0;
    vg_buf_putc(out, '{');
    for (int j = 0; j < k->n; j++) {
        const struct field *f = ordered(k, j);
        if (!(mask & (1ul << k->order[j])))
            continue;
        put_kept_before(out, m, n, &i, f, &first);
        if (f->from != FROM_SHAPE)
            put_field(out, f, r, &first);
        else if (i == n || !put_shaped(out, f, &m[i++], o, &first))
            return 0;
    }
    put_kept_before(out, m, n, &i, NULL, &first);
    vg_buf_putc(out, '}');
    return 1;
}

/* A prev_id stored as a shape's hole (a UUID's, 19), read back into buf for the holes that name
 * it (o's prev): own_of found only its stored text. 0 when it does not read back. */
static int own_prev_expanded(const struct kind_fields *k, unsigned long mask,
                             const struct member *m, int n, struct own *o, struct vg_buf *buf)
{
    for (int j = 0; j < k->n; j++) {
        const struct field *f = &k->f[j];
        if (!(mask & (1ul << j)) || f->from != FROM_SHAPE || strcmp(f->key, "prev_id") != 0)
            continue;
        struct own none = {0};
        for (int i = 0; i < n; i++) {
            if (!is_field(&m[i], "prev_id"))
                continue;
            if (!shape_expand(f->text, m[i].key + m[i].klen + 2, m[i].end, &none, buf) ||
                buf->fail || buf->len < 2)
                return 0;
            o->prev = buf->data + 1; /* its text between the quotes */
            o->plen = buf->len - 2;
            return 1;
        }
        return 0;
    }
    return 1;
}

/* The members of the body as written from stored members m and the entries in mask, into out
 * (its braces included); 0 when the stored text is not what pack writes. */
static int unpack_members(const struct kind_fields *k, unsigned long mask, const struct member *m,
                          int n, const struct vg_record *r, const char *prev, struct vg_buf *out)
{
    struct own o = own_of(m, n, r, prev);
    struct vg_buf prev_text;
    vg_buf_init(&prev_text, VG_BUF_DEFAULT_MAX);
    int ok = own_prev_expanded(k, mask, m, n, &o, &prev_text) &&
             unpack_fields(k, mask, m, n, r, &o, out);
    vg_buf_release(&prev_text);
    return ok;
}

int vg_body_unpack(const struct vg_record *r, struct vg_buf *out)
{
    return vg_body_unpack_prev(r, NULL, out);
}

int vg_body_unpack_prev(const struct vg_record *r, const char *prev, struct vg_buf *out)
{
    const struct kind_fields *k;
    if (strncmp(r->body, MARKER, MARKER_LEN) != 0 || !(k = fields_of(r->kind)))
        return 0;
    const char *p = r->body + MARKER_LEN, *end = r->body + strlen(r->body) - 1;
    unsigned long mask = 0;
    while (*p >= '0' && *p <= '9' && mask < (1ul << 31))
        mask = mask * 10 + (unsigned long)(*p++ - '0');
    if (p == r->body + MARKER_LEN || (mask >> k->n) != 0)
        return 0;                 /* not what pack writes: the reader sees it as stored */
    if (mask == 0 && *p == ',') { /* escape_marker's: any text behind it */
        vg_buf_putc(out, '{');
        vg_buf_puts(out, p + 1);
        return 1;
    }
    if (mask == 0 || (*p != ',' && *p != '}') || *end != '}' || p > end)
        return 0;
    struct member m[MAX_MEMBERS];
    int n = *p == ',' ? members_of(p + 1, end, m) : 0;
    if (n < 0)
        return 0;
    size_t mark = out->len;
    if (unpack_members(k, mask, m, n, r, prev, out))
        return 1;
    out->len = mark; /* the stored text read as it is */
    if (out->data)
        out->data[mark] = '\0';
    return 0;
}

/* ---- members of a message row (store/rows.c) ------------------------------------------------- */

const char *vg_body_value_end(const char *p, const char *end)
{
    return value_end(p, end);
}

/* The flat members of body (a whole object), or -1. */
static int object_members(const char *body, size_t len, struct member *m)
{
    return len >= 2 && body[0] == '{' && body[len - 1] == '}'
               ? members_of(body + 1, body + len - 1, m)
               : -1;
}

/* Whether member m's value is the JSON string of val (plain text, no escapes). */
static int value_is(const struct member *m, const char *val, size_t vlen)
{
    const char *v = m->key + m->klen + 2;
    return (size_t)(m->end - v) == vlen + 2 && v[0] == '"' && !memcmp(v + 1, val, vlen) &&
           v[vlen + 1] == '"';
}

/* Which of members m[0..n) are "keys[j]":"vals[j]" (skip[i] set), each key's at most once: bit j
 * set for each. */
static int members_to_drop(const struct member *m, int n, const char *const *keys,
                           const char *const *vals, int n_keys, unsigned char *skip)
{
    int dropped = 0;
    for (int i = 0; i < n; i++) {
        skip[i] = 0;
        for (int j = 0; j < n_keys && !skip[i]; j++) {
            size_t klen = strlen(keys[j]);
            if (!(dropped & (1 << j)) && vals[j] && vals[j][0] && m[i].klen == klen &&
                !memcmp(m[i].key, keys[j], klen) && value_is(&m[i], vals[j], strlen(vals[j]))) {
                skip[i] = 1;
                dropped |= 1 << j;
            }
        }
    }
    return dropped;
}

int vg_body_pack_less(const struct vg_record *r, const char *prev, const char *const *keys,
                      const char *const *vals, int n_keys, struct vg_buf *out)
{
    const struct kind_fields *k = fields_of(r->kind);
    struct member m[MAX_MEMBERS];
    unsigned char skip[MAX_MEMBERS];
    int n = object_members(r->body, strlen(r->body), m), kept_n = 0, prev_used = 0;
    if (n < 0)
        return -1;
    int dropped = members_to_drop(m, n, keys, vals, n_keys, skip);
    for (int i = 0; i < n; i++)
        if (!skip[i])
            m[kept_n++] = m[i];
    unsigned mask = 0;
    struct vg_buf kept;
    vg_buf_init(&kept, VG_BUF_DEFAULT_MAX);
    if (k && kept_n > 0 && (!k->when || strstr(r->body, k->when)))
        mask = pack_members(k, m, kept_n, r, prev, &prev_used, &kept);
    if (mask) {
        vg_buf_puts(out, MARKER);
        vg_buf_put_i64(out, mask);
        vg_buf_append(out, kept.data, kept.len);
        vg_buf_putc(out, '}');
    } else if (!dropped) { /* as it is (behind the marker when it reads as one) */
        if (!escape_marker(r, out))
            vg_buf_puts(out, r->body);
    } else { /* less the members dropped, behind the marker when it reads as one */
        int marked = kept_n > 0 && m[0].klen == 0;
        vg_buf_puts(out, marked ? MARKER "0" : "{");
        for (int i = 0; i < kept_n; i++) {
            if (i > 0 || marked)
                vg_buf_putc(out, ',');
            vg_buf_append(out, m[i].start, (size_t)(m[i].end - m[i].start));
        }
        vg_buf_putc(out, '}');
    }
    if (kept.fail && !out->fail)
        out->fail = kept.fail;
    vg_buf_release(&kept);
    return dropped;
}

/* A comma before every member but the first. */
static void separate(struct vg_buf *out, int *wrote)
{
    if (*wrote)
        vg_buf_putc(out, ',');
    *wrote = 1;
}

static void put_string_member(struct vg_buf *out, const char *key, const char *val, int *wrote)
{
    separate(out, wrote);
    vg_buf_putc(out, '"');
    vg_buf_puts(out, key);
    vg_buf_puts(out, "\":\"");
    vg_buf_puts(out, val);
    vg_buf_putc(out, '"');
}

int vg_body_add_string(const char *body, const char *key, const char *val, struct vg_buf *out)
{
    struct member m[MAX_MEMBERS];
    size_t klen = strlen(key);
    int n = object_members(body, strlen(body), m), done = 0, wrote = 0;
    if (n < 0)
        return 0;
    vg_buf_putc(out, '{');
    for (int i = 0; i < n; i++) {
        if (!done && key_cmp(m[i].key, m[i].klen, key, klen) > 0) {
            put_string_member(out, key, val, &wrote);
            done = 1;
        }
        separate(out, &wrote);
        vg_buf_append(out, m[i].start, (size_t)(m[i].end - m[i].start));
    }
    if (!done)
        put_string_member(out, key, val, &wrote);
    vg_buf_putc(out, '}');
    return 1;
}

size_t vg_body_string_of(const char *body, const char *key, char *out, size_t cap)
{
    struct member m[MAX_MEMBERS];
    size_t klen = strlen(key);
    int n = object_members(body, strlen(body), m);
    for (int i = 0; i < n; i++) {
        if (m[i].klen != klen || memcmp(m[i].key, key, klen))
            continue;
        const char *v = m[i].key + klen + 2;
        size_t len = (size_t)(m[i].end - v);
        if (len < 2 || v[0] != '"' || len - 2 >= cap || memchr(v + 1, '\\', len - 2))
            return 0;
        memcpy(out, v + 1, len - 2);
        out[len - 2] = '\0';
        return len - 2;
    }
    return 0;
}

int vg_body_uuid_stored(const char *uuid, struct vg_buf *out)
{
    unsigned char bytes[ID_BYTES_MAX];
    if (strlen(uuid) != UUID_TEXT_LEN || id_bytes(UUID_C, uuid, bytes) != 16)
        return 0;
    put_b64url(out, bytes, 16);
    return 1;
}

int vg_body_uuid_text(const char *stored, char out[37])
{
    unsigned char bytes[16];
    static const char hex[] = "0123456789abcdef";
    if (!b64url_bytes(stored, strlen(stored), bytes, 16))
        return 0;
    for (size_t i = 0, o = 0; i < 16; i++) {
        if (uuid_dash(o))
            out[o++] = '-';
        out[o++] = hex[bytes[i] >> 4];
        out[o++] = hex[bytes[i] & 15];
    }
    out[36] = '\0';
    return 1;
}

int vg_body_message_run_hole(const char *stored)
{
    unsigned long mask = 0;
    const char *p = stored + MARKER_LEN;
    if (strncmp(stored, MARKER, MARKER_LEN) != 0)
        return 0;
    while (*p >= '0' && *p <= '9' && mask < (1ul << 31))
        mask = mask * 10 + (unsigned long)(*p++ - '0');
    return (mask >> MESSAGE_RUN_HOLE) & 1;
}
