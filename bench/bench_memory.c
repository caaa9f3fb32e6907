/*
 * bench_memory.c: memory figures. Prints them; asserts nothing.
 *
 *   bench_memory [BLOCKS] [MESSAGES] [DIR]   defaults 100000 blocks, 1000000 messages, /tmp
 *
 * 1. Archival search over BLOCKS blocks with 384-dim vectors: exact top-10 over the contiguous
 *    vector array, against the memory-bandwidth limit of scanning those bytes (a memcpy probe
 *    and a plain float-sum probe over an array of the same size); then end-to-end hybrid
 *    search (FTS5 + vectors + fusion + loading the hits) through the memory manager.
 * 2. Context assembly with 10 vs MESSAGES messages of thread history.
 * 3. Compaction throughput: jobs and summarized messages per second (extractive summarizer).
 */
#include "helpers/rt.h"

#include "agent/agent.h"
#include "memory/compact.h"
#include "memory/memory.h"
#include "bench_util.h"

#include <time.h>

static void die(const vigil_error *e, const char *what)
{
    fprintf(stderr, "bench_memory: %s: %s\n", what, e->message);
    exit(1);
}

static const char *const words[] = {
    "alice",  "bridge",   "coffee", "marathon",   "porto",   "jazz",     "garden",  "dentist",
    "novel",  "train",    "alps",   "vegetarian", "phone",   "repair",   "fern",    "rent",
    "gym",    "film",     "cat",    "sister",     "project", "deadline", "quarter", "tea",
    "lisbon", "japanese", "class",  "radio",      "morning", "evening",  "book",    "gift",
    "pen",    "ink",      "green",  "blue",       "car",     "brake"};

static void text_for(long i, char *buf, size_t n)
{
    uint64_t s = (uint64_t)i * 2654435761u + 12345;
    int o = snprintf(buf, n, "note %ld:", i);
    for (int w = 0; w < 12 && o < (int)n - 16; w++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        o += snprintf(buf + o, n - (size_t)o, " %s", words[(s >> 33) % VG_ARRAY_LEN(words)]);
    }
}

static volatile float sink;

static void search_bench(struct vg_env *env, const char *agent, long n_blocks)
{
    vigil_error err = {0};
    struct vg_embedder *emb = NULL;
    struct vg_memory *m = NULL;
    if (vg_embed_hash_new(0, &emb, &err) || vg_memory_new(env, emb, &m, &err))
        die(&err, "setup");
    const int dim = 384;
    float *mat = vg_malloc(sizeof *mat * (size_t)n_blocks * dim);
    if (!mat)
        die(&err, "out of memory");
    char text[256];
    double t0 = bench_wall_s();
    for (long i = 0; i < n_blocks; i++) {
        text_for(i, text, sizeof text);
        const char *t = text;
        vg_embed(emb, &t, 1, mat + (size_t)i * dim, &err);
    }
    double t_embed = bench_wall_s() - t0;
    printf("hash embedder: %.1f us per text (%ld texts)\n", t_embed / n_blocks * 1e6, n_blocks);

    /* Bandwidth probes over an array of the same size. */
    size_t bytes = sizeof *mat * (size_t)n_blocks * dim;
    float *copy = vg_malloc(bytes);
    if (!copy)
        die(&err, "out of memory");
    memcpy(copy, mat, bytes); /* fault the pages in first */
    double best_cp = 1e9, best_sum = 1e9, best_topk = 1e9;
    for (int r = 0; r < 5; r++) {
        t0 = bench_wall_s();
        memcpy(copy, mat, bytes);
        double d = bench_wall_s() - t0;
        best_cp = d < best_cp ? d : best_cp;
        t0 = bench_wall_s();
        /* Integer adds on 64-bit words: no latency chain, so this is what reading the bytes
         * costs. */
        const uint64_t *w = (const uint64_t *)mat;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        size_t nw = bytes / 8;
        for (size_t i = 0; i + 4 <= nw; i += 4) {
            s0 += w[i];
            s1 += w[i + 1];
            s2 += w[i + 2];
            s3 += w[i + 3];
        }
        sink = (float)(s0 + s1 + s2 + s3);
        d = bench_wall_s() - t0;
        best_sum = d < best_sum ? d : best_sum;
    }
    struct vg_vec_hit hits[10];
    float q[384];
    const char *qt = "coffee in the morning with my sister in porto";
    vg_embed(emb, &qt, 1, q, &err);
    for (int r = 0; r < 10; r++) {
        t0 = bench_wall_s();
        vg_vec_topk(mat, n_blocks, dim, q, 10, hits);
        double d = bench_wall_s() - t0;
        best_topk = d < best_topk ? d : best_topk;
    }
    double mb = (double)bytes / 1e6;
    printf("vectors: %ld x %d float32 = %.1f MB\n", n_blocks, dim, mb);
    printf("  memcpy probe:   %.2f ms  (%.2f GB/s read+write)\n", best_cp * 1e3,
           2 * bytes / best_cp / 1e9);
    printf("  read probe:     %.2f ms  (%.2f GB/s read)\n", best_sum * 1e3, bytes / best_sum / 1e9);
    printf("  top-10 cosine:  %.2f ms  (%.2f GB/s scanned, %.0f%% of the read probe)\n",
           best_topk * 1e3, bytes / best_topk / 1e9, 100.0 * best_sum / best_topk);
    vg_free(copy);

    /* Populate the store: blocks with vectors and FTS, in batches of 2000 per transaction. */
    t0 = bench_wall_s();
    for (long i = 0; i < n_blocks; i += 2000) {
        if (vg_store_begin(env->store, &err))
            die(&err, "begin");
        for (long j = i; j < i + 2000 && j < n_blocks; j++) {
            char label[32];
            snprintf(label, sizeof label, "n%ld", j);
            text_for(j, text, sizeof text);
            struct vg_memory_block_in in = {.agent_id = agent,
                                            .tier = VG_TIER_ARCHIVAL,
                                            .label = label,
                                            .content = text,
                                            .permission = VG_PERM_READ_WRITE};
            if (vg_memory_create(m, &in, "bench", &err))
                die(&err, "create");
        }
        if (vg_store_commit(env->store, &err))
            die(&err, "commit");
    }
    double t_fill = bench_wall_s() - t0;
    printf("store: %ld blocks written (vector + FTS + event each) in %.1f s (%.0f us/block, "
           "batched)\n",
           n_blocks, t_fill, t_fill / n_blocks * 1e6);
    json_t *res = NULL;
    t0 = bench_wall_s();
    if (vg_memory_search(m, agent, qt, VG_SEARCH_VECTOR, 10, &res, &err))
        die(&err, "search");
    printf("  first vector search (loads and decodes %ld vectors): %.1f ms\n", n_blocks,
           (bench_wall_s() - t0) * 1e3);
    json_decref(res);
    static const struct {
        enum vg_search_mode mode;
        const char *name;
    } modes[] = {
        {VG_SEARCH_VECTOR, "vector"}, {VG_SEARCH_KEYWORD, "keyword"}, {VG_SEARCH_HYBRID, "hybrid"}};
    for (size_t k = 0; k < VG_ARRAY_LEN(modes); k++) {
        double best = 1e9;
        for (int r = 0; r < 5; r++) {
            t0 = bench_wall_s();
            if (vg_memory_search(m, agent, qt, modes[k].mode, 10, &res, &err))
                die(&err, "search");
            double d = bench_wall_s() - t0;
            best = d < best ? d : best;
            json_decref(res);
        }
        printf("  %-7s search top-10, warm: %.2f ms\n", modes[k].name, best * 1e3);
    }
    vg_free(mat);
    vg_memory_free(m);
    vg_embed_close(emb);
}

static void fill_thread(struct vg_env *env, const char *agent, const char *thread, long n)
{
    vigil_error err = {0};
    char text[256];
    for (long i = 0; i < n; i += 5000) {
        if (vg_store_begin(env->store, &err))
            die(&err, "begin");
        for (long j = i; j < i + 5000 && j < n; j++) {
            text_for(j, text, sizeof text);
            struct vg_message_in in = {.agent_id = agent,
                                       .thread_id = thread,
                                       .kind = j % 2 ? VG_MSG_THOUGHT : VG_MSG_USER,
                                       .content = text};
            if (vg_message_append(env, &in, NULL, &err))
                die(&err, "append");
        }
        if (vg_store_commit(env->store, &err))
            die(&err, "commit");
    }
}

static double assemble_time(struct vg_memory *m, const char *agent, const char *thread)
{
    vigil_error err = {0};
    double best = 1e9;
    for (int r = 0; r < 20; r++) {
        struct vg_context c;
        struct vg_assemble_opts o = {.agent_id = agent, .thread_id = thread};
        double t0 = bench_wall_s();
        if (vg_memory_assemble(m, &o, &c, &err))
            die(&err, "assemble");
        double d = bench_wall_s() - t0;
        best = d < best ? d : best;
        vg_context_release(&c);
    }
    return best;
}

static void assembly_bench(struct vg_env *env, const char *agent, long n_msgs)
{
    vigil_error err = {0};
    struct vg_memory *m = NULL;
    if (vg_memory_new(env, NULL, &m, &err) || vg_memory_seed(m, agent, NULL, NULL, &err))
        die(&err, "setup");
    fill_thread(env, agent, "short", 10);
    fill_thread(env, agent, "mid", 1000);
    double t0 = bench_wall_s();
    fill_thread(env, agent, "long", n_msgs);
    printf("history: %ld messages appended in %.1f s (batched)\n", n_msgs, bench_wall_s() - t0);
    double a = assemble_time(m, agent, "short"), b = assemble_time(m, agent, "mid"),
           c = assemble_time(m, agent, "long");
    printf("context assembly (core blocks, report, observations, working, summaries, up to 40 "
           "hot messages):\n");
    printf("  thread with 10 messages (10 hot):       %.3f ms\n", a * 1e3);
    printf("  thread with 1000 messages (40 hot):     %.3f ms\n", b * 1e3);
    printf("  thread with %ld messages (40 hot): %.3f ms\n", n_msgs, c * 1e3);
    vg_memory_free(m);
}

static void compaction_bench(struct vg_env *env, const char *agent)
{
    vigil_error err = {0};
    const long n = 20000;
    fill_thread(env, agent, "compact", n);
    struct vg_compaction_policy p = {
        .thread_budget = 4000, .keep_tokens = 1000, .level2_fanout = 8};
    long jobs = 0, msgs = 0;
    double t0 = bench_wall_s();
    for (;;) {
        char jid[VG_RECORD_ID_MAX];
        if (vg_compact_consider(env, agent, "compact", &p, jid, &err))
            die(&err, "consider");
        if (!jid[0])
            break;
        int ran = 0;
        if (vg_compact_run_one(env, NULL, &p, &ran, &err))
            die(&err, "run");
        json_t *j = NULL;
        if (vg_compact_job_get(env, jid, &j, &err))
            die(&err, "job");
        if (json_integer_value(json_object_get(j, "depth")) == 1)
            msgs += json_integer_value(json_object_get(j, "messages"));
        json_decref(j);
        jobs++;
    }
    double d = bench_wall_s() - t0;
    printf("compaction (extractive, one durable transaction per job): %ld jobs, %ld messages "
           "summarized in %.2f s: %.0f jobs/s, %.0f messages/s\n",
           jobs, msgs, d, jobs / d, msgs / d);
}

int main(int argc, char **argv)
{
    long n_blocks = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
    long n_msgs = argc > 2 ? strtol(argv[2], NULL, 10) : 1000000;
    const char *dir = argc > 3 ? argv[3] : "/tmp";
    char path[1024];
    snprintf(path, sizeof path, "%s/bench_memory.db", dir);
    remove(path);
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    vigil_runtime_options o = {.size = sizeof o, .store_uri = path, .create_if_missing = 1};
    if (vigil_runtime_open(&o, &rt, &err))
        die(&err, "open");
    struct vg_env *env = vg_runtime_env(rt);
    char agent[37];
    vigil_agent_spec spec = {.name = "bench", .prompt = "You are a benchmark."};
    if (vigil_agent_create(rt, &spec, agent, &err))
        die(&err, "agent");
    search_bench(env, agent, n_blocks);
    char agent2[37];
    if (vigil_agent_create(rt, &spec, agent2, &err))
        die(&err, "agent");
    assembly_bench(env, agent2, n_msgs);
    compaction_bench(env, agent2);
    vigil_runtime_close(rt);
    remove(path);
    return 0;
}
