/*
 * body.c: column values out of the stored bodies of the step's records (body.h).
 *
 * Sections: the kinds' fields; members of an object; pack; unpack.
 */
#include "base/common.h"

#include "base/json.h"
#include "os/clock.h"
#include "store/body.h"

/* ---- the kinds' fields ----------------------------------------------------------------------- */

enum source { FROM_ID, FROM_OWNER, FROM_K1, FROM_K2, FROM_SEQ, FROM_AT, FROM_TEXT };

struct field {
    const char *key;
    size_t klen;
    enum source from;
    const char *text; /* FROM_TEXT: the value's JSON text */
};

#define F(key, from, text)                                                                         \
    {                                                                                              \
        key, sizeof key - 1, from, text                                                            \
    }

/* Each table in ascending key order (unpack merges it with the stored members); a key may have
 * several entries, one per constant value it often has. At most 31 entries. The tables are part
 * of the stored format: an entry's position is its bit in the marker of every body stored with
 * it, so they never change; more fields would need a marker of their own. */
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
};
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
};
static const struct field tool_call_fields[] = {
    F("ended_at", FROM_AT, NULL),         F("error_code", FROM_TEXT, "null"),
    F("operation_id", FROM_TEXT, "null"), F("run_id", FROM_K1, NULL),
    F("started_at", FROM_AT, NULL),       F("status", FROM_K2, NULL),
    F("tool_call_id", FROM_ID, NULL),
};

struct kind_fields {
    const char *kind;
    const struct field *f;
    int n;
};

static const struct kind_fields kinds[] = {
    {"message", message_fields, (int)VG_ARRAY_LEN(message_fields)},
    {"journal", journal_fields, (int)VG_ARRAY_LEN(journal_fields)},
    {"run_tool_call", tool_call_fields, (int)VG_ARRAY_LEN(tool_call_fields)},
};

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
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f || s[i] == '"' ||
            s[i] == '\\')
            return 0;
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

int vg_body_pack(const struct vg_record *r, struct vg_buf *out)
{
    const struct kind_fields *k = fields_of(r->kind);
    struct member m[MAX_MEMBERS];
    size_t len = strlen(r->body);
    if (!k)
        return 0;
    int n = len >= 2 && r->body[0] == '{' && r->body[len - 1] == '}'
                ? members_of(r->body + 1, r->body + len - 1, m)
                : -1;
    if (n <= 0)
        return escape_marker(r, out);
    struct vg_buf tmp;
    unsigned mask = 0;
    int kept[MAX_MEMBERS], nkept = 0;
    vg_buf_init(&tmp, 4096);
    for (int i = 0, f = 0; i < n; i++) {
        while (f < k->n && key_cmp(k->f[f].key, k->f[f].klen, m[i].key, m[i].klen) < 0)
            f++;
        int found = -1;
        for (int g = f;
             found < 0 && g < k->n && key_cmp(k->f[g].key, k->f[g].klen, m[i].key, m[i].klen) == 0;
             g++)
            if (holds_row_value(&m[i], &k->f[g], r, &tmp))
                found = g;
        if (found >= 0)
            mask |= 1u << found;
        else
            kept[nkept++] = i;
    }
    vg_buf_release(&tmp);
    if (!mask)
        return escape_marker(r, out);
    vg_buf_puts(out, MARKER);
    vg_buf_put_i64(out, mask);
    for (int i = 0; i < nkept; i++) {
        vg_buf_putc(out, ',');
        vg_buf_append(out, m[kept[i]].start, (size_t)(m[kept[i]].end - m[kept[i]].start));
    }
    vg_buf_putc(out, '}');
    return 1;
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

int vg_body_unpack(const struct vg_record *r, struct vg_buf *out)
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
    int n = *p == ',' ? members_of(p + 1, end, m) : 0, first = 1, i = 0;
    if (n < 0)
        return 0;
    vg_buf_putc(out, '{');
    for (int f = 0; f < k->n; f++) {
        if (!(mask & (1ul << f)))
            continue;
        for (; i < n && key_cmp(m[i].key, m[i].klen, k->f[f].key, k->f[f].klen) < 0;
             i++, first = 0) {
            if (!first)
                vg_buf_putc(out, ',');
            vg_buf_append(out, m[i].start, (size_t)(m[i].end - m[i].start));
        }
        put_field(out, &k->f[f], r, &first);
    }
    for (; i < n; i++, first = 0) {
        if (!first)
            vg_buf_putc(out, ',');
        vg_buf_append(out, m[i].start, (size_t)(m[i].end - m[i].start));
    }
    vg_buf_putc(out, '}');
    return 1;
}
