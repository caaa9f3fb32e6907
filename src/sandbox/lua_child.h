/* lua_child.h: the Lua program's side of an execution, run in the confined child. */
#ifndef VG_SANDBOX_LUA_CHILD_H
#define VG_SANDBOX_LUA_CHILD_H

#include "base/common.h"

/* The child's whole input, flat (it crosses to the zygote as bytes): the code follows. */
struct vg_lua_child {
    size_t memory_bytes;
    size_t code_len;
    char code[];
};

/* vg_sandbox_main_fn on a struct vg_lua_child: run the program, send its result or error on
 * the bridge, return 0. */
int vg_lua_child_main(void *user);

/* Run the interpreter once in the host (a state with the safe library, a tiny program, its
 * JSON): the lazy symbol bindings it resolves are inherited by every child, which would
 * otherwise resolve them again after each fork. */
void vg_lua_child_warm(void);

/* In the spare, before its request: reserve the heap and make the interpreter with the safe
 * library and the bridge's table (warmed with a tiny program of its own), which its one
 * execution then uses. Nothing of any execution is in it. */
void vg_lua_child_prepare(void);

#endif
