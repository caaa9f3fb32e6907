/*
 * test.h: the assertion macros of vigil's tests. Each prints both values and the source
 * location, then exits non-zero, so CTest reports the case as failed. A test file defines
 * cases with TEST(name) and lists them in a main via RUN(name).
 */
#ifndef VG_TEST_H
#define VG_TEST_H

#include "base/common.h"

#include "helpers/fault_alloc.h"
#include "helpers/seeded_ids.h"
#include "helpers/hand_clock.h"

#include <inttypes.h>

extern int vg_test_failures;
extern const char *vg_test_current;

#define TEST(name) static void name(void)

#define RUN(name)                                                                                  \
    do {                                                                                           \
        vg_test_current = #name;                                                                   \
        name();                                                                                    \
        fprintf(stderr, "ok - %s\n", #name);                                                       \
    } while (0)

#define TEST_FAIL_(...)                                                                            \
    do {                                                                                           \
        fprintf(stderr, "FAIL %s at %s:%d: ", vg_test_current ? vg_test_current : "?", __FILE__,   \
                __LINE__);                                                                         \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            TEST_FAIL_("assertion failed: %s", #cond);                                             \
    } while (0)

#define ASSERT_EQ(a, b)                                                                            \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_)                                                                              \
            TEST_FAIL_("%s == %s: %lld != %lld", #a, #b, a_, b_);                                  \
    } while (0)

#define ASSERT_NE(a, b)                                                                            \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ == b_)                                                                              \
            TEST_FAIL_("%s != %s: both %lld", #a, #b, a_);                                         \
    } while (0)

#define ASSERT_STREQ(a, b)                                                                         \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                                     \
            TEST_FAIL_("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)",                   \
                       b_ ? b_ : "(null)");                                                        \
    } while (0)

#define ASSERT_CONTAINS(hay, needle)                                                               \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (!h_ || !strstr(h_, n_))                                                                \
            TEST_FAIL_("\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", n_);                  \
    } while (0)

/* Assert a vigil call succeeded, printing the error report when it did not. */
#define ASSERT_OK(call)                                                                            \
    do {                                                                                           \
        vigil_error e_ = {0};                                                                      \
        vigil_error *E = &e_;                                                                      \
        (void)E;                                                                                   \
        vigil_code rc_ = (call);                                                                   \
        if (rc_ != VIGIL_OK)                                                                       \
            TEST_FAIL_("%s failed: %s (%s) %s", #call, vigil_code_name(rc_), e_.message,           \
                       e_.detail);                                                                 \
    } while (0)

/* Assert a call returned the given code. */
#define ASSERT_CODE(code, call)                                                                    \
    do {                                                                                           \
        vigil_code rc_ = (call);                                                                   \
        if (rc_ != (code))                                                                         \
            TEST_FAIL_("%s returned %s, expected %s", #call, vigil_code_name(rc_),                 \
                       vigil_code_name(code));                                                     \
    } while (0)

/* A fresh empty directory for this test under the build tree; returns a static buffer. */
const char *vg_test_tmpdir(const char *name);

/* Open (creating it) the store at path with this busy timeout; NULL, having said why on
 * stderr, when it cannot be opened. */
struct vg_store;
struct vg_store *vg_test_store_open(const char *path, int busy_ms);
/* The number of records of a kind in the store, or -1 when it cannot be counted. */
int64_t vg_test_store_count(struct vg_store *s, const char *kind);

#endif
