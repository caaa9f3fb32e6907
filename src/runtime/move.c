/*
 * move.c: an agent taken to another store with its past (docs/storage.md, "Moving an agent to
 * another store"). `vigil journal export` writes three files into <folder>/agent-journals/:
 *   <id>.interaction.jsonl  its runs' journal records (src/journal/export.c);
 *   <id>.agent.jsonl        the agent's own records: identity and config, state, conversation
 *                           threads, reports, memory (blocks, vectors, events, pending changes)
 *                           and the operations of its tool calls, those made by hand included,
 *                           one store record a line with its body as a JSON string;
 *   <id>.sha256             the SHA-256 of the two, in sha256sum's format.
 * Import checks the sums first, then every line of both files, and writes everything in one
 * transaction: the agent's records under their own ids (those already stored are left as they
 * are), then the journal, whose runs are rebuilt from it. The sums catch a file changed or cut
 * in transit; they are not a signature (whoever can change a file can write its sum again).
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/hash.h"
#include "base/json.h"
#include "journal/journal.h"
#include "memory/reindex.h"
#include "os/fs.h"
#include "runtime/runtime_int.h"
#include "store/store.h"

#define MOVE_FILE_MAX ((size_t)1 << 30)
#define MOVE_PATH_MAX 4400
#define INTERACTION_SUFFIX ".interaction.jsonl"
#define AGENT_SUFFIX ".agent.jsonl"
#define SUMS_SUFFIX ".sha256"

/* The record kinds an agent takes along (owner = the agent). Not: its runtime state, lease and
 * wake queue (local to a store: made again idle), the runs' derived records (rebuilt from the
 * journal), the text index (made again from the blocks). */
static const char *const MOVED_KINDS[] = {
    "agent",        "agent_state",  "agent_change",      "message",        "message_payload",
    "report",       "link",         "tombstone",         "memory_block",   "memory_vector",
    "memory_event", "memory_meta",  "memory_embed_todo", "memory_pending", "operation",
    "loop_thread",  "budget_usage", "source_ref",
};

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static int64_t jint(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static int moved_kind(const char *kind)
{
    for (size_t i = 0; kind && i < VG_ARRAY_LEN(MOVED_KINDS); i++)
        if (!strcmp(kind, MOVED_KINDS[i]))
            return 1;
    return 0;
}

/* The export's three paths, from the journal's file name (its id encoded as the journal does). */
struct move_paths {
    char journal[MOVE_PATH_MAX], agent[MOVE_PATH_MAX], sums[MOVE_PATH_MAX];
    const char *journal_name, *agent_name; /* the files' names within the folder */
};

static vigil_code move_paths(const char *folder, const char *agent_id, struct move_paths *p,
                             vigil_error *err)
{
    vigil_code rc = vg_journal_path(folder, agent_id, p->journal, sizeof p->journal, err);
    if (rc)
        return rc;
    size_t stem = strlen(p->journal) - strlen(INTERACTION_SUFFIX);
    if (snprintf(p->agent, sizeof p->agent, "%.*s%s", (int)stem, p->journal, AGENT_SUFFIX) >=
            (int)sizeof p->agent ||
        snprintf(p->sums, sizeof p->sums, "%.*s%s", (int)stem, p->journal, SUMS_SUFFIX) >=
            (int)sizeof p->sums)
        return VG_FAIL(err, VIGIL_ETOOBIG, "journal path is too long");
    p->journal_name = strrchr(p->journal, '/') ? strrchr(p->journal, '/') + 1 : p->journal;
    p->agent_name = strrchr(p->agent, '/') ? strrchr(p->agent, '/') + 1 : p->agent;
    return VIGIL_OK;
}

/* ---- export -------------------------------------------------------------------------------- */

struct lines_ctx {
    struct vg_buf *buf;
    int64_t lines;
    int oom;
};

static int record_line_cb(void *user, const struct vg_record *r)
{
    struct lines_ctx *c = user;
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:s}", "kind", r->kind, "id", r->id,
                          "owner", r->owner, "k1", r->k1, "k2", r->k2, "seq", (json_int_t)r->seq,
                          "at", (json_int_t)r->at, "rev", (json_int_t)r->rev, "body", r->body);
    char *text = o ? vg_json_dump(o, 1) : NULL;
    json_decref(o);
    if (!text) {
        c->oom = 1;
        return 1;
    }
    vg_buf_puts(c->buf, text);
    vg_buf_putc(c->buf, '\n');
    vg_free(text);
    c->lines++;
    return c->buf->fail != VIGIL_OK;
}

/* The agent's own records as lines, kind by kind in MOVED_KINDS' order (the agent first). */
static vigil_code agent_lines(struct vg_store *s, const char *agent_id, struct vg_buf *buf,
                              int64_t *lines, vigil_error *err)
{
    struct lines_ctx c = {.buf = buf};
    for (size_t i = 0; i < VG_ARRAY_LEN(MOVED_KINDS); i++) {
        struct vg_query q = {.kind = MOVED_KINDS[i], .owner = agent_id};
        vigil_code rc = vg_store_scan(s, &q, record_line_cb, &c, err);
        if (rc == VIGIL_OK && c.oom)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory exporting an agent");
        if (rc == VIGIL_OK)
            rc = vg_buf_finish(buf, err);
        if (rc)
            return rc;
    }
    *lines = c.lines;
    return VIGIL_OK;
}

/* sha256sum's line for a file: "<hex>  <name>\n". */
static void put_sum(struct vg_buf *b, const char *data, size_t len, const char *name)
{
    char hex[VG_SHA256_HEX_LEN + 1];
    vg_sha256_hex(hex, data, len);
    vg_buf_printf(b, "%s  %s\n", hex, name);
}

vigil_code vg_runtime_move_export(vigil_runtime *rt, const char *agent_id, const char *folder,
                                  int64_t *out_count, vigil_error *err)
{
    struct move_paths p;
    struct vg_buf agent, sums;
    char *journal = NULL;
    size_t journal_len = 0;
    int64_t journal_lines = 0, agent_count = 0;
    vg_alloc_install_json();
    vigil_code rc = move_paths(folder, agent_id, &p, err);
    if (rc)
        return rc;
    vg_buf_init(&agent, MOVE_FILE_MAX);
    vg_buf_init(&sums, 4096);
    if ((rc = agent_lines(rt->env.store, agent_id, &agent, &agent_count, err)) ||
        (rc = vg_journal_export(rt->env.store, folder, agent_id, &journal_lines, err)) ||
        (rc = vg_fs_read_file(p.journal, MOVE_FILE_MAX, &journal, &journal_len, err)) ||
        (rc = vg_fs_write_file(p.agent, agent.data, agent.len, err)))
        goto out;
    put_sum(&sums, agent.data, agent.len, p.agent_name);
    put_sum(&sums, journal, journal_len, p.journal_name);
    if ((rc = vg_buf_finish(&sums, err)) ||
        (rc = vg_fs_write_file(p.sums, sums.data, sums.len, err)))
        goto out;
    if (out_count)
        *out_count = journal_lines + agent_count;
out:
    vg_free(journal);
    vg_buf_release(&agent);
    vg_buf_release(&sums);
    return rc;
}

/* ---- import: the files read and checked ---------------------------------------------------- */

struct move_files {
    char *journal, *agent; /* owned; agent NULL when the export has no such file */
    size_t journal_len, agent_len;
    int checked; /* the sums file was there and every file matched it */
};

static void move_files_release(struct move_files *f)
{
    vg_free(f->journal);
    vg_free(f->agent);
}

/* The sum the sums file gives for name, into hex: 0, or -1 when it names no such file. */
static int sum_of(const char *sums, const char *name, char hex[VG_SHA256_HEX_LEN + 1])
{
    size_t nlen = strlen(name);
    for (const char *l = sums; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l) : strlen(l);
        if (n == VG_SHA256_HEX_LEN + 2 + nlen && !memcmp(l + VG_SHA256_HEX_LEN, "  ", 2) &&
            !memcmp(l + VG_SHA256_HEX_LEN + 2, name, nlen)) {
            memcpy(hex, l, VG_SHA256_HEX_LEN);
            hex[VG_SHA256_HEX_LEN] = '\0';
            return 0;
        }
    }
    return -1;
}

/* A file the export holds checked against its line in the sums file. */
static vigil_code check_sum(const char *sums, const char *sums_path, const char *name,
                            const char *data, size_t len, vigil_error *err)
{
    const char *sums_name = strrchr(sums_path, '/') ? strrchr(sums_path, '/') + 1 : sums_path;
    char want[VG_SHA256_HEX_LEN + 1], got[VG_SHA256_HEX_LEN + 1];
    if (sum_of(sums, name, want))
        return VG_FAIL(err, VIGIL_ECORRUPT,
                       "the export's file \"%s\" has no checksum in %s: nothing was imported", name,
                       sums_name);
    vg_sha256_hex(got, data, len);
    if (strcmp(want, got) != 0)
        return VG_FAIL(err, VIGIL_ECORRUPT,
                       "the export's file \"%s\" does not match its checksum (%s): it was "
                       "changed after the export; nothing was imported",
                       name, sums_name);
    return VIGIL_OK;
}

static vigil_code read_files(const struct move_paths *p, struct move_files *f, vigil_error *err)
{
    char *sums = NULL;
    size_t sums_len = 0;
    const char *sums_name = strrchr(p->sums, '/') ? strrchr(p->sums, '/') + 1 : p->sums;
    vigil_code rc = vg_fs_read_file(p->journal, MOVE_FILE_MAX, &f->journal, &f->journal_len, err);
    if (rc == VIGIL_OK && vg_fs_exists(p->agent))
        rc = vg_fs_read_file(p->agent, MOVE_FILE_MAX, &f->agent, &f->agent_len, err);
    if (rc == VIGIL_OK && vg_fs_exists(p->sums))
        rc = vg_fs_read_file(p->sums, 1 << 16, &sums, &sums_len, err);
    if (rc == VIGIL_OK && sums) {
        rc = check_sum(sums, p->sums, p->journal_name, f->journal, f->journal_len, err);
        if (rc == VIGIL_OK && f->agent)
            rc = check_sum(sums, p->sums, p->agent_name, f->agent, f->agent_len, err);
        if (rc == VIGIL_OK && !f->agent && sum_of(sums, p->agent_name, (char[65]){0}) == 0)
            rc = VG_FAIL(err, VIGIL_ECORRUPT,
                         "the export's file \"%s\" is missing (%s lists it): nothing was imported",
                         p->agent_name, sums_name);
        f->checked = rc == VIGIL_OK;
    } else if (rc == VIGIL_OK && f->agent) {
        /* Both are written by the same export: an agent file without its sums lost them. */
        rc = VG_FAIL(err, VIGIL_ECORRUPT,
                     "the export's checksums (%s) are missing: nothing was imported", sums_name);
    }
    vg_free(sums);
    return rc;
}

/* Every line of the agent file parsed and checked before anything is written: a record of a
 * kind the agent takes along, owned by the agent, with a body that is JSON. *out: an array. */
static vigil_code check_agent_lines(const char *data, size_t len, const char *agent_id,
                                    json_t **out, vigil_error *err)
{
    json_t *recs = json_array();
    vigil_code rc = recs ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    size_t line = 0;
    for (size_t pos = 0; rc == VIGIL_OK && pos < len; line++) {
        const char *start = data + pos, *nl = memchr(start, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - start) : len - pos;
        pos += n + (nl ? 1 : 0);
        json_error_t je;
        json_t *r = json_loadb(start, n, JSON_REJECT_DUPLICATES, &je), *body = NULL;
        const char *kind = jstr(r, "kind"), *id = jstr(r, "id"), *text = jstr(r, "body");
        if (!r || !id || !*id || strlen(id) > 200 || !jstr(r, "k1") || !jstr(r, "k2") ||
            !json_is_integer(json_object_get(r, "seq")) ||
            !json_is_integer(json_object_get(r, "at")) || jint(r, "rev") < 1 || !text)
            rc = VG_FAIL(err, VIGIL_EPARSE, "%s line %zu: not a record", AGENT_SUFFIX, line + 1);
        else if (!moved_kind(kind))
            rc = VG_FAIL(err, VIGIL_EINVAL, "%s line %zu: an agent's export holds no \"%.40s\"",
                         AGENT_SUFFIX, line + 1, kind ? kind : "");
        else if (strcmp(jstr(r, "owner") ? jstr(r, "owner") : "", agent_id) != 0 ||
                 (!strcmp(kind, "agent") && strcmp(id, agent_id) != 0))
            rc = VG_FAIL(err, VIGIL_EINVAL, "%s line %zu: a record of another agent", AGENT_SUFFIX,
                         line + 1);
        else if (!(body = json_loads(text, 0, &je)))
            rc = VG_FAIL(err, VIGIL_EPARSE, "%s line %zu: its body is not JSON", AGENT_SUFFIX,
                         line + 1);
        json_decref(body);
        if (rc == VIGIL_OK && json_array_append(recs, r))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
        json_decref(r);
    }
    if (rc == VIGIL_OK)
        *out = recs;
    else
        json_decref(recs);
    return rc;
}

/* ---- import: the writes -------------------------------------------------------------------- */

/* An agent new to this store may not take the name of a live one here (a name names one live
 * agent: docs/cli.md). */
static vigil_code check_name_free(struct vg_env *env, const json_t *agent_rec, vigil_error *err)
{
    json_t *body = json_loads(jstr(agent_rec, "body"), 0, NULL);
    const char *name = jstr(body, "name"), *id = jstr(agent_rec, "id");
    char other[37] = "";
    vigil_code rc = name ? vg_agent_name_holder(env, name, id, other, err) : VIGIL_OK;
    if (rc == VIGIL_OK && other[0])
        rc = VG_FAIL(err, VIGIL_EEXISTS,
                     "an agent named \"%s\" already exists in this store (%s): rename or "
                     "destroy it before bringing the exported one (%s) here",
                     name, other, id);
    json_decref(body);
    return rc;
}

static int found_cb(void *user, const struct vg_record *r)
{
    (void)r;
    *(int *)user = 1;
    return 0;
}

/* An agent this store holds already takes nothing from the export's own records: each must be
 * here (a second import of one export, or of an older one, adds nothing). One that is not
 * means the agent went on in the other store after it came here; mixing the two would leave,
 * say, a thread head behind its messages, so the import is refused. */
static vigil_code check_held(struct vg_store *s, const json_t *rec, vigil_error *err)
{
    int found = 0;
    vigil_code rc = vg_store_get(s, jstr(rec, "kind"), jstr(rec, "id"), found_cb, &found, NULL);
    if (rc == VIGIL_ENOTFOUND)
        return VG_FAIL(err, VIGIL_EEXISTS,
                       "agent %s is here already, without records of the export (%s): destroy "
                       "and delete it here first to bring this export",
                       jstr(rec, "owner"), jstr(rec, "kind"));
    return rc ? vg_store_get(s, jstr(rec, "kind"), jstr(rec, "id"), found_cb, &found, err) : rc;
}

/* Put one record if absent; a new one gets the revision it had (it is rewritten until its
 * revision is the exported one), so a writer's next compare-and-swap and the agent's change
 * records, which count revisions, go on from where they were. */
static vigil_code put_record(struct vg_env *env, const json_t *rec, int *inserted, vigil_error *err)
{
    struct vg_record r = {.kind = jstr(rec, "kind"),
                          .id = jstr(rec, "id"),
                          .owner = jstr(rec, "owner"),
                          .k1 = jstr(rec, "k1"),
                          .k2 = jstr(rec, "k2"),
                          .seq = jint(rec, "seq"),
                          .at = jint(rec, "at"),
                          .body = jstr(rec, "body")};
    vigil_code rc = vg_store_put(env->store, &r, VG_PUT_IF_ABSENT, inserted, err);
    for (int64_t rev = 1; rc == VIGIL_OK && *inserted && rev < jint(rec, "rev"); rev++)
        rc = vg_store_update(env->store, &r, rev, err);
    if (rc == VIGIL_OK && *inserted && !strcmp(r.kind, "memory_block"))
        rc = vg_memory_index_block_body(env, r.id, r.owner, r.body, err);
    return rc;
}

/* The agent's records, inside the caller's transaction; *added counts those new here. */
static vigil_code put_agent_records(struct vg_env *env, const char *agent_id, const json_t *recs,
                                    int64_t *added, vigil_error *err)
{
    vigil_lifecycle lc;
    vigil_code rc = vg_agent_lifecycle(env, agent_id, &lc, NULL);
    int is_new = rc == VIGIL_ENOTFOUND;
    if (rc != VIGIL_OK && !is_new)
        return vg_agent_lifecycle(env, agent_id, &lc, err);
    size_t i;
    json_t *rec;
    json_array_foreach (recs, i, rec) {
        rc = VIGIL_OK;
        if (is_new && !strcmp(jstr(rec, "kind"), "agent") && !(rc = vg_agent_names_lock(env, err)))
            rc = check_name_free(env, rec, err);
        int inserted = 0;
        if (rc == VIGIL_OK)
            rc = is_new ? put_record(env, rec, &inserted, err) : check_held(env->store, rec, err);
        if (rc)
            return rc;
        *added += inserted;
    }
    return VIGIL_OK;
}

/* What the imported agent may run, from its config as stored now: its `tools` allowlist, its
 * command tools' commands and its MCP servers' commands or URLs ({"tools", "command_tools":
 * {name: command}, "mcp_servers": {name: command or url}}). The sums are not a signature, so
 * an export changed on the way may bring a program to run (trial H12): import says what. */
static vigil_code import_brings(struct vg_env *env, const char *agent_id, json_t **out,
                                vigil_error *err)
{
    json_t *agent = NULL, *decl;
    const char *name;
    vigil_code rc = vg_agent_get(env, agent_id, &agent, NULL, err);
    if (rc)
        return rc;
    json_t *config = json_object_get(agent, "config");
    json_t *tools = json_object_get(config, "tools");
    json_t *o = json_pack("{s:o, s:{}, s:{}}", "tools", tools ? json_incref(tools) : json_array(),
                          "command_tools", "mcp_servers");
    json_t *commands = json_object_get(o, "command_tools");
    json_t *servers = json_object_get(o, "mcp_servers");
    int failed = !o;
    json_object_foreach (o ? json_object_get(config, "command_tools") : NULL, name, decl) {
        json_t *how = json_object_get(decl, "command");
        failed |= json_object_set(commands, name, how ? how : json_null());
    }
    json_object_foreach (o ? json_object_get(config, "mcp_servers") : NULL, name, decl) {
        json_t *how = json_object_get(decl, "command");
        how = how ? how : json_object_get(decl, "url");
        failed |= json_object_set(servers, name, how ? how : json_null());
    }
    json_decref(agent);
    if (failed) {
        json_decref(o);
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    }
    *out = o;
    return VIGIL_OK;
}

vigil_code vg_runtime_move_import(vigil_runtime *rt, const char *agent_id, const char *folder,
                                  char **out_json, vigil_error *err)
{
    struct move_paths p;
    struct move_files f = {0};
    json_t *recs = NULL;
    int64_t journal_added = 0, agent_added = 0;
    struct vg_store *s = rt->env.store;
    vg_alloc_install_json();
    vigil_code rc = move_paths(folder, agent_id, &p, err);
    if (rc || (rc = read_files(&p, &f, err)))
        goto out;
    if (f.agent && (rc = check_agent_lines(f.agent, f.agent_len, agent_id, &recs, err)))
        goto out;
    /* The journal's lines are checked whole by its import before it writes (export.c). */
    if ((rc = vg_journal_import_check(f.journal, f.journal_len, agent_id, err)) ||
        (rc = vg_store_begin(s, err)))
        goto out;
    if (recs)
        rc = put_agent_records(&rt->env, agent_id, recs, &agent_added, err);
    if (rc == VIGIL_OK && recs && json_array_size(recs) > 0)
        rc = vg_agent_runtime_put_idle(&rt->env, agent_id, err);
    if (rc == VIGIL_OK)
        rc = vg_journal_import_text(s, f.journal, f.journal_len, agent_id, &journal_added, err);
    if ((rc = vg_store_end(s, rc, err)))
        goto out;
    json_t *brings = NULL;
    if (recs && (rc = import_brings(&rt->env, agent_id, &brings, err)))
        goto out;
    json_t *o =
        json_pack("{s:s,s:I,s:I,s:b,s:s,s:o?}", "agent_id", agent_id, "records",
                  (json_int_t)journal_added, "agent_records", (json_int_t)agent_added, "agent",
                  recs != NULL, "checksums", f.checked ? "verified" : "absent", "brings", brings);
    *out_json = o ? vg_json_dump(o, 0) : NULL;
    json_decref(o);
    if (!*out_json)
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
out:
    json_decref(recs);
    move_files_release(&f);
    return rc;
}
