/*
 * test_search.c: search ranking on a small labelled set. Prints recall@5 for keyword, vector
 * (offline hash embedder) and hybrid (reciprocal rank fusion); asserts each finds most answers
 * and that fusion is no worse than keywords alone. Also: the FTS query cannot be injected.
 */
#include "helpers/rt.h"

#include "memory/memory.h"
#include "store/store_int.h"

static const struct {
    const char *label, *content;
} docs[] = {
    {"pet", "Alice has a grey cat named Miso who sleeps on the radiator."},
    {"coffee", "Alice drinks her coffee black, no sugar, two cups every morning."},
    {"allergy", "Alice is allergic to peanuts and carries an epinephrine pen."},
    {"work", "Alice works as a structural engineer designing pedestrian bridges."},
    {"sister", "Alice's sister Joana lives in Porto and teaches mathematics."},
    {"running", "Alice trains for the Lisbon half marathon on Sunday mornings."},
    {"car", "The car is a blue 2014 hatchback that needs new brake pads."},
    {"birthday", "Alice's birthday is on the ninth of March."},
    {"music", "Alice listens to Brazilian jazz, especially bossa nova records."},
    {"language", "Alice is learning Japanese with evening classes twice a week."},
    {"garden", "Tomatoes and basil grow in the balcony garden each summer."},
    {"dentist", "Dentist appointment booked for the twelfth at half past three."},
    {"book", "Currently reading a long novel about a lighthouse keeper."},
    {"travel", "Planning a train journey through the Swiss Alps in autumn."},
    {"diet", "Alice avoids red meat and cooks mostly vegetarian dishes."},
    {"phone", "Her phone screen cracked last week; repair shop quoted ninety euros."},
    {"sleep", "Alice goes to bed around eleven and wakes at half past six."},
    {"project", "The bridge project deadline moved to the end of the quarter."},
    {"gift", "Idea for Joana's gift: a fountain pen with green ink."},
    {"wifi", "The home wifi password is stored in the password manager, not here."},
    {"plants", "Water the fern on the windowsill every three days."},
    {"bank", "Rent is paid on the first of each month by standing order."},
    {"gym", "Gym membership renews in June; consider cancelling."},
    {"movie", "Favourite films are slow science fiction like Solaris."},
};

static const struct {
    const char *query, *answer;
} queries[] = {
    {"what is the name of the cat", "pet"},
    {"how does she take her coffee", "coffee"},
    {"peanut allergy", "allergy"},
    {"engineering job bridges", "work"},
    {"who is Joana", "sister"},
    {"marathon training", "running"},
    {"brakes on the car", "car"},
    {"when is her birthday", "birthday"},
    {"bossa nova", "music"},
    {"japanese lessons", "language"},
    {"tomato garden", "garden"},
    {"dentist appointment", "dentist"},
    {"vegetarian cooking", "diet"},
    {"cracked phone repair", "phone"},
    {"present for her sister", "gift"},
    {"watering the fern", "plants"},
    {"science fiction films", "movie"},
    {"trains in the alps", "travel"},
};

static double recall_at_5(struct vg_memory *m, const char *agent, enum vg_search_mode mode)
{
    int found = 0;
    for (size_t i = 0; i < VG_ARRAY_LEN(queries); i++) {
        json_t *hits = NULL;
        ASSERT_OK(vg_memory_search(m, agent, queries[i].query, mode, 5, &hits, E));
        for (size_t h = 0; h < json_array_size(hits); h++)
            if (strcmp(json_string_value(json_object_get(json_array_get(hits, h), "label")),
                       queries[i].answer) == 0) {
                found++;
                break;
            }
        json_decref(hits);
    }
    return (double)found / (double)VG_ARRAY_LEN(queries);
}

/* proves: S4-005 */
TEST(recall_at_5_on_a_labelled_set)
{
    struct test_rt t;
    test_rt_open(&t, "search_recall");
    char agent[37];
    vigil_agent_spec spec = {.name = "s"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    struct vg_embedder *emb = NULL;
    struct vg_memory *m = NULL;
    ASSERT_OK(vg_embed_hash_new(0, &emb, E));
    ASSERT_OK(vg_memory_new(t.env, emb, &m, E));
    for (size_t i = 0; i < VG_ARRAY_LEN(docs); i++) {
        struct vg_memory_block_in in = {.agent_id = agent,
                                        .tier = VG_TIER_ARCHIVAL,
                                        .label = docs[i].label,
                                        .content = docs[i].content,
                                        .permission = VG_PERM_READ_WRITE};
        ASSERT_OK(vg_memory_create(m, &in, "test", E));
    }
    double kw = recall_at_5(m, agent, VG_SEARCH_KEYWORD);
    double vec = recall_at_5(m, agent, VG_SEARCH_VECTOR);
    double hy = recall_at_5(m, agent, VG_SEARCH_HYBRID);
    printf("recall@5 over %zu queries: keyword %.2f, vector (hash embedder) %.2f, hybrid %.2f\n",
           VG_ARRAY_LEN(queries), kw, vec, hy);
    ASSERT(kw >= 0.6);
    ASSERT(vec >= 0.6);
    ASSERT(hy >= kw);
    /* A query that shares nothing with memory finds nothing, and one of common words alone
     * matches no block by them (E15 of session 31's trial): memory_read hands a model no
     * "top memory" for a question it knows nothing about. */
    static const char *const nothing[] = {"xqzv", "pterodactyl", "zebra quantum", "the",
                                          "what is in it"};
    for (size_t i = 0; i < VG_ARRAY_LEN(nothing); i++) {
        json_t *hits = NULL;
        ASSERT_OK(vg_memory_search(m, agent, nothing[i], VG_SEARCH_HYBRID, 5, &hits, E));
        if (json_array_size(hits))
            TEST_FAIL_("\"%s\" found \"%s\" (%s)", nothing[i],
                       json_string_value(json_object_get(json_array_get(hits, 0), "label")),
                       json_dumps(json_array_get(hits, 0), 0));
        json_decref(hits);
    }
    vg_memory_free(m);
    vg_embed_close(emb);
    test_rt_close(&t);
}

TEST(query_syntax_is_never_injected)
{
    struct test_rt t;
    test_rt_open(&t, "search_inject");
    char agent[37];
    vigil_agent_spec spec = {.name = "s"};
    ASSERT_OK(vigil_agent_create(t.rt, &spec, agent, E));
    struct vg_memory *m = NULL;
    ASSERT_OK(vg_memory_new(t.env, NULL, &m, E));
    json_t *out = NULL;
    ASSERT_OK(vg_memory_write(m, agent, "n", "a note about NEAR and OR operators", NULL, &out, E));
    json_decref(out);
    /* a label that would be a path out of its place is refused (trial E29); user:alice is not */
    ASSERT_CODE(VIGIL_EINVAL, vg_memory_write(m, agent, "../../etc", "x", NULL, &out, NULL));
    ASSERT_CODE(VIGIL_EINVAL, vg_memory_write(m, agent, "..", "x", NULL, &out, NULL));
    ASSERT_OK(vg_memory_write(m, agent, "user:alice", "likes tea", NULL, &out, E));
    json_decref(out);
    static const char *const evil[] = {
        "\"",  "\"\"\"", "NEAR(a b",  "a OR",     "AND", "text:note", "^note",  "note*",
        "(((", "-note",  "col : \"x", "\x01\x02", "",    "   ",       "n\"ote", "NOT note"};
    for (size_t i = 0; i < VG_ARRAY_LEN(evil); i++) {
        json_t *hits = NULL;
        ASSERT_OK(vg_memory_search(m, agent, evil[i], VG_SEARCH_KEYWORD, 5, &hits, E));
        json_decref(hits);
    }
    /* the store port quotes terms itself */
    const char *terms[] = {"NEAR(", "\"", "OR"};
    struct vg_buf b;
    vg_buf_init(&b, 0);
    ASSERT_EQ(vg_sqlite_fts_query(terms, 3, &b), 0);
    ASSERT_STREQ(b.data, "\"NEAR(\" OR \"\"\"\" OR \"OR\"");
    vg_buf_release(&b);
    vg_memory_free(m);
    test_rt_close(&t);
}

int main(void)
{
    RUN(recall_at_5_on_a_labelled_set);
    RUN(query_syntax_is_never_injected);
    return 0;
}
