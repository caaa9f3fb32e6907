/*
 * export.c: journals as newline-delimited JSON files, one file per owner at
 * <folder>/agent-journals/<encoded owner id>.interaction.jsonl, one line per record, runs oldest
 * first and each run's records in sequence order. Import is clean-slate: every line is parsed,
 * validated and folded per run before anything is written, so one bad line refuses the whole
 * file with its line number. Writing is one transaction and skips records already stored, so
 * importing twice adds nothing.
 */
#include "base/common.h"

#include "base/buf.h"
#include "journal/journal_int.h"
#include "os/clock.h"
#include "os/fs.h"
#include "store/store.h"

#define IMPORT_MAX ((size_t)1 << 30)

/* Encode an id into a file name: [A-Za-z0-9_-] stay, every other byte becomes %XX, so no id
 * can name "..", a slash or a hidden file. */
static int encode_name(const char *id, char *out, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || *p == '_' || *p == '-';
        if (o + (plain ? 1 : 3) >= n)
            return -1;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return 0;
}

vigil_code vg_journal_path(const char *folder, const char *owner_id, char *out, size_t n,
                           vigil_error *err)
{
    char enc[640];
    if (folder && !*folder)
        return VG_FAIL(err, VIGIL_EINVAL, "journal export needs a folder");
    if (!owner_id || !*owner_id || strlen(owner_id) > 200 ||
        encode_name(owner_id, enc, sizeof enc) != 0)
        return VG_FAIL(err, VIGIL_EINVAL, "journal owner id must be 1..200 bytes");
    int w = snprintf(out, n, "%s%sagent-journals/%s.interaction.jsonl", folder ? folder : "",
                     folder ? "/" : "", enc);
    if (w < 0 || (size_t)w >= n)
        return VG_FAIL(err, VIGIL_ETOOBIG, "journal path is too long");
    return VIGIL_OK;
}

/* ---- export -------------------------------------------------------------------------------- */

static int run_ids_cb(void *user, const struct vg_record *r)
{
    return json_array_append_new(user, json_string(r->id)) ? 1 : 0;
}

struct line_ctx {
    struct vg_store *store;
    struct vg_buf *buf;
    int64_t lines;
    vigil_code rc; /* following a stored output's name (output_ref.c) */
    vigil_error err;
};

static int line_cb(void *user, const struct vg_record *r)
{
    struct line_ctx *c = user;
    char *full = NULL;
    if ((c->rc = vg_journal_follow_text(c->store, r->body, &full, &c->err)))
        return 1;
    vg_buf_puts(c->buf, full ? full : r->body);
    vg_buf_putc(c->buf, '\n');
    vg_free(full);
    c->lines++;
    return c->buf->fail != VIGIL_OK;
}

vigil_code vg_journal_export(struct vg_store *store, const char *folder, const char *agent_id,
                             int64_t *out_records, vigil_error *err)
{
    char path[4400], dir[4400];
    struct vg_buf buf;
    json_t *runs = NULL;
    vigil_code rc;
    vg_alloc_install_json();
    if (!folder)
        return VG_FAIL(err, VIGIL_EINVAL, "journal export needs a folder");
    if ((rc = vg_journal_path(folder, agent_id, path, sizeof path, err)))
        return rc;
    vg_buf_init(&buf, IMPORT_MAX);
    struct line_ctx c = {.store = store, .buf = &buf};
    runs = json_array();
    if (!runs)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory exporting a journal");
    /* Oldest run first, then each run's records in sequence order. */
    struct vg_query rq = {.kind = RUN_KIND, .owner = agent_id};
    if ((rc = vg_store_scan(store, &rq, run_ids_cb, runs, err)))
        goto out;
    size_t i;
    json_t *id;
    json_array_foreach (runs, i, id) {
        struct vg_query q = {.kind = JOURNAL_KIND, .owner = agent_id, .k1 = json_string_value(id)};
        if ((rc = vg_journal_scan(store, &q, line_cb, &c, err)))
            goto out;
        if ((rc = c.rc)) {
            if (err)
                *err = c.err;
            goto out;
        }
        if ((rc = vg_buf_finish(&buf, err)))
            goto out;
    }
    vg_fs_dirname(path, dir, sizeof dir);
    if ((rc = vg_fs_mkdir_p(dir, err)) || (rc = vg_fs_write_file(path, buf.data, buf.len, err)))
        goto out;
    if (out_records)
        *out_records = c.lines;
out:
    json_decref(runs);
    vg_buf_release(&buf);
    return rc;
}

/* ---- import -------------------------------------------------------------------------------- */

/* Parse, validate and fold every line; on success *out is an array of the records. */
static vigil_code check_all(const char *data, size_t len, const char *expect_owner, json_t **out,
                            vigil_error *err)
{
    json_t *records = json_array(), *runs = json_object(), *ids = json_object();
    const char *owner = expect_owner;
    vigil_code rc = VIGIL_OK;
    size_t line = 0, pos = 0;
    if (!records || !runs || !ids) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory checking a journal file");
        goto out;
    }
    while (pos < len) {
        const char *start = data + pos;
        const char *nl = memchr(start, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - start) : len - pos;
        pos += n + (nl ? 1 : 0);
        line++;
        if (n == 0) {
            rc = VG_FAIL(err, VIGIL_EPARSE, "line %zu: empty line", line);
            goto out;
        }
        if (n > JOURNAL_MAX_LINE) {
            rc = VG_FAIL(err, VIGIL_ETOOBIG, "line %zu: record larger than %zu bytes", line,
                         JOURNAL_MAX_LINE);
            goto out;
        }
        json_error_t je;
        json_t *rec = vg_jload(start, n, JSON_REJECT_DUPLICATES, &je);
        if (!rec) {
            rc = vg_json_oom(&je)
                     ? VG_FAIL(err, VIGIL_ENOMEM, "line %zu: out of memory", line)
                     : VG_FAIL(err, VIGIL_EPARSE, "line %zu: not JSON: %s", line, je.text);
            goto out;
        }
        if (json_array_append_new(records, rec)) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory checking a journal file");
            goto out;
        }
        char why[256] = "";
        vigil_error sub = {0};
        rc = vg_journal_validate(rec, &sub);
        if (rc == VIGIL_OK && owner && strcmp(owner, vg_jstr(rec, "owner_id")) != 0)
            rc = VG_FAIL(&sub, VIGIL_EINVAL, "owner \"%.60s\" differs from the file's \"%.60s\"",
                         vg_jstr(rec, "owner_id"), owner);
        if (rc == VIGIL_OK && json_object_get(ids, vg_jstr(rec, "record_id")))
            rc = VG_FAIL(&sub, VIGIL_EINVAL, "record id \"%s\" appears twice",
                         vg_jstr(rec, "record_id"));
        if (rc == VIGIL_OK && json_object_set_new(ids, vg_jstr(rec, "record_id"), json_true()))
            rc = VG_FAIL(&sub, VIGIL_ENOMEM, "out of memory");
        if (rc == VIGIL_OK) {
            /* Fold per run: header first, sequences rising, one run and owner per journal. */
            const char *run = vg_jstr(rec, "run_id");
            json_t *proj = json_object_get(runs, run);
            if (!proj) {
                if (strcmp(vg_jstr(rec, "type"), "journal.header") != 0)
                    rc = VG_FAIL(&sub, VIGIL_EINVAL,
                                 "run \"%s\" does not start with journal.header", run);
                else if (!(proj = vg_journal_proj_new()) || json_object_set_new(runs, run, proj))
                    rc = VG_FAIL(&sub, VIGIL_ENOMEM, "out of memory");
            }
            if (rc == VIGIL_OK) {
                struct fold f = {.proj = proj};
                rc = vg_journal_fold(&f, rec, &sub);
            }
        }
        if (!owner)
            owner = vg_jstr(rec, "owner_id");
        if (rc) {
            snprintf(why, sizeof why, "%s", sub.message);
            rc = VG_FAIL(err, rc, "line %zu: %s", line, why);
            goto out;
        }
    }
    *out = records;
    records = NULL;
out:
    json_decref(records);
    json_decref(runs);
    json_decref(ids);
    return rc;
}

vigil_code vg_journal_import_check(const char *data, size_t len, const char *expect_owner,
                                   vigil_error *err)
{
    json_t *records = NULL;
    vg_alloc_install_json();
    vigil_code rc = check_all(data, len, expect_owner, &records, err);
    json_decref(records);
    return rc;
}

struct same_ctx {
    struct vg_store *store;
    const char *want;
    int same;
};

static int same_cb(void *user, const struct vg_record *r)
{
    struct same_ctx *c = user;
    char *full = NULL;
    /* a record that cannot be read back in full is not the same */
    if (vg_journal_follow_text(c->store, r->body, &full, NULL) == VIGIL_OK)
        c->same = strcmp(c->want, full ? full : r->body) == 0;
    vg_free(full);
    return 0;
}

vigil_code vg_journal_import_text(struct vg_store *store, const char *data, size_t len,
                                  const char *expect_owner, int64_t *out_added, vigil_error *err)
{
    json_t *records = NULL, *runs = NULL;
    int64_t added = 0;
    vg_alloc_install_json();
    vigil_code rc = check_all(data, len, expect_owner, &records, err);
    if (rc)
        return rc;
    runs = json_object();
    if (!runs) {
        json_decref(records);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory importing a journal");
    }
    if ((rc = vg_store_begin(store, err)))
        goto out;
    size_t i;
    json_t *rec;
    json_array_foreach (records, i, rec) {
        char *text = vg_journal_canonical(rec);
        int64_t at = 0;
        vg_time_parse_ms(vg_jstr(rec, "occurred_at"), &at);
        if (!text) {
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory importing a journal");
            break;
        }
        struct vg_record r = {.kind = JOURNAL_KIND,
                              .id = vg_jstr(rec, "record_id"),
                              .owner = vg_jstr(rec, "owner_id"),
                              .k1 = vg_jstr(rec, "run_id"),
                              .k2 = vg_journal_class(rec),
                              .seq = vg_jint(rec, "sequence"),
                              .at = at,
                              .body = text};
        int inserted = 0;
        char *kept = NULL; /* a tool call's end kept in its result message (ends.c) */
        rc = vg_journal_end_find(store, r.id, r.k1, &kept, err);
        if (rc == VIGIL_OK && kept) {
            struct same_ctx c = {.store = store, .want = text};
            same_cb(&c, &(struct vg_record){.body = kept});
            if (!c.same)
                rc = VG_FAIL(err, VIGIL_EEXISTS,
                             "line %zu: record \"%s\" is already stored with other content", i + 1,
                             r.id);
        } else if (rc == VIGIL_OK) {
            rc = vg_store_put(store, &r, VG_PUT_IF_ABSENT, &inserted, err);
        }
        vg_free(kept);
        if (rc == VIGIL_OK && !inserted && !kept) {
            struct same_ctx c = {.store = store, .want = text};
            rc = vg_store_get(store, JOURNAL_KIND, r.id, same_cb, &c, err);
            if (rc == VIGIL_OK && !c.same)
                rc = VG_FAIL(err, VIGIL_EEXISTS,
                             "line %zu: record \"%s\" is already stored with other content", i + 1,
                             r.id);
        }
        added += inserted;
        vg_free(text);
        if (rc == VIGIL_OK &&
            json_object_set_new(runs, vg_jstr(rec, "run_id"), json_string(r.owner)))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory importing a journal");
        if (rc)
            break;
    }
    /* Derived records (run, projection, keys, tool calls), checked by a full replay. */
    const char *run;
    json_t *v;
    json_object_foreach (runs, run, v) {
        if (rc)
            break;
        rc = vg_journal_rebuild_run(store, json_string_value(v), run, err);
    }
    rc = vg_store_end(store, rc, err);
    if (rc == VIGIL_OK && out_added)
        *out_added = added;
out:
    json_decref(records);
    json_decref(runs);
    return rc;
}

vigil_code vg_journal_import(struct vg_store *store, const char *folder, const char *agent_id,
                             int64_t *out_added, vigil_error *err)
{
    char path[4400];
    char *data = NULL;
    size_t len = 0;
    if (!folder)
        return VG_FAIL(err, VIGIL_EINVAL, "journal import needs a folder");
    vigil_code rc = vg_journal_path(folder, agent_id, path, sizeof path, err);
    if (rc || (rc = vg_fs_read_file(path, IMPORT_MAX, &data, &len, err)))
        return rc;
    rc = vg_journal_import_text(store, data, len, agent_id, out_added, err);
    vg_free(data);
    return rc;
}
