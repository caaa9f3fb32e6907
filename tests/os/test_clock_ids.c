/*
 * test_clock_ids.c: the clock and id ports: the test clock moves only when told, ids are
 * UUIDv7, strictly increasing, and a seeded source repeats itself exactly.
 */
#include "helpers/test.h"

#include "os/clock.h"
#include "os/ids.h"

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TEST(test_clock_moves_only_when_told)
{
    struct vg_test_clock tc;
    vg_test_clock_init(&tc, 1700000000000);
    struct vg_clock *c = &tc.base;
    ASSERT_EQ(vg_clock_now_ms(c), 1700000000000);
    int64_t m0 = vg_clock_mono_ns(c);
    vg_clock_sleep_ms(c, 1500);
    ASSERT_EQ(vg_clock_now_ms(c), 1700000001500);
    ASSERT_EQ(vg_clock_mono_ns(c) - m0, 1500 * 1000000LL);
    ASSERT_EQ(tc.slept_ms, 1500);
    vg_test_clock_set_wall(&tc, 1600000000000); /* a jump back leaves monotonic time alone */
    ASSERT_EQ(vg_clock_now_ms(c), 1600000000000);
    ASSERT_EQ(vg_clock_mono_ns(c) - m0, 1500 * 1000000LL);
}

TEST(time_format_and_parse_round_trip)
{
    char text[32];
    vg_time_format_ms(text, 1700000000123);
    ASSERT_STREQ(text, "2023-11-14T22:13:20.123Z");
    int64_t ms = 0;
    ASSERT_EQ(vg_time_parse_ms(text, &ms), 0);
    ASSERT_EQ(ms, 1700000000123);
    ASSERT_EQ(vg_time_parse_ms("2023-11-14T23:13:20+01:00", &ms), 0);
    ASSERT_EQ(ms, 1700000000000);
    ASSERT_NE(vg_time_parse_ms("2023-13-14T23:13:20Z", &ms), 0);
    ASSERT_NE(vg_time_parse_ms("yesterday", &ms), 0);
}

/* The hand-written date arithmetic agrees with the C library's gmtime_r across the whole range
 * it writes (years 0000 to 9999, both sides of 1970, leap days and century years), and clamps
 * beyond it. */
TEST(time_format_matches_gmtime_everywhere)
{
    char got[32], want[96];
    static const int64_t fixed[] = {0,
                                    -1,
                                    999,
                                    -999,
                                    -1000,
                                    -1001,
                                    86399999,
                                    86400000,
                                    951782400000 /* 2000-02-29 */,
                                    4107456000000 /* 2100-02-28 */,
                                    -62167219200000 /* 0000-01-01 */,
                                    253402300799999 /* 9999 */};
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 200000 + (int)VG_ARRAY_LEN(fixed); i++) {
        int64_t ms;
        if (i < (int)VG_ARRAY_LEN(fixed)) {
            ms = fixed[i];
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            ms = (int64_t)(x % 315537897600000ull) - 62167219200000; /* 0000 .. 9999 */
        }
        int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
        time_t t = (time_t)secs;
        struct tm tm;
        ASSERT(gmtime_r(&t, &tm) != NULL);
        snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (int)(ms - secs * 1000));
        vg_time_format_ms(got, ms);
        if (strcmp(got, want) != 0)
            TEST_FAIL_("%lld ms: got %s, want %s", (long long)ms, got, want);
    }
    vg_time_format_ms(got, 253402300800000); /* 10000-01-01 */
    ASSERT_STREQ(got, "9999-01-01T00:00:00.000Z");
    vg_time_format_ms(got, -62167219200001); /* 1 ms before 0000-01-01 */
    ASSERT_STREQ(got, "0000-12-31T23:59:59.999Z");
}

TEST(uuidv7_is_valid_and_increasing)
{
    struct vg_test_clock tc;
    vg_test_clock_init(&tc, 1700000000000);
    struct vg_ids *ids = vg_ids_real(&tc.base);
    ASSERT(ids);
    char prev[37] = "", cur[37];
    for (int i = 0; i < 10000; i++) { /* same millisecond: the counter keeps order */
        vg_ids_new(ids, cur);
        ASSERT(vg_id_valid(cur));
        ASSERT_EQ(cur[14], '7');
        ASSERT(strcmp(prev, cur) < 0);
        memcpy(prev, cur, sizeof cur);
    }
    vg_test_clock_advance(&tc, 1);
    vg_ids_new(ids, cur);
    ASSERT(strcmp(prev, cur) < 0);
    vg_ids_free(ids);
}

/* Ids draw their random bits from a pool filled 256 bytes at a time. A forked child must not
 * serve the rest of its parent's pool: in the same millisecond both would mint the same id. */
TEST(a_forked_child_does_not_repeat_its_parent_ids)
{
    struct vg_test_clock tc;
    vg_test_clock_init(&tc, 1700000000000);
    struct vg_ids *ids = vg_ids_real(&tc.base);
    ASSERT(ids);
    char first[37], mine[37], theirs[37] = "";
    vg_ids_new(ids, first); /* the pool is filled now */
    vg_test_clock_advance(&tc, 1);
    int fd[2];
    ASSERT(pipe(fd) == 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        char id[37];
        vg_ids_new(ids, id);
        ssize_t w = write(fd[1], id, sizeof id);
        _exit(w == (ssize_t)sizeof id ? 0 : 1);
    }
    vg_ids_new(ids, mine);
    close(fd[1]);
    ASSERT(read(fd[0], theirs, sizeof theirs) == (ssize_t)sizeof theirs);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT(vg_id_valid(theirs));
    if (strcmp(mine, theirs) == 0)
        TEST_FAIL_("parent and child both minted %s", mine);
    vg_ids_free(ids);
}

TEST(seeded_ids_repeat)
{
    struct vg_test_clock a, b;
    vg_test_clock_init(&a, 1700000000000);
    vg_test_clock_init(&b, 1700000000000);
    struct vg_ids *x = vg_ids_seeded(&a.base, 42), *y = vg_ids_seeded(&b.base, 42);
    for (int i = 0; i < 100; i++) {
        char s[37], t[37];
        vg_ids_new(x, s);
        vg_ids_new(y, t);
        ASSERT_STREQ(s, t);
    }
    ASSERT_EQ(vg_ids_random_u64(x), vg_ids_random_u64(y));
    vg_ids_free(x);
    vg_ids_free(y);
}

int main(void)
{
    RUN(test_clock_moves_only_when_told);
    RUN(time_format_and_parse_round_trip);
    RUN(time_format_matches_gmtime_everywhere);
    RUN(uuidv7_is_valid_and_increasing);
    RUN(a_forked_child_does_not_repeat_its_parent_ids);
    RUN(seeded_ids_repeat);
    return 0;
}
