/*
 * test_proc.c: process identity for lease holders (src/os/proc.h). This process's identity is
 * read once a thread and kept; a forked child names itself, not its parent: its pid and a
 * start that says it runs while it runs and is gone once it has exited.
 */
#include "helpers/test.h"

#include "os/proc.h"

#include <sys/wait.h>
#include <unistd.h>

TEST(this_process_is_not_gone_and_reads_the_same_twice)
{
    struct vg_proc_id a, b;
    vg_proc_self(&a);
    vg_proc_self(&b);
    ASSERT_EQ(a.pid, (long)getpid());
    ASSERT_STREQ(a.host, b.host);
    ASSERT_STREQ(a.start, b.start);
    ASSERT_EQ(vg_proc_gone(a.host, a.pid, a.start), 0);
}

TEST(a_forked_child_names_itself)
{
    struct vg_proc_id parent, child;
    int to_child[2], from_child[2];
    vg_proc_self(&parent); /* kept for this thread before the fork */
    ASSERT(pipe(to_child) == 0 && pipe(from_child) == 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        char go;
        struct vg_proc_id me;
        vg_proc_self(&me);
        ssize_t w = write(from_child[1], &me, sizeof me);
        ssize_t r = read(to_child[0], &go, 1); /* stay alive until the parent has checked */
        _exit(w == (ssize_t)sizeof me && r >= 0 ? 0 : 1);
    }
    ASSERT_EQ(read(from_child[0], &child, sizeof child), (ssize_t)sizeof child);
    ASSERT_EQ(child.pid, (long)pid);
    ASSERT_STREQ(child.host, parent.host);
    ASSERT(child.start[0] != '\0');
    ASSERT_EQ(vg_proc_gone(child.host, child.pid, child.start), 0);
    ASSERT_EQ(write(to_child[1], "x", 1), 1);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_EQ(vg_proc_gone(child.host, child.pid, child.start), 1);
    close(to_child[0]);
    close(to_child[1]);
    close(from_child[0]);
    close(from_child[1]);
}

int main(void)
{
    RUN(this_process_is_not_gone_and_reads_the_same_twice);
    RUN(a_forked_child_names_itself);
    return 0;
}
