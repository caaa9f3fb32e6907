/*
 * fault_store.c: a store adapter for tests that wraps another and fails the Nth port call with a
 * chosen code, the way SQLite's test VFS shims fail the Nth I/O. The torture tests run the
 * conformance suite failing call 1, 2, 3, ... in turn and check that every run ends in a clean
 * error with no partial record and a store that still opens.
 */
#include "base/common.h"

#include "helpers/fault_store.h"

struct fault_store {
    struct vg_store base; /* must stay first */
    struct vg_store *inner;
    long calls;       /* port calls seen since the last arm */
    long nth;         /* fail this call (1-based); 0: off */
    vigil_code code;  /* what the failing call returns */
    char watched[64]; /* a kind whose scans and gets are counted ("": none) */
    long scans;       /* scans of it since the last arm */
    long gets;        /* gets of it since the last arm */
};

static int trip(struct fault_store *f, vigil_error *err, const char *what, vigil_code *rc)
{
    f->calls++;
    if (f->nth > 0 && f->calls == f->nth) {
        *rc = VG_FAIL(err, f->code, "injected fault in store %s (call %ld)", what, f->calls);
        return 1;
    }
    return 0;
}

#define F ((struct fault_store *)s)
#define INNER (F->inner)
#define TRIP(what)                                                                                 \
    do {                                                                                           \
        vigil_code rc_;                                                                            \
        if (trip(F, err, what, &rc_))                                                              \
            return rc_;                                                                            \
    } while (0)

static vigil_code fault_open(struct vg_store *s, const char *uri, const struct vg_store_options *o,
                             vigil_error *err)
{
    return VG_FAIL(err, VIGIL_EUNSUPPORTED, "the fault store wraps an open store");
}

static void fault_close(struct vg_store *s)
{
    vg_store_close(INNER);
    INNER = NULL;
}

static vigil_code fault_begin(struct vg_store *s, int depth, vigil_error *err)
{
    TRIP("begin");
    return INNER->methods->begin(INNER, depth, err);
}

static vigil_code fault_commit(struct vg_store *s, int depth, vigil_error *err)
{
    vigil_code rc;
    if (trip(F, err, "commit", &rc)) {
        /* A failed commit leaves nothing behind, exactly as a real one must. */
        INNER->methods->rollback(INNER, depth, NULL);
        return rc;
    }
    return INNER->methods->commit(INNER, depth, err);
}

static vigil_code fault_rollback(struct vg_store *s, int depth, vigil_error *err)
{
    return INNER->methods->rollback(INNER, depth, err); /* never fails by injection */
}

static vigil_code fault_put(struct vg_store *s, const struct vg_record *r, unsigned flags,
                            int *inserted, vigil_error *err)
{
    TRIP("put");
    return INNER->methods->put(INNER, r, flags, inserted, err);
}

static vigil_code fault_update(struct vg_store *s, const struct vg_record *r, int64_t rev,
                               vigil_error *err)
{
    TRIP("update");
    return INNER->methods->update(INNER, r, rev, err);
}

static vigil_code fault_get(struct vg_store *s, const char *kind, const char *id, vg_record_cb cb,
                            void *user, vigil_error *err)
{
    TRIP("get");
    F->gets += F->watched[0] && kind && !strcmp(kind, F->watched);
    return INNER->methods->get(INNER, kind, id, cb, user, err);
}

static vigil_code fault_scan(struct vg_store *s, const struct vg_query *q, vg_record_cb cb,
                             void *user, vigil_error *err)
{
    TRIP("scan");
    F->scans += F->watched[0] && q->kind && !strcmp(q->kind, F->watched);
    return INNER->methods->scan(INNER, q, cb, user, err);
}

static vigil_code fault_count(struct vg_store *s, const struct vg_query *q, int64_t *out,
                              vigil_error *err)
{
    TRIP("count");
    return INNER->methods->count(INNER, q, out, err);
}

static vigil_code fault_remove(struct vg_store *s, const char *kind, const char *id,
                               vigil_error *err)
{
    TRIP("remove");
    return INNER->methods->remove(INNER, kind, id, err);
}

static vigil_code fault_remove_owner(struct vg_store *s, const char *owner, int64_t *removed,
                                     vigil_error *err)
{
    TRIP("remove_owner");
    return INNER->methods->remove_owner(INNER, owner, removed, err);
}

static vigil_code fault_control(struct vg_store *s, int op, void *arg, vigil_error *err)
{
    /* Of the rare extras only the durability switch counts: it changes how commits end. */
    if (op == VG_STORE_CTRL_DURABLE_COMMITS)
        TRIP("control");
    return INNER->methods->control(INNER, op, arg, err);
}

static vigil_code fault_text_index(struct vg_store *s, const char *kind, const char *id,
                                   const char *owner, const char *text, vigil_error *err)
{
    TRIP("text_index");
    return vg_store_text_index(INNER, kind, id, owner, text, err);
}

static vigil_code fault_text_search(struct vg_store *s, const char *kind, const char *owner,
                                    const char *const *terms, size_t n_terms, int limit,
                                    vg_text_hit_cb cb, void *user, vigil_error *err)
{
    TRIP("text_search");
    return vg_store_text_search(INNER, kind, owner, terms, n_terms, limit, cb, user, err);
}

static const struct vg_store_methods fault_methods = {
    .version = 2,
    .name = "fault",
    .caps = 0,
    .open = fault_open,
    .close = fault_close,
    .begin = fault_begin,
    .commit = fault_commit,
    .rollback = fault_rollback,
    .put = fault_put,
    .update = fault_update,
    .get = fault_get,
    .scan = fault_scan,
    .count = fault_count,
    .remove = fault_remove,
    .remove_owner = fault_remove_owner,
    .control = fault_control,
    .text_index = fault_text_index,
    .text_search = fault_text_search,
};

vigil_code vg_store_fault_wrap(struct vg_store *inner, struct vg_store **out, vigil_error *err)
{
    struct fault_store *f = vg_calloc(1, sizeof *f);
    if (!f) {
        vg_store_close(inner);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory wrapping a store");
    }
    f->base.methods = &fault_methods;
    f->inner = inner;
    *out = &f->base;
    return VIGIL_OK;
}

void vg_store_fault_arm(struct vg_store *s, long nth, vigil_code code)
{
    F->calls = 0;
    F->scans = 0;
    F->gets = 0;
    F->nth = nth;
    F->code = code;
}

long vg_store_fault_calls(struct vg_store *s)
{
    return F->calls;
}

void vg_store_fault_watch(struct vg_store *s, const char *kind)
{
    snprintf(F->watched, sizeof F->watched, "%s", kind ? kind : "");
    F->scans = 0;
    F->gets = 0;
}

long vg_store_fault_scans(struct vg_store *s)
{
    return F->scans;
}

long vg_store_fault_gets(struct vg_store *s)
{
    return F->gets;
}
