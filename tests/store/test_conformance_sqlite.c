/*
 * test_conformance_sqlite.c: the store conformance suite against the SQLite adapter: a fresh
 * file per case, then the same through the fault-injecting wrapper with no fault armed (the
 * wrapper must be transparent).
 */
#include "helpers/test.h"

#include "conformance/store/conformance.h"
#include "helpers/fault_store.h"

struct sqlite_opener {
    const char *dir;
    int n;      /* fresh stores made so far */
    int faulty; /* wrap in the fault store */
};

static vigil_code open_sqlite(void *user, int fresh, struct vg_store **out, vigil_error *err)
{
    struct sqlite_opener *o = user;
    char path[4200];
    if (fresh)
        o->n++;
    snprintf(path, sizeof path, "%s/%s-%d.db", o->dir, o->faulty ? "fault" : "plain", o->n);
    struct vg_store_options opts = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    vigil_code rc = vg_store_open(path, &opts, &s, err);
    if (rc != VIGIL_OK || !o->faulty) {
        *out = s;
        return rc;
    }
    return vg_store_fault_wrap(s, out, err);
}

int main(void)
{
    struct sqlite_opener plain = {.dir = vg_test_tmpdir("conformance_sqlite")};
    struct vg_conf_opener op = {"sqlite", open_sqlite, &plain};
    vg_store_conformance(&op);

    struct sqlite_opener faulty = {.dir = plain.dir, .faulty = 1};
    struct vg_conf_opener fop = {"sqlite+fault(unarmed)", open_sqlite, &faulty};
    vg_store_conformance(&fop);
    return 0;
}
