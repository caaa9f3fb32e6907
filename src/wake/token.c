/*
 * token.c: the token classifier (semantic keys, subtype tokens, entity ids), notification
 * batches with their identity, and the self-suppression memory of entity ids an agent's run
 * mutated (docs/internals/WAKE.md: the fallback for batches that arrive without a source tag).
 */
#include "base/common.h"

#include "base/hash.h"
#include "wake/wake_int.h"

/* ---- classifier ------------------------------------------------------------------------------ */

enum vg_token_class vg_token_classify(const char *t)
{
    const char *p;
    int dot = 0;
    if (!t || !*t)
        return VG_TOKEN_ENTITY;
    /* Semantic keys are UPPER_SNAKE: TASK, DAY_PLAN, AGENT_CHANGED. */
    if (*t >= 'A' && *t <= 'Z') {
        for (p = t; *p; p++)
            if (!((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
                break;
        if (!*p)
            return VG_TOKEN_KEY;
    }
    /* Subtype tokens are dotted names starting with a lowercase letter: workout.running. */
    if (*t >= 'a' && *t <= 'z') {
        for (p = t; *p; p++) {
            if (*p == '.') {
                if (p[-1] == '.' || !p[1])
                    return VG_TOKEN_ENTITY;
                dot = 1;
            } else if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                         (*p >= '0' && *p <= '9') || *p == '_' || *p == '-')) {
                return VG_TOKEN_ENTITY;
            }
        }
        if (dot)
            return VG_TOKEN_SUBTYPE;
    }
    return VG_TOKEN_ENTITY;
}

static const char *const class_names[] = {"key", "subtype", "entity"};

const char *vg_token_class_name(enum vg_token_class c)
{
    return (unsigned)c < 3 ? class_names[c] : "entity";
}

int vg_token_class_parse(const char *name, enum vg_token_class *out)
{
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, class_names[i])) {
            *out = (enum vg_token_class)i;
            return 0;
        }
    return -1;
}

/* ---- batches --------------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void vg_wake_batch_release(struct vg_wake_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        vg_free(b->tokens[i]);
    for (size_t i = 0; i < b->n_records; i++)
        vg_free(b->record_ids[i]);
    vg_free(b->tokens);
    vg_free(b->record_ids);
    vg_free(b->source);
    vg_free(b->sequence);
    memset(b, 0, sizeof *b);
}

vigil_code vg_wake_batch_build(struct vg_wake_batch *b, const char *const *tokens, size_t n,
                               const char *source, const char *sequence, vigil_error *err)
{
    vigil_code rc = VIGIL_OK;
    const char **parts = NULL;
    memset(b, 0, sizeof *b);
    if (n && !(b->tokens = vg_calloc(n, sizeof *b->tokens)))
        goto oom;
    for (size_t i = 0; i < n; i++) {
        if (!tokens[i] || !*tokens[i] || strlen(tokens[i]) > 190) {
            rc = VG_FAIL(err, VIGIL_EINVAL,
                         "invalid notification token \"%.40s\": use 1 to 190 "
                         "bytes",
                         tokens[i] ? tokens[i] : "");
            goto fail;
        }
        if (!(b->tokens[b->n] = vg_strdup(tokens[i])))
            goto oom;
        b->n++;
    }
    if (b->n)
        qsort(b->tokens, b->n, sizeof *b->tokens, cmp_str);
    size_t k = 0; /* drop duplicates */
    for (size_t i = 0; i < b->n; i++) {
        if (k && !strcmp(b->tokens[k - 1], b->tokens[i]))
            vg_free(b->tokens[i]);
        else
            b->tokens[k++] = b->tokens[i];
    }
    b->n = k;
    if (source && *source && !(b->source = vg_strdup(source)))
        goto oom;
    if (!(b->sequence = vg_strdup(sequence ? sequence : "")))
        goto oom;
    if (!(parts = vg_calloc(b->n + 1, sizeof *parts)))
        goto oom;
    for (size_t i = 0; i < b->n; i++)
        parts[i] = b->tokens[i];
    parts[b->n] = b->sequence;
    vg_sha256_hex_parts(b->identity, parts, b->n + 1);
    vg_free(parts);
    return VIGIL_OK;
oom:
    rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building a notification batch");
fail:
    vg_free(parts);
    vg_wake_batch_release(b);
    return rc;
}

int vg_wake_batch_has(const struct vg_wake_batch *b, const char *token)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(b->tokens[mid], token);
        if (!c)
            return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* ---- self-suppression memory ----------------------------------------------------------------- */

struct suppress_entry {
    struct suppress_entry *next;
    char agent[37];
    int64_t expires_ms; /* wall ms after which the entry no longer suppresses */
    int prereg;         /* 1: the pre-registered watch set of a running run */
    char **ids;         /* owned */
    size_t n;
};

struct vg_suppress {
    struct suppress_entry *head;
};

static void entry_free(struct suppress_entry *e)
{
    for (size_t i = 0; i < e->n; i++)
        vg_free(e->ids[i]);
    vg_free(e->ids);
    vg_free(e);
}

struct vg_suppress *vg_suppress_new(void)
{
    return vg_calloc(1, sizeof(struct vg_suppress));
}

void vg_suppress_free(struct vg_suppress *s)
{
    if (!s)
        return;
    while (s->head) {
        struct suppress_entry *e = s->head;
        s->head = e->next;
        entry_free(e);
    }
    vg_free(s);
}

static void note(struct vg_wake *w, const char *agent_id, const char *const *ids, size_t n,
                 int prereg, int64_t ttl);

void vg_wake_note_mutations(struct vg_wake *w, const char *agent_id, const char *const *ids,
                            size_t n)
{
    note(w, agent_id, ids, n, 0, w->cfg.suppress_ttl_ms);
}

void vg_suppress_prereg(struct vg_wake *w, const char *agent_id, const char *const *ids, size_t n)
{
    /* Held for the whole run (docs/internals/WAKE.md); the run's end replaces it. */
    note(w, agent_id, ids, n, 1, INT64_MAX / 4);
}

void vg_suppress_end_run(struct vg_wake *w, const char *agent_id)
{
    struct suppress_entry *e = w->suppress->head;
    while (e && strcmp(e->agent, agent_id))
        e = e->next;
    if (e && e->prereg) /* the run reported no mutations of its own: nothing to suppress */
        note(w, agent_id, NULL, 0, 0, 0);
}

static void note(struct vg_wake *w, const char *agent_id, const char *const *ids, size_t n,
                 int prereg, int64_t ttl)
{
    struct vg_suppress *s = w->suppress;
    struct suppress_entry **pp = &s->head, *e;
    while (*pp && strcmp((*pp)->agent, agent_id))
        pp = &(*pp)->next;
    if (*pp) { /* the latest run's set replaces the earlier one */
        e = *pp;
        *pp = e->next;
        entry_free(e);
    }
    if (!n)
        return;
    if (!(e = vg_calloc(1, sizeof *e)) || !(e->ids = vg_calloc(n, sizeof *e->ids))) {
        vg_free(e); /* out of memory: no suppression, at worst one extra wake */
        return;
    }
    snprintf(e->agent, sizeof e->agent, "%s", agent_id);
    e->expires_ms = vg_env_now(w->env) + ttl;
    e->prereg = prereg;
    for (size_t i = 0; i < n; i++)
        if ((e->ids[e->n] = vg_strdup(ids[i])))
            e->n++;
    e->next = s->head;
    s->head = e;
}

int vg_suppress_covers(struct vg_wake *w, const char *agent_id, const struct vg_wake_batch *b)
{
    int64_t now = vg_env_now(w->env);
    size_t entities = 0;
    struct suppress_entry *e = w->suppress->head;
    while (e && strcmp(e->agent, agent_id))
        e = e->next;
    if (!e || now > e->expires_ms)
        return 0;
    for (size_t i = 0; i < b->n; i++) {
        if (vg_token_classify(b->tokens[i]) != VG_TOKEN_ENTITY)
            continue;
        entities++;
        size_t j;
        for (j = 0; j < e->n; j++)
            if (!strcmp(e->ids[j], b->tokens[i]))
                break;
        if (j == e->n)
            return 0; /* an entity the agent did not write: someone else changed something */
    }
    return entities > 0;
}
