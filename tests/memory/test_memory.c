/*
 * test_memory.c: memory blocks and their permissions, pending mutations with approval and
 * rejection reaching the agent, the event log, first-run seeding, working-block eviction under
 * a budget, context assembly, and the embedder-down path (keyword fallback, later embedding).
 */
#include "helpers/rt.h"

#include "helpers/fault_store.h"

#include "memory/memory.h"
#include "memory/memory_int.h"
#include "os/fs.h"

struct fx {
    struct test_rt t;
    struct vg_embedder *emb;
    struct vg_memory *m;
    char agent[37];
};

static void fx_open(struct fx *f, const char *name)
{
    test_rt_open(&f->t, name);
    vigil_agent_spec spec = {.name = "ada", .prompt = "You are Ada."};
    ASSERT_OK(vigil_agent_create(f->t.rt, &spec, f->agent, E));
    ASSERT_OK(vg_embed_hash_new(0, &f->emb, E));
    ASSERT_OK(vg_memory_new(f->t.env, f->emb, &f->m, E));
}

static void fx_close(struct fx *f)
{
    vg_memory_free(f->m);
    vg_embed_close(f->emb);
    test_rt_close(&f->t);
}

static void mk(struct fx *f, enum vg_mem_tier tier, const char *label, const char *content,
               enum vg_mem_perm perm, int pinned)
{
    struct vg_memory_block_in in = {.agent_id = f->agent,
                                    .tier = tier,
                                    .label = label,
                                    .content = content,
                                    .permission = perm,
                                    .pinned = pinned};
    ASSERT_OK(vg_memory_create(f->m, &in, "config", E));
}

static char *content_of(struct fx *f, const char *label, char *buf, size_t n)
{
    json_t *b = NULL;
    ASSERT_OK(vg_memory_get(f->m, f->agent, label, &b, E));
    snprintf(buf, n, "%s", json_string_value(json_object_get(b, "content")));
    json_decref(b);
    return buf;
}

static size_t history_len(struct fx *f, const char *label)
{
    json_t *h = NULL;
    ASSERT_OK(vg_memory_history(f->m, f->agent, label, &h, E));
    size_t n = json_array_size(h);
    json_decref(h);
    return n;
}

/* proves: S4-008, S4-039, S4-037 */
TEST(permissions_are_enforced_by_the_manager)
{
    struct fx f;
    char buf[512];
    fx_open(&f, "mem_perms");
    mk(&f, VG_TIER_CORE, "system", "rules", VG_PERM_READ_ONLY, 1);
    mk(&f, VG_TIER_WORKING, "log", "first", VG_PERM_APPEND, 0);
    mk(&f, VG_TIER_WORKING, "notes", "n1", VG_PERM_READ_WRITE, 0);

    /* read_only: write, append and delete are refused and nothing changes */
    vigil_error err = {0};
    json_t *out = NULL;
    ASSERT_EQ(vg_memory_write(f.m, f.agent, "system", "new rules", NULL, &out, &err),
              VIGIL_EDENIED);
    ASSERT_CONTAINS(err.message, "read-only");
    ASSERT_EQ(vg_memory_append(f.m, f.agent, "system", "more", &out, &err), VIGIL_EDENIED);
    ASSERT_EQ(vg_memory_delete(f.m, f.agent, "system", &out, &err), VIGIL_EDENIED);
    ASSERT_STREQ(content_of(&f, "system", buf, sizeof buf), "rules");
    ASSERT_EQ(history_len(&f, "system"), 1); /* only its creation */

    /* append: appends apply, rewrites and deletes are refused */
    ASSERT_OK(vg_memory_append(f.m, f.agent, "log", "second", &out, E));
    ASSERT_STREQ(json_string_value(json_object_get(out, "status")), "applied");
    json_decref(out);
    ASSERT_STREQ(content_of(&f, "log", buf, sizeof buf), "first\nsecond");
    vigil_error e2 = {0};
    ASSERT_EQ(vg_memory_write(f.m, f.agent, "log", "rewritten", NULL, &out, &e2), VIGIL_EDENIED);
    ASSERT_CONTAINS(e2.message, "append-only");
    ASSERT_EQ(vg_memory_delete(f.m, f.agent, "log", &out, &e2), VIGIL_EDENIED);
    ASSERT_STREQ(content_of(&f, "log", buf, sizeof buf), "first\nsecond");

    /* read_write: write, append, delete all apply */
    ASSERT_OK(vg_memory_write(f.m, f.agent, "notes", "n2", NULL, &out, E));
    json_decref(out);
    ASSERT_STREQ(content_of(&f, "notes", buf, sizeof buf), "n2");
    ASSERT_OK(vg_memory_append(f.m, f.agent, "notes", "n3", &out, E));
    json_decref(out);
    ASSERT_STREQ(content_of(&f, "notes", buf, sizeof buf), "n2\nn3");
    ASSERT_OK(vg_memory_delete(f.m, f.agent, "notes", &out, E));
    json_decref(out);
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_memory_get(f.m, f.agent, "notes", &out, NULL));

    /* a write to a new label creates a read_write block; the agent cannot create core blocks */
    ASSERT_OK(vg_memory_write(f.m, f.agent, "user:alice", "likes tea", NULL, &out, E));
    ASSERT_STREQ(json_string_value(json_object_get(out, "status")), "created");
    json_decref(out);
    json_t *b = NULL;
    ASSERT_OK(vg_memory_get(f.m, f.agent, "user:alice", &b, E));
    ASSERT_STREQ(json_string_value(json_object_get(b, "tier")), "archival");
    ASSERT_STREQ(json_string_value(json_object_get(b, "permission")), "read_write");
    ASSERT(json_object_get(b, "created_at") && json_object_get(b, "updated_at"));
    ASSERT(json_is_boolean(json_object_get(b, "pinned")));
    json_decref(b);
    ASSERT_EQ(vg_memory_write(f.m, f.agent, "core2", "x", "core", &out, &e2), VIGIL_EDENIED);
    /* the block got its embedding in the same write (S4-006) */
    char id[VG_BLOCK_ID_LEN];
    vg_memory_block_id(f.agent, "user:alice", id);
    json_t *vec = NULL;
    ASSERT_OK(vg_env_get_json(f.t.env, "memory_vector", id, &vec, NULL, E));
    ASSERT_EQ(json_integer_value(json_object_get(vec, "dim")), 384);
    json_decref(vec);
    fx_close(&f);
}

static const char *last_system_message(struct fx *f, char *buf, size_t n)
{
    char thread[VG_RECORD_ID_MAX];
    vg_memory_default_thread(f->agent, thread);
    json_t *msgs = NULL;
    ASSERT_OK(vg_message_latest(f->t.env, f->agent, thread, 1, &msgs, E));
    ASSERT_EQ(json_array_size(msgs), 1);
    json_t *m = json_array_get(msgs, 0);
    ASSERT_STREQ(json_string_value(json_object_get(m, "kind")), "system");
    snprintf(buf, n, "%s", json_string_value(json_object_get(m, "content")));
    json_decref(msgs);
    return buf;
}

/* proves: S4-009, S4-010, S4-011, S4-043 */
TEST(familiar_changes_wait_for_the_human)
{
    struct fx f;
    char buf[1024];
    fx_open(&f, "mem_pending");
    mk(&f, VG_TIER_CORE, "persona", "I am calm.", VG_PERM_FAMILIAR, 1);
    json_t *out = NULL;
    ASSERT_OK(vg_memory_write(f.m, f.agent, "persona", "I am cheerful.", NULL, &out, E));
    ASSERT_STREQ(json_string_value(json_object_get(out, "status")), "pending");
    char p1[64];
    snprintf(p1, sizeof p1, "%s", json_string_value(json_object_get(out, "pending_id")));
    json_decref(out);
    ASSERT_STREQ(content_of(&f, "persona", buf, sizeof buf), "I am calm.");
    ASSERT_OK(vg_memory_append(f.m, f.agent, "persona", "I like jazz.", &out, E));
    char p2[64];
    snprintf(p2, sizeof p2, "%s", json_string_value(json_object_get(out, "pending_id")));
    json_decref(out);

    json_t *pend = NULL;
    ASSERT_OK(vg_memory_pending_list(f.m, NULL, &pend, E));
    ASSERT_EQ(json_array_size(pend), 2);
    json_decref(pend);

    /* the pending queue survives a restart */
    vg_memory_free(f.m);
    test_rt_reopen(&f.t);
    ASSERT_OK(vg_memory_new(f.t.env, f.emb, &f.m, E));

    ASSERT_OK(vg_memory_approve(f.m, p1, "human", NULL, E));
    ASSERT_STREQ(content_of(&f, "persona", buf, sizeof buf), "I am cheerful.");
    ASSERT_CONTAINS(last_system_message(&f, buf, sizeof buf), "approved");
    /* idempotent: approving again changes nothing; rejecting it now is refused */
    ASSERT_OK(vg_memory_approve(f.m, p1, "human", NULL, E));
    vigil_error err = {0};
    ASSERT_EQ(vg_memory_reject(f.m, p1, "no", "human", NULL, &err), VIGIL_ESTATE);
    ASSERT_EQ(vg_memory_reject(f.m, p2, "", "human", NULL, &err), VIGIL_EINVAL);

    ASSERT_OK(vg_memory_reject(f.m, p2, "keep music out of your persona", "human", NULL, E));
    ASSERT_STREQ(content_of(&f, "persona", buf, sizeof buf), "I am cheerful.");
    ASSERT_CONTAINS(last_system_message(&f, buf, sizeof buf), "keep music out of your persona");
    ASSERT_OK(vg_memory_reject(f.m, p2, "keep music out of your persona", "human", NULL, E));

    /* the loop takes each outcome once, feedback included */
    json_t *oc = NULL;
    ASSERT_OK(vg_memory_outcomes_take(f.m, f.agent, &oc, E));
    ASSERT_EQ(json_array_size(oc), 2);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(oc, 0), "status")), "approved");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(oc, 1), "reason")),
                 "keep music out of your persona");
    json_decref(oc);
    ASSERT_OK(vg_memory_outcomes_take(f.m, f.agent, &oc, E));
    ASSERT_EQ(json_array_size(oc), 0);
    json_decref(oc);
    ASSERT_OK(vg_memory_pending_list(f.m, f.agent, &pend, E));
    ASSERT_EQ(json_array_size(pend), 0);
    json_decref(pend);

    /* the history keeps the proposals, the approval and the rejection with their contents */
    json_t *h = NULL;
    ASSERT_OK(vg_memory_history(f.m, f.agent, "persona", &h, E));
    const char *types[] = {"create", "pending", "pending", "approved", "rejected"};
    ASSERT_EQ(json_array_size(h), VG_ARRAY_LEN(types));
    for (size_t i = 0; i < VG_ARRAY_LEN(types); i++)
        ASSERT_STREQ(json_string_value(json_object_get(json_array_get(h, i), "type")), types[i]);
    json_t *ap = json_array_get(h, 3);
    ASSERT_STREQ(json_string_value(json_object_get(ap, "old_content")), "I am calm.");
    ASSERT_STREQ(json_string_value(json_object_get(ap, "new_content")), "I am cheerful.");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(h, 4), "reason")),
                 "keep music out of your persona");
    json_decref(h);
    fx_close(&f);
}

/* proves: S4-007 */
TEST(every_mutation_is_in_the_event_log)
{
    struct fx f;
    fx_open(&f, "mem_events");
    json_t *out = NULL;
    ASSERT_OK(vg_memory_write(f.m, f.agent, "fact", "a", "working", &out, E));
    json_decref(out);
    ASSERT_OK(vg_memory_write(f.m, f.agent, "fact", "b", NULL, &out, E));
    json_decref(out);
    ASSERT_OK(vg_memory_append(f.m, f.agent, "fact", "c", &out, E));
    json_decref(out);
    ASSERT_OK(vg_memory_delete(f.m, f.agent, "fact", &out, E));
    json_decref(out);
    json_t *h = NULL;
    ASSERT_OK(vg_memory_history(f.m, f.agent, "fact", &h, E));
    static const struct {
        const char *type, *old, *new_;
    } want[] = {{"create", NULL, "a"},
                {"update", "a", "b"},
                {"append", "b", "b\nc"},
                {"delete", "b\nc", NULL}};
    ASSERT_EQ(json_array_size(h), VG_ARRAY_LEN(want));
    int64_t prev_no = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(want); i++) {
        json_t *e = json_array_get(h, i);
        ASSERT_STREQ(json_string_value(json_object_get(e, "type")), want[i].type);
        const char *o = json_string_value(json_object_get(e, "old_content"));
        const char *n = json_string_value(json_object_get(e, "new_content"));
        ASSERT((o == NULL) == (want[i].old == NULL));
        ASSERT((n == NULL) == (want[i].new_ == NULL));
        if (o)
            ASSERT_STREQ(o, want[i].old);
        if (n)
            ASSERT_STREQ(n, want[i].new_);
        ASSERT(json_object_get(e, "at") && json_object_get(e, "block_id"));
        int64_t no = json_integer_value(json_object_get(e, "event_no"));
        ASSERT(no > prev_no);
        prev_no = no;
    }
    json_decref(h);
    fx_close(&f);
}

/* The newest event of a label (owned). */
static json_t *last_event(struct fx *f, const char *label)
{
    json_t *h = NULL;
    ASSERT_OK(vg_memory_history(f->m, f->agent, label, &h, E));
    json_t *e = json_incref(json_array_get(h, json_array_size(h) - 1));
    json_decref(h);
    return e;
}

static json_t *person_set(struct fx *f, const char *label, const char *content, const char *tier,
                          const char *perm)
{
    struct vg_memory_set_in in = {
        .agent_id = f->agent, .label = label, .content = content, .tier = tier, .permission = perm};
    json_t *out = NULL;
    ASSERT_OK(vg_memory_set(f->m, &in, &out, E));
    return out;
}

/* A person's change (trial E14) applies at once whatever the permission binding the agent --
 * read_only and familiar blocks included, with no pending change -- and is in the event log as
 * made by "human"; the agent's own writes stay refused. proves: S4-008, S4-007 */
TEST(a_person_changes_memory_at_once_whatever_the_permission)
{
    struct fx f;
    char buf[256];
    fx_open(&f, "mem_person");
    mk(&f, VG_TIER_CORE, "hours", "Open 9-17", VG_PERM_READ_ONLY, 0);
    mk(&f, VG_TIER_CORE, "persona", "I am Ada.", VG_PERM_FAMILIAR, 0);
    json_t *out = person_set(&f, "hours", "Open 8-18", NULL, NULL);
    ASSERT_STREQ(json_string_value(json_object_get(out, "change")), "updated");
    ASSERT_STREQ(json_string_value(json_object_get(out, "permission")), "read_only");
    json_decref(out);
    ASSERT_STREQ(content_of(&f, "hours", buf, sizeof buf), "Open 8-18");
    json_t *e = last_event(&f, "hours");
    ASSERT_STREQ(json_string_value(json_object_get(e, "type")), "update");
    ASSERT_STREQ(json_string_value(json_object_get(e, "actor")), "human");
    ASSERT_STREQ(json_string_value(json_object_get(e, "old_content")), "Open 9-17");
    json_decref(e);
    /* the agent still may not */
    vigil_error err = {0};
    ASSERT_EQ(vg_memory_write(f.m, f.agent, "hours", "Always", NULL, &out, &err), VIGIL_EDENIED);
    /* familiar: applied, nothing pending */
    json_decref(person_set(&f, "persona", "I am Ada, careful.", NULL, NULL));
    ASSERT_STREQ(content_of(&f, "persona", buf, sizeof buf), "I am Ada, careful.");
    ASSERT_OK(vg_memory_pending_list(f.m, f.agent, &out, E));
    ASSERT_EQ(json_array_size(out), 0);
    json_decref(out);
    /* nothing differs: nothing written */
    size_t n = history_len(&f, "hours");
    out = person_set(&f, "hours", "Open 8-18", "core", "read_only");
    ASSERT_STREQ(json_string_value(json_object_get(out, "change")), "unchanged");
    json_decref(out);
    ASSERT_EQ(history_len(&f, "hours"), n);
    /* tier and permission alone; a block moved to working is loaded */
    out = person_set(&f, "hours", NULL, "working", "read_write");
    ASSERT_STREQ(json_string_value(json_object_get(out, "tier")), "working");
    ASSERT(json_is_true(json_object_get(out, "loaded")));
    json_decref(out);
    e = last_event(&f, "hours");
    ASSERT_STREQ(json_string_value(json_object_get(e, "old_permission")), "read_only");
    ASSERT_STREQ(json_string_value(json_object_get(e, "old_tier")), "core");
    json_decref(e);
    ASSERT_OK(vg_memory_list(f.m, f.agent, "working", &out, E));
    ASSERT_EQ(json_array_size(out), 1);
    json_decref(out);
    /* a new archival note, found by search, then deleted: not found, its deletion logged */
    out = person_set(&f, "wifi", "the guest wifi password is hunter2", "archival", NULL);
    ASSERT_STREQ(json_string_value(json_object_get(out, "change")), "created");
    ASSERT_STREQ(json_string_value(json_object_get(out, "permission")), "read_write");
    json_decref(out);
    ASSERT_OK(vg_memory_search(f.m, f.agent, "hunter2", VG_SEARCH_HYBRID, 5, &out, E));
    ASSERT_EQ(json_array_size(out), 1);
    json_decref(out);
    ASSERT_OK(vg_memory_remove(f.m, f.agent, "wifi", NULL, &out, E));
    ASSERT_STREQ(json_string_value(json_object_get(out, "content")),
                 "the guest wifi password is hunter2");
    json_decref(out);
    ASSERT_OK(vg_memory_search(f.m, f.agent, "hunter2", VG_SEARCH_HYBRID, 5, &out, E));
    ASSERT_EQ(json_array_size(out), 0);
    json_decref(out);
    e = last_event(&f, "wifi");
    ASSERT_STREQ(json_string_value(json_object_get(e, "type")), "delete");
    ASSERT_STREQ(json_string_value(json_object_get(e, "actor")), "human");
    json_decref(e);
    /* what is not there */
    ASSERT_EQ(vg_memory_remove(f.m, f.agent, "wifi", NULL, NULL, &err), VIGIL_ENOTFOUND);
    struct vg_memory_set_in none = {.agent_id = f.agent, .label = "ghost"};
    ASSERT_EQ(vg_memory_set(f.m, &none, NULL, &err), VIGIL_ENOTFOUND);
    struct vg_memory_set_in bad = {
        .agent_id = f.agent, .label = "x", .content = "y", .tier = "attic"};
    ASSERT_EQ(vg_memory_set(f.m, &bad, NULL, &err), VIGIL_EINVAL);
    fx_close(&f);
}

/* proves: S4-035, S4-040, S4-003 */
TEST(first_run_seeds_core_blocks_from_the_persona)
{
    struct fx f;
    fx_open(&f, "mem_seed");
    int seeded = 0;
    ASSERT_OK(vg_memory_seed(f.m, f.agent, NULL, &seeded, E));
    ASSERT_EQ(seeded, 1);
    static const struct {
        const char *label, *perm;
    } want[] = {{"system", "read_only"}, {"persona", "familiar"}, {"familiar", "familiar"}};
    for (size_t i = 0; i < VG_ARRAY_LEN(want); i++) {
        json_t *b = NULL;
        ASSERT_OK(vg_memory_get(f.m, f.agent, want[i].label, &b, E));
        ASSERT_STREQ(json_string_value(json_object_get(b, "tier")), "core");
        ASSERT_STREQ(json_string_value(json_object_get(b, "permission")), want[i].perm);
        ASSERT(strlen(json_string_value(json_object_get(b, "content"))) > 20);
        json_decref(b);
    }
    ASSERT_OK(vg_memory_seed(f.m, f.agent, NULL, &seeded, E));
    ASSERT_EQ(seeded, 0);
    /* core blocks are in the system prompt */
    struct vg_assemble_opts o = {.agent_id = f.agent, .thread_id = "t1"};
    struct vg_context c;
    ASSERT_OK(vg_memory_assemble(f.m, &o, &c, E));
    ASSERT_CONTAINS(c.system, "You are Ada.");
    ASSERT_CONTAINS(c.system, "<memory label=\"persona\" permission=\"familiar\">");
    ASSERT_CONTAINS(c.system, "persistent assistant");
    vg_context_release(&c);
    /* a persona file without the sections is refused */
    char path[4300];
    snprintf(path, sizeof path, "%s/bad.md", vg_test_tmpdir("mem_seed_bad"));
    ASSERT_OK(vg_fs_write_file(path, "# persona\nhi\n", 13, E));
    char other[37];
    vigil_agent_spec spec = {.name = "bob"};
    ASSERT_OK(vigil_agent_create(f.t.rt, &spec, other, E));
    ASSERT_CODE(VIGIL_EPARSE, vg_memory_seed(f.m, other, path, &seeded, NULL));
    fx_close(&f);
}

static void count_commit(void *user, int committed)
{
    *(int *)user += committed;
}

/* The core blocks are written together: a persona file that lacks its last section leaves the
 * agent with no block at all (before, the first two stayed, and the next first run, finding
 * blocks, never seeded the third), and a complete one writes all three in one commit. */
TEST(a_first_runs_core_blocks_are_seeded_together_or_not_at_all)
{
    struct fx f;
    fx_open(&f, "mem_seed_all");
    char path[4300];
    snprintf(path, sizeof path, "%s/two.md", vg_test_tmpdir("mem_seed_two"));
    static const char two[] = "# system\nYou work.\n# persona\nYou are Ada.\n";
    ASSERT_OK(vg_fs_write_file(path, two, sizeof two - 1, E));
    int seeded = 1;
    ASSERT_CODE(VIGIL_EPARSE, vg_memory_seed(f.m, f.agent, path, &seeded, NULL));
    ASSERT_EQ(seeded, 0);
    struct vg_query q = {.kind = "memory_block", .owner = f.agent};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(f.t.env->store, &q, &n, E));
    ASSERT_EQ(n, 0);
    int commits = 0;
    vg_store_set_tx_hook(f.t.env->store, count_commit, &commits);
    ASSERT_OK(vg_memory_seed(f.m, f.agent, NULL, &seeded, E));
    vg_store_set_tx_hook(f.t.env->store, NULL, NULL);
    ASSERT_EQ(commits, 1);
    ASSERT_EQ(seeded, 1);
    ASSERT_OK(vg_store_count(f.t.env->store, &q, &n, E));
    ASSERT_EQ(n, 3);
    fx_close(&f);
}

/* An embedder that counts its calls, in front of the hash embedder; offline or not. */
struct counted_embedder {
    struct vg_embedder base;
    struct vg_embedder *inner;
    int calls;
};

static int counted_dimension(struct vg_embedder *e)
{
    return vg_embed_dimension(((struct counted_embedder *)e)->inner);
}

static vigil_code counted_embed(struct vg_embedder *e, const char *const *texts, size_t n,
                                float *out, vigil_error *err)
{
    struct counted_embedder *c = (struct counted_embedder *)e;
    c->calls++;
    return vg_embed(c->inner, texts, n, out, err);
}

static void counted_close(struct vg_embedder *e)
{
    (void)e;
}

static const struct vg_embed_methods counted_offline = {
    1, "counted", VG_EMBED_CAP_OFFLINE, counted_dimension, counted_embed, counted_close};
static const struct vg_embed_methods counted_networked = {
    1, "counted", 0, counted_dimension, counted_embed, counted_close};

/* Two new agents' core blocks: an offline embedder (a function of the text) embeds the persona's
 * three blocks once for both, and each agent stores the same vectors; one over a network is
 * asked for every block, as before. */
TEST(new_agents_core_blocks_are_embedded_once_by_an_offline_embedder)
{
    struct fx f;
    fx_open(&f, "mem_seed_embed");
    for (int networked = 0; networked < 2; networked++) {
        struct counted_embedder c = {
            .base = {.methods = networked ? &counted_networked : &counted_offline}, .inner = f.emb};
        snprintf(c.base.model, sizeof c.base.model, "%s", f.emb->model);
        struct vg_memory *m = NULL;
        ASSERT_OK(vg_memory_new(f.t.env, &c.base, &m, E));
        char agents[2][37];
        for (int i = 0; i < 2; i++) {
            char name[16];
            snprintf(name, sizeof name, "n%d-%d", networked, i);
            vigil_agent_spec spec = {.name = name};
            ASSERT_OK(vigil_agent_create(f.t.rt, &spec, agents[i], E));
            int seeded = 0;
            ASSERT_OK(vg_memory_seed(m, agents[i], NULL, &seeded, E));
            ASSERT_EQ(seeded, 1);
        }
        ASSERT_EQ(c.calls, networked ? 6 : 3);
        static const char *const labels[] = {"system", "persona", "familiar"};
        for (size_t l = 0; l < VG_ARRAY_LEN(labels); l++) {
            json_t *v[2] = {NULL, NULL};
            for (int i = 0; i < 2; i++) {
                char id[VG_BLOCK_ID_LEN];
                vg_memory_block_id(agents[i], labels[l], id);
                ASSERT_OK(vg_env_get_json(f.t.env, "memory_vector", id, &v[i], NULL, E));
            }
            ASSERT_STREQ(json_string_value(json_object_get(v[0], "v")),
                         json_string_value(json_object_get(v[1], "v")));
            json_decref(v[0]);
            json_decref(v[1]);
        }
        vg_memory_free(m);
    }
    fx_close(&f);
}

/* proves: S4-004, S4-038, S4-041 */
TEST(least_recently_used_working_blocks_leave_first)
{
    struct fx f;
    fx_open(&f, "mem_evict");
    char big[2001];
    memset(big, 'x', 2000);
    big[2000] = '\0';
    /* four unpinned working blocks of ~500 tokens, used at t+1..t+4, and one pinned one */
    const char *labels[] = {"w1", "w2", "w3", "w4"};
    for (int i = 0; i < 4; i++) {
        vg_test_clock_advance(&f.t.clock, 1000);
        mk(&f, VG_TIER_WORKING, labels[i], big, VG_PERM_READ_WRITE, 0);
    }
    vg_test_clock_advance(&f.t.clock, 1000);
    mk(&f, VG_TIER_WORKING, "pin", big, VG_PERM_READ_WRITE, 1);
    /* w1 is used again: it becomes the most recent */
    vg_test_clock_advance(&f.t.clock, 1000);
    ASSERT_OK(vg_memory_load(f.m, f.agent, "w1", E));
    /* budget 5000 tokens: the unpinned share (30%) holds two 500-token blocks */
    struct vg_assemble_opts o = {.agent_id = f.agent, .thread_id = "t1", .window = 6250};
    struct vg_context c;
    ASSERT_OK(vg_memory_assemble(f.m, &o, &c, E));
    ASSERT_EQ(c.budget, 5000);
    ASSERT_EQ(json_array_size(c.working), 3);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(c.working, 0), "label")), "pin");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(c.working, 1), "label")), "w1");
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(c.working, 2), "label")), "w4");
    ASSERT_EQ(json_array_size(c.evicted), 2);
    ASSERT_STREQ(json_string_value(json_array_get(c.evicted, 0)), "w3");
    ASSERT_STREQ(json_string_value(json_array_get(c.evicted, 1)), "w2");
    ASSERT(c.used <= c.budget);
    vg_context_release(&c);
    /* unloading w4 lets w3 in */
    ASSERT_OK(vg_memory_unload(f.m, f.agent, "w4", E));
    ASSERT_OK(vg_memory_assemble(f.m, &o, &c, E));
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(c.working, 2), "label")), "w3");
    vg_context_release(&c);
    /* a tiny window: the pinned block still stays */
    o.window = 100;
    ASSERT_OK(vg_memory_assemble(f.m, &o, &c, E));
    ASSERT_EQ(json_array_size(c.working), 1);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(c.working, 0), "label")), "pin");
    vg_context_release(&c);
    vigil_error err = {0};
    ASSERT_EQ(vg_memory_load(f.m, f.agent, "nope", &err), VIGIL_ENOTFOUND);
    fx_close(&f);
}

/* A first run's seed writes the agent's memory counters once, not once per event and vector,
 * and they count what was written: three events numbered 1 to 3, three vectors; the counters
 * go on from there at the next write. */
TEST(a_seed_writes_its_agents_counters_once)
{
    struct fx f;
    fx_open(&f, "mem_seed_meta");
    int seeded = 0;
    ASSERT_OK(vg_memory_seed(f.m, f.agent, NULL, &seeded, E));
    ASSERT_EQ(seeded, 1);
    json_t *meta = NULL;
    int64_t rev = 0;
    ASSERT_OK(vg_env_get_json(f.t.env, "memory_meta", f.agent, &meta, &rev, E));
    ASSERT_EQ(rev, 1);
    ASSERT_EQ(json_integer_value(json_object_get(meta, "event_no")), 3);
    ASSERT_EQ(json_integer_value(json_object_get(meta, "vec_gen")), 3);
    json_decref(meta);
    json_t *h = NULL;
    ASSERT_OK(vg_memory_history(f.m, f.agent, "persona", &h, E));
    ASSERT_EQ(json_array_size(h), 1);
    json_int_t persona_no = json_integer_value(json_object_get(json_array_get(h, 0), "event_no"));
    ASSERT(persona_no >= 1 && persona_no <= 3);
    json_decref(h);
    mk(&f, VG_TIER_WORKING, "notes", "n1", VG_PERM_READ_WRITE, 0);
    ASSERT_OK(vg_memory_history(f.m, f.agent, "notes", &h, E));
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(h, 0), "event_no")), 4);
    json_decref(h);
    fx_close(&f);
}

/* The system text of agent_id's context, and how many scans of memory blocks building it took
 * (the working tier's listing is one each time). */
static long system_of(struct fx *f, struct vg_store *counting, const char *agent_id, char *out,
                      size_t n)
{
    struct vg_assemble_opts o = {.agent_id = agent_id, .thread_id = "t1"};
    struct vg_context c;
    vg_store_fault_watch(counting, "memory_block");
    vg_store_read_batch(f->t.env->store, 1); /* as the loop assembles */
    ASSERT_OK(vg_memory_assemble(f->m, &o, &c, E));
    vg_store_read_batch(f->t.env->store, 0);
    snprintf(out, n, "%s", c.system);
    vg_context_release(&c);
    return vg_store_fault_scans(counting);
}

/* Agents taking turns (vigil_chat_many, the daemon) each find their system text as they left
 * it: their core blocks are not read again at every model call while nothing was written, and
 * a changed block or prompt is in the next call's text. */
TEST(agents_taking_turns_keep_their_system_text_until_it_changes)
{
    struct fx f;
    char ada[1024], bob[1024], bob_id[37];
    fx_open(&f, "mem_system_kept");
    vigil_agent_spec spec = {.name = "bob", .prompt = "You are Bob."};
    ASSERT_OK(vigil_agent_create(f.t.rt, &spec, bob_id, E));
    mk(&f, VG_TIER_CORE, "persona", "curious", VG_PERM_READ_WRITE, 1);
    struct vg_memory_block_in in = {.agent_id = bob_id,
                                    .tier = VG_TIER_CORE,
                                    .label = "persona",
                                    .content = "terse",
                                    .permission = VG_PERM_FAMILIAR,
                                    .pinned = 1};
    ASSERT_OK(vg_memory_create(f.m, &in, "config", E));
    struct vg_store *counting = NULL; /* closed with the runtime, and the store it wraps */
    ASSERT_OK(vg_store_fault_wrap(f.t.env->store, &counting, E));
    f.t.env->store = counting;
    ASSERT_EQ(system_of(&f, counting, f.agent, ada, sizeof ada), 2);
    ASSERT_EQ(system_of(&f, counting, bob_id, bob, sizeof bob), 2);
    ASSERT_CONTAINS(ada, "You are Ada.");
    ASSERT_CONTAINS(ada, "curious");
    ASSERT_CONTAINS(bob, "terse");
    long kept = getenv("VIGIL_TEST_RT_PG") ? 2 : 1; /* PostgreSQL keeps no change marks */
    for (int turn = 0; turn < 3; turn++) {
        char again[1024];
        ASSERT_EQ(system_of(&f, counting, f.agent, again, sizeof again), kept);
        ASSERT_STREQ(again, ada);
        ASSERT_EQ(system_of(&f, counting, bob_id, again, sizeof again), kept);
        ASSERT_STREQ(again, bob);
    }
    json_t *out = NULL;
    ASSERT_OK(vg_memory_write(f.m, f.agent, "persona", "patient", NULL, &out, E));
    json_decref(out);
    ASSERT_EQ(system_of(&f, counting, f.agent, ada, sizeof ada), 2);
    ASSERT_CONTAINS(ada, "patient");
    json_t *prompt = json_pack("{s:s}", "prompt", "You are Bob, briefly.");
    ASSERT_OK(vg_agent_update(f.t.env, bob_id, prompt, E));
    json_decref(prompt);
    system_of(&f, counting, bob_id, bob, sizeof bob);
    ASSERT_CONTAINS(bob, "You are Bob, briefly.");
    ASSERT_CONTAINS(bob, "terse");
    fx_close(&f);
}

/* proves: S0-031, S0-046 */
TEST(context_has_report_observations_hot_messages_and_delta)
{
    struct fx f;
    fx_open(&f, "mem_assemble");
    ASSERT_OK(
        vg_report_set(f.t.env, f.agent, "current", "## status\nall good", NULL, NULL, NULL, E));
    for (int i = 0; i < 3; i++) {
        char note[64];
        snprintf(note, sizeof note, "note %d", i);
        struct vg_message_in in = {.agent_id = f.agent,
                                   .thread_id = "journal",
                                   .kind = VG_MSG_OBSERVATION,
                                   .content = note};
        ASSERT_OK(vg_message_append(f.t.env, &in, NULL, E));
    }
    for (int i = 0; i < 100; i++) {
        char text[64];
        snprintf(text, sizeof text, "message %d", i);
        struct vg_message_in in = {.agent_id = f.agent,
                                   .thread_id = "chat",
                                   .kind = i % 2 ? VG_MSG_THOUGHT : VG_MSG_USER,
                                   .content = text};
        ASSERT_OK(vg_message_append(f.t.env, &in, NULL, E));
    }
    struct vg_assemble_opts o = {
        .agent_id = f.agent, .thread_id = "chat", .hot_max = 10, .delta = "task 7 changed"};
    struct vg_context c;
    ASSERT_OK(vg_memory_assemble(f.m, &o, &c, E));
    ASSERT_CONTAINS(c.report, "all good");
    ASSERT_STREQ(c.delta, "task 7 changed");
    ASSERT_EQ(json_array_size(c.observations), 3);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(c.observations, 0), "content")),
                 "note 0");
    ASSERT_EQ(json_array_size(c.hot), 10); /* bounded by count */
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(c.hot, 9), "content")),
                 "message 99");
    vg_context_release(&c);
    /* bounded by tokens too: a small window keeps only the newest that fit */
    o.window = 400;
    o.hot_max = 100;
    ASSERT_OK(vg_memory_assemble(f.m, &o, &c, E));
    ASSERT(json_array_size(c.hot) < 100);
    ASSERT(c.dropped_hot > 0);
    ASSERT(c.used <= c.budget);
    ASSERT_STREQ(json_string_value(
                     json_object_get(json_array_get(c.hot, json_array_size(c.hot) - 1), "content")),
                 "message 99");
    vg_context_release(&c);
    /* A caller with its own window of the thread (the loop) asks for no hot messages: it gets
     * none, and the rest of the context as before. */
    o.window = 0;
    o.hot_max = -1;
    ASSERT_OK(vg_memory_assemble(f.m, &o, &c, E));
    ASSERT(json_is_array(c.hot));
    ASSERT_EQ(json_array_size(c.hot), 0);
    ASSERT_EQ(c.dropped_hot, 0);
    ASSERT_CONTAINS(c.report, "all good");
    ASSERT_EQ(json_array_size(c.observations), 3);
    vg_context_release(&c);
    fx_close(&f);
}

/* An embedder that fails while `down` is set (the service is unreachable). */
struct flaky {
    struct vg_embedder base;
    struct vg_embedder *inner;
    int down;
};

static int flaky_dim(struct vg_embedder *e)
{
    return vg_embed_dimension(((struct flaky *)e)->inner);
}

static vigil_code flaky_embed(struct vg_embedder *e, const char *const *t, size_t n, float *out,
                              vigil_error *err)
{
    struct flaky *f = (struct flaky *)e;
    if (f->down)
        return VG_FAIL(err, VIGIL_ENETWORK, "embedding service unreachable");
    return vg_embed(f->inner, t, n, out, err);
}

static void flaky_close(struct vg_embedder *e)
{
    (void)e;
}

static const struct vg_embed_methods flaky_methods = {1,         "flaky",     0,
                                                      flaky_dim, flaky_embed, flaky_close};

/* proves: S4-065, S4-006 */
TEST(embedder_down_falls_back_to_keyword_then_embeds_later)
{
    struct fx f;
    fx_open(&f, "mem_embed_down");
    struct flaky fl = {.base = {.methods = &flaky_methods}, .inner = f.emb, .down = 1};
    snprintf(fl.base.model, sizeof fl.base.model, "%s", vg_embed_model(f.emb));
    struct vg_memory *m = NULL;
    ASSERT_OK(vg_memory_new(f.t.env, &fl.base, &m, E));
    json_t *out = NULL;
    ASSERT_OK(
        vg_memory_write(m, f.agent, "trip", "flight to Lisbon on the fifth of May", NULL, &out, E));
    json_decref(out);
    char id[VG_BLOCK_ID_LEN];
    vg_memory_block_id(f.agent, "trip", id);
    json_t *v = NULL;
    ASSERT_CODE(VIGIL_ENOTFOUND, vg_env_get_json(f.t.env, "memory_vector", id, &v, NULL, NULL));
    /* search still finds it, by keyword only */
    json_t *hits = NULL;
    ASSERT_OK(vg_memory_search(m, f.agent, "Lisbon flight", VG_SEARCH_HYBRID, 5, &hits, E));
    ASSERT_EQ(json_array_size(hits), 1);
    ASSERT(json_object_get(json_array_get(hits, 0), "keyword_rank"));
    ASSERT(!json_object_get(json_array_get(hits, 0), "vector_rank"));
    json_decref(hits);
    /* the pass does nothing while the service is down, then embeds once it is back */
    int done = 0;
    ASSERT_OK(vg_memory_embed_pending(m, f.agent, 10, &done, E));
    ASSERT_EQ(done, 0);
    fl.down = 0;
    ASSERT_OK(vg_memory_embed_pending(m, f.agent, 10, &done, E));
    ASSERT_EQ(done, 1);
    ASSERT_OK(vg_env_get_json(f.t.env, "memory_vector", id, &v, NULL, E));
    json_decref(v);
    ASSERT_OK(vg_memory_embed_pending(m, f.agent, 10, &done, E));
    ASSERT_EQ(done, 0);
    ASSERT_OK(vg_memory_search(m, f.agent, "Lisbon flight", VG_SEARCH_HYBRID, 5, &hits, E));
    ASSERT(json_object_get(json_array_get(hits, 0), "vector_rank"));
    json_decref(hits);
    vg_memory_free(m);
    fx_close(&f);
}

/* proves: S4-068 */
TEST(memory_tools_call_the_manager)
{
    struct fx f;
    fx_open(&f, "mem_tools");
    mk(&f, VG_TIER_CORE, "system", "rules", VG_PERM_READ_ONLY, 1);
    json_t *args = json_pack("{s:s, s:s}", "label", "pet", "content", "the cat is called Miso");
    json_t *out = NULL;
    ASSERT_OK(vg_memory_tool_write(f.m, f.agent, args, &out, E));
    json_decref(args);
    json_decref(out);
    args = json_pack("{s:s}", "query", "what is the cat called");
    ASSERT_OK(vg_memory_tool_read(f.m, f.agent, args, &out, E));
    json_decref(args);
    json_t *first = json_array_get(json_object_get(out, "results"), 0);
    ASSERT_STREQ(json_string_value(json_object_get(first, "label")), "pet");
    json_decref(out);
    args = json_pack("{s:s}", "tier", "core");
    ASSERT_OK(vg_memory_tool_list(f.m, f.agent, args, &out, E));
    json_decref(args);
    ASSERT_EQ(json_array_size(json_object_get(out, "blocks")), 1);
    json_decref(out);
    args = json_pack("{s:s, s:s}", "label", "system", "content", "x");
    vigil_error err = {0};
    ASSERT_EQ(vg_memory_tool_write(f.m, f.agent, args, &out, &err), VIGIL_EDENIED);
    json_decref(args);
    args = json_pack("{s:i}", "label", 3);
    ASSERT_EQ(vg_memory_tool_write(f.m, f.agent, args, &out, &err), VIGIL_EINVAL);
    json_decref(args);
    fx_close(&f);
}

/* The content of the one core block a context would read now, inside a read batch, after the
 * agent (as vg_memory_assemble reads them: the first read takes the batch's snapshot). */
static void core_now(struct fx *f, json_t **kept, char *buf, size_t n)
{
    json_t *agent = NULL;
    vg_store_read_batch(f->t.env->store, 1);
    ASSERT_OK(vg_agent_get_shared(f->t.env, f->agent, &agent, E));
    json_decref(agent);
    ASSERT_OK(vg_memory_list_shared(f->m, f->agent, "core", kept, E));
    ASSERT_EQ(json_array_size(*kept), 1);
    snprintf(buf, n, "%s", vg_memory_str(json_array_get(*kept, 0), "content"));
    vg_store_read_batch(f->t.env->store, 0);
}

/* Each model call's context lists the agent's core and working blocks; they are listed again
 * only when the store says a block may have changed: after this connection's write of one,
 * after another connection's commit, not after a write of another kind. */
TEST(a_context_lists_blocks_again_only_when_they_may_have_changed)
{
    struct fx f;
    fx_open(&f, "mem_listed");
    int marks = getenv("VIGIL_TEST_RT_PG") == NULL; /* PostgreSQL keeps no change marks */
    mk(&f, VG_TIER_CORE, "persona", "v1", VG_PERM_READ_WRITE, 1);
    json_t *a = NULL, *b = NULL;
    char got[64];
    core_now(&f, &a, got, sizeof got);
    ASSERT_STREQ(got, "v1");
    /* a message is no block: the listing kept is served */
    struct vg_record note = {.kind = "note", .id = "n1", .owner = f.agent, .body = "{}"};
    ASSERT_OK(vg_store_begin(f.t.env->store, E));
    ASSERT_OK(vg_store_put(f.t.env->store, &note, 0, NULL, E));
    ASSERT_OK(vg_store_commit(f.t.env->store, E));
    core_now(&f, &b, got, sizeof got);
    ASSERT_STREQ(got, "v1");
    if (marks)
        ASSERT(a == b);
    json_decref(a);
    json_decref(b);
    /* this connection's write of a block */
    ASSERT_OK(vg_memory_write(f.m, f.agent, "persona", "v2", NULL, NULL, E));
    core_now(&f, &a, got, sizeof got);
    ASSERT_STREQ(got, "v2");
    json_decref(a);
    /* another connection's */
    vigil_runtime *other = NULL;
    vigil_runtime_options o = {.size = sizeof o, .store_uri = f.t.path};
    ASSERT_OK(vigil_runtime_open(&o, &other, E));
    struct vg_memory *om = NULL;
    ASSERT_OK(vg_memory_new(vg_runtime_env(other), f.emb, &om, E));
    ASSERT_OK(vg_memory_write(om, f.agent, "persona", "v3", NULL, NULL, E));
    vg_memory_free(om);
    vigil_runtime_close(other);
    core_now(&f, &a, got, sizeof got);
    ASSERT_STREQ(got, "v3");
    json_decref(a);
    fx_close(&f);
}

static int64_t kind_count(struct fx *f, const char *kind)
{
    struct vg_query q = {.kind = kind, .owner = f->agent};
    int64_t n = -1;
    ASSERT_OK(vg_store_count(f->t.env->store, &q, &n, E));
    return n;
}

/* A fresh store (this test's, on SQLite; agent_test_memory_pg's on PostgreSQL) is at the latest
 * schema and takes memory blocks, their events, messages and pending mutations at once: they are
 * kinds of the one records table, which need no migration of their own (docs/internals/
 * MEMORY.md, "Records"). Vectors are records too, so semantic search works on either adapter
 * with no database extension: a vector-only search finds the block.
 * proves: S4-067 */
TEST(a_fresh_store_holds_memory_messages_pending_changes_and_vectors)
{
    struct fx f;
    fx_open(&f, "mem_fresh");
    int version = 0;
    ASSERT_OK(vg_store_control(f.t.env->store, VG_STORE_CTRL_SCHEMA_VERSION, &version, E));
    ASSERT(version > 0);
    static const char *const kinds[] = {"memory_block", "memory_event", "memory_pending",
                                        "memory_vector", "message"};
    for (size_t i = 0; i < VG_ARRAY_LEN(kinds); i++)
        ASSERT_EQ(kind_count(&f, kinds[i]), 0);
    mk(&f, VG_TIER_ARCHIVAL, "trip", "flights booked to Lisbon in May", VG_PERM_READ_WRITE, 0);
    mk(&f, VG_TIER_CORE, "persona", "I am calm.", VG_PERM_FAMILIAR, 1);
    json_t *out = NULL;
    ASSERT_OK(vg_memory_write(f.m, f.agent, "persona", "I am cheerful.", NULL, &out, E));
    ASSERT_STREQ(json_string_value(json_object_get(out, "status")), "pending");
    json_decref(out);
    char thread[128];
    snprintf(thread, sizeof thread, "%s:session:fresh", f.agent);
    struct vg_message_in in = {
        .agent_id = f.agent, .thread_id = thread, .kind = VG_MSG_USER, .content = "hello"};
    ASSERT_OK(vg_message_append(f.t.env, &in, NULL, E));
    ASSERT_EQ(kind_count(&f, "memory_block"), 2);
    ASSERT(kind_count(&f, "memory_event") >= 3); /* two creates and the proposal */
    ASSERT_EQ(kind_count(&f, "memory_pending"), 1);
    ASSERT_EQ(kind_count(&f, "memory_vector"), 2);
    ASSERT_EQ(kind_count(&f, "message"), 1);
    json_t *hits = NULL;
    ASSERT_OK(vg_memory_search(f.m, f.agent, "flights Lisbon", VG_SEARCH_VECTOR, 5, &hits, E));
    ASSERT(json_array_size(hits) >= 1);
    ASSERT_STREQ(json_string_value(json_object_get(json_array_get(hits, 0), "label")), "trip");
    json_decref(hits);
    fx_close(&f);
}

int main(void)
{
    RUN(permissions_are_enforced_by_the_manager);
    RUN(familiar_changes_wait_for_the_human);
    RUN(every_mutation_is_in_the_event_log);
    RUN(a_person_changes_memory_at_once_whatever_the_permission);
    RUN(first_run_seeds_core_blocks_from_the_persona);
    RUN(a_first_runs_core_blocks_are_seeded_together_or_not_at_all);
    RUN(a_seed_writes_its_agents_counters_once);
    RUN(new_agents_core_blocks_are_embedded_once_by_an_offline_embedder);
    RUN(least_recently_used_working_blocks_leave_first);
    RUN(agents_taking_turns_keep_their_system_text_until_it_changes);
    RUN(context_has_report_observations_hot_messages_and_delta);
    RUN(embedder_down_falls_back_to_keyword_then_embeds_later);
    RUN(memory_tools_call_the_manager);
    RUN(a_context_lists_blocks_again_only_when_they_may_have_changed);
    RUN(a_fresh_store_holds_memory_messages_pending_changes_and_vectors);
    return 0;
}
