/*
 * lua_child.c: the program's side, run in the confined child. A Lua 5.4 state with no ambient
 * authority: the base library without dofile, loadfile or bytecode (load reads text only),
 * string (no dump), table, math, utf8, coroutine, and os reduced to time, clock, date and
 * difftime; no io, package, require or debug. print writes to the output pipe (descriptor 2).
 * The `vigil` table is the only way out: its functions send JSON lines to the host on
 * descriptor 1 and read the answer on descriptor 0. The heap is capped by the allocator, so
 * running out of memory is a clean memory_limit, not a crash.
 */
#include "base/common.h"
#include "base/json.h"

#include "sandbox/lua_child.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <jansson.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * The Lua heap. The child is a copy of a large host: glibc's malloc would carve its blocks out
 * of the host's free chunks all over the inherited heap, and each page it writes there is
 * copied (a fault and a TLB flush each), which cost more than the rest of an execution. So the
 * interpreter gets an arena of fresh pages of its own: a reserved region of up to 8 MiB,
 * filled from the bottom in size classes (16-byte steps to 512, then powers of two), each class
 * with a free list. When the region is full, glibc's malloc takes over, under the same cap.
 */
#define HEAP_STEP 16
#define HEAP_SMALL 512
#define HEAP_CLASSES (HEAP_SMALL / HEAP_STEP + 64)
#define HEAP_POPULATE (96u * 1024) /* faulted in with one call: a small program's whole heap */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct heap {
    size_t used, cap; /* bytes held (arena blocks by class size) and the limit */
    char *base, *top, *end;
    void *free_list[HEAP_CLASSES];
};

static unsigned size_class(size_t n, size_t *class_size)
{
    if (n <= HEAP_SMALL) {
        unsigned c = (unsigned)((n + HEAP_STEP - 1) / HEAP_STEP);
        *class_size = (size_t)c * HEAP_STEP;
        return c - 1;
    }
    unsigned b = 10;
    while (((size_t)1 << b) < n)
        b++;
    *class_size = (size_t)1 << b;
    return HEAP_SMALL / HEAP_STEP + (b - 10);
}

static int in_arena(const struct heap *h, const void *p)
{
    return h->base && (const char *)p >= h->base && (const char *)p < h->end;
}

/* The size a block of osize bytes holds against the cap; *c its class when in the arena. */
static size_t held(const struct heap *h, const void *p, size_t osize, unsigned *c)
{
    size_t cs = osize;
    if (p && in_arena(h, p))
        *c = size_class(osize, &cs);
    return p ? cs : 0;
}

static void *arena_take(struct heap *h, unsigned c, size_t cs)
{
    void *p = h->free_list[c];
    if (p) {
        h->free_list[c] = *(void **)p;
        return p;
    }
    if (!h->base || (size_t)(h->end - h->top) < cs)
        return NULL;
    p = h->top;
    h->top += cs;
    return p;
}

static void block_free(struct heap *h, void *p, unsigned c)
{
    if (in_arena(h, p)) {
        *(void **)p = h->free_list[c];
        h->free_list[c] = p;
    } else {
        free(p);
    }
}

static void *capped_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct heap *h = ud;
    unsigned oc = 0, nc;
    size_t ocs = held(h, ptr, osize, &oc), ncs;
    if (nsize == 0) {
        if (ptr)
            block_free(h, ptr, oc);
        h->used -= ocs;
        return NULL;
    }
    if (nsize > h->cap)
        return NULL;
    nc = size_class(nsize, &ncs);
    if (ptr && in_arena(h, ptr) && oc == nc)
        return ptr;
    void *p = h->used - ocs + ncs <= h->cap ? arena_take(h, nc, ncs) : NULL;
    if (!p && h->used - ocs + nsize <= h->cap && (p = malloc(nsize)))
        ncs = nsize;
    if (!p)
        return NULL;
    if (ptr) {
        memcpy(p, ptr, VG_MIN(osize, nsize));
        block_free(h, ptr, oc);
    }
    h->used = h->used - ocs + ncs;
    return p;
}

/* Reserve the arena (address space only, but its first pages, made at once). It is at most
 * VG_LUA_ARENA_MAX, which the address-space limit leaves room for (confine.c): a larger heap
 * goes on in glibc's malloc, still under the cap. */
static void heap_reserve(struct heap *h)
{
    size_t page = 4096, size = (VG_MIN(h->cap, (size_t)VG_LUA_ARENA_MAX) + page - 1) / page * page;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return; /* glibc's malloc alone, as before */
    madvise(p, VG_MIN(size, (size_t)HEAP_POPULATE), MADV_POPULATE_WRITE);
    h->base = h->top = p;
    h->end = h->base + size;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- JSON <-> Lua ------------------------------------------------------------------------- */

static const char null_key = 0; /* &null_key is vigil.null, JSON's null */

static json_t *to_json(lua_State *L, int idx, int depth);

static int is_array(lua_State *L, int idx, size_t *n)
{
    size_t count = 0;
    lua_Integer max = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1) {
            lua_pop(L, 1);
            return 0;
        }
        if (lua_tointeger(L, -1) > max)
            max = lua_tointeger(L, -1);
        count++;
    }
    *n = count;
    return count > 0 && (size_t)max == count;
}

static json_t *table_to_json(lua_State *L, int idx, int depth)
{
    size_t n = 0;
    if (is_array(L, idx, &n)) {
        json_t *a = json_array();
        for (size_t i = 1; a && i <= n; i++) {
            lua_rawgeti(L, idx, (lua_Integer)i);
            json_t *v = to_json(L, lua_gettop(L), depth + 1);
            lua_pop(L, 1);
            if (!v || json_array_append_new(a, v)) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    json_t *o = json_object();
    lua_pushnil(L);
    while (o && lua_next(L, idx)) { /* stack: key value */
        const char *k = NULL;
        char num[32];
        if (lua_type(L, -2) == LUA_TSTRING) {
            k = lua_tostring(L, -2);
        } else if (lua_isinteger(L, -2)) { /* never lua_tostring: it would change the key */
            snprintf(num, sizeof num, "%lld", (long long)lua_tointeger(L, -2));
            k = num;
        }
        json_t *v = k ? to_json(L, lua_gettop(L), depth + 1) : NULL;
        if (!v || json_object_set_new(o, k, v)) {
            json_decref(o);
            lua_pop(L, 2);
            return NULL;
        }
        lua_pop(L, 1);
    }
    return o;
}

static json_t *to_json(lua_State *L, int idx, int depth)
{
    if (depth > 64)
        return NULL;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        return json_null();
    case LUA_TBOOLEAN:
        return json_boolean(lua_toboolean(L, idx));
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            return json_integer((json_int_t)lua_tointeger(L, idx));
        return json_real(lua_tonumber(L, idx));
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        return json_stringn(s, n);
    }
    case LUA_TLIGHTUSERDATA:
        return lua_touserdata(L, idx) == &null_key ? json_null() : NULL;
    case LUA_TTABLE:
        return table_to_json(L, idx, depth);
    default:
        return NULL;
    }
}

static void push_json(lua_State *L, const json_t *v, int depth)
{
    luaL_checkstack(L, 4, "JSON too deep");
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        lua_createtable(L, 0, (int)json_object_size(v));
        json_object_foreach ((json_t *)v, k, x) {
            push_json(L, x, depth + 1);
            lua_setfield(L, -2, k);
        }
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *x;
        lua_createtable(L, (int)json_array_size(v), 0);
        json_array_foreach (v, i, x) {
            push_json(L, x, depth + 1);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        break;
    }
    case JSON_STRING:
        lua_pushlstring(L, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        lua_pushinteger(L, (lua_Integer)json_integer_value(v));
        break;
    case JSON_REAL:
        lua_pushnumber(L, json_real_value(v));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        lua_pushboolean(L, json_is_true(v));
        break;
    default:
        lua_pushlightuserdata(L, (void *)&null_key);
    }
}

static int l_json_encode(lua_State *L)
{
    luaL_checkany(L, 1);
    json_t *v = to_json(L, 1, 0);
    char *s = v ? vg_json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    if (!s)
        return luaL_error(L, "vigil.json_encode: the value cannot be JSON (a function, a "
                             "cycle, nesting over 64, or a key that is not a string)");
    lua_pushstring(L, s);
    free(s);
    return 1;
}

static int l_json_decode(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    json_error_t je;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY, &je);
    if (!v)
        return luaL_error(L, "vigil.json_decode: %s (line %d)", je.text, je.line);
    push_json(L, v, 0);
    json_decref(v);
    return 1;
}

/* ---- the bridge --------------------------------------------------------------------------- */

struct link {
    json_int_t next_id;
    char *in;
    size_t in_len, in_cap;
};

static struct link link_state;

/* Read one line from the host into link_state.in (NUL at its end). */
static char *read_line(size_t *len)
{
    struct link *k = &link_state;
    for (;;) {
        char *nl = k->in ? memchr(k->in, '\n', k->in_len) : NULL;
        if (nl) {
            *nl = 0;
            *len = (size_t)(nl - k->in);
            return k->in;
        }
        if (k->in_len + 65536 > k->in_cap) {
            char *b = realloc(k->in, k->in_cap + 65536 * 4);
            if (!b)
                return NULL;
            k->in = b;
            k->in_cap += 65536 * 4;
        }
        ssize_t n = read(0, k->in + k->in_len, k->in_cap - k->in_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NULL;
        k->in_len += (size_t)n;
    }
}

static void drop_line(size_t len)
{
    struct link *k = &link_state;
    memmove(k->in, k->in + len + 1, k->in_len - len - 1);
    k->in_len -= len + 1;
}

/* Raise the bridge's error as a table {code=, message=, op=}, catchable with pcall. */
static int raise_bridge(lua_State *L, const char *op, const char *code, const char *msg)
{
    lua_createtable(L, 0, 3);
    lua_pushstring(L, code);
    lua_setfield(L, -2, "code");
    lua_pushstring(L, msg);
    lua_setfield(L, -2, "message");
    lua_pushstring(L, op);
    lua_setfield(L, -2, "op");
    return lua_error(L);
}

/* Send req (stolen) and push the answer's value, or raise its error. */
static int bridge_call(lua_State *L, const char *op, json_t *req)
{
    json_int_t id = link_state.next_id++;
    json_object_set_new(req, "id", json_integer(id));
    json_object_set_new(req, "op", json_string(op));
    char *line = vg_json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!line)
        return luaL_error(L, "vigil.%s: the request cannot be JSON", op);
    size_t n = strlen(line);
    line[n] = '\n';
    int w = write_all(1, line, n + 1);
    free(line);
    size_t len = 0;
    char *ans = w ? NULL : read_line(&len);
    if (!ans)
        return raise_bridge(L, op, "bridge_closed", "the host closed the bridge");
    json_t *a = json_loadb(ans, len, 0, NULL);
    drop_line(len);
    json_t *e = json_object_get(a, "error");
    if (!json_is_object(a) || json_integer_value(json_object_get(a, "id")) != id) {
        json_decref(a);
        return raise_bridge(L, op, "bridge_error", "the host's answer was not understood");
    }
    if (e) {
        char code[32], msg[512];
        snprintf(code, sizeof code, "%s", json_string_value(json_object_get(e, "code")));
        snprintf(msg, sizeof msg, "%s", json_string_value(json_object_get(e, "message")));
        json_decref(a);
        return raise_bridge(L, op, code, msg);
    }
    push_json(L, json_object_get(a, "value"), 0);
    json_decref(a);
    return 1;
}

static int l_call(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    json_t *args = lua_isnoneornil(L, 2) ? json_object() : to_json(L, 2, 0);
    if (!json_is_object(args)) {
        json_decref(args);
        return luaL_error(L, "vigil.call: arguments must be a table with string keys");
    }
    return bridge_call(L, "tool", json_pack("{s:s, s:o}", "name", name, "args", args));
}

static int path_op(lua_State *L, const char *op)
{
    const char *path = luaL_optstring(L, 1, "");
    return bridge_call(L, op, json_pack("{s:s}", "path", path));
}

static int l_read(lua_State *L)
{
    return path_op(L, "read");
}

static int l_fetch(lua_State *L)
{
    const char *url = luaL_checkstring(L, 1);
    return bridge_call(L, "fetch", json_pack("{s:s}", "url", url));
}
static int l_list(lua_State *L)
{
    return path_op(L, "list");
}
static int l_remove(lua_State *L)
{
    return path_op(L, "remove");
}

static int write_op(lua_State *L, int append)
{
    const char *path = luaL_checkstring(L, 1);
    size_t n;
    const char *data = luaL_checklstring(L, 2, &n);
    json_t *d = json_stringn(data, n);
    if (!d)
        return luaL_error(L, "vigil.write: the data must be UTF-8 text");
    return bridge_call(L, "write",
                       json_pack("{s:s, s:o, s:b}", "path", path, "data", d, "append", append));
}

static int l_write(lua_State *L)
{
    return write_op(L, 0);
}
static int l_append(lua_State *L)
{
    return write_op(L, 1);
}

/* ---- the environment ---------------------------------------------------------------------- */

static int l_print(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1)
            luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_addchar(&b, '\n');
    luaL_pushresult(&b);
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    write_all(2, s, len);
    return 0;
}

/* load with text chunks only: bytecode could break the interpreter's own checks. */
static int l_load(lua_State *L)
{
    size_t n;
    const char *s = luaL_checklstring(L, 1, &n);
    const char *name = luaL_optstring(L, 2, "=(load)");
    int st = luaL_loadbufferx(L, s, n, name, "t");
    if (st == LUA_OK)
        return 1;
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
}

static void open_lib(lua_State *L, const char *name, lua_CFunction f)
{
    luaL_requiref(L, name, f, 1);
    lua_pop(L, 1);
}

static void drop_fields(lua_State *L, const char *table, const char *const *names)
{
    lua_getglobal(L, table);
    for (; *names; names++) {
        lua_pushnil(L);
        lua_setfield(L, -2, *names);
    }
    lua_pop(L, 1);
}

static const luaL_Reg vigil_fns[] = {{"call", l_call},
                                     {"read", l_read},
                                     {"write", l_write},
                                     {"append", l_append},
                                     {"list", l_list},
                                     {"remove", l_remove},
                                     {"fetch", l_fetch},
                                     {"json_encode", l_json_encode},
                                     {"json_decode", l_json_decode},
                                     {NULL, NULL}};

static void open_safe(lua_State *L)
{
    static const char *const base_drop[] = {"dofile", "loadfile", "require", NULL};
    static const char *const string_drop[] = {"dump", NULL};
    static const char *const os_drop[] = {"execute", "exit",    "getenv",    "remove",
                                          "rename",  "tmpname", "setlocale", NULL};
    open_lib(L, "_G", luaopen_base);
    open_lib(L, LUA_STRLIBNAME, luaopen_string);
    open_lib(L, LUA_TABLIBNAME, luaopen_table);
    open_lib(L, LUA_MATHLIBNAME, luaopen_math);
    open_lib(L, LUA_UTF8LIBNAME, luaopen_utf8);
    open_lib(L, LUA_COLIBNAME, luaopen_coroutine);
    open_lib(L, LUA_OSLIBNAME, luaopen_os);
    drop_fields(L, "_G", base_drop);
    drop_fields(L, "string", string_drop);
    drop_fields(L, "os", os_drop);
    lua_register(L, "print", l_print);
    lua_register(L, "load", l_load);
    luaL_newlib(L, vigil_fns);
    lua_pushlightuserdata(L, (void *)&null_key);
    lua_setfield(L, -2, "null");
    lua_setglobal(L, "vigil");
}

/* ---- running ------------------------------------------------------------------------------ */

static void send_final(json_t *msg)
{
    char *line = msg ? vg_json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    if (!line) { /* the value could not be JSON: say so in a form that always encodes */
        static const char fallback[] =
            "{\"op\":\"error\",\"code\":\"runtime_error\",\"message\":\"the program's return "
            "value cannot be JSON (a function, a cycle, or nesting over 64)\"}\n";
        write_all(1, fallback, sizeof fallback - 1);
        return;
    }
    size_t n = strlen(line);
    line[n] = '\n';
    write_all(1, line, n + 1);
    free(line);
}

static void send_error(const char *code, const char *msg)
{
    send_final(json_pack("{s:s, s:s, s:s}", "op", "error", "code", code, "message", msg));
}

/* The error object at the top of the stack: a bridge error table or a message. */
static void report_error(lua_State *L, int status)
{
    if (status == LUA_ERRMEM) {
        send_error("memory_limit", "the program used more memory than its limit");
        return;
    }
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "code");
        lua_getfield(L, -2, "message");
        lua_getfield(L, -3, "op");
        const char *code = lua_tostring(L, -3), *msg = lua_tostring(L, -2);
        const char *op = lua_tostring(L, -1);
        char text[512];
        snprintf(text, sizeof text, "vigil.%s: %s: %s", op ? op : "?", code ? code : "?",
                 msg ? msg : "");
        send_error(code && !strcmp(code, "tool_limit") ? "tool_limit" : "bridge_error", text);
        return;
    }
    const char *msg = lua_tostring(L, -1);
    send_error("runtime_error", msg ? msg : "the program raised an error that is not text");
}

/* Run a tiny program and encode its value as the result message is (send_final): the code and
 * the allocator's pages every execution uses first. Each page written or code page run first
 * after the request would be a fault there (50-100 us each on this VM: packing the message
 * was 0.3 ms of the request's path). */
static void warm_state(lua_State *L)
{
    if (luaL_loadbufferx(L, "return {1}", 10, "=warm", "t") == LUA_OK &&
        lua_pcall(L, 0, 1, 0) == LUA_OK) {
        json_t *v = to_json(L, lua_gettop(L), 0);
        json_t *msg = v ? json_pack("{s:s, s:o}", "op", "result", "value", v) : NULL;
        char *s = msg ? vg_json_dumps(msg, JSON_COMPACT) : NULL;
        free(s);
        json_decref(msg);
    }
    lua_settop(L, 0);
}

void vg_lua_child_warm(void)
{
    struct heap h = {.cap = 64u * 1024 * 1024};
    lua_State *L = lua_newstate(capped_alloc, &h);
    if (!L)
        return;
    open_safe(L);
    warm_state(L);
    lua_close(L);
}

/* The child's heap and interpreter: made by the spare before its request, or at it. */
static struct heap child_heap;
static lua_State *child_state;

void vg_lua_child_prepare(void)
{
    child_heap.cap = VG_LUA_ARENA_MAX;
    heap_reserve(&child_heap);
    child_state = lua_newstate(capped_alloc, &child_heap);
    if (!child_state)
        return;
    open_safe(child_state);
    warm_state(child_state);
}

/* The interpreter with this execution's heap cap: the prepared one unless it already holds
 * more than the cap. */
static lua_State *child_interpreter(size_t cap)
{
    if (child_state && child_heap.used > cap) {
        lua_close(child_state);
        child_state = NULL;
    }
    child_heap.cap = cap;
    if (child_state)
        return child_state;
    if (!child_heap.base)
        heap_reserve(&child_heap);
    child_state = lua_newstate(capped_alloc, &child_heap);
    if (child_state)
        open_safe(child_state);
    return child_state;
}

int vg_lua_child_main(void *user)
{
    const struct vg_lua_child *c = user;
    lua_State *L = child_interpreter(c->memory_bytes);
    if (!L) {
        send_error("memory_limit", "no memory for the interpreter");
        return 0;
    }
    int st = luaL_loadbufferx(L, c->code, c->code_len, "=code", "t");
    if (st != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        send_error(st == LUA_ERRMEM ? "memory_limit" : "syntax_error", m ? m : "syntax error");
        return 0;
    }
    int base = lua_gettop(L) - 1;
    st = lua_pcall(L, 0, LUA_MULTRET, 0);
    if (st != LUA_OK) {
        report_error(L, st);
        return 0;
    }
    int n = lua_gettop(L) - base;
    json_t *v = NULL;
    if (n == 1)
        v = to_json(L, base + 1, 0);
    else if (n == 0)
        v = json_null();
    else if ((v = json_array()))
        for (int i = 1; i <= n; i++)
            json_array_append_new(v, to_json(L, base + i, 0));
    send_final(v ? json_pack("{s:s, s:o}", "op", "result", "value", v) : NULL);
    return 0;
}
