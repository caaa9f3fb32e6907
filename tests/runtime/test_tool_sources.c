/*
 * test_tool_sources.c: a runtime whose tools cannot be built (a declared command tool takes a
 * built-in tool's name) refuses every call the same way, again and again, and reads nothing it
 * freed: the declared sources' sets only borrow the providers of the executor that was thrown
 * away, so they are thrown away with it (under the sanitizers a second call read freed memory).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "helpers/rt.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

TEST(a_failed_build_of_the_tools_is_refused_again_and_again)
{
    char dir[4096], cfg[4200];
    const char *tmp = getenv("VIGIL_TEST_TMP");
    snprintf(dir, sizeof dir, "%s/tool-sources-%d", tmp ? tmp : "/tmp", (int)getpid());
    mkdir(dir, 0700);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    FILE *f = fopen(cfg, "w");
    ASSERT(f != NULL);
    /* "fmt" goes in first; "memory_search" is a built-in's name and fails the build after. */
    fputs("{\"command_tools\": {"
          "\"fmt\": {\"command\": [\"/bin/cat\"], \"description\": \"echo\"},"
          "\"memory_search\": {\"command\": [\"/bin/cat\"], \"description\": \"clash\"}}}",
          f);
    fclose(f);
    setenv("VIGIL_CONFIG", cfg, 1);
    struct test_rt t;
    test_rt_open(&t, "tool-sources");
    vigil_error err = {0};
    char *out = NULL;
    vigil_code first = vigil_tool_list_for_agent(t.rt, NULL, &out, &err);
    ASSERT(first != VIGIL_OK);
    for (int i = 0; i < 3; i++) {
        vigil_error again = {0};
        ASSERT_EQ(vigil_tool_list_for_agent(t.rt, NULL, &out, &again), first);
        ASSERT_STREQ(again.message, err.message);
    }
    test_rt_close(&t);
    unsetenv("VIGIL_CONFIG");
    remove(cfg);
    rmdir(dir);
}

int main(void)
{
    RUN(a_failed_build_of_the_tools_is_refused_again_and_again);
    return 0;
}
