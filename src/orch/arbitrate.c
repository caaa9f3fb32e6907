/*
 * arbitrate.c: when children disagree (S0-142, docs/orchestration.md "When children
 * disagree"). Children of one spawn_agents call whose requests name the same decision_key
 * answer one decision; when their answers differ, a fixed policy picks one, from the stored
 * results alone, so the same results always give the same choice: the answer most of them gave
 * (compared after trimming, collapsing white space and folding ASCII case), and among answers
 * given equally often, the one of the lowest request index. A pure function: the caller puts
 * its verdict in the parent's results wake, beside the results it was drawn from.
 */
#include "base/common.h"

#include <ctype.h>

#include "orch/orch.h"

#define POLICY "majority of the same answer, then the lowest request index"

/* The answer as compared: trimmed, white space runs made one space, ASCII folded to lower
 * case (owned; NULL when out of memory). */
static char *normal(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *out = vg_malloc(n + 1);
    int space = 0;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isspace(*p)) {
            space = o > 0;
            continue;
        }
        if (space)
            out[o++] = ' ';
        space = 0;
        out[o++] = (char)tolower(*p);
    }
    out[o] = '\0';
    return out;
}

struct voter {
    int index;
    const char *request_id;
    char *answer; /* normal()'s */
};

/* The verdict over the voters of one key (n >= 1): the answer with the most votes, ties to the
 * lowest index. */
static json_t *verdict(const char *key, struct voter *v, size_t n, size_t members)
{
    size_t best = 0, best_votes = 0, distinct = 0;
    for (size_t i = 0; i < n; i++) {
        size_t votes = 0, first = i;
        for (size_t j = 0; j < n; j++) {
            if (strcmp(v[i].answer, v[j].answer))
                continue;
            votes++;
            if (v[j].index < v[first].index)
                first = j;
        }
        distinct += first == i;
        if (votes > best_votes || (votes == best_votes && v[first].index < v[best].index)) {
            best = first;
            best_votes = votes;
        }
    }
    return json_pack("{s:s, s:b, s:i, s:s?, s:s, s:I, s:I, s:s}", "decision_key", key, "agreed",
                     distinct == 1 && n == members, "chosen_index", v[best].index,
                     "chosen_request_id", v[best].request_id, "answer", v[best].answer, "votes",
                     (json_int_t)best_votes, "voters", (json_int_t)n, "policy", POLICY);
}

/* The verdict for one key, or NULL with *bad 0 when fewer than two children answer it or none
 * completed. */
static json_t *arbitrate_key(json_t *results, const char *key, int *bad)
{
    struct voter *v = vg_calloc(json_array_size(results) + 1, sizeof *v);
    size_t n = 0, members = 0, i;
    json_t *r, *out = NULL;
    if (!v) {
        *bad = 1;
        return NULL;
    }
    json_array_foreach (results, i, r) {
        const char *k = json_string_value(json_object_get(r, "decision_key"));
        const char *st = json_string_value(json_object_get(r, "status"));
        const char *text = json_string_value(json_object_get(r, "result"));
        if (!k || strcmp(k, key))
            continue;
        members++;
        if (!st || strcmp(st, "completed") || !text) /* a child that failed has no vote */
            continue;
        v[n].index = (int)json_integer_value(json_object_get(r, "index"));
        v[n].request_id = json_string_value(json_object_get(r, "request_id"));
        if (!(v[n++].answer = normal(text)))
            *bad = 1;
    }
    if (!*bad && members >= 2 && n >= 1 && !(out = verdict(key, v, n, members)))
        *bad = 1;
    for (size_t j = 0; j < n; j++)
        vg_free(v[j].answer);
    vg_free(v);
    return out;
}

json_t *vg_orch_arbitrate(json_t *results)
{
    json_t *out = json_array(), *seen = json_object(), *r;
    size_t i;
    int bad = !out || !seen;
    json_array_foreach (results, i, r) {
        const char *key = json_string_value(json_object_get(r, "decision_key"));
        if (bad || !key || json_object_get(seen, key))
            continue;
        json_t *d = arbitrate_key(results, key, &bad);
        bad |= json_object_set_new(seen, key, json_true()) != 0;
        if (d && json_array_append_new(out, d))
            bad = 1;
    }
    json_decref(seen);
    if (bad) {
        json_decref(out);
        return NULL;
    }
    return out;
}
