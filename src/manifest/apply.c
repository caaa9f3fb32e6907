/*
 * apply.c: manifests onto agents. An agent is found by name; the manifest maps onto the agent
 * record (kind, mode, prompt, model, visibility) and its config, the object the executor, the
 * budgets and the runtime's limits already read (docs/tools.md), so a manifest-made agent is an
 * ordinary agent. Applying compares first and writes only what differs: a second apply of the
 * same file writes nothing. The sections `memory`, `timers` and `subscriptions` also have
 * effects: seeds become memory blocks (a label the agent already has is left as it is: it is
 * the agent's now), and the manifest owns the agent's timers and subscriptions once it names
 * them. A directory is applied in one transaction: all of it, or nothing.
 *
 * Sections: desired record; finding the agent; effects; one manifest; files and directories.
 */
#include "base/common.h"

#include "agent/agent.h"
#include "base/buf.h"
#include "base/json.h"
#include "manifest/manifest_int.h"
#include "memory/memory.h"
#include "os/fs.h"
#include "store/store.h"
#include "wake/wake.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

const char *const vg_manifest_config_keys[] = {"tools",        "require_approval",
                                               "capabilities", "allowed_scopes",
                                               "limits",       "budgets",
                                               "memory",       "subscriptions",
                                               "timers",       "command_tools",
                                               "mcp_servers",  "sandbox",
                                               "spawn",        "tags",
                                               "retention",    "reports",
                                               "extension",    NULL};

/* ---- desired record ------------------------------------------------------------------------ */

/* The agent record fields a manifest sets (owned): absent fields take the create defaults, so
 * removing a line from a manifest puts the default back. */
static json_t *desired_fields(const json_t *m)
{
    json_t *config = json_object();
    for (size_t i = 0; config && vg_manifest_config_keys[i]; i++) {
        json_t *v = json_object_get(m, vg_manifest_config_keys[i]);
        if (v && json_object_set(config, vg_manifest_config_keys[i], v)) {
            json_decref(config);
            return NULL;
        }
    }
    const char *kind = json_string_value(json_object_get(m, "kind"));
    const char *mode = json_string_value(json_object_get(m, "mode"));
    /* The old spellings public and private are external and internal (docs/manifests.md). */
    const char *vis = vg_agent_visibility_name(json_string_value(json_object_get(m, "visibility")));
    json_t *prompt = json_object_get(m, "prompt"), *model = json_object_get(m, "model");
    return json_pack("{s:O, s:s, s:s, s:O, s:O, s:s, s:o}", "name", json_object_get(m, "name"),
                     "kind", kind ? kind : "assistant", "mode", mode ? mode : "hybrid", "prompt",
                     prompt ? prompt : json_null(), "model", model ? model : json_null(),
                     "visibility", vis ? vis : "project", "config", config);
}

static int same(const json_t *a, const json_t *b)
{
    if ((!a || json_is_null(a)) && (!b || json_is_null(b)))
        return 1;
    return a && b && json_equal(a, b);
}

/* The sections whose effects reach beyond the agent record: what they change is what their
 * effects would write (plan_effects), not how the manifest's text differs from the last one. */
static int effect_key(const char *k)
{
    return !strcmp(k, "memory") || !strcmp(k, "timers") || !strcmp(k, "subscriptions");
}

/* Names of what differs between the stored agent and the desired fields (new array). */
static json_t *changes(const json_t *agent, const json_t *want)
{
    static const char *const top[] = {"kind", "mode", "prompt", "model", "visibility"};
    json_t *out = json_array(), *have = json_object_get(agent, "config");
    json_t *cfg = json_object_get(want, "config");
    const char *k;
    json_t *v;
    for (size_t i = 0; out && i < VG_ARRAY_LEN(top); i++)
        if (!same(json_object_get(agent, top[i]), json_object_get(want, top[i])))
            json_array_append_new(out, json_string(top[i]));
    json_object_foreach (cfg, k, v)
        if (!effect_key(k) && !same(json_object_get(have, k), v))
            json_array_append_new(out, json_string(k));
    json_object_foreach (have, k, v)
        if (!effect_key(k) && !json_object_get(cfg, k))
            json_array_append_new(out, json_string(k)); /* removed, or set outside the manifest */
    return out;
}

/* ---- finding the agent --------------------------------------------------------------------- */

static vigil_code by_name_one(void *user, json_t *a, vigil_error *err)
{
    json_t *by = user;
    const char *n = json_string_value(json_object_get(a, "name"));
    const char *lc = json_string_value(json_object_get(a, "lifecycle"));
    json_t *had = n ? json_object_get(by, n) : NULL;
    if (!n || (lc && !strcmp(lc, "destroyed")))
        return VIGIL_OK;
    if (!had)
        json_object_set(by, n, a);
    else if (json_is_array(had))
        json_array_append(had, json_object_get(a, "id"));
    else
        json_object_set_new(
            by, n, json_pack("[O, O]", json_object_get(had, "id"), json_object_get(a, "id")));
    (void)err;
    return VIGIL_OK;
}

/* Every live (not destroyed) agent by name, read once per apply: name -> the agent, or, for a
 * name two agents share, the JSON array of their ids (apply cannot tell which one is meant). */
static vigil_code agents_by_name(struct vg_env *env, json_t **out, vigil_error *err)
{
    json_t *by = json_object();
    if (!by)
        return VG_FAIL(err, VIGIL_ENOMEM, "out of memory reading agents");
    vigil_code rc = vg_agent_each(env, by_name_one, by, err);
    if (rc)
        json_decref(by);
    else
        *out = by;
    return rc;
}

/* The agent the manifest named `name` means (*agent borrowed, NULL: none yet). */
static vigil_code find_by_name(const json_t *by, const char *name, json_t **agent, vigil_error *err)
{
    json_t *a = json_object_get(by, name);
    *agent = NULL;
    if (json_is_array(a))
        return VG_FAIL(err, VIGIL_EINVAL,
                       "agents %s and %s are both named \"%s\": rename or "
                       "destroy one before applying",
                       json_string_value(json_array_get(a, 0)),
                       json_string_value(json_array_get(a, 1)), name);
    *agent = a;
    return VIGIL_OK;
}

/* ---- effects ------------------------------------------------------------------------------- */

static vigil_code seed_memory(struct vg_env *env, const char *id, const json_t *seeds,
                              vigil_error *err)
{
    struct vg_memory *m = NULL;
    json_t *s;
    size_t i;
    vigil_code rc = seeds ? vg_memory_new(env, NULL, &m, err) : VIGIL_OK;
    json_array_foreach (seeds, i, s) {
        if (rc)
            break;
        const char *tier = json_string_value(json_object_get(s, "tier"));
        const char *perm = json_string_value(json_object_get(s, "permission"));
        struct vg_memory_block_in in = {.agent_id = id,
                                        .tier = VG_TIER_CORE,
                                        .label = json_string_value(json_object_get(s, "label")),
                                        .content = json_string_value(json_object_get(s, "content")),
                                        .permission = VG_PERM_READ_WRITE,
                                        .pinned = json_is_true(json_object_get(s, "pinned"))};
        if (tier)
            vg_mem_tier_parse(tier, &in.tier);
        if (perm)
            vg_mem_perm_parse(perm, &in.permission);
        rc = vg_memory_create(m, &in, "manifest", err);
        if (rc == VIGIL_EEXISTS) /* a seed is a seed: the agent's block stays as it is */
            rc = VIGIL_OK;
    }
    vg_memory_free(m);
    return rc;
}

static const char *timer_key(const json_t *t, enum vg_timer_kind *kind)
{
    static const char *const keys[] = {"rrule", "cron", "at"}; /* enum vg_timer_kind order */
    for (size_t k = 0; k < VG_ARRAY_LEN(keys); k++)
        if (json_object_get(t, keys[k])) {
            *kind = (enum vg_timer_kind)k;
            return keys[k];
        }
    return NULL;
}

/* Is the stored timer (vg_timer_list item) one the manifest asks for? */
static int timer_wanted(const json_t *have, const json_t *timers)
{
    json_t *t;
    size_t i;
    json_array_foreach (timers, i, t) {
        enum vg_timer_kind kind;
        const char *key = timer_key(t, &kind), *tz = json_string_value(json_object_get(t, "tz"));
        const char *hkind = json_string_value(json_object_get(have, "kind"));
        const char *hspec = json_string_value(json_object_get(have, "spec"));
        const char *htz = json_string_value(json_object_get(have, "tz"));
        if (key && hkind && hspec && htz && !strcmp(hkind, vg_timer_kind_name(kind)) &&
            !strcmp(json_string_value(json_object_get(t, key)), hspec) &&
            !strcmp(tz ? tz : "UTC", htz))
            return 1;
    }
    return 0;
}

/* The manifest owns the agent's timers: drop the others, add the missing ones. dry: write
 * nothing; *writes (may be NULL) counts the timers removed and added (or that would be). */
static vigil_code sync_timers(struct vg_env *env, const char *id, const json_t *timers, int dry,
                              int *writes, vigil_error *err)
{
    json_t *have = NULL, *h, *t;
    size_t i;
    int n = 0;
    vigil_code rc = vg_timer_list(env, id, &have, err);
    json_array_foreach (have, i, h)
        if (!rc && !timer_wanted(h, timers) && ++n && !dry)
            rc = vg_timer_remove(env, json_string_value(json_object_get(h, "id")), err);
    json_array_foreach (timers, i, t) {
        enum vg_timer_kind kind;
        const char *key = timer_key(t, &kind);
        int present = 0;
        for (size_t j = 0; key && j < json_array_size(have); j++) {
            json_t *one = json_pack("[O]", t);
            present |= timer_wanted(json_array_get(have, j), one);
            json_decref(one);
        }
        if (!rc && key && !present && ++n && !dry)
            rc = vg_timer_add(env, id, kind, json_string_value(json_object_get(t, key)),
                              json_string_value(json_object_get(t, "tz")), NULL, err);
    }
    json_decref(have);
    if (writes)
        *writes = n;
    return rc;
}

static const char **strv(const json_t *a, size_t *n)
{
    *n = json_array_size(a);
    const char **v = vg_calloc(*n + 1, sizeof *v);
    for (size_t i = 0; v && i < *n; i++)
        v[i] = json_string_value(json_array_get(a, i));
    return v;
}

/* The manifest owns the agent's subscriptions: ids "manifest-<agent>-<n>", replaced in place;
 * every other subscription of the agent is dropped. */
static vigil_code sync_subscriptions(struct vg_env *env, const char *id, const json_t *subs,
                                     vigil_error *err)
{
    json_t *have = NULL, *h, *s;
    size_t i;
    char sid[201];
    vigil_code rc = vg_sub_list(env, id, &have, err);
    json_array_foreach (have, i, h) {
        const char *hid = json_string_value(json_object_get(h, "id"));
        int ours = 0;
        for (size_t j = 0; hid && j < json_array_size(subs); j++) {
            snprintf(sid, sizeof sid, "manifest-%s-%zu", id, j);
            ours |= !strcmp(hid, sid);
        }
        if (!rc && hid && !ours)
            rc = vg_sub_remove(env, hid, err);
    }
    json_array_foreach (subs, i, s) {
        size_t nt, nr, nw;
        const char **t = strv(json_object_get(s, "tokens"), &nt);
        const char **r = strv(json_object_get(s, "require"), &nr);
        const char **w = strv(json_object_get(s, "where"), &nw);
        snprintf(sid, sizeof sid, "manifest-%s-%zu", id, i);
        struct vg_sub_spec spec = {.id = sid,
                                   .agent_id = id,
                                   .tokens = t,
                                   .n_tokens = nt,
                                   .require = r,
                                   .n_require = nr,
                                   .where = w,
                                   .n_where = nw,
                                   .linked_to = json_string_value(json_object_get(s, "linked_to"))};
        if (!rc)
            rc = t && r && w ? vg_sub_add(env, &spec, NULL, err)
                             : VG_FAIL(err, VIGIL_ENOMEM, "out of memory adding a subscription");
        vg_free(t);
        vg_free(r);
        vg_free(w);
    }
    json_decref(have);
    return rc;
}

/* Would the manifest's subscriptions (each "manifest-<agent>-<n>") change the agent's? */
static vigil_code subs_differ(struct vg_env *env, const char *id, const json_t *subs, int *differ,
                              vigil_error *err)
{
    json_t *have = NULL, *s;
    size_t i;
    char sid[201];
    vigil_code rc = vg_manifest_subs_of(env, id, &have, err);
    *differ = !rc && json_array_size(have) != json_array_size(subs);
    json_array_foreach (subs, i, s) {
        json_t *want = vg_manifest_sub_normal(s), *h, *found = NULL;
        size_t j;
        snprintf(sid, sizeof sid, "manifest-%s-%zu", id, i);
        json_array_foreach (have, j, h)
            if (!strcmp(json_string_value(json_object_get(h, "id")), sid))
                found = h;
        if (!rc && !want)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying a manifest");
        if (found && want)
            json_object_set(want, "id", json_object_get(found, "id"));
        *differ |= !found || !want || !json_equal(want, found);
        json_decref(want);
    }
    json_decref(have);
    return rc;
}

/* Does the agent's block differ from the seed in what a seed says? */
static int seed_differs(const json_t *seed, const json_t *block)
{
    static const char *const keys[] = {"content", "tier", "permission"};
    static const char *const dflt[] = {"", "core", "read_write"};
    for (size_t i = 0; i < VG_ARRAY_LEN(keys); i++) {
        const char *want = json_string_value(json_object_get(seed, keys[i]));
        if (strcmp(want ? want : dflt[i], json_string_value(json_object_get(block, keys[i]))))
            return 1;
    }
    return json_is_true(json_object_get(seed, "pinned")) !=
           json_is_true(json_object_get(block, "pinned"));
}

/* Seeds with no block yet (*creates) and labels whose block differs from its seed (kept: the
 * block is the agent's memory, a seed never overwrites it). */
static vigil_code seeds_plan(struct vg_env *env, const char *id, const json_t *seeds, int *creates,
                             json_t *kept, vigil_error *err)
{
    json_t *blocks = NULL, *seed;
    size_t i;
    vigil_code rc = vg_manifest_blocks_of(env, id, seeds, &blocks, err);
    *creates = 0;
    json_array_foreach (seeds, i, seed) {
        json_t *b, *found = NULL;
        size_t j;
        json_array_foreach (blocks, j, b)
            if (json_equal(json_object_get(b, "label"), json_object_get(seed, "label")))
                found = b;
        *creates += !found;
        if (!rc && found && seed_differs(seed, found) &&
            json_array_append(kept, json_object_get(seed, "label")))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying a manifest");
    }
    json_decref(blocks);
    return rc;
}

/* The sections of an existing agent's manifest that would write something, appended to
 * changed; labels of seeds left unapplied go to kept. A section the manifest leaves out writes
 * nothing: the agent's timers, subscriptions and blocks stay as they are. */
static vigil_code plan_effects(struct vg_env *env, const char *id, const json_t *config,
                               json_t *changed, json_t *kept, vigil_error *err)
{
    json_t *seeds = json_object_get(config, "memory");
    json_t *timers = json_object_get(config, "timers");
    json_t *subs = json_object_get(config, "subscriptions");
    int creates = 0, writes = 0, differ = 0;
    vigil_code rc = seeds ? seeds_plan(env, id, seeds, &creates, kept, err) : VIGIL_OK;
    if (!rc && timers)
        rc = sync_timers(env, id, timers, 1, &writes, err);
    if (!rc && subs)
        rc = subs_differ(env, id, subs, &differ, err);
    if (!rc && ((creates && json_array_append_new(changed, json_string("memory"))) ||
                (writes && json_array_append_new(changed, json_string("timers"))) ||
                (differ && json_array_append_new(changed, json_string("subscriptions")))))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying a manifest");
    return rc;
}

/* A section the manifest leaves out is left alone, in the record too: its seeds still name the
 * blocks export prints. */
static vigil_code keep_unnamed(const json_t *agent, json_t *want, vigil_error *err)
{
    static const char *const keys[] = {"memory", "timers", "subscriptions"};
    json_t *have = json_object_get(agent, "config"), *cfg = json_object_get(want, "config");
    for (size_t i = 0; i < VG_ARRAY_LEN(keys); i++) {
        json_t *v = json_object_get(have, keys[i]);
        if (v && !json_object_get(cfg, keys[i]) && json_object_set(cfg, keys[i], v))
            return VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying a manifest");
    }
    return VIGIL_OK;
}

static vigil_code effects(struct vg_env *env, const char *id, const json_t *config,
                          const json_t *changed, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    size_t i;
    json_t *c;
    json_array_foreach (changed, i, c) {
        const char *k = json_string_value(c);
        json_t *v = json_object_get(config, k);
        if (rc || !v)
            continue;
        if (!strcmp(k, "memory"))
            rc = seed_memory(env, id, v, err);
        else if (!strcmp(k, "timers"))
            rc = sync_timers(env, id, v, 0, NULL, err);
        else if (!strcmp(k, "subscriptions"))
            rc = sync_subscriptions(env, id, v, err);
    }
    return rc;
}

/* ---- one manifest -------------------------------------------------------------------------- */

static vigil_code create_agent(struct vg_env *env, json_t *want, char id[37], vigil_error *err)
{
    char *config = vg_json_dump(json_object_get(want, "config"), 1);
    vigil_agent_spec spec = {.name = json_string_value(json_object_get(want, "name")),
                             .kind = json_string_value(json_object_get(want, "kind")),
                             .mode = json_string_value(json_object_get(want, "mode")),
                             .prompt = json_string_value(json_object_get(want, "prompt")),
                             .model = json_string_value(json_object_get(want, "model")),
                             .config_json = config};
    vigil_code rc = config ? vg_agent_create(env, &spec, id, err)
                           : VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating an agent");
    vg_free(config);
    if (!rc && strcmp(json_string_value(json_object_get(want, "visibility")), "project")) {
        json_t *vis = json_pack("{s:O}", "visibility", json_object_get(want, "visibility"));
        rc = vis ? vg_agent_update(env, id, vis, err)
                 : VG_FAIL(err, VIGIL_ENOMEM, "out of memory creating an agent");
        json_decref(vis);
    }
    return rc;
}

/* Apply one validated manifest; *out (owned) is its report line. */
static vigil_code apply_one(struct vg_env *env, const json_t *by_name, const char *file,
                            const json_t *m, int dry_run, json_t **out, vigil_error *err)
{
    json_t *agent = NULL, *want = desired_fields(m), *changed = NULL, *kept = json_array();
    const char *name = json_string_value(json_object_get(m, "name")), *action;
    char id[37] = "";
    vigil_code rc = want ? find_by_name(by_name, name, &agent, err)
                         : VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying a manifest");
    if (rc)
        goto out;
    if (!agent) {
        action = "created";
        changed = json_array();
        for (size_t i = 0; changed && vg_manifest_config_keys[i]; i++) {
            const char *k = vg_manifest_config_keys[i];
            json_t *v = json_object_get(json_object_get(want, "config"), k);
            /* An empty list of seeds, timers or subscriptions writes none. */
            if (v && !(effect_key(k) && !json_array_size(v)))
                json_array_append_new(changed, json_string(k));
        }
        if (!dry_run && !(rc = create_agent(env, want, id, err)))
            rc = effects(env, id, json_object_get(want, "config"), changed, err);
    } else {
        snprintf(id, sizeof id, "%s", json_string_value(json_object_get(agent, "id")));
        changed = changes(agent, want);
        rc = changed && kept ? keep_unnamed(agent, want, err)
                             : VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying a manifest");
        if (!rc)
            rc = plan_effects(env, id, json_object_get(want, "config"), changed, kept, err);
        action = json_array_size(changed) ? "updated" : "unchanged";
        if (!rc && !dry_run && json_array_size(changed)) {
            json_object_del(want, "name");
            if (!(rc = vg_agent_update(env, id, want, err)))
                rc = effects(env, id, json_object_get(want, "config"), changed, err);
        }
    }
    if (!rc && !(*out = json_pack("{s:s, s:s?, s:s, s:s, s:O, s:O, s:b}", "file", file, "id",
                                  id[0] ? id : NULL, "name", name, "action", action, "changes",
                                  changed ? changed : json_array(), "memory_kept",
                                  kept ? kept : json_array(), "dry_run", dry_run)))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory applying a manifest");
out:
    json_decref(want);
    json_decref(changed);
    json_decref(kept);
    return rc;
}

/* ---- files and directories ----------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int manifest_name(const char *n)
{
    size_t l = strlen(n);
    return n[0] != '.' &&
           ((l > 5 && !strcmp(n + l - 5, ".yaml")) || (l > 4 && !strcmp(n + l - 4, ".yml")) ||
            (l > 5 && !strcmp(n + l - 5, ".json")));
}

/* The manifest files of path (a file, or a directory's files sorted), as a new array. */
static vigil_code list_files(const char *path, json_t **out, vigil_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return VG_FAIL(err, VIGIL_ENOTFOUND, "no manifest file or directory \"%s\"", path);
    if (!S_ISDIR(st.st_mode))
        return (*out = json_pack("[s]", path)) ? VIGIL_OK
                                               : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    DIR *d = opendir(path);
    if (!d)
        return VG_FAIL(err, VIGIL_EIO, "cannot read directory \"%s\": %s", path, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!manifest_name(e->d_name))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **t = vg_realloc(names, cap * sizeof *t);
            if (!t)
                break;
            names = t;
        }
        names[n++] = vg_strdup(e->d_name);
    }
    closedir(d);
    if (n > 1) /* names is NULL when the folder has no file */
        qsort(names, n, sizeof *names, cmp_str);
    json_t *files = json_array();
    for (size_t i = 0; i < n; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/",
                 names[i] ? names[i] : "");
        if (names[i])
            json_array_append_new(files, json_string(full));
        vg_free(names[i]);
    }
    vg_free(names);
    if (!json_array_size(files)) {
        json_decref(files);
        return VG_FAIL(err, VIGIL_ENOTFOUND,
                       "directory \"%s\" holds no manifest (*.yaml, *.yml, "
                       "*.json)",
                       path);
    }
    *out = files;
    return VIGIL_OK;
}

/* Read and validate every file; a name used twice is a problem at its second use. */
static vigil_code read_all(json_t *files, json_t *docs, json_t *problems, vigil_error *err)
{
    json_t *names = json_object(), *f;
    size_t i;
    vigil_code rc = VIGIL_OK, bad = VIGIL_OK;
    json_array_foreach (files, i, f) {
        const char *file = json_string_value(f);
        char *text = NULL;
        size_t len = 0;
        json_t *doc = NULL, *marks = NULL;
        vigil_error ferr = {0};
        if ((rc = vg_fs_read_file(file, VG_MANIFEST_MAX_BYTES, &text, &len, err)))
            break;
        vigil_code prc = vg_manifest_parse(text, len, file, &doc, &marks, problems, &ferr);
        vg_free(text);
        if (prc == VIGIL_ENOMEM) {
            *err = ferr;
            rc = prc;
            break;
        }
        if (prc) {
            if (!bad)
                *err = ferr, bad = prc;
            continue;
        }
        const char *name = json_string_value(json_object_get(doc, "name"));
        json_t *first = json_object_get(names, name);
        if (first) {
            char msg[512];
            snprintf(msg, sizeof msg, "/name: agent name \"%s\" is already used by %s", name,
                     json_string_value(first));
            vg_manifest_problem(problems, file, marks, "/name", msg);
            json_t *p = json_array_get(problems, json_array_size(problems) - 1);
            if (!bad)
                bad = VG_FAIL(err, VIGIL_EINVAL, "%s:%d:%d: %s", file,
                              (int)json_integer_value(json_object_get(p, "line")),
                              (int)json_integer_value(json_object_get(p, "column")), msg);
        } else {
            json_object_set_new(names, name, json_string(file));
        }
        json_array_append_new(docs, json_pack("{s:s, s:o}", "file", file, "doc", doc));
        json_decref(marks);
    }
    json_decref(names);
    return rc ? rc : bad;
}

/* ---- declarations shared by every agent ---------------------------------------------------- */

/* Whether docs (the manifests applied now) name an agent called name. */
static int applied_now(const json_t *docs, const char *name)
{
    json_t *d;
    size_t i;
    json_array_foreach (docs, i, d) {
        const char *n = json_string_value(json_object_get(json_object_get(d, "doc"), "name"));
        if (n && !strcmp(n, name))
            return 1;
    }
    return 0;
}

/* One manifest's declarations under key added to seen, as a stored agent's are. */
static vigil_code collect_doc(const json_t *doc, const char *key, const char *what, json_t *seen,
                              vigil_error *err)
{
    json_t *as_agent = json_pack("{s:O, s:O}", "name", json_object_get(doc, "name"), "config", doc);
    vigil_code rc = as_agent ? vg_manifest_collect_one(as_agent, key, what, seen, err)
                             : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_decref(as_agent);
    return rc;
}

/* The tools every agent is served are one set: a name declared two ways, by the agents kept
 * and the manifests applied now, is refused here rather than served to neither. */
static vigil_code check_one_key(const json_t *by_name, const json_t *docs, const json_t *config,
                                const char *key, const char *what, vigil_error *err)
{
    json_t *seen = json_object(), *a, *d;
    const char *name;
    size_t i;
    vigil_code rc = seen ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc)
        rc = vg_manifest_collect_from(json_object_get(config, key), "the config file", what, seen,
                                      err);
    json_object_foreach ((json_t *)by_name, name, a) {
        vigil_error kept = {0}; /* two kept agents that clash are not this apply's to refuse */
        if (!rc && json_is_object(a) && !applied_now(docs, name) &&
            vg_manifest_collect_one(a, key, what, seen, &kept) == VIGIL_ENOMEM)
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    }
    json_array_foreach (docs, i, d) {
        if (!rc)
            rc = collect_doc(json_object_get(d, "doc"), key, what, seen, err);
    }
    json_decref(seen);
    return rc;
}

static vigil_code check_builtin_names(const json_t *docs, vg_manifest_taken_fn taken, void *user,
                                      vigil_error *err)
{
    json_t *d, *decl;
    const char *tool;
    size_t i;
    json_array_foreach (docs, i, d) {
        json_t *doc = json_object_get(d, "doc");
        json_object_foreach (json_object_get(doc, "command_tools"), tool, decl) {
            if (taken && taken(user, tool))
                return VG_FAIL(err, VIGIL_EEXISTS,
                               "%s: command tool \"%s\" of agent \"%s\" is named like a built-in "
                               "tool: rename it",
                               json_string_value(json_object_get(d, "file")), tool,
                               json_string_value(json_object_get(doc, "name")));
        }
    }
    return VIGIL_OK;
}

static vigil_code check_declarations(const json_t *by_name, const json_t *docs,
                                     vg_manifest_taken_fn taken, void *user, const json_t *config,
                                     vigil_error *err)
{
    vigil_code rc = check_builtin_names(docs, taken, user, err);
    if (!rc)
        rc = check_one_key(by_name, docs, config, "command_tools", "command tool", err);
    if (!rc)
        rc = check_one_key(by_name, docs, config, "mcp_servers", "MCP server", err);
    return rc;
}

/* ---- applying ------------------------------------------------------------------------------ */

vigil_code vg_manifest_apply_path(struct vg_env *env, const char *path, int dry_run, json_t **out,
                                  json_t *problems, vigil_error *err)
{
    return vg_manifest_apply_checked(env, &path, 1, dry_run, NULL, NULL, NULL, out, problems, err);
}

/* The manifest's likely tool typos under "warnings" of its report line, and the other agents
 * its new tools reach under "reaches" (none: no key). */
static vigil_code with_warnings(json_t *line, const json_t *d, const json_t *docs,
                                const json_t *by_name, const json_t *config,
                                vg_manifest_taken_fn taken, void *user, vigil_error *err)
{
    json_t *w = NULL, *reach = NULL, *doc = json_object_get(d, "doc");
    vigil_code rc = vg_manifest_tool_warnings(doc, docs, by_name, config, taken, user, &w, err);
    if (!rc && json_array_size(w) && json_object_set(line, "warnings", w))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc)
        rc = vg_manifest_reach_notices(doc, docs, by_name, config,
                                       json_is_true(json_object_get(line, "dry_run")), &reach, err);
    if (!rc && json_array_size(reach) && json_object_set(line, "reaches", reach))
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    json_decref(w);
    json_decref(reach);
    return rc;
}

/* The manifest files of every path, in the order given (a directory's sorted), as a new array. */
static vigil_code list_all(const char *const *paths, size_t n, json_t **out, vigil_error *err)
{
    json_t *all = json_array(), *one = NULL;
    vigil_code rc = all ? VIGIL_OK : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        if (!paths[i] || !*paths[i])
            rc = VG_FAIL(err, VIGIL_EINVAL, "apply needs manifest paths, not an empty one");
        else if (!(rc = list_files(paths[i], &one, err)) && json_array_extend(all, one))
            rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
        json_decref(one);
        one = NULL;
    }
    if (rc)
        json_decref(all);
    else
        *out = all;
    return rc;
}

vigil_code vg_manifest_apply_checked(struct vg_env *env, const char *const *paths, size_t n_paths,
                                     int dry_run, vg_manifest_taken_fn taken, void *user,
                                     const json_t *config, json_t **out, json_t *problems,
                                     vigil_error *err)
{
    json_t *files = NULL, *docs = json_array(), *report = json_array(), *by_name = NULL, *d;
    size_t i;
    vigil_code rc = docs && report ? list_all(paths, n_paths, &files, err)
                                   : VG_FAIL(err, VIGIL_ENOMEM, "out of memory");
    if (!rc)
        rc = read_all(files, docs, problems, err);
    if (!rc && !dry_run)
        rc = vg_store_begin(env->store, err);
    if (!rc) {
        /* Read inside the transaction: what is compared is what is written over. Another apply
         * waits for this one first, so two never both create one name (E30 of trial E). */
        if (!dry_run)
            rc = vg_agent_names_lock(env, err);
        if (!rc)
            rc = agents_by_name(env, &by_name, err);
        if (!rc)
            rc = check_declarations(by_name, docs, taken, user, config, err);
        json_array_foreach (docs, i, d) {
            json_t *line = NULL;
            if (rc || (rc = apply_one(env, by_name, json_string_value(json_object_get(d, "file")),
                                      json_object_get(d, "doc"), dry_run, &line, err)))
                break;
            rc = with_warnings(line, d, docs, by_name, config, taken, user, err);
            json_array_append_new(report, line);
        }
        if (!dry_run)
            rc = vg_store_end(env->store, rc, err);
    }
    json_decref(files);
    json_decref(docs);
    json_decref(by_name);
    if (rc) {
        json_decref(report);
        return rc;
    }
    *out = report;
    return VIGIL_OK;
}
