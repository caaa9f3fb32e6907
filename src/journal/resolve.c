/*
 * resolve.c: what names a run in the history readers (`vigil runs show|messages|tools`,
 * `vigil replay`): its run id, its run key (which `vigil wakes` and `runs show` print), or a
 * unique start of its run key of 8 characters or more, as `runs cancel|rerun|resume` take one
 * (src/orch/runctl.c). A run key names the newest run under it: a crashed run and the retry
 * that finished it share their key.
 */
#include "base/common.h"

#include "base/json.h"
#include "journal/journal_int.h"
#include "os/ids.h"
#include "store/store.h"

#define PREFIX_MIN 8
#define KEY_MAX 200

struct key_match {
    char needle[KEY_MAX + 16]; /* "run_key":"<start>, as the canonical writer writes it */
    char key[KEY_MAX + 1];     /* the first matching run's key */
    char run_id[37];           /* and its id: the newest run of that key (scan is newest first) */
    int other_key;             /* a run with a different key matched too */
};

static int key_match_cb(void *user, const struct vg_record *r)
{
    struct key_match *m = user;
    if (!strstr(r->body, m->needle))
        return 0;
    json_error_t je;
    json_t *b = vg_jload(r->body, strlen(r->body), 0, &je);
    const char *key = vg_jstr(b, "run_key");
    if (key && !m->key[0]) {
        snprintf(m->key, sizeof m->key, "%s", key);
        snprintf(m->run_id, sizeof m->run_id, "%s", r->id);
    } else if (key && strcmp(key, m->key)) {
        m->other_key = 1;
    }
    json_decref(b);
    return m->other_key;
}

static int found_cb(void *user, const struct vg_record *r)
{
    (void)r;
    *(int *)user = 1;
    return 0;
}

static int run_exists(struct vg_store *store, const char *id)
{
    int found = 0;
    return vg_id_valid(id) &&
           vg_store_get(store, RUN_KIND, id, found_cb, &found, NULL) == VIGIL_OK && found;
}

vigil_code vg_journal_run_resolve(struct vg_store *store, const char *run, char out_id[37],
                                  vigil_error *err)
{
    vg_alloc_install_json();
    if (!run || !*run)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no run given: give its run id or run key");
    if (run_exists(store, run)) {
        snprintf(out_id, 37, "%s", run);
        return VIGIL_OK;
    }
    struct key_match m = {0};
    vigil_code rc = VIGIL_OK;
    if (strlen(run) >= PREFIX_MIN && strlen(run) <= KEY_MAX && !strchr(run, '"') &&
        !strchr(run, '\\')) {
        snprintf(m.needle, sizeof m.needle, "\"run_key\":\"%s", run);
        struct vg_query q = {.kind = RUN_KIND, .descending = 1};
        rc = vg_store_scan(store, &q, key_match_cb, &m, err);
    }
    if (rc)
        return rc;
    if (m.other_key)
        return VG_FAIL(err, VIGIL_EINVAL,
                       "\"%s\" is the start of more than one run key: give more of it", run);
    if (!m.key[0])
        return VG_FAIL(err, VIGIL_ENOTFOUND,
                       "run \"%s\" not found (neither a run id, nor a run key, nor the start of "
                       "one)",
                       run);
    snprintf(out_id, 37, "%s", m.run_id);
    return VIGIL_OK;
}
