/*
 * test_durability_switch.c: a switch of commit durability that fails (vg_store_durable_commits:
 * a fiber resuming puts its own durability back, src/os/fiber.h's context restore) must not
 * leave the store committing the other way. The store tries the switch again before the next
 * transaction or write outside one, and that fails while the switch still cannot be made: no
 * commit ends with a durability its caller did not ask for.
 */
#include "helpers/test.h"

#include "helpers/fault_store.h"
#include "store/store.h"

static vigil_code put(struct vg_store *s, const char *id, vigil_error *err)
{
    struct vg_record r = {.kind = "note", .id = id, .owner = "a", .seq = 1, .body = "{}"};
    return vg_store_put(s, &r, 0, NULL, err);
}

TEST(a_failed_durability_switch_is_made_before_the_next_commit_or_fails_it)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/d.db", vg_test_tmpdir("durability_switch"));
    struct vg_store *inner = vg_test_store_open(path, 2000), *s = NULL;
    ASSERT(inner);
    ASSERT_OK(vg_store_fault_wrap(inner, &s, E));
    ASSERT_OK(vg_store_durable_commits(s, 0, E)); /* group commit */

    /* Back to durable: the switch fails, and so does everything until it is made. */
    vg_store_fault_arm(s, 1, VIGIL_EIO);
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EIO, vg_store_durable_commits(s, 1, &err));
    ASSERT(vg_store_durable(s)); /* what was asked */
    vg_store_fault_arm(s, 1, VIGIL_EIO);
    ASSERT_CODE(VIGIL_EIO, vg_store_begin(s, &err)); /* the switch again: fails again */
    ASSERT(!vg_store_in_tx(s));
    vg_store_fault_arm(s, 1, VIGIL_EIO);
    ASSERT_CODE(VIGIL_EIO, put(s, "lone", &err));
    ASSERT_EQ(vg_test_store_count(s, "note"), 0);

    /* Once it can be made, it is, once. */
    vg_store_fault_arm(s, 0, VIGIL_OK);
    ASSERT_OK(vg_store_begin(s, E));
    long calls = vg_store_fault_calls(s);
    ASSERT_OK(put(s, "a", E));
    ASSERT_OK(vg_store_commit(s, E));
    ASSERT_OK(put(s, "b", E));
    ASSERT_EQ(vg_store_fault_calls(s), calls + 3); /* put, commit, put: no switch again */
    ASSERT_EQ(vg_test_store_count(s, "note"), 2);
    vg_store_close(s);
}

int main(void)
{
    RUN(a_failed_durability_switch_is_made_before_the_next_commit_or_fails_it);
    return 0;
}
