/*
 * test_schema.c: vigil's JSON Schema validator as the tool executor uses it: error messages
 * with JSON pointers, the list of every violation, defaults, tool-style schemas, schemas
 * rejected at compile time, the pattern translation, deep and cyclic input, threads, and
 * out-of-memory at every allocation.
 */
/* proves: S0-048, S4-068 (tool arguments are validated against the tool's schema) */
#include "helpers/test.h"

#include "base/buf.h"
#include "tool/schema.h"
#include "tool/schema_int.h"

#include <locale.h>
#include <pthread.h>

static json_t *parse(const char *text)
{
    json_error_t jerr;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (!j)
        TEST_FAIL_("bad test JSON (%s): %s", jerr.text, text);
    return j;
}

static struct vg_schema *compile_ok(const char *text)
{
    json_t *j = parse(text);
    struct vg_schema *s = NULL;
    ASSERT_OK(vg_schema_compile(j, &s, E));
    json_decref(j); /* the compiled schema keeps its own copy */
    return s;
}

/* Compile must fail with code; returns the message in a static buffer. */
static const char *compile_fails(const char *text, vigil_code code)
{
    static vigil_error err;
    json_t *j = parse(text);
    struct vg_schema *s = NULL;
    memset(&err, 0, sizeof err);
    vigil_code rc = vg_schema_compile(j, &s, &err);
    json_decref(j);
    if (rc != code)
        TEST_FAIL_("compiling %s gave %s (%s), expected %s", text, vigil_code_name(rc), err.message,
                   vigil_code_name(code));
    ASSERT(s == NULL);
    return err.message;
}

/* Validate instance text: returns the error message ("" when valid). */
static const char *check(const struct vg_schema *s, const char *instance)
{
    static vigil_error err;
    json_t *j = parse(instance);
    memset(&err, 0, sizeof err);
    vigil_code rc = vg_schema_validate(s, j, NULL, &err);
    json_decref(j);
    if (rc == VIGIL_OK)
        return "";
    ASSERT_EQ(rc, VIGIL_EINVAL);
    ASSERT(err.message[0] != '\0');
    return err.message;
}

static const char *task_tool =
    "{\"type\":\"object\",\"additionalProperties\":false,"
    " \"required\":[\"title\",\"items\"],"
    " \"properties\":{"
    "  \"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":20},"
    "  \"count\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":100,\"default\":10},"
    "  \"mode\":{\"enum\":[\"fast\",\"slow\"],\"default\":\"fast\"},"
    "  \"items\":{\"type\":\"array\",\"maxItems\":50,\"items\":{"
    "    \"type\":\"object\",\"required\":[\"name\"],"
    "    \"properties\":{\"name\":{\"type\":\"string\",\"pattern\":\"^[a-z][a-z0-9_]*$\"},"
    "                  \"priority\":{\"enum\":[\"low\",\"high\"],\"default\":\"low\"},"
    "                  \"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
    "                            \"uniqueItems\":true}}}}}}";

TEST(tool_schema_accepts_valid_arguments)
{
    struct vg_schema *s = compile_ok(task_tool);
    ASSERT_STREQ(check(s, "{\"title\":\"t\",\"items\":[]}"), "");
    ASSERT_STREQ(check(s, "{\"title\":\"plan\",\"count\":3,\"mode\":\"slow\",\"items\":"
                          "[{\"name\":\"a1\",\"priority\":\"high\",\"tags\":[\"x\",\"y\"]}]}"),
                 "");
    /* 1.0 is an integer in JSON Schema */
    ASSERT_STREQ(check(s, "{\"title\":\"t\",\"count\":1.0,\"items\":[]}"), "");
    vg_schema_free(s);
}

TEST(errors_name_the_instance_location)
{
    struct vg_schema *s = compile_ok(task_tool);
    ASSERT_STREQ(check(s, "{\"title\":\"t\",\"items\":[{\"name\":\"a\"},{\"name\":\"b\"},"
                          "{\"name\":\"c\",\"priority\":\"urgent\"}]}"),
                 "at /items/2/priority: expected one of [\"low\",\"high\"]");
    ASSERT_STREQ(check(s, "{\"items\":[]}"), "at (root): missing required property \"title\"");
    ASSERT_STREQ(check(s, "{\"title\":\"t\",\"items\":[],\"count\":1.5}"),
                 "at /count: expected integer, got number");
    ASSERT_STREQ(check(s, "{\"title\":\"t\",\"items\":[],\"count\":101}"),
                 "at /count: expected a number <= 100, got 101");
    ASSERT_STREQ(check(s, "{\"title\":\"\",\"items\":[]}"),
                 "at /title: expected at least 1 characters, got 0");
    ASSERT_STREQ(check(s, "{\"title\":\"t\",\"items\":[{\"name\":\"Bad\"}]}"),
                 "at /items/0/name: expected a string matching \"^[a-z][a-z0-9_]*$\"");
    ASSERT_STREQ(check(s, "{\"title\":\"t\",\"items\":[],\"extra\":1}"),
                 "at (root): unexpected property \"extra\"");
    ASSERT_STREQ(check(s, "{\"title\":\"t\",\"items\":[{\"name\":\"a\",\"tags\":[\"x\",\"x\"]}]}"),
                 "at /items/0/tags: expected unique items, items 0 and 1 are equal");
    ASSERT_STREQ(check(s, "[1]"), "at (root): expected object, got array");
    vg_schema_free(s);

    /* keys with / and ~ are escaped in the pointer */
    s = compile_ok("{\"properties\":{\"a/b~c\":{\"type\":[\"string\",\"null\"]}}}");
    ASSERT_STREQ(check(s, "{\"a/b~c\":1}"), "at /a~1b~0c: expected null or string, got integer");
    vg_schema_free(s);

    s = compile_ok("{\"items\":false}");
    ASSERT_STREQ(check(s, "[1]"), "at /0: no value is allowed here");
    vg_schema_free(s);
}

TEST(every_violation_is_listed_and_capped)
{
    struct vg_schema *s = compile_ok(task_tool);
    json_t *inst = parse("{\"title\":5,\"count\":\"x\",\"items\":[{\"priority\":\"no\"}],\"z\":0}");
    struct vg_buf out;
    vigil_error err = {0};
    vg_buf_init(&out, 0);
    ASSERT_CODE(VIGIL_EINVAL, vg_schema_validate(s, inst, &out, &err));
    ASSERT_CONTAINS(out.data, "at /title: expected string, got integer\n");
    ASSERT_CONTAINS(out.data, "at /count: expected integer, got string\n");
    ASSERT_CONTAINS(out.data, "at /items/0: missing required property \"name\"\n");
    ASSERT_CONTAINS(out.data, "at /items/0/priority: expected one of [\"low\",\"high\"]\n");
    ASSERT_CONTAINS(out.data, "at (root): unexpected property \"z\"\n");
    ASSERT_CONTAINS(out.data, err.message); /* the message is the first listed violation */
    int lines = 0;
    for (const char *p = out.data; *p; p++)
        lines += *p == '\n';
    ASSERT_EQ(lines, 5);
    json_decref(inst);
    vg_schema_free(s);

    /* 500 bad items: the list stops at VG_SCHEMA_MAX_ERRORS lines plus one note */
    s = compile_ok("{\"items\":{\"type\":\"string\"}}");
    inst = json_array();
    for (int i = 0; i < 500; i++)
        json_array_append_new(inst, json_integer(i));
    vg_buf_reset(&out);
    ASSERT_CODE(VIGIL_EINVAL, vg_schema_validate(s, inst, &out, NULL));
    lines = 0;
    for (const char *p = out.data; *p; p++)
        lines += *p == '\n';
    ASSERT_EQ(lines, VG_SCHEMA_MAX_ERRORS + 1);
    ASSERT_CONTAINS(out.data, "(more violations not shown)");
    /* and a valid instance leaves the list untouched */
    vg_buf_reset(&out);
    json_t *good = parse("[\"a\",\"b\"]");
    ASSERT_OK(vg_schema_validate(s, good, &out, E));
    ASSERT_EQ(out.len, 0);
    json_decref(good);
    json_decref(inst);
    vg_buf_release(&out);
    vg_schema_free(s);
}

TEST(keyword_semantics)
{
    struct vg_schema *s = compile_ok("{\"maxLength\":3,\"minLength\":3}");
    ASSERT_STREQ(check(s, "\"h\\u00e9\\u00e9\""), "");  /* 3 code points, 5 bytes */
    ASSERT_STREQ(check(s, "\"\\ud83d\\ude00ab\""), ""); /* an emoji counts once */
    ASSERT_CONTAINS(check(s, "\"abcd\""), "expected at most 3 characters, got 4");
    vg_schema_free(s);

    s = compile_ok("{\"const\":{\"a\":[1,2.0]}}");
    ASSERT_STREQ(check(s, "{\"a\":[1.0,2]}"), ""); /* numbers compare by value */
    ASSERT_STREQ(check(s, "{\"a\":[1,2,3]}"), "at (root): expected {\"a\":[1,2.0]}");
    vg_schema_free(s);

    s = compile_ok("{\"exclusiveMinimum\":0,\"multipleOf\":0.01}");
    ASSERT_STREQ(check(s, "19.99"), "");
    ASSERT_STREQ(check(s, "0"), "at (root): expected a number > 0, got 0");
    ASSERT_STREQ(check(s, "0.001"), "at (root): expected a multiple of 0.01, got 0.001");
    vg_schema_free(s);

    s = compile_ok("{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}");
    ASSERT_STREQ(check(s, "1"), "");
    ASSERT_CONTAINS(check(s, "3"), "matched more than one");
    vg_schema_free(s);

    s = compile_ok("{\"if\":{\"properties\":{\"kind\":{\"const\":\"file\"}}},"
                   "\"then\":{\"required\":[\"path\"]},\"else\":{\"required\":[\"url\"]}}");
    ASSERT_STREQ(check(s, "{\"kind\":\"file\",\"path\":\"/x\"}"), "");
    ASSERT_CONTAINS(check(s, "{\"kind\":\"file\"}"), "missing required property \"path\"");
    ASSERT_CONTAINS(check(s, "{\"kind\":\"web\"}"), "missing required property \"url\"");
    vg_schema_free(s);

    s = compile_ok("{\"dependencies\":{\"a\":[\"b\"]},\"propertyNames\":{\"maxLength\":2}}");
    ASSERT_STREQ(check(s, "{\"a\":1,\"b\":2}"), "");
    ASSERT_STREQ(check(s, "{\"a\":1}"), "at (root): property \"a\" requires property \"b\"");
    ASSERT_STREQ(check(s, "{\"abc\":1}"),
                 "at (root): property name \"abc\" does not match propertyNames");
    vg_schema_free(s);
}

TEST(defaults_are_filled_recursively)
{
    struct vg_schema *s = compile_ok(task_tool);
    json_t *inst = parse("{\"title\":\"t\",\"mode\":\"slow\",\"items\":[{\"name\":\"a\"},"
                         "{\"name\":\"b\",\"priority\":\"high\"}]}");
    ASSERT_OK(vg_schema_apply_defaults(s, inst, E));
    ASSERT_EQ(json_integer_value(json_object_get(inst, "count")), 10);
    ASSERT_STREQ(json_string_value(json_object_get(inst, "mode")), "slow"); /* kept */
    json_t *items = json_object_get(inst, "items");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 0), "priority")), "low");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(items, 1), "priority")), "high");
    ASSERT_STREQ(check(s, "{\"title\":\"t\",\"items\":[]}"), "");
    ASSERT_OK(vg_schema_validate(s, inst, NULL, E));
    json_decref(inst);
    vg_schema_free(s);

    /* defaults nest: a missing object gets its default, then the defaults inside it */
    s = compile_ok("{\"definitions\":{\"opts\":{\"type\":\"object\",\"default\":{},"
                   "\"properties\":{\"depth\":{\"default\":2},\"deep\":{\"default\":{\"x\":1},"
                   "\"properties\":{\"y\":{\"default\":true}}}}}},"
                   "\"properties\":{\"options\":{\"$ref\":\"#/definitions/opts\"}}}");
    inst = json_object();
    ASSERT_OK(vg_schema_apply_defaults(s, inst, E));
    char *text = json_dumps(inst, JSON_COMPACT | JSON_SORT_KEYS);
    ASSERT_STREQ(text, "{\"options\":{\"deep\":{\"x\":1,\"y\":true},\"depth\":2}}");
    free(text);
    json_decref(inst);
    vg_schema_free(s);

    /* a default that contains itself through a $ref stops, it does not grow forever */
    s = compile_ok("{\"properties\":{\"child\":{\"$ref\":\"#\",\"default\":{}}}}");
    inst = json_object();
    ASSERT_OK(vg_schema_apply_defaults(s, inst, E));
    int depth = 0;
    for (json_t *c = inst; (c = json_object_get(c, "child"));)
        depth++;
    ASSERT(depth > 1 && depth <= VG_SCHEMA_MAX_DEPTH / 8 + 1);
    json_decref(inst);
    vg_schema_free(s);
}

TEST(malformed_schemas_are_rejected_at_compile_time)
{
    ASSERT_STREQ(compile_fails("{\"type\":\"strin\"}", VIGIL_EINVAL),
                 "invalid schema at /type: unknown type \"strin\"");
    ASSERT_STREQ(compile_fails("{\"properties\":{\"n\":{\"minLength\":-1}}}", VIGIL_EINVAL),
                 "invalid schema at /properties/n/minLength: expected a non-negative integer");
    ASSERT_CONTAINS(
        compile_fails("{\"items\":[{\"type\":\"string\"},{\"maxItems\":\"3\"}]}", VIGIL_EINVAL),
        "at /items/1/maxItems:");
    ASSERT_CONTAINS(compile_fails("{\"exclusiveMinimum\":true}", VIGIL_EINVAL),
                    "draft-4 boolean form");
    ASSERT_CONTAINS(compile_fails("{\"multipleOf\":0}", VIGIL_EINVAL), "at /multipleOf:");
    ASSERT_CONTAINS(compile_fails("42", VIGIL_EINVAL), "at (root): expected a schema");
    ASSERT_CONTAINS(compile_fails("{\"properties\":{\"a\":7}}", VIGIL_EINVAL),
                    "at /properties/a: expected a schema");
    ASSERT_CONTAINS(compile_fails("{\"anyOf\":[]}", VIGIL_EINVAL), "at /anyOf:");
    ASSERT_CONTAINS(compile_fails("{\"required\":[1]}", VIGIL_EINVAL), "at /required:");
    ASSERT_CONTAINS(compile_fails("{\"definitions\":{\"x\":{\"enum\":3}}}", VIGIL_EINVAL),
                    "at /definitions/x/enum:");
    ASSERT_CONTAINS(compile_fails("{\"$ref\":\"#/definitions/missing\"}", VIGIL_EINVAL),
                    "points nowhere");
    ASSERT_CONTAINS(compile_fails("{\"$ref\":\"https://example.com/s.json\"}", VIGIL_EINVAL),
                    "is not a local reference");
    ASSERT_CONTAINS(
        compile_fails("{\"definitions\":{\"a\":{\"$ref\":\"#/definitions/b\"},"
                      "\"b\":{\"$ref\":\"#/definitions/a\"}},\"$ref\":\"#/definitions/a\"}",
                      VIGIL_EINVAL),
        "circular");
    /* an error inside a $ref target names the target's pointer */
    ASSERT_CONTAINS(compile_fails("{\"$ref\":\"#/definitions/x\",\"definitions\":{\"x\":"
                                  "{\"minimum\":\"0\"}}}",
                                  VIGIL_EINVAL),
                    "at /definitions/x/minimum:");
    /* patterns: untranslatable ones are EUNSUPPORTED, broken ones EINVAL, both name the place */
    ASSERT_STREQ(
        compile_fails("{\"properties\":{\"p\":{\"pattern\":\"a(?=b)\"}}}", VIGIL_EUNSUPPORTED),
        "invalid schema at /properties/p/pattern: pattern \"a(?=b)\": lookahead (?=) is "
        "not supported");
    ASSERT_CONTAINS(compile_fails("{\"patternProperties\":{\"^(a\":{}}}", VIGIL_EINVAL),
                    "at /patternProperties/^(a: pattern \"^(a\": unterminated group");
    /* nesting beyond the document limit */
    char deep[2 * (VG_SCHEMA_MAX_DOC_DEPTH + 10) * 12 + 8], *p = deep;
    for (int i = 0; i < VG_SCHEMA_MAX_DOC_DEPTH + 10; i++)
        p += snprintf(p, 16, "{\"not\":");
    p += snprintf(p, 8, "{}");
    for (int i = 0; i < VG_SCHEMA_MAX_DOC_DEPTH + 10; i++)
        *p++ = '}';
    *p = '\0';
    ASSERT_CONTAINS(compile_fails(deep, VIGIL_EINVAL), "nested deeper than");
    vg_schema_free(NULL);
}

struct rx_case {
    const char *pattern;
    const char *text;
    int match;
};

TEST(patterns_translate_from_ecma262)
{
    static const struct rx_case cases[] = {
        {"^\\d{3}-\\d{4}$", "555-1234", 1},
        {"^\\d{3}-\\d{4}$", "555-12345", 0},
        {"^[a-z_][a-z0-9_]*$", "snake_case9", 1},
        {"^[a-z_][a-z0-9_]*$", "9lives", 0},
        {"^\\w+@\\w+\\.com$", "me@host.com", 1},
        {"^\\w+@\\w+\\.com$", "me@hostxcom", 0},
        {"^\\S+$", "a b", 0},
        {"^\\s*$", " \t\n", 1},
        {"^\\D\\W$", "a-", 1},
        {"^\\D\\W$", "1-", 0},
        {"a+?b", "xaab", 1},
        {"^(?:ab)+$", "ababab", 1},
        {"^(?<year>\\d{4})$", "2024", 1},
        {"^.{2}$",
         "\xc3\xa9"
         "a",
         1}, /* two code points */
        {"^.$", "\xc3\xa9", 1},
        {"^.$", "\n", 0},
        {"^\\u00e9+$", "\xc3\xa9\xc3\xa9", 1}, /* the whole code point repeats */
        {"^\xc3\xa9{2}$", "\xc3\xa9\xc3\xa9", 1},
        {"^[^a]$", "\xc3\xa9", 1},
        {"^[^a]$", "a", 0},
        {"^[\\]\\-^]+$", "]-^", 1},
        {"^[\\^]$", "^", 1},
        {"^[\\d.]+$", "1.5", 1},
        {"^[\\d.]+$", "1,5", 0},
        {"a{2,3}", "xaay", 1},
        {"^a{2,}$", "a", 0},
        {"x{", "x{", 1},
        {"^\\$\\d+\\.\\d\\d$", "$12.50", 1},
        {"^\\(\\)\\[\\]\\{\\}\\|\\*\\+\\?\\\\\\/$", "()[]{}|*+?\\/", 1},
        {"^a|b$", "xb", 1},
        {"^(a|)$", "", 1},
        {"^[^]$", "\n", 1},
        {"\\x41\\u0042", "AB", 1},
        {"^\\ud83d\\ude00$", "\xf0\x9f\x98\x80", 1},
        {"^[\\t ]$", "\t", 1},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(cases); i++) {
        struct vg_schema_regex *rx = NULL;
        char why[160] = "";
        vigil_code rc = vg_schema_regex_compile(cases[i].pattern, strlen(cases[i].pattern), &rx,
                                                why, sizeof why);
        if (rc != VIGIL_OK)
            TEST_FAIL_("pattern %s did not compile: %s", cases[i].pattern, why);
        int got = vg_schema_regex_search(rx, cases[i].text, strlen(cases[i].text));
        if (got != cases[i].match)
            TEST_FAIL_("pattern %s on \"%s\": got %d, expected %d", cases[i].pattern, cases[i].text,
                       got, cases[i].match);
        vg_schema_regex_free(rx);
    }
    static const struct {
        const char *pattern;
        vigil_code code;
        const char *why;
    } bad[] = {
        {"a(?=b)", VIGIL_EUNSUPPORTED, "lookahead"},
        {"a(?!b)", VIGIL_EUNSUPPORTED, "lookahead"},
        {"(?<=a)b", VIGIL_EUNSUPPORTED, "lookbehind"},
        {"(a)\\1", VIGIL_EUNSUPPORTED, "backreferences"},
        {"\\bword", VIGIL_EUNSUPPORTED, "word boundaries"},
        {"\\p{L}", VIGIL_EUNSUPPORTED, "property escapes"},
        {"[\\D]", VIGIL_EUNSUPPORTED, "negated shorthand"},
        {"[\xc3\xa9]", VIGIL_EUNSUPPORTED, "non-ASCII"},
        {"[]", VIGIL_EUNSUPPORTED, "empty class"},
        {"a\\0", VIGIL_EUNSUPPORTED, "NUL"},
        {"a{1001}", VIGIL_EUNSUPPORTED, "repetition count"},
        {"((a{100}){100}){100}", VIGIL_EUNSUPPORTED, "expands too much"},
        {"(", VIGIL_EINVAL, "unterminated group"},
        {"a)", VIGIL_EINVAL, "unmatched"},
        {"[a", VIGIL_EINVAL, "unterminated character class"},
        {"a{3,1}", VIGIL_EINVAL, "out of order"},
        {"*a", VIGIL_EINVAL, "nothing to repeat"},
        {"\\q", VIGIL_EINVAL, "unknown escape"},
        {"[z-a]", VIGIL_EINVAL, "out of order"},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(bad); i++) {
        struct vg_schema_regex *rx = NULL;
        char why[160] = "";
        vigil_code rc =
            vg_schema_regex_compile(bad[i].pattern, strlen(bad[i].pattern), &rx, why, sizeof why);
        if (rc != bad[i].code)
            TEST_FAIL_("pattern %s gave %s (%s), expected %s", bad[i].pattern, vigil_code_name(rc),
                       why, vigil_code_name(bad[i].code));
        ASSERT(rx == NULL);
        ASSERT_CONTAINS(why, bad[i].why);
    }
}

/* In a UTF-8 locale regcomp handles multi-byte characters itself: same answers. */
TEST(patterns_in_a_utf8_locale)
{
    if (!setlocale(LC_CTYPE, "C.UTF-8")) {
        fprintf(stderr, "  (no C.UTF-8 locale here: skipped)\n");
        return;
    }
    static const struct rx_case cases[] = {
        {"^.$", "\xc3\xa9", 1},
        {"^.{2}$",
         "\xc3\xa9"
         "a",
         1},
        {"^[^a]$", "\xc3\xa9", 1},
        {"^\\u00e9+$", "\xc3\xa9\xc3\xa9", 1},
        {"^[^]$", "\xc3\xa9", 1},
        {"^\\w+$", "\xc3\xa9", 0},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(cases); i++) {
        struct vg_schema_regex *rx = NULL;
        char why[160] = "";
        if (vg_schema_regex_compile(cases[i].pattern, strlen(cases[i].pattern), &rx, why,
                                    sizeof why) != VIGIL_OK)
            TEST_FAIL_("pattern %s did not compile: %s", cases[i].pattern, why);
        int got = vg_schema_regex_search(rx, cases[i].text, strlen(cases[i].text));
        vg_schema_regex_free(rx);
        if (got != cases[i].match)
            TEST_FAIL_("pattern %s: got %d, expected %d", cases[i].pattern, got, cases[i].match);
    }
    setlocale(LC_CTYPE, "C");
}

TEST(deep_instances_end_in_an_error_not_a_crash)
{
    /* 10,000 nested arrays, built by hand (jansson's parser stops at 2048 levels) */
    json_t *deep = json_array(), *cur = deep;
    for (int i = 0; i < 10000; i++) {
        json_t *next = json_array();
        json_array_append_new(cur, next);
        cur = next;
    }
    struct vg_schema *s = compile_ok("{\"items\":{\"$ref\":\"#\"}}");
    vigil_error err = {0};
    struct vg_buf out;
    vg_buf_init(&out, 0);
    ASSERT_CODE(VIGIL_EINVAL, vg_schema_validate(s, deep, &out, &err));
    ASSERT_CONTAINS(err.message, "nested deeper than 512 levels");
    ASSERT_CONTAINS(err.message, "at /0/0/0/0/");
    ASSERT_CONTAINS(out.data, "nested deeper than 512 levels");
    vg_buf_release(&out);
    vg_schema_free(s);

    /* a schema that does not descend accepts it */
    s = compile_ok("{\"type\":\"array\",\"minItems\":1}");
    ASSERT_OK(vg_schema_validate(s, deep, NULL, E));
    vg_schema_free(s);

    /* comparing two deep values (uniqueItems, const) is bounded too */
    json_t *pair = json_array();
    json_array_append(pair, deep);
    json_array_append(pair, deep);
    s = compile_ok("{\"uniqueItems\":true}");
    memset(&err, 0, sizeof err);
    ASSERT_CODE(VIGIL_EINVAL, vg_schema_validate(s, pair, NULL, &err));
    ASSERT_CONTAINS(err.message, "nested too deeply");
    vg_schema_free(s);
    json_decref(pair);
    json_decref(deep);
}

TEST(cyclic_refs_terminate)
{
    /* a recursive schema over a finite instance is fine */
    struct vg_schema *s = compile_ok(
        "{\"definitions\":{\"node\":{\"type\":\"object\",\"required\":[\"v\"],"
        "\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\","
        "\"items\":{\"$ref\":\"#/definitions/node\"}}}}},\"$ref\":\"#/definitions/node\"}");
    ASSERT_STREQ(check(s, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]},{\"v\":4}]}"), "");
    ASSERT_STREQ(check(s, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":\"x\"}]}]}"),
                 "at /kids/0/kids/0/v: expected integer, got string");
    vg_schema_free(s);

    /* a cycle that never descends into the instance is caught, not followed forever */
    s = compile_ok("{\"anyOf\":[{\"type\":\"string\"},{\"$ref\":\"#\"}]}");
    ASSERT_STREQ(check(s, "\"ok\""), "");
    ASSERT_CONTAINS(check(s, "1"), "loop without making progress");
    vg_schema_free(s);

    s = compile_ok("{\"definitions\":{\"a\":{\"allOf\":[{\"$ref\":\"#/definitions/b\"}]},"
                   "\"b\":{\"not\":{\"$ref\":\"#/definitions/a\"}}},\"$ref\":\"#/definitions/a\"}");
    ASSERT_CONTAINS(check(s, "null"), "loop without making progress");
    vg_schema_free(s);

    /* a $ref graph that fans out exponentially hits the work limit */
    struct vg_buf text;
    vg_buf_init(&text, 0);
    vg_buf_puts(&text, "{\"$ref\":\"#/definitions/d0\",\"definitions\":{");
    for (int i = 0; i < 40; i++)
        vg_buf_printf(&text,
                      "\"d%d\":{\"allOf\":[{\"$ref\":\"#/definitions/d%d\"},"
                      "{\"$ref\":\"#/definitions/d%d\"}]},",
                      i, i + 1, i + 1);
    vg_buf_puts(&text, "\"d40\":{\"type\":\"integer\"}}}");
    s = compile_ok(text.data);
    ASSERT_CONTAINS(check(s, "1"), "work limit");
    vg_buf_release(&text);
    vg_schema_free(s);
}

struct worker {
    const struct vg_schema *s;
    int failures;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    json_t *good =
        json_loads("{\"title\":\"t\",\"items\":[{\"name\":\"a\",\"tags\":[\"x\"]}]}", 0, NULL);
    json_t *bad =
        json_loads("{\"title\":\"t\",\"items\":[{\"name\":\"a\",\"priority\":\"x\"}]}", 0, NULL);
    for (int i = 0; i < 2000; i++) {
        vigil_error err = {0};
        if (vg_schema_validate(w->s, good, NULL, &err) != VIGIL_OK)
            w->failures++;
        if (vg_schema_validate(w->s, bad, NULL, &err) != VIGIL_EINVAL ||
            strcmp(err.message, "at /items/0/priority: expected one of [\"low\",\"high\"]") != 0)
            w->failures++;
    }
    json_decref(good);
    json_decref(bad);
    return NULL;
}

TEST(one_compiled_schema_serves_many_threads)
{
    struct vg_schema *s = compile_ok(task_tool);
    pthread_t th[4];
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i].s = s;
        w[i].failures = 0;
        ASSERT_EQ(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ASSERT_EQ(w[i].failures, 0);
    }
    vg_schema_free(s);
}

TEST(out_of_memory_everywhere_is_clean)
{
    vg_alloc_install_json();
    json_t *schema = parse(task_tool);
    json_t *inst = parse("{\"title\":\"t\",\"items\":[{\"name\":\"a\"}],\"extra\":1}");
    int compiled = 0;
    for (long n = 1; n < 5000 && !compiled; n++) {
        struct vg_schema *s = NULL;
        vigil_error err = {0};
        vg_alloc_fail_at(n, 1);
        vigil_code rc = vg_schema_compile(schema, &s, &err);
        int failed = vg_alloc_failed();
        vg_alloc_fail_at(0, 0);
        if (rc == VIGIL_OK) {
            ASSERT(!failed);
            compiled = 1;
        } else {
            ASSERT_EQ(rc, VIGIL_ENOMEM);
            ASSERT(s == NULL);
        }
        if (!s)
            continue;
        /* validation and defaults under the same fault injection */
        for (long k = 1; k < 200; k++) {
            struct vg_buf out;
            vg_buf_init(&out, 0);
            json_t *copy = json_deep_copy(inst);
            vg_alloc_fail_at(k, 1);
            vigil_code v1 = vg_schema_validate(s, inst, &out, NULL);
            vigil_code v2 = vg_schema_apply_defaults(s, copy, NULL);
            int hit = vg_alloc_failed();
            vg_alloc_fail_at(0, 0);
            ASSERT(v1 == VIGIL_EINVAL || v1 == VIGIL_ENOMEM);
            ASSERT(v2 == VIGIL_OK || v2 == VIGIL_ENOMEM);
            vg_buf_release(&out);
            json_decref(copy);
            if (!hit)
                break;
        }
        vg_schema_free(s);
    }
    ASSERT(compiled);
    json_decref(schema);
    json_decref(inst);
}

int main(void)
{
    RUN(tool_schema_accepts_valid_arguments);
    RUN(errors_name_the_instance_location);
    RUN(every_violation_is_listed_and_capped);
    RUN(keyword_semantics);
    RUN(defaults_are_filled_recursively);
    RUN(malformed_schemas_are_rejected_at_compile_time);
    RUN(patterns_translate_from_ecma262);
    RUN(patterns_in_a_utf8_locale);
    RUN(deep_instances_end_in_an_error_not_a_crash);
    RUN(cyclic_refs_terminate);
    RUN(one_compiled_schema_serves_many_threads);
    RUN(out_of_memory_everywhere_is_clean);
    return 0;
}
