/*
 * json.c: a minimal JSON writer for hot paths: string escaping with UTF-8 validation.
 */
#include "base/common.h"

#include "base/json.h"

#include <inttypes.h>
#include <math.h>
#include <jansson.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if it is not valid. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
            return 0;
        if (c == 0xe0 && p[1] < 0xa0)
            return 0; /* overlong */
        if (c == 0xed && p[1] > 0x9f)
            return 0; /* surrogates */
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] > 0x8f))
            return 0;
        return 4;
    }
    return 0;
}

int vg_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = utf8_len(p);
        if (!n)
            return 0;
        p += n;
    }
    return 1;
}

size_t vg_utf8_cut(const char *s, size_t len, size_t max)
{
    size_t n = max;
    if (len <= max)
        return len;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) /* s[n], a continuation: split */
        n--;
    return n;
}

/* The end of the run from p that JSON copies as it is: no control character (NUL included),
 * no quote, no backslash, nothing past ASCII. Sixteen bytes at a time with SSE2 (every x86-64
 * has it), else eight at a time while none of them is one of those (the classic "has a byte
 * less than n / equal to c" word tests, exact as to whether any byte matches), then byte by
 * byte: request bodies repeat whole conversations, so most of the bytes this module writes go
 * through here. */
static const unsigned char *plain_end(const unsigned char *p, const unsigned char *end)
{
#if defined(__SSE2__)
    /* As signed bytes, "below 0x20 or past ASCII" is one comparison: c < 0x20. */
    const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'),
                  slash = _mm_set1_epi8('\\');
    while (end - p >= 16) {
        __m128i w = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i marks = _mm_or_si128(_mm_cmpeq_epi8(w, quote), _mm_cmpeq_epi8(w, slash));
        int mask = _mm_movemask_epi8(_mm_or_si128(_mm_cmplt_epi8(w, space), marks));
        if (mask)
            return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    while (end - p >= 8) {
        uint64_t w, quote8, slash8;
        memcpy(&w, p, sizeof w);
        quote8 = w ^ (ones * '"');
        slash8 = w ^ (ones * '\\');
        if ((((w - ones * 0x20) & ~w) | ((quote8 - ones) & ~quote8) | ((slash8 - ones) & ~slash8) |
             w) &
            highs)
            break;
        p += 8;
    }
    while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80)
        p++;
    return p;
}

void vg_json_put_string(struct vg_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    if (!s) {
        vg_buf_puts(b, "null");
        return;
    }
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
    vg_buf_putc(b, '"');
    while (*p) {
        /* Copy the longest run that needs no escaping in one append. */
        const unsigned char *run = p;
        p = plain_end(p, end);
        if (p > run)
            vg_buf_append(b, run, (size_t)(p - run));
        if (!*p)
            break;
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            vg_buf_append(b, esc, 2);
            p++;
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            switch (c) {
            case '\n':
                vg_buf_append(b, "\\n", 2);
                break;
            case '\r':
                vg_buf_append(b, "\\r", 2);
                break;
            case '\t':
                vg_buf_append(b, "\\t", 2);
                break;
            default:
                vg_buf_append(b, esc, 6);
            }
            p++;
        } else {
            size_t n = utf8_len(p);
            if (n) {
                vg_buf_append(b, p, n);
                p += n;
            } else {
                vg_buf_puts(b, "\\ufffd");
                p++;
            }
        }
    }
    vg_buf_putc(b, '"');
}

void vg_json_put_key(struct vg_buf *b, const char *key, int first)
{
    if (!first)
        vg_buf_putc(b, ',');
    vg_json_put_string(b, key);
    vg_buf_putc(b, ':');
}

void vg_json_put_int(struct vg_buf *b, int64_t v)
{
    vg_buf_put_i64(b, (long long)v);
}

/* ---- canonical dump ------------------------------------------------------------------------ */

/* A string as jansson writes it: the two quoting escapes, \b \f \n \r \t, other control
 * characters as \u00XX (upper-case hex), everything else (UTF-8) as it is. */
static int put_jstring(struct vg_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    /* Most strings (keys, ids, times) need no escape: one copy between the quotes. */
    const unsigned char *q = plain_end(p, end);
    if (q == end) {
        char *w = vg_buf_room(b, len + 2);
        if (w) {
            w[0] = '"';
            memcpy(w + 1, s, len);
            w[len + 1] = '"';
            vg_buf_added(b, len + 2);
        }
        return 0;
    }
    vg_buf_putc(b, '"');
    while (p < end) {
        const unsigned char *run = p;
        p = plain_end(p, end);
        if (p > run)
            vg_buf_append(b, run, (size_t)(p - run));
        if (p == end)
            break;
        unsigned char c = *p;
        if (c >= 0x80) {
            /* utf8_len stops at the terminating NUL jansson keeps after every string. */
            size_t n = utf8_len(p);
            if (!n || n > (size_t)(end - p))
                return -1;
            vg_buf_append(b, p, n);
            p += n;
            continue;
        }
        p++;
        static const char *const named[0x20] = {
            ['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n", ['\r'] = "\\r", ['\t'] = "\\t"};
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            vg_buf_append(b, esc, 2);
        } else if (c < 0x20 && named[c]) { /* plain_end stops at no other byte below 0x80 */
            vg_buf_append(b, named[c], 2);
        } else {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            vg_buf_append(b, esc, 6);
        }
    }
    vg_buf_putc(b, '"');
    return 0;
}

/* How put_json writes: keys sorted by their bytes or in the order they were set, and reals
 * as the shortest text that reads back as the same double or as jansson writes them (%.17g). */
enum { WRITE_SORTED = 1, WRITE_REAL17 = 2 };

/* The digits of v at precision prec ("%.*g") in buf, and whether they read back as v. */
static int real_digits(char *buf, size_t size, double v, int prec, int *len)
{
    *len = snprintf(buf, size, "%.*g", prec, v);
    if (*len < 0 || *len >= (int)size) {
        *len = 0;
        return 0;
    }
    /* strtod reads the locale's decimal point, the one snprintf wrote */
    double back = strtod(buf, NULL);
    return memcmp(&back, &v, sizeof v) == 0; /* bits: -0.0 is not 0.0 */
}

/* A real in JSON: its digits ("%.*g"), ".0" added to what would read as an integer, and the
 * exponent without "+" or leading zeros, as jansson writes them. At WRITE_REAL17 the digits
 * are jansson's %.17g, which every text vigil hashed before session 37 was written with (so
 * operation ids stay the same); otherwise the fewest that read back as the same double, 0.8
 * and not 0.80000000000000004. For a normal double %.15g is that whenever any text of 15 digits
 * or fewer is (the double nearest such a text is within half an ulp, less than half a unit of
 * the 15th digit), then %.16g, then %.17g, which always is; a subnormal one has fewer bits, so
 * it tries from one digit up (5e-324). */
static void put_jreal(struct vg_buf *b, double v, int how)
{
    char buf[64];
    int len = 0;
    if (how & WRITE_REAL17)
        real_digits(buf, sizeof buf - 3, v, 17, &len);
    else
        for (int prec = fpclassify(v) == FP_SUBNORMAL ? 1 : 15; prec <= 17; prec++)
            if (real_digits(buf, sizeof buf - 3, v, prec, &len) || prec == 17)
                break;
    for (int i = 0; i < len; i++)
        if (buf[i] == ',') /* a locale's decimal comma */
            buf[i] = '.';
    if (!memchr(buf, '.', (size_t)len) && !memchr(buf, 'e', (size_t)len)) {
        buf[len++] = '.';
        buf[len++] = '0';
    }
    buf[len] = '\0';
    char *e = strchr(buf, 'e');
    if (e) {
        char *start = e + 1, *digits;
        if (*start == '-')
            start++;
        digits = start;
        while (*digits == '+' || *digits == '0')
            digits++;
        if (digits != start) {
            memmove(start, digits, strlen(digits) + 1);
            len = (int)strlen(buf);
        }
    }
    vg_buf_append(b, buf, (size_t)len);
}

struct key_ref {
    const char *key;
    size_t len;
    const json_t *value;
};

static int key_cmp(const void *a, const void *b)
{
    const struct key_ref *x = a, *y = b;
    return strcmp(x->key, y->key);
}

static int put_object(struct vg_buf *b, const json_t *v, int how, struct vg_json_splice *sp,
                      size_t nsp);

static int put_json(struct vg_buf *b, const json_t *v, int how)
{
    switch (json_typeof(v)) {
    case JSON_NULL:
        vg_buf_append(b, "null", 4);
        return 0;
    case JSON_TRUE:
        vg_buf_append(b, "true", 4);
        return 0;
    case JSON_FALSE:
        vg_buf_append(b, "false", 5);
        return 0;
    case JSON_INTEGER:
        vg_buf_put_i64(b, (long long)json_integer_value(v));
        return 0;
    case JSON_REAL:
        put_jreal(b, json_real_value(v), how);
        return 0;
    case JSON_STRING:
        return put_jstring(b, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        vg_buf_putc(b, '[');
        for (size_t i = 0; i < n; i++) {
            if (i)
                vg_buf_putc(b, ',');
            if (put_json(b, json_array_get(v, i), how))
                return -1;
        }
        vg_buf_putc(b, ']');
        return 0;
    }
    case JSON_OBJECT:
        return put_object(b, v, how, NULL, 0);
    }
    return -1;
}

/* An object's keys and values in keys (small when it has 32 or fewer, else allocated), sorted
 * by their bytes or in the order they were set; NULL when out of memory. */
static struct key_ref *object_keys(const json_t *v, int sorted, struct key_ref small[32],
                                   size_t *count)
{
    size_t n = json_object_size(v), i = 0;
    struct key_ref *keys = n <= 32 ? small : vg_malloc(n * sizeof *keys);
    if (!keys)
        return NULL;
    for (void *it = json_object_iter((json_t *)v); it && i < n;
         it = json_object_iter_next((json_t *)v, it), i++) {
        keys[i].key = json_object_iter_key(it);
        keys[i].len = json_object_iter_key_len(it);
        keys[i].value = json_object_iter_value(it);
    }
    /* Insertion sort: objects have a few dozen keys at most, and the ones vigil writes
     * most (a run's projection) keep their keys in sorted order, so this is one comparison
     * per key; qsort only past the small array. */
    if (!sorted) {
        /* jansson's own order: the order the keys were set in */
    } else if (i > 32) {
        qsort(keys, i, sizeof *keys, key_cmp);
    } else {
        for (size_t a = 1; a < i; a++) {
            struct key_ref k = keys[a];
            size_t c = a;
            while (c > 0 && strcmp(keys[c - 1].key, k.key) > 0) {
                keys[c] = keys[c - 1];
                c--;
            }
            keys[c] = k;
        }
    }
    *count = i;
    return keys;
}

/* An object; the values of the keys sp names (nsp of them) written as their text where given,
 * and where each value's text went noted in sp. */
static int put_object(struct vg_buf *b, const json_t *v, int how, struct vg_json_splice *sp,
                      size_t nsp)
{
    struct key_ref small[32];
    size_t i = 0;
    struct key_ref *keys = object_keys(v, how & WRITE_SORTED, small, &i);
    if (!keys)
        return -1;
    int rc = 0;
    vg_buf_putc(b, '{');
    for (size_t k = 0; k < i && rc == 0; k++) {
        if (k)
            vg_buf_putc(b, ',');
        rc = put_jstring(b, keys[k].key, keys[k].len);
        vg_buf_putc(b, ':');
        size_t s = 0;
        while (s < nsp && strcmp(keys[k].key, sp[s].key) != 0)
            s++;
        if (s < nsp)
            sp[s].start = b->len;
        if (rc == 0 && s < nsp && sp[s].raw)
            vg_buf_puts(b, sp[s].raw);
        else if (rc == 0)
            rc = put_json(b, keys[k].value, how);
        if (s < nsp)
            sp[s].end = b->len;
    }
    vg_buf_putc(b, '}');
    if (keys != small)
        vg_free(keys);
    return rc;
}

/* ---- text already canonical ------------------------------------------------------------ */

struct canon {
    const unsigned char *p, *end;
    int depth;
};

static int upper_hex(unsigned char c, unsigned *v)
{
    if (c >= '0' && c <= '9')
        *v = c - '0';
    else if (c >= 'A' && c <= 'F')
        *v = c - 'A' + 10;
    else
        return 0;
    return 1;
}

/* A string exactly as put_jstring writes it (its escapes, valid UTF-8 as it is); a key holds no
 * escape at all (keys are compared as they stand). Its bytes between the quotes in *s, *n. */
static int canon_string(struct canon *c, int key, const unsigned char **s, size_t *n)
{
    if (c->p >= c->end || *c->p != '"')
        return 0;
    const unsigned char *start = ++c->p;
    for (;;) {
        c->p = plain_end(c->p, c->end);
        if (c->p >= c->end)
            return 0;
        unsigned char ch = *c->p;
        if (ch == '"')
            break;
        if (ch == '\\') {
            unsigned hi, lo;
            if (key || c->end - c->p < 2)
                return 0;
            unsigned char e = c->p[1];
            if (e == '"' || e == '\\' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                c->p += 2;
                continue;
            }
            /* \u00XX only for a control character without a short escape (not NUL, which
             * jansson refuses), in capitals */
            if (e != 'u' || c->end - c->p < 6 || c->p[2] != '0' || c->p[3] != '0' ||
                !upper_hex(c->p[4], &hi) || !upper_hex(c->p[5], &lo) || hi > 1)
                return 0;
            unsigned v = hi * 16 + lo;
            if (v == 0 || v == '\b' || v == '\f' || v == '\n' || v == '\r' || v == '\t')
                return 0;
            c->p += 6;
            continue;
        }
        /* utf8_len reads as many bytes as the first says the character has */
        if (ch < 0x20 || c->end - c->p < (ch < 0xe0 ? 2 : ch < 0xf0 ? 3 : 4))
            return 0;
        size_t len = utf8_len(c->p);
        if (!len)
            return 0;
        c->p += len;
    }
    *s = start;
    *n = (size_t)(c->p - start);
    c->p++;
    return 1;
}

/* An integer as vg_buf_put_i64 writes one, of at most 18 digits (so jansson reads it as an
 * integer, not a real). */
static int canon_number(struct canon *c)
{
    int neg = *c->p == '-';
    c->p += neg;
    const unsigned char *digits = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
        c->p++;
    size_t n = (size_t)(c->p - digits);
    if (n == 0 || n > 18 || (digits[0] == '0' && (n > 1 || neg)))
        return 0;
    return c->p >= c->end || (*c->p != '.' && *c->p != 'e' && *c->p != 'E');
}

static int canon_word(struct canon *c, const char *w, size_t n)
{
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0)
        return 0;
    c->p += n;
    return 1;
}

static int canon_value(struct canon *c)
{
    if (c->p >= c->end)
        return 0;
    const unsigned char *s;
    size_t n;
    switch (*c->p) {
    case '"':
        return canon_string(c, 0, &s, &n);
    case 't':
        return canon_word(c, "true", 4);
    case 'f':
        return canon_word(c, "false", 5);
    case 'n':
        return canon_word(c, "null", 4);
    case '[':
    case '{':
        break;
    default:
        return canon_number(c);
    }
    int object = *c->p++ == '{';
    if (++c->depth > 32)
        return 0;
    if (c->p < c->end && *c->p == (object ? '}' : ']')) {
        c->p++;
        c->depth--;
        return 1;
    }
    const unsigned char *prev = NULL;
    size_t prev_n = 0;
    for (;;) {
        if (object) {
            /* keys in strictly rising byte order: sorted, and no key twice */
            if (!canon_string(c, 1, &s, &n))
                return 0;
            if (prev) {
                int cmp = memcmp(prev, s, prev_n < n ? prev_n : n);
                if (cmp > 0 || (cmp == 0 && prev_n >= n))
                    return 0;
            }
            prev = s;
            prev_n = n;
            if (c->p >= c->end || *c->p++ != ':')
                return 0;
        }
        if (!canon_value(c) || c->p >= c->end)
            return 0;
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p++ != (object ? '}' : ']'))
            return 0;
        c->depth--;
        return 1;
    }
}

int vg_json_is_canonical(const char *text, size_t len)
{
    struct canon c = {(const unsigned char *)text, (const unsigned char *)text + len, 0};
    return canon_value(&c) && c.p == c.end;
}

int vg_json_put_canonical(struct vg_buf *b, const json_t *v)
{
    return put_json(b, v, WRITE_SORTED);
}

int vg_json_put_canonical_splice(struct vg_buf *b, const json_t *v, struct vg_json_splice *sp,
                                 size_t n)
{
    for (size_t i = 0; i < n; i++)
        sp[i].start = sp[i].end = 0;
    if (!json_is_object(v))
        return put_json(b, v, WRITE_SORTED);
    return put_object(b, v, WRITE_SORTED, sp, n);
}

static int key_after(const char *a, const char *b)
{
    if (a[0] != b[0])
        return (unsigned char)a[0] > (unsigned char)b[0];
    return strcmp(a, b) > 0;
}

int vg_json_put_fields(struct vg_buf *b, const struct vg_jfield *f, size_t n)
{
    const struct vg_jfield *order[32];
    size_t k = 0;
    if (n > VG_ARRAY_LEN(order))
        return -1;
    for (size_t i = 0; i < n; i++) {
        size_t c = k++;
        /* Keys mostly differ in their first byte: compared here, strcmp only on a tie. */
        while (c > 0 && key_after(order[c - 1]->key, f[i].key)) {
            order[c] = order[c - 1];
            c--;
        }
        order[c] = &f[i];
    }
    vg_buf_putc(b, '{');
    for (size_t i = 0; i < k; i++) {
        const struct vg_jfield *x = order[i];
        /* The key: one of the caller's constants, which need no escape (a field list's keys
         * are plain ASCII names), copied without the scan; debug builds check the promise. */
        size_t klen = strlen(x->key);
        char *w = vg_buf_room(b, klen + 4);
#ifndef NDEBUG
        if (plain_end((const unsigned char *)x->key, (const unsigned char *)x->key + klen) !=
            (const unsigned char *)x->key + klen)
            return -1;
#endif
        if (w) {
            size_t at = 0;
            if (i)
                w[at++] = ',';
            w[at++] = '"';
            memcpy(w + at, x->key, klen);
            at += klen;
            w[at++] = '"';
            w[at++] = ':';
            vg_buf_added(b, at);
        }
        switch (x->type) {
        case VG_JF_STR:
            if (!x->s)
                vg_buf_append(b, "null", 4);
            else if (put_jstring(b, x->s, strlen(x->s)))
                return -1;
            break;
        case VG_JF_BOOL:
            if (x->i)
                vg_buf_append(b, "true", 4);
            else
                vg_buf_append(b, "false", 5);
            break;
        case VG_JF_INT:
            vg_buf_put_i64(b, (long long)x->i);
            break;
        case VG_JF_RAW:
            vg_buf_puts(b, x->s ? x->s : "null");
            break;
        }
    }
    vg_buf_putc(b, '}');
    return 0;
}

int vg_json_put_text(struct vg_buf *b, const char *s)
{
    return put_jstring(b, s, strlen(s));
}

void vg_json_put_real(struct vg_buf *b, double v)
{
    put_jreal(b, v, 0);
}

int vg_json_put_compact(struct vg_buf *b, const json_t *v)
{
    return put_json(b, v, 0);
}

int vg_json_has_real(const json_t *v)
{
    if (json_is_real(v))
        return 1;
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            if (vg_json_has_real(json_array_get(v, i)))
                return 1;
    } else if (json_is_object(v)) {
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it))
            if (vg_json_has_real(json_object_iter_value(it)))
                return 1;
    }
    return 0;
}

static char *dump_how(const json_t *v, int how)
{
    struct vg_buf b;
    vg_buf_init(&b, 0);
    if (put_json(&b, v, how) != 0 || b.fail != VIGIL_OK) {
        vg_buf_release(&b);
        return NULL;
    }
    return vg_buf_detach(&b, NULL);
}

char *vg_json_hash_text(const json_t *v)
{
    return dump_how(v, WRITE_SORTED | WRITE_REAL17);
}

/* ---- jansson's other layouts -------------------------------------------------------------- */

/* A line break and depth levels of indentation when flags indent, else one space where space is
 * set and the layout is not compact: jansson's dump_indent. */
static void put_indent(struct vg_buf *b, size_t flags, int depth, int space)
{
    size_t width = (flags & JSON_MAX_INDENT) * (size_t)depth;
    if (flags & JSON_MAX_INDENT) {
        char *w = vg_buf_room(b, width + 1);
        if (w) {
            w[0] = '\n';
            memset(w + 1, ' ', width);
            vg_buf_added(b, width + 1);
        }
    } else if (space && !(flags & JSON_COMPACT)) {
        vg_buf_putc(b, ' ');
    }
}

/* v laid out as json_dumps lays it out with flags (JSON_INDENT(n), JSON_COMPACT, JSON_SORT_KEYS;
 * jansson's order of keys otherwise), reals the fewest digits that read back the same. */
static int put_laid_out(struct vg_buf *b, const json_t *v, size_t flags, int depth)
{
    if (json_is_array(v) && json_array_size(v)) {
        size_t n = json_array_size(v);
        vg_buf_putc(b, '[');
        put_indent(b, flags, depth + 1, 0);
        for (size_t i = 0; i < n; i++) {
            if (put_laid_out(b, json_array_get(v, i), flags, depth + 1))
                return -1;
            if (i + 1 < n)
                vg_buf_putc(b, ',');
            put_indent(b, flags, i + 1 < n ? depth + 1 : depth, i + 1 < n);
        }
        vg_buf_putc(b, ']');
        return 0;
    }
    if (!json_is_object(v) || !json_object_size(v))
        return put_json(b, v, 0);
    struct key_ref small[32];
    size_t n = 0;
    struct key_ref *keys = object_keys(v, (flags & JSON_SORT_KEYS) != 0, small, &n);
    if (!keys)
        return -1;
    int rc = 0;
    vg_buf_putc(b, '{');
    put_indent(b, flags, depth + 1, 0);
    for (size_t k = 0; k < n && rc == 0; k++) {
        rc = put_jstring(b, keys[k].key, keys[k].len);
        vg_buf_puts(b, flags & JSON_COMPACT ? ":" : ": ");
        if (rc == 0)
            rc = put_laid_out(b, keys[k].value, flags, depth + 1);
        if (k + 1 < n)
            vg_buf_putc(b, ',');
        put_indent(b, flags, k + 1 < n ? depth + 1 : depth, k + 1 < n);
    }
    vg_buf_putc(b, '}');
    if (keys != small)
        vg_free(keys);
    return rc;
}

char *vg_json_dumps(const json_t *v, size_t flags)
{
    if (!v || (!(flags & JSON_ENCODE_ANY) && !json_is_array(v) && !json_is_object(v)))
        return NULL;
    if ((flags & JSON_COMPACT) && !(flags & JSON_MAX_INDENT))
        return dump_how(v, flags & JSON_SORT_KEYS ? WRITE_SORTED : 0);
    struct vg_buf b;
    vg_buf_init(&b, 0);
    if (put_laid_out(&b, v, flags, 0) != 0 || b.fail != VIGIL_OK) {
        vg_buf_release(&b);
        return NULL;
    }
    return vg_buf_detach(&b, NULL);
}

int vg_json_dumpf(const json_t *v, FILE *out, size_t flags)
{
    char *text = vg_json_dumps(v, flags);
    int rc = text && fputs(text, out) != EOF ? 0 : -1;
    vg_free(text);
    return rc;
}

char *vg_json_dump(const json_t *v, int sorted)
{
    return dump_how(v, sorted ? WRITE_SORTED : 0);
}

int vg_json_array_sort(json_t *items, int (*cmp)(const void *, const void *))
{
    size_t n = json_array_size(items);
    if (n < 2) /* sorted; and qsort takes no NULL array, even empty */
        return 0;
    json_t **v = vg_malloc(n * sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(items, i));
    qsort(v, n, sizeof *v, cmp);
    json_array_clear(items);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, v[i]);
    vg_free(v);
    return 0;
}
