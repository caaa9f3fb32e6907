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
    enum source from;
    const char *text; /* FROM_TEXT: the value's JSON text */
};

/* Each table in ascending key order (unpack merges it with the stored members). At most 31. */
static const struct field message_fields[] = {
    {"agent_id", FROM_OWNER, NULL}, {"created_at", FROM_AT, NULL},     {"id", FROM_ID, NULL},
    {"kind", FROM_K2, NULL},        {"payload_id", FROM_TEXT, "null"}, {"seq", FROM_SEQ, NULL},
    {"thread_id", FROM_K1, NULL},
};
static const struct field journal_fields[] = {
    {"occurred_at", FROM_AT, NULL},     {"owner_id", FROM_OWNER, NULL},
    {"record_id", FROM_ID, NULL},       {"run_id", FROM_K1, NULL},
    {"schema_version", FROM_TEXT, "1"}, {"scope", FROM_TEXT, "\"agent\""},
    {"sequence", FROM_SEQ, NULL},       {"type", FROM_K2, NULL},
};
static const struct field tool_call_fields[] = {
    {"ended_at", FROM_AT, NULL},         {"error_code", FROM_TEXT, "null"},
    {"operation_id", FROM_TEXT, "null"}, {"run_id", FROM_K1, NULL},
    {"started_at", FROM_AT, NULL},       {"status", FROM_K2, NULL},
    {"tool_call_id", FROM_ID, NULL},
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

/* The end of the value at p (before end), or NULL. Not a validation: the members only need to
 * be cut where they were, and pack keeps a text only when unpack gives it back (body.h). */
static const char *value_end(const char *p, const char *end)
{
    int depth = 0, in_string = 0;
    for (; p < end; p++) {
        char c = *p;
        if (in_string) {
            if (c == '\\') {
                if (++p == end)
                    return NULL;
            } else if (c == '"') {
                in_string = 0;
                if (depth == 0)
                    return p + 1;
            }
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
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
    }
    return depth == 0 && !in_string ? end : NULL; /* a scalar ran to the object's end */
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

/* Whether member m holds field f's value as the row has it. */
static int holds_row_value(const struct member *m, const struct field *f, const struct vg_record *r,
                           struct vg_buf *tmp)
{
    const char *value = m->key + m->klen + 2;
    vg_buf_reset(tmp);
    put_value(tmp, f, r);
    return !tmp->fail && tmp->len == (size_t)(m->end - value) &&
           memcmp(tmp->data, value, tmp->len) == 0;
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
        while (f < k->n && key_cmp(k->f[f].key, strlen(k->f[f].key), m[i].key, m[i].klen) < 0)
            f++;
        if (f < k->n && key_cmp(k->f[f].key, strlen(k->f[f].key), m[i].key, m[i].klen) == 0 &&
            holds_row_value(&m[i], &k->f[f], r, &tmp))
            mask |= 1u << f;
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
    if (p == r->body + MARKER_LEN || (*p != ',' && *p != '}') || *end != '}' || p > end ||
        (mask >> k->n) != 0)
        return 0; /* not what pack writes: the reader sees it as stored */
    if (mask == 0) {
        vg_buf_putc(out, '{');
        vg_buf_puts(out, *p == ',' ? p + 1 : p);
        return 1;
    }
    struct member m[MAX_MEMBERS];
    int n = *p == ',' ? members_of(p + 1, end, m) : 0, first = 1, i = 0;
    if (n < 0)
        return 0;
    vg_buf_putc(out, '{');
    for (int f = 0; f < k->n; f++) {
        if (!(mask & (1ul << f)))
            continue;
        size_t flen = strlen(k->f[f].key);
        for (; i < n && key_cmp(m[i].key, m[i].klen, k->f[f].key, flen) < 0; i++, first = 0) {
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
