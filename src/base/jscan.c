/*
 * jscan.c: a strict JSON reader that walks a text without building a tree (jscan.h). Its rules
 * are jansson's decoder's (src/load.c of jansson 2.14): white space is space, tab, newline and
 * carriage return; strings hold no control byte and only valid UTF-8 (no overlong form, no
 * surrogate, nothing past U+10FFFF), and their \u escapes pair surrogates; numbers have no
 * leading zero; literals are exactly true, false and null; nothing follows the top value.
 */
#include "base/common.h"

#include "base/jscan.h"

static int decline(struct vg_jscan *s)
{
    s->failed = 1;
    return -1;
}

static void white(struct vg_jscan *s)
{
    const unsigned char *p = s->p;
    while (p < s->end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    s->p = p;
}

void vg_jscan_init(struct vg_jscan *s, const char *text, size_t len)
{
    memset(s, 0, sizeof *s);
    s->p = (const unsigned char *)text;
    s->end = s->p + len;
}

/* The length of the valid UTF-8 sequence at p (2 to 4 bytes; p[0] is past ASCII), or 0. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
    unsigned char c = p[0];
    size_t n = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    if (!n || (size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || (c == 0xf0 && p[1] < 0x90) ||
        (c == 0xf4 && p[1] > 0x8f))
        return 0; /* overlong, surrogate, past U+10FFFF */
    return n;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *v)
{
    if (end - p < 4)
        return -1;
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d > 15)
            return -1;
        x = x << 4 | d;
    }
    *v = x;
    return 0;
}

static void put_utf8(struct vg_buf *b, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12);
        u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | cp >> 18);
        u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    vg_buf_append(b, u, n);
}

/* The string whose opening quote is at s->p: checked, and decoded into b unless b is NULL. */
static int string(struct vg_jscan *s, struct vg_buf *b)
{
    const unsigned char *p = s->p + 1, *end = s->end;
    for (;;) {
        const unsigned char *run = p;
        while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
            p++;
        if (b && p > run)
            vg_buf_append(b, run, (size_t)(p - run));
        if (p >= end)
            return decline(s);
        unsigned char c = *p;
        if (c == '"') {
            s->p = p + 1;
            return 0;
        }
        if (c < 0x20)
            return decline(s);
        if (c >= 0x80) {
            size_t n = utf8_seq(p, end);
            if (!n)
                return decline(s);
            if (b)
                vg_buf_append(b, p, n);
            p += n;
            continue;
        }
        /* An escape. */
        if (end - p < 2)
            return decline(s);
        c = p[1];
        p += 2;
        static const char simple[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
        const char *at = c ? strchr(simple, c) : NULL;
        if (at) {
            if (b)
                vg_buf_putc(b, decoded[at - simple]);
            continue;
        }
        unsigned cp, low;
        if (c != 'u' || hex4(p, end, &cp) != 0 || cp == 0)
            return decline(s); /* \u0000: jansson refuses it unless asked to allow it */
        p += 4;
        if (cp >= 0xdc00 && cp <= 0xdfff)
            return decline(s); /* a low surrogate first */
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &low) != 0 ||
                low < 0xdc00 || low > 0xdfff)
                return decline(s);
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            p += 6;
        }
        if (b)
            put_utf8(b, cp);
    }
}

/* An integer at s->p (jansson's grammar; a fraction, an exponent or 19 digits decline). */
static int number(struct vg_jscan *s, int64_t *v)
{
    const unsigned char *p = s->p, *end = s->end;
    int neg = p < end && *p == '-';
    p += neg;
    if (p >= end || *p < '0' || *p > '9')
        return decline(s);
    int64_t x = 0;
    if (*p == '0') {
        p++;
        if (p < end && *p >= '0' && *p <= '9')
            return decline(s); /* a leading zero */
    } else {
        int digits = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (++digits > 18)
                return decline(s);
            x = x * 10 + (*p++ - '0');
        }
    }
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
        return decline(s);
    s->p = p;
    if (v)
        *v = neg ? -x : x;
    return 0;
}

static int literal(struct vg_jscan *s, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return decline(s);
    s->p += n;
    return 0;
}

int vg_jscan_peek(struct vg_jscan *s)
{
    if (s->failed)
        return -1;
    white(s);
    if (s->p >= s->end)
        return decline(s);
    unsigned char c = *s->p;
    if (c == '{' || c == '[' || c == '"' || c == 'n' || c == 't' || c == 'f')
        return c;
    if (c == '-' || (c >= '0' && c <= '9'))
        return '0';
    return decline(s);
}

int vg_jscan_enter(struct vg_jscan *s, int open)
{
    if (vg_jscan_peek(s) != open || (open != '{' && open != '['))
        return decline(s);
    if (s->depth >= VG_JSCAN_DEPTH)
        return decline(s);
    s->open[s->depth] = (unsigned char)open;
    s->first[s->depth] = 1;
    s->depth++;
    s->p++;
    return 0;
}

/* vg_jscan_next; `any_key` takes keys with escapes too (members that are only stepped over). */
static int next_member(struct vg_jscan *s, const char **key, size_t *len, int any_key)
{
    if (s->failed || s->depth == 0)
        return decline(s);
    int d = s->depth - 1;
    unsigned char close = s->open[d] == '{' ? '}' : ']';
    white(s);
    if (s->p >= s->end)
        return decline(s);
    if (*s->p == close) {
        s->p++;
        s->depth--;
        return 0;
    }
    if (s->first[d]) {
        s->first[d] = 0;
    } else {
        if (*s->p != ',')
            return decline(s);
        s->p++;
        white(s);
    }
    if (close == ']')
        return 1;
    if (s->p >= s->end || *s->p != '"')
        return decline(s);
    const unsigned char *k = s->p + 1;
    if (string(s, NULL) != 0)
        return -1;
    size_t n = (size_t)(s->p - 1 - k);
    if (!any_key && memchr(k, '\\', n))
        return decline(s);
    white(s);
    if (s->p >= s->end || *s->p != ':')
        return decline(s);
    s->p++;
    if (key) {
        *key = (const char *)k;
        *len = n;
    }
    return 1;
}

int vg_jscan_next(struct vg_jscan *s, const char **key, size_t *len)
{
    return next_member(s, key, len, 0);
}

int vg_jscan_key_is(const char *key, size_t len, const char *want)
{
    return strlen(want) == len && memcmp(key, want, len) == 0;
}

static int digits(const unsigned char **p, const unsigned char *end)
{
    const unsigned char *q = *p;
    while (*p < end && **p >= '0' && **p <= '9')
        (*p)++;
    return *p > q;
}

/* Step over a number of JSON's grammar, fraction and exponent too, reading no value. */
static int number_span(struct vg_jscan *s)
{
    const unsigned char *p = s->p, *end = s->end;
    p += p < end && *p == '-';
    if (p < end && *p == '0')
        p++;
    else if (!digits(&p, end))
        return decline(s);
    if (p < end && *p == '.' && (++p, !digits(&p, end)))
        return decline(s);
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        p += p < end && (*p == '+' || *p == '-');
        if (!digits(&p, end))
            return decline(s);
    }
    s->p = p;
    return 0;
}

/* reals: a number with a fraction or an exponent is stepped over (vg_jscan_skip_span). */
static int scalar(struct vg_jscan *s, int c, int64_t *v, int reals)
{
    switch (c) {
    case '"':
        return string(s, NULL);
    case '0':
        return reals ? number_span(s) : number(s, v);
    case 'n':
        return literal(s, "null");
    case 't':
        return literal(s, "true");
    case 'f':
        return literal(s, "false");
    default:
        return decline(s);
    }
}

int vg_jscan_string(struct vg_jscan *s, struct vg_buf *b, size_t *at)
{
    int c = vg_jscan_peek(s);
    if (c == 'n') {
        *at = (size_t)-1;
        return literal(s, "null");
    }
    if (c != '"')
        return decline(s);
    *at = b->len;
    if (string(s, b) != 0)
        return -1;
    vg_buf_putc(b, '\0');
    return b->fail ? decline(s) : 0;
}

int vg_jscan_int(struct vg_jscan *s, int64_t *v)
{
    return vg_jscan_peek(s) == '0' ? number(s, v) : decline(s);
}

static int skip(struct vg_jscan *s, int reals)
{
    int base = s->depth;
    for (;;) {
        int c = vg_jscan_peek(s);
        if (c < 0)
            return -1;
        if (c == '{' || c == '[') {
            if (vg_jscan_enter(s, c) != 0)
                return -1;
        } else if (scalar(s, c, NULL, reals) != 0) {
            return -1;
        }
        /* On to the next value to step over, leaving the containers that end. */
        for (;;) {
            if (s->depth == base)
                return 0;
            int r = next_member(s, NULL, NULL, 1);
            if (r < 0)
                return -1;
            if (r == 1)
                break;
        }
    }
}

int vg_jscan_skip(struct vg_jscan *s)
{
    return skip(s, 0);
}

int vg_jscan_skip_span(struct vg_jscan *s)
{
    return skip(s, 1);
}

int vg_jscan_end(struct vg_jscan *s)
{
    if (s->failed || s->depth != 0)
        return decline(s);
    white(s);
    return s->p == s->end ? 0 : decline(s);
}
