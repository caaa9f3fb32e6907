/* lua_child.h: the Lua program's side of an execution, run in the confined child. */
#ifndef VG_SANDBOX_LUA_CHILD_H
#define VG_SANDBOX_LUA_CHILD_H

#include "base/common.h"

struct vg_lua_child {
    const char *code;
    size_t code_len;
    size_t memory_bytes;
};

/* vg_sandbox_main_fn: run the program, send its result or error on the bridge, return 0. */
int vg_lua_child_main(void *user);

/* Run the interpreter once in the host (a state with the safe library, a tiny program, its
 * JSON): the lazy symbol bindings it resolves are inherited by every child, which would
 * otherwise resolve them again after each fork. */
void vg_lua_child_warm(void);

#endif
