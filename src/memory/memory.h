/*
 * memory.h: the memory manager (docs/memory.md): blocks in three tiers with permissions enforced
 * here (never in prompts), pending mutations a human resolves, an immutable event log, hybrid
 * search (FTS5 keywords + exact cosine over stored vectors, fused by reciprocal rank), context
 * assembly within a token budget, and first-run seeding from a persona file. Compaction is in
 * memory/compact.h.
 *
 * Record kinds (store/port.h columns: owner, k1, k2, seq):
 *   memory_block      id=mb_<sha(agent,label)>  owner=agent k1=tier     k2=label     seq=created ms
 *   memory_vector     id=block id               owner=agent k1=model    k2=tier      seq=dimension
 *   memory_embed_todo id=block id               owner=agent (a block waiting for its vector)
 *   memory_event      id=uuid                   owner=agent k1=label    k2=type      seq=event no.
 *   memory_pending    id=uuid                   owner=agent k1=status   k2=delivery  seq=created ms
 *   memory_meta       id=agent id               owner=agent (event counter, vector generation)
 * The block id is derived from (agent, label), so a label is unique per agent even when two
 * writers race: the second insert fails on the id. Vectors live in their own records so a block
 * read never decodes one, and so a block can exist without one (embedder down).
 */
#ifndef VG_MEMORY_H
#define VG_MEMORY_H

#include "agent/agent.h"
#include "embed/embed.h"
#include "env/env.h"

#include <jansson.h>

enum vg_mem_tier { VG_TIER_CORE, VG_TIER_WORKING, VG_TIER_ARCHIVAL, VG_TIER_COUNT };
enum vg_mem_perm {
    VG_PERM_READ_ONLY,
    VG_PERM_FAMILIAR,
    VG_PERM_APPEND,
    VG_PERM_READ_WRITE,
    VG_PERM_COUNT
};

const char *vg_mem_tier_name(enum vg_mem_tier t); /* "core", "working", "archival" */
int vg_mem_tier_parse(const char *s, enum vg_mem_tier *out);
const char *vg_mem_perm_name(enum vg_mem_perm p); /* "read_only", "familiar", "append", ... */
int vg_mem_perm_parse(const char *s, enum vg_mem_perm *out);

struct vg_vec_cache;

/* The memory manager: ports plus an in-process cache of each agent's vectors. */
struct vg_memory {
    struct vg_env *env;           /* borrowed */
    struct vg_embedder *embedder; /* borrowed; NULL: keyword search only */
    struct vg_vec_cache *cache;   /* owned */
    /* The last agent's core and working blocks as the context read them (the env memo's
     * values), each with the store's change mark it was read under (VG_STORE_CTRL_CHANGE_MARK):
     * each model call reads both, and they are read again only when the store changed. */
    struct vg_memory_listed {
        char agent_id[VG_RECORD_ID_MAX];
        json_t *blocks; /* owned reference */
        struct vg_store_change_mark mark;
    } listed[VG_TIER_COUNT];
    /* The last few texts an offline embedder embedded here, with their vectors (owned): such an
     * embedder is a function of the text, and every new agent's first run embeds the same
     * persona's core blocks (a third of what seeding an agent cost). */
    struct vg_memory_embedded {
        char *text;
        float *vec;
    } embedded[3];
    int embedded_next;
    /* Each recent agent's system text (its prompt and core blocks as the context renders
     * them), NULL until the first model call: src/memory/assemble.c. */
    struct vg_memory_systems *systems; /* owned */
    /* One agent's counters (its memory_meta record) while vg_memory_create_missing writes its
     * blocks: bumped here and written once at the end, not read and rewritten at each event
     * and vector (six times for a new agent's three core blocks). */
    struct vg_memory_meta_batch {
        const char *agent_id; /* borrowed; NULL: no batch */
        json_t *meta;         /* owned; NULL until the first bump reads it */
        int64_t rev;          /* 0: no record yet */
    } meta_batch;
};

vigil_code vg_memory_new(struct vg_env *env, struct vg_embedder *embedder, struct vg_memory **out,
                         vigil_error *err);
void vg_memory_free(struct vg_memory *m);

/* Longest label and content the manager accepts. */
#define VG_MEMORY_LABEL_MAX 120
#define VG_MEMORY_CONTENT_MAX (256 * 1024)

/* The thread that receives approval outcomes and other system notes for an agent. */
void vg_memory_default_thread(const char *agent_id, char out[VG_RECORD_ID_MAX]);

/* A block as configuration creates it (no permission check: configuration is the authority). */
struct vg_memory_block_in {
    const char *agent_id;
    enum vg_mem_tier tier;
    const char *label;
    const char *content;
    enum vg_mem_perm permission;
    int pinned;
};

/* Create a block; EEXISTS if the agent already has the label. actor: who ("config", "human"). */
vigil_code vg_memory_create(struct vg_memory *m, const struct vg_memory_block_in *in,
                            const char *actor, vigil_error *err);
/* Create the blocks of in[0..n) the agent lacks, in one transaction: one commit, and all of them
 * or none (a block that exists already is left as it is, not an error). */
vigil_code vg_memory_create_missing(struct vg_memory *m, const struct vg_memory_block_in *in,
                                    size_t n, const char *actor, vigil_error *err);

/*
 * The agent's writes, checked against the block's permission:
 *   read_only -> EDENIED, nothing changes;  append -> write/delete EDENIED, append applies;
 *   familiar  -> a pending mutation is queued (status "pending"), nothing changes yet;
 *   read_write -> applied.
 * A write to a missing label creates a read_write block in `tier` (NULL: archival).
 * *out (owned): {"status":"applied"|"created"|"pending", "block_id", "label", "pending_id"?}.
 */
vigil_code vg_memory_write(struct vg_memory *m, const char *agent_id, const char *label,
                           const char *content, const char *tier, json_t **out, vigil_error *err);
vigil_code vg_memory_append(struct vg_memory *m, const char *agent_id, const char *label,
                            const char *text, json_t **out, vigil_error *err);
vigil_code vg_memory_delete(struct vg_memory *m, const char *agent_id, const char *label,
                            json_t **out, vigil_error *err);

/* ---- a person's changes --------------------------------------------------------------------- */

/*
 * A person's change applies at once, whatever the block's permission: permissions bind the
 * agent, not its owner, and a person is who would approve a pending change anyway. It is
 * recorded in the event log like the agent's changes (types create, update, delete) with the
 * actor who made it, so `memory history` says "by human".
 */
struct vg_memory_set_in {
    const char *agent_id;
    const char *label;
    const char *content;    /* NULL: keep the block's (a new block needs one) */
    const char *tier;       /* NULL: keep; a new block: "core" */
    const char *permission; /* NULL: keep; a new block: "read_write" */
    const char *actor;      /* who: NULL is "human" */
};

/* Create or change a block. *out (owned, optional): the block as it is now, with "change":
 * "created", "updated" or "unchanged" (nothing differed: nothing written, no event). */
vigil_code vg_memory_set(struct vg_memory *m, const struct vg_memory_set_in *in, json_t **out,
                         vigil_error *err);
/* Delete a block of any tier and permission (ENOTFOUND: no such label); actor NULL is "human".
 * *out (owned, optional): the block as it was. */
vigil_code vg_memory_remove(struct vg_memory *m, const char *agent_id, const char *label,
                            const char *actor, json_t **out, vigil_error *err);

/* One block (owned) or ENOTFOUND. */
vigil_code vg_memory_get(struct vg_memory *m, const char *agent_id, const char *label, json_t **out,
                         vigil_error *err);
/* The agent's blocks, optionally of one tier, ordered by tier then label (owned array). */
vigil_code vg_memory_list(struct vg_memory *m, const char *agent_id, const char *tier, json_t **out,
                          vigil_error *err);
/* Working blocks: load into context (and mark used now) or unload. EINVAL for other tiers. */
vigil_code vg_memory_load(struct vg_memory *m, const char *agent_id, const char *label,
                          vigil_error *err);
vigil_code vg_memory_unload(struct vg_memory *m, const char *agent_id, const char *label,
                            vigil_error *err);
/* The event log of one label, oldest first (owned array). */
vigil_code vg_memory_history(struct vg_memory *m, const char *agent_id, const char *label,
                             json_t **out, vigil_error *err);

/* ---- pending mutations ---------------------------------------------------------------------- */

/* Pending mutations (status "pending") of one agent or of all (agent NULL), oldest first. */
vigil_code vg_memory_pending_list(struct vg_memory *m, const char *agent_id, json_t **out,
                                  vigil_error *err);
/*
 * Resolve a pending mutation. Approval applies it to the block's current content; rejection
 * keeps the block and records the reason. Both write the event, mark the mutation resolved and
 * append a system message to the agent's default thread, in one transaction. Idempotent:
 * resolving again the same way returns the stored outcome; the other way is ESTATE.
 * *out (owned, optional): the resolved mutation.
 */
vigil_code vg_memory_approve(struct vg_memory *m, const char *pending_id, const char *actor,
                             json_t **out, vigil_error *err);
vigil_code vg_memory_reject(struct vg_memory *m, const char *pending_id, const char *reason,
                            const char *actor, json_t **out, vigil_error *err);
/*
 * Outcomes (approved/rejected mutations) not yet handed to the agent's loop, oldest first,
 * marked delivered in the same transaction (owned array: {pending_id, label, status, reason,
 * new_content, text}). The loop calls this between turns.
 */
vigil_code vg_memory_outcomes_take(struct vg_memory *m, const char *agent_id, json_t **out,
                                   vigil_error *err);

/* ---- search --------------------------------------------------------------------------------- */

enum vg_search_mode { VG_SEARCH_HYBRID, VG_SEARCH_KEYWORD, VG_SEARCH_VECTOR };

/* Split user text into plain search terms (lowercased words, at most 32). *out owned array. */
vigil_code vg_memory_query_terms(const char *text, json_t **out, vigil_error *err);

/*
 * Search the agent's blocks of every tier (and summaries of compacted history): keyword hits
 * (store text index) and vector hits (exact cosine over the agent's vectors of the current
 * embedder's model) fused by reciprocal rank (k = 60). Without an embedder or vectors, keyword
 * only; a vector hit of similarity 0 or less is no hit. *out (owned): array of {kind, id,
 * label?, tier?, content, score, keyword_rank?, vector_rank?, similarity? (its cosine)} best
 * first, at most k (1..100).
 */
vigil_code vg_memory_search(struct vg_memory *m, const char *agent_id, const char *query,
                            enum vg_search_mode mode, int k, json_t **out, vigil_error *err);

/* Embed up to max blocks stored without a vector (embedder was down, or a write inside a
 * transaction left a networked one alone). *done: how many. Inside a transaction with such an
 * embedder it does nothing (*done 0): a network call must not hold the write lock. */
vigil_code vg_memory_embed_pending(struct vg_memory *m, const char *agent_id, int max, int *done,
                                   vigil_error *err);

/* ---- first run ------------------------------------------------------------------------------ */

/*
 * Seed core blocks (system: read_only, persona: familiar, familiar: familiar) when the agent
 * has no blocks. The persona file is `path`, else $VIGIL_PERSONA, else the shipped
 * share/persona/default.md. Sections start with "# system", "# persona", "# familiar".
 * *seeded: 1 when blocks were created, 0 when the agent already had memory.
 */
vigil_code vg_memory_seed(struct vg_memory *m, const char *agent_id, const char *path, int *seeded,
                          vigil_error *err);

/* ---- context assembly ----------------------------------------------------------------------- */

struct vg_assemble_opts {
    const char *agent_id;  /* required */
    const char *thread_id; /* required: the active thread */
    int64_t window;        /* the model's context window in tokens; 0: 128000 */
    double budget_ratio;   /* share of the window to fill; 0: 0.8 */
    int hot_max;           /* most raw messages; 0: 40; negative: none (the caller has its own) */
    int summary_max;       /* most summaries; 0: 8 */
    int observation_max;   /* most observation notes; 0: 50 */
    int prior_max;         /* most prior threads whose latest summary is sent; 0: 4 */
    const char *delta;     /* the wake delta text, optional */
};

/*
 * What goes to the model, in order. Every list is oldest first. The loop turns it into model
 * messages: system (+ report, observations, working blocks, summaries) then hot, then delta.
 * The read cost is bounded by the option limits, never by the length of history.
 */
struct vg_context {
    char *system;         /* the agent's prompt and core blocks (owned) */
    char *report;         /* current report markdown or NULL (owned) */
    json_t *observations; /* observation messages (owned array) */
    json_t *working;      /* loaded working blocks that fit (owned array) */
    json_t *evicted;      /* labels of loaded working blocks left out for budget (owned) */
    json_t *summaries;    /* summary messages of older spans (owned array) */
    json_t *prior;        /* the latest summary of each of the agent's other threads (owned) */
    json_t *hot;          /* recent raw messages of the thread (owned array) */
    char *delta;          /* the wake delta (owned) or NULL */
    int64_t budget;       /* tokens allowed */
    int64_t used;         /* tokens taken (estimate) */
    int64_t dropped_hot;  /* hot messages left out for budget */
};

vigil_code vg_memory_assemble(struct vg_memory *m, const struct vg_assemble_opts *o,
                              struct vg_context *out, vigil_error *err);
void vg_context_release(struct vg_context *c);

/* ---- tools (JSON in, JSON out; the tool layer registers them) -------------------------------- */

/* memory_read {"query", "k"?}; memory_write {"label","content","tier"?}; memory_list {"tier"?};
 * memory_append {"label","text"}; memory_load / memory_unload {"label"}. args borrowed, *out
 * owned. A permission refusal is returned as an error code (EDENIED) with its message. */
vigil_code vg_memory_tool_read(struct vg_memory *m, const char *agent_id, json_t *args,
                               json_t **out, vigil_error *err);
vigil_code vg_memory_tool_write(struct vg_memory *m, const char *agent_id, json_t *args,
                                json_t **out, vigil_error *err);
vigil_code vg_memory_tool_list(struct vg_memory *m, const char *agent_id, json_t *args,
                               json_t **out, vigil_error *err);
vigil_code vg_memory_tool_append(struct vg_memory *m, const char *agent_id, json_t *args,
                                 json_t **out, vigil_error *err);
vigil_code vg_memory_tool_load(struct vg_memory *m, const char *agent_id, json_t *args,
                               json_t **out, vigil_error *err);
vigil_code vg_memory_tool_unload(struct vg_memory *m, const char *agent_id, json_t *args,
                                 json_t **out, vigil_error *err);

/* internal to src/memory: the vector cache is dropped when an agent's vectors change. */
vigil_code vg_memory_meta_bump(struct vg_memory *m, const char *agent_id, int vectors,
                               int64_t *event_no, vigil_error *err);
void vg_vec_cache_free(struct vg_vec_cache *c);

#endif
