/*
 * schema_regex.c: `pattern` and `patternProperties` use ECMA-262 regular expressions, and the C
 * library only has POSIX regcomp. This file translates the common subset (classes, the \d \w \s
 * shorthands, escapes, groups, alternation, greedy and lazy quantifiers) into POSIX ERE and
 * refuses, with a reason, what has no translation (lookaround, backreferences, \b, \p{..}).
 * Only match/no-match matters to a validator, so lazy quantifiers become greedy ones.
 * In a single-byte locale `.` and negated classes are spelled as UTF-8 byte sequences, so they
 * consume whole code points the way ECMA-262 does.
 */
#include "base/common.h"

#include "base/buf.h"
#include "tool/schema_int.h"

#include <ctype.h>
#include <stdarg.h>

struct tr {
    const unsigned char *p;
    size_t n, i;
    int utf8_bytes;
    struct vg_buf *out;
    char *why;
    size_t why_len;
    long weight[VG_REGEX_MAX_GROUPS + 1]; /* running expansion weight per open group */
    int depth;                            /* open groups */
    long last;                            /* weight of the last atom, for a quantifier */
    int have_atom;                        /* a quantifier may follow */
};

static vigil_code trfail(struct tr *t, vigil_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static vigil_code trfail(struct tr *t, vigil_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (t->why && t->why_len)
        vsnprintf(t->why, t->why_len, fmt, ap);
    va_end(ap);
    return code;
}

/* A set of ASCII characters (the only members a translated class may list). */
struct cset {
    unsigned char bits[16];
};

static void cset_add(struct cset *s, unsigned c)
{
    s->bits[c >> 3] |= (unsigned char)(1u << (c & 7));
}
static int cset_has(const struct cset *s, unsigned c)
{
    return (s->bits[c >> 3] >> (c & 7)) & 1;
}
static void cset_range(struct cset *s, unsigned lo, unsigned hi)
{
    for (unsigned c = lo; c <= hi; c++)
        cset_add(s, c);
}
static int cset_empty(const struct cset *s)
{
    for (size_t i = 0; i < sizeof s->bits; i++)
        if (s->bits[i])
            return 0;
    return 1;
}

/* Build the set of a shorthand (d, w, s); negated shorthands are the caller's business. */
static void cset_shorthand(struct cset *s, int which)
{
    switch (which) {
    case 'd':
        cset_range(s, '0', '9');
        break;
    case 'w':
        cset_range(s, '0', '9');
        cset_range(s, 'A', 'Z');
        cset_range(s, 'a', 'z');
        cset_add(s, '_');
        break;
    default: /* s: ASCII whitespace and line terminators */
        cset_add(s, ' ');
        cset_range(s, '\t', '\r'); /* \t \n \v \f \r */
        break;
    }
}

/*
 * Emit a bracket expression. Members are listed one by one (no ranges, so collation order
 * cannot matter) and ordered so that none is special: `]` first, `[` `^` `-` last.
 */
static void emit_members(struct tr *t, const struct cset *s)
{
    if (cset_has(s, ']'))
        vg_buf_putc(t->out, ']');
    for (unsigned c = 1; c < 128; c++)
        if (cset_has(s, c) && c != ']' && c != '[' && c != '^' && c != '-')
            vg_buf_putc(t->out, (char)c);
    if (cset_has(s, '['))
        vg_buf_putc(t->out, '[');
    if (cset_has(s, '^'))
        vg_buf_putc(t->out, '^');
    if (cset_has(s, '-'))
        vg_buf_putc(t->out, '-');
}

static void emit_class(struct tr *t, const struct cset *s, int negate)
{
    if (!negate) {
        struct cset only = {{0}};
        cset_add(&only, '^');
        if (memcmp(s, &only, sizeof only) == 0) { /* "[^]" would be a negation */
            vg_buf_puts(t->out, "\\^");
            return;
        }
        cset_add(&only, '-');
        if (memcmp(s, &only, sizeof only) == 0) {
            vg_buf_puts(t->out, "[-^]");
            return;
        }
        vg_buf_putc(t->out, '[');
        emit_members(t, s);
        vg_buf_putc(t->out, ']');
        return;
    }
    if (t->utf8_bytes) {
        /* One ASCII byte outside the set, or one whole multi-byte code point. */
        vg_buf_puts(t->out, "([^");
        if (cset_has(s, ']'))
            vg_buf_putc(t->out, ']');
        vg_buf_puts(t->out, "\x80-\xff");
        struct cset rest = *s;
        rest.bits[']' >> 3] &= (unsigned char)~(1u << (']' & 7));
        emit_members(t, &rest);
        vg_buf_puts(t->out, "]|[\xc0-\xff][\x80-\xbf]+)");
        return;
    }
    vg_buf_puts(t->out, "[^");
    emit_members(t, s);
    vg_buf_putc(t->out, ']');
}

static void emit_ascii_literal(struct tr *t, unsigned c)
{
    switch (c) {
    case '^':
        vg_buf_puts(t->out, "\\^");
        break;
    case '\\':
        vg_buf_puts(t->out, "[\\]");
        break;
    case '.':
    case '[':
    case ']':
    case '(':
    case ')':
    case '*':
    case '+':
    case '?':
    case '{':
    case '}':
    case '|':
    case '$':
        vg_buf_printf(t->out, "[%c]", (char)c);
        break;
    default:
        vg_buf_putc(t->out, (char)c);
    }
}

static void emit_utf8(struct tr *t, unsigned long cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        emit_ascii_literal(t, (unsigned)cp);
        return;
    }
    if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    /* A group, so that a quantifier repeats the whole code point and not its last byte. */
    vg_buf_putc(t->out, '(');
    vg_buf_append(t->out, b, n);
    vg_buf_putc(t->out, ')');
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int read_hex(struct tr *t, size_t digits, unsigned long *out)
{
    unsigned long v = 0;
    if (t->i + digits > t->n)
        return 0;
    for (size_t k = 0; k < digits; k++) {
        int h = hexval(t->p[t->i + k]);
        if (h < 0)
            return 0;
        v = v * 16 + (unsigned long)h;
    }
    t->i += digits;
    *out = v;
    return 1;
}

/* \u escape after the 'u': one code point, combining a surrogate pair. */
static vigil_code read_unicode_escape(struct tr *t, unsigned long *cp)
{
    if (!read_hex(t, 4, cp))
        return trfail(t, VIGIL_EINVAL, "malformed \\u escape");
    if (*cp >= 0xd800 && *cp <= 0xdbff) {
        unsigned long lo;
        if (t->i + 1 < t->n && t->p[t->i] == '\\' && t->p[t->i + 1] == 'u') {
            t->i += 2;
            if (read_hex(t, 4, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
                *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
                return VIGIL_OK;
            }
        }
        return trfail(t, VIGIL_EUNSUPPORTED, "lone surrogate escapes are not supported");
    }
    if (*cp >= 0xdc00 && *cp <= 0xdfff)
        return trfail(t, VIGIL_EUNSUPPORTED, "lone surrogate escapes are not supported");
    return VIGIL_OK;
}

/*
 * One escape (the backslash already consumed). Either a single code point (*cp) or, for the
 * shorthands, a set (*set, *negated). in_class changes \b (backspace) and what is allowed.
 */
static vigil_code read_escape(struct tr *t, int in_class, unsigned long *cp, struct cset *set,
                              int *is_set, int *negated)
{
    if (t->i >= t->n)
        return trfail(t, VIGIL_EINVAL, "pattern ends with a backslash");
    unsigned c = t->p[t->i++];
    *is_set = 0;
    *negated = 0;
    switch (c) {
    case 'd':
    case 'w':
    case 's':
        cset_shorthand(set, (int)c);
        *is_set = 1;
        return VIGIL_OK;
    case 'D':
    case 'W':
    case 'S':
        if (in_class)
            return trfail(t, VIGIL_EUNSUPPORTED,
                          "negated shorthand \\%c inside a character class is not supported",
                          (char)c);
        cset_shorthand(set, (int)c + ('a' - 'A'));
        *is_set = 1;
        *negated = 1;
        return VIGIL_OK;
    case 'n':
        *cp = '\n';
        return VIGIL_OK;
    case 't':
        *cp = '\t';
        return VIGIL_OK;
    case 'r':
        *cp = '\r';
        return VIGIL_OK;
    case 'f':
        *cp = '\f';
        return VIGIL_OK;
    case 'v':
        *cp = '\v';
        return VIGIL_OK;
    case 'b':
        if (in_class) {
            *cp = '\b';
            return VIGIL_OK;
        }
        return trfail(t, VIGIL_EUNSUPPORTED, "word boundaries (\\b) are not supported");
    case 'B':
        return trfail(t, VIGIL_EUNSUPPORTED, "word boundaries (\\B) are not supported");
    case '0':
        return trfail(t, VIGIL_EUNSUPPORTED, "NUL characters (\\0) are not supported");
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        return trfail(t, VIGIL_EUNSUPPORTED, "backreferences (\\%c) are not supported", (char)c);
    case 'k':
        return trfail(t, VIGIL_EUNSUPPORTED, "named backreferences (\\k) are not supported");
    case 'p':
    case 'P':
        return trfail(t, VIGIL_EUNSUPPORTED, "unicode property escapes (\\%c) are not supported",
                      (char)c);
    case 'c':
        return trfail(t, VIGIL_EUNSUPPORTED, "control escapes (\\c) are not supported");
    case 'x':
        if (!read_hex(t, 2, cp))
            return trfail(t, VIGIL_EINVAL, "malformed \\x escape");
        break;
    case 'u': {
        vigil_code rc = read_unicode_escape(t, cp);
        if (rc != VIGIL_OK)
            return rc;
        break;
    }
    default:
        if (c >= 0x80) { /* identity escape of a non-ASCII character: take it literally */
            t->i--;
            return trfail(t, VIGIL_EUNSUPPORTED, "escaped non-ASCII characters are not supported");
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return trfail(t, VIGIL_EINVAL, "unknown escape \\%c", (char)c);
        *cp = c; /* an escaped punctuation character stands for itself */
        return VIGIL_OK;
    }
    if (*cp == 0)
        return trfail(t, VIGIL_EUNSUPPORTED, "NUL characters are not supported");
    return VIGIL_OK;
}

/* One member of a class: a code point or a shorthand set. */
static vigil_code class_atom(struct tr *t, unsigned long *cp, struct cset *set, int *is_set)
{
    unsigned c = t->p[t->i];
    if (c == '\\') {
        int negated;
        t->i++;
        vigil_code rc = read_escape(t, 1, cp, set, is_set, &negated);
        if (rc != VIGIL_OK)
            return rc;
    } else {
        t->i++;
        *cp = c;
        *is_set = 0;
    }
    if (!*is_set && *cp >= 0x80)
        return trfail(t, VIGIL_EUNSUPPORTED,
                      "non-ASCII characters in a character class are not supported");
    return VIGIL_OK;
}

static vigil_code translate_class(struct tr *t)
{
    struct cset set = {{0}};
    int negate = 0;
    if (t->i < t->n && t->p[t->i] == '^') {
        negate = 1;
        t->i++;
    }
    for (;;) {
        if (t->i >= t->n)
            return trfail(t, VIGIL_EINVAL, "unterminated character class");
        if (t->p[t->i] == ']') {
            t->i++;
            break;
        }
        unsigned long lo, hi;
        struct cset s1 = {{0}}, s2 = {{0}};
        int set1, set2;
        vigil_code rc = class_atom(t, &lo, &s1, &set1);
        if (rc != VIGIL_OK)
            return rc;
        if (t->i + 1 < t->n && t->p[t->i] == '-' && t->p[t->i + 1] != ']') {
            t->i++;
            rc = class_atom(t, &hi, &s2, &set2);
            if (rc != VIGIL_OK)
                return rc;
            if (set1 || set2)
                return trfail(t, VIGIL_EUNSUPPORTED, "a shorthand as a range end is not supported");
            if (lo > hi)
                return trfail(t, VIGIL_EINVAL, "character class range out of order");
            cset_range(&set, (unsigned)lo, (unsigned)hi);
            continue;
        }
        if (set1) {
            for (size_t k = 0; k < sizeof set.bits; k++)
                set.bits[k] |= s1.bits[k];
        } else {
            cset_add(&set, (unsigned)lo);
        }
    }
    if (cset_empty(&set)) {
        if (!negate)
            return trfail(t, VIGIL_EUNSUPPORTED, "the empty class [] is not supported");
        /* [^] matches any character, line terminators included. */
        vg_buf_puts(t->out, t->utf8_bytes ? "([\x01-\x7f]|[\xc0-\xff][\x80-\xbf]+)" : "(.|\n)");
        return VIGIL_OK;
    }
    emit_class(t, &set, negate);
    return VIGIL_OK;
}

static void atom_done(struct tr *t)
{
    t->weight[t->depth] += 1;
    t->last = 1;
    t->have_atom = 1;
}

static int read_uint(struct tr *t, long *v)
{
    size_t start = t->i;
    long x = 0;
    while (t->i < t->n && t->p[t->i] >= '0' && t->p[t->i] <= '9') {
        if (x < 100000)
            x = x * 10 + (t->p[t->i] - '0');
        t->i++;
    }
    *v = x;
    return t->i > start;
}

/* After '{': a quantifier {n}, {n,} or {n,m}? Returns 1 and the bounds (m = -1: none). */
static int try_brace_quantifier(struct tr *t, long *lo, long *hi)
{
    size_t save = t->i;
    *hi = -1;
    if (!read_uint(t, lo))
        goto no;
    *hi = *lo;
    if (t->i < t->n && t->p[t->i] == ',') {
        t->i++;
        *hi = -1;
        if (t->i < t->n && t->p[t->i] != '}' && !read_uint(t, hi))
            goto no;
    }
    if (t->i < t->n && t->p[t->i] == '}') {
        t->i++;
        return 1;
    }
no:
    t->i = save;
    return 0;
}

static vigil_code quantified(struct tr *t, long k)
{
    if (!t->have_atom)
        return trfail(t, VIGIL_EINVAL, "nothing to repeat");
    if (k > 1) {
        t->weight[t->depth] += t->last * (k - 1);
        t->last *= k;
        if (t->weight[t->depth] > VG_REGEX_MAX_WEIGHT || t->last > VG_REGEX_MAX_WEIGHT)
            return trfail(t, VIGIL_EUNSUPPORTED, "pattern expands too much (limit %d)",
                          VG_REGEX_MAX_WEIGHT);
    }
    t->have_atom = 0;
    if (t->i < t->n && t->p[t->i] == '?') /* lazy: same match/no-match as greedy */
        t->i++;
    return VIGIL_OK;
}

vigil_code vg_schema_regex_translate(const char *src, size_t len, int utf8_bytes,
                                     struct vg_buf *out, char *why, size_t why_len)
{
    struct tr t = {0};
    t.p = (const unsigned char *)src;
    t.n = len;
    t.utf8_bytes = utf8_bytes;
    t.out = out;
    t.why = why;
    t.why_len = why_len;
    vigil_code rc;
    while (t.i < t.n) {
        unsigned c = t.p[t.i++];
        switch (c) {
        case '\\': {
            unsigned long cp;
            struct cset set = {{0}};
            int is_set, negated;
            rc = read_escape(&t, 0, &cp, &set, &is_set, &negated);
            if (rc != VIGIL_OK)
                return rc;
            if (is_set)
                emit_class(&t, &set, negated);
            else
                emit_utf8(&t, cp);
            atom_done(&t);
            break;
        }
        case '[':
            rc = translate_class(&t);
            if (rc != VIGIL_OK)
                return rc;
            atom_done(&t);
            break;
        case '.':
            vg_buf_puts(t.out,
                        t.utf8_bytes ? "([^\n\r\x80-\xff]|[\xc0-\xff][\x80-\xbf]+)" : "[^\n\r]");
            atom_done(&t);
            break;
        case '(':
            if (t.depth >= VG_REGEX_MAX_GROUPS)
                return trfail(&t, VIGIL_EUNSUPPORTED, "groups nested deeper than %d",
                              VG_REGEX_MAX_GROUPS);
            if (t.i < t.n && t.p[t.i] == '?') {
                const char *rest = (const char *)t.p + t.i + 1;
                size_t left = t.n - t.i - 1;
                if (left >= 1 && rest[0] == ':') {
                    t.i += 2;
                } else if (left >= 1 && (rest[0] == '=' || rest[0] == '!')) {
                    return trfail(&t, VIGIL_EUNSUPPORTED, "lookahead (?%c) is not supported",
                                  rest[0]);
                } else if (left >= 2 && rest[0] == '<' && (rest[1] == '=' || rest[1] == '!')) {
                    return trfail(&t, VIGIL_EUNSUPPORTED, "lookbehind (?<%c) is not supported",
                                  rest[1]);
                } else if (left >= 1 && rest[0] == '<') { /* named group: keep the group */
                    size_t k = 1;
                    while (k < left && rest[k] != '>' &&
                           (isalnum((unsigned char)rest[k]) || rest[k] == '_' || rest[k] == '$'))
                        k++;
                    if (k >= left || rest[k] != '>' || k == 1)
                        return trfail(&t, VIGIL_EINVAL, "malformed group name");
                    t.i += 1 + k + 1;
                } else {
                    return trfail(&t, VIGIL_EINVAL, "invalid group (?");
                }
            }
            vg_buf_putc(t.out, '(');
            t.depth++;
            t.weight[t.depth] = 0;
            t.have_atom = 0;
            break;
        case ')': {
            if (t.depth == 0)
                return trfail(&t, VIGIL_EINVAL, "unmatched )");
            vg_buf_putc(t.out, ')');
            long w = t.weight[t.depth] ? t.weight[t.depth] : 1;
            t.depth--;
            t.weight[t.depth] += w;
            t.last = w;
            t.have_atom = 1;
            break;
        }
        case '|':
            vg_buf_putc(t.out, '|');
            t.have_atom = 0;
            break;
        case '^':
        case '$':
            vg_buf_putc(t.out, (char)c);
            t.have_atom = 0;
            break;
        case '*':
        case '+':
        case '?':
            if (!t.have_atom)
                return trfail(&t, VIGIL_EINVAL, "nothing to repeat");
            vg_buf_putc(t.out, (char)c);
            rc = quantified(&t, 1);
            if (rc != VIGIL_OK)
                return rc;
            break;
        case '{': {
            long lo, hi;
            if (try_brace_quantifier(&t, &lo, &hi)) {
                if (!t.have_atom)
                    return trfail(&t, VIGIL_EINVAL, "nothing to repeat");
                if (lo > VG_REGEX_MAX_REPEAT || hi > VG_REGEX_MAX_REPEAT)
                    return trfail(&t, VIGIL_EUNSUPPORTED, "repetition count above %d",
                                  VG_REGEX_MAX_REPEAT);
                if (hi >= 0 && hi < lo)
                    return trfail(&t, VIGIL_EINVAL, "numbers out of order in {} quantifier");
                if (hi < 0)
                    vg_buf_printf(t.out, "{%ld,}", lo);
                else
                    vg_buf_printf(t.out, "{%ld,%ld}", lo, hi);
                rc = quantified(&t, hi < 0 ? lo + 1 : hi);
                if (rc != VIGIL_OK)
                    return rc;
                break;
            }
            emit_ascii_literal(&t, '{'); /* ECMA-262 Annex B: a lone brace is literal */
            atom_done(&t);
            break;
        }
        default:
            if (c >= 0x80) { /* a raw UTF-8 sequence: one code point, kept whole */
                size_t start = t.i - 1;
                while (t.i < t.n && (t.p[t.i] & 0xc0) == 0x80)
                    t.i++;
                vg_buf_putc(t.out, '(');
                vg_buf_append(t.out, t.p + start, t.i - start);
                vg_buf_putc(t.out, ')');
            } else if (c == 0) {
                return trfail(&t, VIGIL_EUNSUPPORTED, "NUL characters are not supported");
            } else {
                emit_ascii_literal(&t, c);
            }
            atom_done(&t);
        }
        if (t.weight[t.depth] > VG_REGEX_MAX_WEIGHT)
            return trfail(&t, VIGIL_EUNSUPPORTED, "pattern expands too much (limit %d)",
                          VG_REGEX_MAX_WEIGHT);
    }
    if (t.depth != 0)
        return trfail(&t, VIGIL_EINVAL, "unterminated group");
    if (out->fail != VIGIL_OK)
        return trfail(&t, out->fail, "out of memory");
    return VIGIL_OK;
}

vigil_code vg_schema_regex_compile(const char *src, size_t len, struct vg_schema_regex **out,
                                   char *why, size_t why_len)
{
    struct vg_buf b;
    struct vg_schema_regex *rx = NULL;
    vg_buf_init(&b, 1 << 20);
    /* Compiled under the current locale; in a single-byte one, spell UTF-8 out in bytes. */
    vigil_code rc = vg_schema_regex_translate(src, len, MB_CUR_MAX == 1, &b, why, why_len);
    if (rc != VIGIL_OK)
        goto out;
    rx = vg_calloc(1, sizeof *rx);
    if (!rx) {
        rc = VIGIL_ENOMEM;
        snprintf(why, why_len, "out of memory");
        goto out;
    }
    int r = regcomp(&rx->re, b.data, REG_EXTENDED | REG_NOSUB);
    if (r != 0) {
        char msg[128];
        regerror(r, &rx->re, msg, sizeof msg);
        snprintf(why, why_len, "%s", msg);
        rc = r == REG_ESPACE ? VIGIL_ENOMEM : VIGIL_EINVAL;
        vg_free(rx);
        rx = NULL;
        goto out;
    }
    *out = rx;
    rx = NULL;
out:
    vg_buf_release(&b);
    return rc;
}

int vg_schema_regex_search(const struct vg_schema_regex *rx, const char *s, size_t len)
{
#ifdef REG_STARTEND
    regmatch_t m[1];
    m[0].rm_so = 0;
    m[0].rm_eo = (regoff_t)len;
    return regexec(&rx->re, s, 1, m, REG_STARTEND) == 0;
#else
    VG_UNUSED(len);
    return regexec(&rx->re, s, 0, NULL, 0) == 0;
#endif
}

void vg_schema_regex_free(struct vg_schema_regex *rx)
{
    if (!rx)
        return;
    regfree(&rx->re);
    vg_free(rx);
}
