/*
 * test_body.c: the bodies of messages, journal records and tool calls are stored without the
 * values their row's columns hold (store/body.h), and every read gives back the bytes that were
 * written: through get and scan, for bodies that can be packed, for every text that cannot, and
 * for rows stored in the full form before (an old store needs no migration).
 */
#include "helpers/test.h"

#include "base/hash.h"
#include "base/json.h"
#include "os/clock.h"
#include "store/body.h"
#include "store/store.h"

#include <sqlite3.h>
#include <string.h>

#define AGENT "0190aaaa-0000-7000-8000-000000000001"
#define THREAD AGENT ":session:c0"
#define MSG_ID "0190aaaa-0000-7000-8000-0000000000m1"
#define AT 1795798305569

static struct vg_store *open_store(const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/s.db", vg_test_tmpdir(name));
    struct vg_store_options o = {.create_if_missing = 1};
    struct vg_store *s = NULL;
    ASSERT_OK(vg_store_open(path, &o, &s, E));
    return s;
}

/* A message body as src/agent/message.c writes it for the row below. */
static void message_body(char *out, size_t cap, const char *created_at)
{
    snprintf(out, cap,
             "{\"agent_id\":\"" AGENT "\",\"content\":\"hello\",\"content_type\":\"text/plain\","
             "\"created_at\":\"%s\",\"id\":\"" MSG_ID "\",\"kind\":\"user\",\"metadata\":null,"
             "\"payload_id\":null,\"prev_id\":null,\"run_id\":\"r1\",\"seq\":7,"
             "\"thread_id\":\"" THREAD "\",\"tokens\":2}",
             created_at);
}

static const struct vg_record message_row = {.kind = "message",
                                             .id = MSG_ID,
                                             .owner = AGENT,
                                             .k1 = THREAD,
                                             .k2 = "user",
                                             .seq = 7,
                                             .at = AT};

static int copy_body(void *user, const struct vg_record *r)
{
    snprintf(user, 2048, "%s", r->body);
    return 0;
}

/* The body text as the store file holds it. */
static void raw_body(const char *path, const char *kind, const char *id, char *out)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    ASSERT_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT body FROM records WHERE kind = ?1 AND id = ?2", -1,
                                 &st, NULL),
              SQLITE_OK);
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    snprintf(out, 2048, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

TEST(a_message_keeps_its_ids_once_and_reads_as_written)
{
    char path[4200], body[2048], at[32], got[2048] = "", raw[2048];
    struct vg_store *s = open_store("body_message", path, sizeof path);
    vg_time_format_ms(at, AT);
    message_body(body, sizeof body, at);
    struct vg_record r = message_row;
    r.body = body;
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT_OK(vg_store_get(s, "message", MSG_ID, copy_body, got, E));
    ASSERT_STREQ(got, body);
    got[0] = '\0';
    struct vg_query q = {.kind = "message", .owner = AGENT, .k1 = THREAD};
    ASSERT_OK(vg_store_scan(s, &q, copy_body, got, E));
    ASSERT_STREQ(got, body);
    vg_store_close(s);

    /* The file holds each id once, in its column, and none of the other column values. */
    raw_body(path, "message", MSG_ID, raw);
    ASSERT(strstr(raw, AGENT) == NULL);
    ASSERT(strstr(raw, MSG_ID) == NULL);
    ASSERT(strstr(raw, at) == NULL);
    ASSERT(strstr(raw, "\"seq\"") == NULL && strstr(raw, "\"payload_id\"") == NULL);
    ASSERT_CONTAINS(raw, "\"content\":\"hello\"");
    ASSERT(strlen(raw) + 150 < strlen(body));
}

TEST(a_value_other_than_the_columns_is_kept)
{
    char path[4200], body[2048], got[2048] = "", raw[2048];
    struct vg_store *s = open_store("body_other", path, sizeof path);
    message_body(body, sizeof body, "2020-01-01T00:00:00.000Z"); /* not the row's time */
    struct vg_record r = message_row;
    r.body = body;
    r.k2 = "thought"; /* not the body's kind either */
    ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
    ASSERT_OK(vg_store_get(s, "message", MSG_ID, copy_body, got, E));
    ASSERT_STREQ(got, body);
    vg_store_close(s);
    raw_body(path, "message", MSG_ID, raw);
    ASSERT_CONTAINS(raw, "\"created_at\":\"2020-01-01T00:00:00.000Z\"");
    ASSERT_CONTAINS(raw, "\"kind\":\"user\"");
}

TEST(texts_that_cannot_be_packed_read_as_written)
{
    static const char *const bodies[] = {
        "{}",
        "[1,2]",
        "\"x\"",
        "{ \"agent_id\":\"" AGENT "\"}",
        "{\"thread_id\":\"" THREAD "\",\"agent_id\":\"" AGENT "\"}",
        "{\"\":1}",
        "{\"\":0,\"x\":[1{,",
        "{\"\":",
        "{\"\":0,\"x\":1}",
        "{\"\":3,\"agent_id\":\"" AGENT "\"}",
        "{\"\":\"x\",\"agent_id\":\"" AGENT "\",\"seq\":7}",
        "{\"a\\\"b\":1,\"agent_id\":\"" AGENT "\"}",
        "{\"agent_id\":\"" AGENT "\",\"z\":{\"agent_id\":\"" AGENT "\"}}",
        "{\"agent_id\":\"" AGENT "\",\"cost\":1.5e3,\"s\":\"a,\\\"}b\",\"seq\":7}",
        "{\"agent_id\":\"" AGENT "\",\"seq\":7",
        "{\"agent_id\":\"" AGENT "\",\"seq\":07}",
        "{\"seq\":7,\"seq\":7}",
    };
    static const char *const kinds[] = {"message", "journal", "run_tool_call", "run"};
    char path[4200], got[2048];
    struct vg_store *s = open_store("body_odd", path, sizeof path);
    for (size_t k = 0; k < VG_ARRAY_LEN(kinds); k++) {
        for (size_t i = 0; i < VG_ARRAY_LEN(bodies); i++) {
            char id[32];
            snprintf(id, sizeof id, "odd-%zu", i);
            struct vg_record r = message_row;
            r.kind = kinds[k];
            r.id = id;
            r.body = bodies[i];
            ASSERT_OK(vg_store_put(s, &r, 0, NULL, E));
            got[0] = '\0';
            ASSERT_OK(vg_store_get(s, kinds[k], id, copy_body, got, E));
            ASSERT_STREQ(got, bodies[i]);
        }
    }
    vg_store_close(s);
}

TEST(rows_stored_in_the_full_form_read_as_they_are)
{
    /* What a store written before the packed form holds: the full body, no marker. */
    char path[4200], body[2048], at[32], got[2048] = "";
    struct vg_store *s = open_store("body_old", path, sizeof path);
    vg_store_close(s);
    vg_time_format_ms(at, AT);
    message_body(body, sizeof body, at);
    sqlite3 *db = NULL;
    ASSERT_EQ(sqlite3_open(path, &db), SQLITE_OK);
    char *sql = sqlite3_mprintf(
        "INSERT INTO records(kind, id, owner, k1, k2, seq, rev, at, body, ix) VALUES"
        "('message', '%q', '%q', '%q', 'user', 7, 1, %lld, '%q', 64)",
        MSG_ID, AGENT, THREAD, (long long)AT, body);
    ASSERT_EQ(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(sql);
    sqlite3_close(db);
    s = vg_test_store_open(path, 0);
    ASSERT_OK(vg_store_get(s, "message", MSG_ID, copy_body, got, E));
    ASSERT_STREQ(got, body);
    vg_store_close(s);
}

TEST(pack_and_unpack_are_inverse)
{
    char body[2048], at[32];
    vg_time_format_ms(at, AT);
    message_body(body, sizeof body, at);
    struct vg_record r = message_row;
    r.body = body;
    struct vg_buf packed, back;
    vg_buf_init(&packed, 1 << 20);
    vg_buf_init(&back, 1 << 20);
    ASSERT_EQ(vg_body_pack(&r, &packed), 1);
    ASSERT_STREQ(packed.data, "{\"\":4089,\"content\":\"hello\",\"run_id\":\"r1\",\"tokens\":2}");
    struct vg_record stored = r;
    stored.body = packed.data;
    ASSERT_EQ(vg_body_unpack(&stored, &back), 1);
    ASSERT_STREQ(back.data, body);
    /* a body without the marker is the body */
    vg_buf_reset(&back);
    ASSERT_EQ(vg_body_unpack(&r, &back), 0);
    vg_buf_release(&packed);
    vg_buf_release(&back);
}

/* ---- shapes: the keys and constants a step's records repeat, stored as their holes --------- */

#define RUN_ID "0190aaaa-0000-7000-8000-0000000000r1"
#define ACTION "0190aaaa-0000-7000-8000-0000000000a1"
#define OP "06586399f210e25e657d910d17bf17a7f850d60b15c9a97bddef1cb6a19eb349"
#define HASH "4e06b00948c918f21ccdb02ba16c6ccd1590aee3217d78e0713b522e88f62871"
/* OP's and ACTION's bytes as base64url, as an id hole stores them */
#define OP_B64 "BlhjmfIQ4l5lfZENF78Xp_hQ1gsVyal73e8ctqGes0k"
#define ACTION_B64 "AZCqqgAAcACAAAAAAAAAoQ"
#define HASH_B64 "TgawCUjJGPIczbAroWxszRWQruMhfXjgcTtSLoj2KHE"
#define ENVELOPE(action, status, result)                                                           \
    "\"{\\\"action_id\\\":\\\"" action "\\\",\\\"changed_entity_ids\\\":[],"                       \
    "\\\"changed_tokens\\\":[],\\\"operation_id\\\":\\\"" OP "\\\",\\\"replayed\\\":false,"        \
    "\\\"result\\\":" result ",\\\"status\\\":\\\"" status "\\\"}\""

#define J1 "0190aaaa-0000-7000-8000-0000000000j1"
static const struct vg_record journal_row = {.kind = "journal",
                                             .id = J1,
                                             .owner = AGENT,
                                             .k1 = RUN_ID,
                                             .k2 = "activity.updated",
                                             .seq = 38,
                                             .at = AT};

/* Packs body as a row like r and checks the stored text (when want is given) and that reading
 * it gives the body back. */
static void check_packed(const struct vg_record *row, const char *body, const char *want)
{
    struct vg_record r = *row;
    struct vg_buf packed, back;
    r.body = body;
    vg_buf_init(&packed, 1 << 20);
    vg_buf_init(&back, 1 << 20);
    int differs = vg_body_pack(&r, &packed);
    if (want) {
        ASSERT_EQ(differs, 1);
        ASSERT_STREQ(packed.data, want);
    }
    struct vg_record stored = r;
    stored.body = differs ? packed.data : body;
    ASSERT_STREQ(vg_body_unpack(&stored, &back) ? back.data : stored.body, body);
    vg_buf_release(&packed);
    vg_buf_release(&back);
}

TEST(a_steps_records_store_the_holes_of_their_shapes)
{
    struct vg_record msg = message_row;
    msg.at = 0; /* created_at stays in the bodies below: only the shapes are left to pack */
    /* a tool result: its envelope and metadata name the action, which prev_id names already */
    check_packed(
        &msg,
        "{\"content\":" ENVELOPE(ACTION, "success",
                                 "\\\"12\\\"") ",\"metadata\":"
                                               "{\"actionRefId\":\"" ACTION
                                               "\",\"toolName\":\"add\"},\"prev_id\":\"" ACTION
                                               "\",\"tokens\":57}",
        "{\"\":2637824,\"content\":[\"" OP_B64 "\",\"\\\"12\\\"\"],\"metadata\":[\"add\"],"
        "\"prev_id\":\"" ACTION_B64 "\",\"tokens\":57}");
    check_packed(&msg,
                 "{\"content\":\"{\\\"a\\\":11}\",\"metadata\":{\"actionType\":\"tool_call\","
                 "\"argumentsHash\":\"" HASH "\",\"operationId\":\"" OP "\",\"previewOnly\":false,"
                 "\"scopeSnapshot\":[],\"toolName\":\"add\"},\"tokens\":4}",
                 "{\"\":32768,\"content\":\"{\\\"a\\\":11}\",\"metadata\":[\"" HASH "\",\"" OP
                 "\",[],\"add\"],\"tokens\":4}");
    check_packed(&msg,
                 "{\"metadata\":{\"model\":\"m\",\"role\":\"assistant\",\"scripted\":false,"
                 "\"stop_reason\":\"tool_use\",\"tool_calls\":[{\"arguments\":\"{}\",\"id\":\"c1\","
                 "\"name\":\"add\"}]}}",
                 "{\"\":262144,\"metadata\":[\"m\",\"tool_use\",\"{}\",\"c1\",\"add\"]}");
    /* an action whose hash is its arguments': the hash is not stored, read back from them */
    check_packed(
        &msg,
        "{\"content\":\"{\\\"a\\\":11,\\\"b\\\":1}\",\"metadata\":{\"actionType\":"
        "\"tool_call\",\"argumentsHash\":\"" HASH "\",\"operationId\":\"" OP "\","
        "\"previewOnly\":false,\"scopeSnapshot\":[\"s\"],\"toolName\":\"add\"},\"tokens\":4}",
        "{\"\":4194304,\"content\":\"{\\\"a\\\":11,\\\"b\\\":1}\",\"metadata\":[\"" OP_B64
        "\",[\"s\"],\"add\"],\"tokens\":4}");
    /* several calls in one answer: the list is kept as one value */
    check_packed(
        &msg,
        "{\"metadata\":{\"model\":\"m\",\"role\":\"assistant\",\"scripted\":false,"
        "\"stop_reason\":\"tool_use\",\"tool_calls\":[{\"id\":\"c1\"},{\"id\":\"c2\"}]}}",
        "{\"\":65536,\"metadata\":[\"m\",\"tool_use\",[{\"id\":\"c1\"},{\"id\":\"c2\"}]]}");
    struct vg_record j = journal_row;
    j.at = 0;
    check_packed(&j,
                 "{\"model_call\":{\"attempts\":1,\"cached_tokens\":0,\"cost_micros\":0,"
                 "\"input_tokens\":260,\"latency_ms\":3,\"model\":\"m\",\"output_tokens\":1,"
                 "\"provider\":\"openai\",\"stop_reason\":\"end_turn\"},\"telemetry\":{"
                 "\"cached_tokens\":0,\"cost_micros\":0,\"input_tokens\":1820,\"model_calls\":13,"
                 "\"output_tokens\":145,\"tool_calls\":12,\"total_tokens\":1965}}",
                 "{\"\":36864,\"model_call\":[1,0,0,260,3,\"m\",1,\"openai\",\"end_turn\"],"
                 "\"telemetry\":[0,0,1820,13,145,12,1965]}");
    check_packed(
        &j,
        "{\"telemetry\":{\"active_tool_name\":\"add\",\"cached_tokens\":0,"
        "\"cost_micros\":0,\"input_tokens\":1,\"model_calls\":1,\"output_tokens\":1,"
        "\"tool_calls\":1,\"total_tokens\":2},\"tool_call\":{\"input\":{\"name\":\"x\"},"
        "\"name\":\"add\",\"status\":\"running\",\"tool_call_id\":\"t1\"}}",
        "{\"\":73728,\"telemetry\":[\"add\",0,0,1,1,1,1,2],\"tool_call\":[{\"name\":\"x\"},"
        "\"add\",\"t1\"]}");
    check_packed(&j,
                 "{\"tool_call\":{\"duration_ms\":0,\"name\":\"add\",\"output_message\":\"m1\","
                 "\"status\":\"succeeded\",\"tool_call_id\":\"t1\"}}",
                 "{\"\":16384,\"tool_call\":[0,\"add\",\"m1\",\"t1\"]}");
    /* a call's end kept in its result message (src/journal/ends.c): the output's message is
     * the record's own id, which is not stored again */
    check_packed(&j,
                 "{\"tool_call\":{\"duration_ms\":0,\"name\":\"add\",\"output_message\":\"" J1
                 "\",\"status\":\"succeeded\",\"tool_call_id\":\"t1\"}}",
                 "{\"\":131072,\"tool_call\":[0,\"add\",\"t1\"]}");
}

TEST(values_unlike_their_shape_are_kept_as_written)
{
    struct vg_record msg = message_row;
    msg.at = 0;
    /* an error, an envelope naming another action, no previous message: kept whole */
    const char *kept[][2] = {
        {"{\"content\":" ENVELOPE(ACTION, "error", "null") ",\"prev_id\":\"" ACTION "\"}",
         "\\\"changed_entity_ids\\\":[]"},
        {"{\"content\":" ENVELOPE(ACTION, "success", "1") ",\"prev_id\":\"" MSG_ID "\"}",
         "\\\"changed_entity_ids\\\":[]"},
        {"{\"metadata\":{\"actionRefId\":\"" ACTION "\",\"toolName\":\"add\"},\"prev_id\":null}",
         "\"metadata\":{\"actionRefId\":\"" ACTION "\",\"toolName\":\"add\"}"},
        {"{\"metadata\":{\"model\":\"m\",\"role\":\"user\",\"scripted\":false,"
         "\"stop_reason\":\"x\",\"tool_calls\":[]}}",
         "\"role\":\"user\""},
    };
    struct vg_buf out;
    vg_buf_init(&out, 1 << 20);
    for (size_t i = 0; i < VG_ARRAY_LEN(kept); i++) {
        vg_buf_reset(&out);
        msg.body = kept[i][0];
        ASSERT_CONTAINS(vg_body_pack(&msg, &out) ? out.data : msg.body, kept[i][1]);
        check_packed(&msg, kept[i][0], NULL);
    }
    vg_buf_release(&out);
    /* holes that hold a shape's own text, quotes and backslashes read back as written */
    check_packed(&msg,
                 "{\"content\":" ENVELOPE(ACTION, "success",
                                          "\\\"a,\\\\\\\"status\\\\\\\":\\\\\\\"success\\\\\\\"}"
                                          "\\\"") ",\"metadata\":{\"actionRefId\":\"" ACTION
                                                  "\",\"toolName\":\"a\\\"\\\\\"},"
                                                  "\"prev_id\":\"" ACTION "\"}",
                 NULL);
    struct vg_record j = journal_row;
    check_packed(&j,
                 "{\"telemetry\":{\"cached_tokens\":0,\"cost_micros\":0,\"input_tokens\":1,"
                 "\"model_calls\":1,\"output_tokens\":1,\"tool_calls\":1,\"total_tokens\":2,"
                 "\"x\":1},\"tool_call\":{\"input\":{\"name\":\"a\",\"status\":\"running\"},"
                 "\"name\":\"\",\"status\":\"running\",\"tool_call_id\":\"\"}}",
                 NULL);
    /* a shape's holes that do not fit it when read: the stored text is read as it is */
    struct vg_record odd = j;
    struct vg_buf back;
    vg_buf_init(&back, 1 << 20);
    odd.body = "{\"\":16384,\"tool_call\":[0,\"add\"]}";
    ASSERT_EQ(vg_body_unpack(&odd, &back), 0);
    odd.body = "{\"\":16384,\"tool_call\":{\"name\":1}}";
    ASSERT_EQ(vg_body_unpack(&odd, &back), 0);
    vg_buf_release(&back);
}

TEST(a_tool_result_stored_before_shapes_reads_as_written)
{
    /* The stored text a store written before the shapes holds (columns left out, the envelope
     * and metadata whole): read as the body that was written. */
    char at[32], want[4096];
    vg_time_format_ms(at, AT);
    snprintf(want, sizeof want,
             "{\"agent_id\":\"" AGENT "\",\"content\":" ENVELOPE(
                 ACTION, "success",
                 "\\\"12\\\"") ",\"content_type\":\"application/"
                               "json\",\"created_at\":\"%s\",\"id\":\"" MSG_ID
                               "\",\"kind\":\"user\",\"metadata\":{\"actionRefId\":\"" ACTION
                               "\",\"toolName\":\"add\"},\"payload_id\":null,\"prev_id\":\"" ACTION
                               "\",\"run_id\":\"" RUN_ID "\",\"seq\":7,\"thread_id\":\"" THREAD
                               "\",\"tokens\":57}",
             at);
    struct vg_record r = message_row;
    r.body = "{\"\":3445,\"content\":" ENVELOPE(
        ACTION, "success", "\\\"12\\\"") ",\"metadata\":"
                                         "{\"actionRefId\":\"" ACTION
                                         "\",\"toolName\":\"add\"},\"prev_id\":\"" ACTION
                                         "\",\"run_id\":\"" RUN_ID "\",\"tokens\":57}";
    struct vg_buf back;
    vg_buf_init(&back, 1 << 20);
    ASSERT_EQ(vg_body_unpack(&r, &back), 1);
    ASSERT_STREQ(back.data, want);
    vg_buf_release(&back);
    /* and the same body written now is stored as its holes and reads the same */
    check_packed(&message_row, want, NULL);
}

/* An action's metadata names the hash of its content; when the content is itself left out (the
 * empty string, a constant of the kind) or stored as holes (a tool result's envelope), the hash
 * must still be read back. */
TEST(a_hash_whose_content_is_left_out_reads_back)
{
    struct vg_record msg = message_row;
    msg.at = 0;
    /* arguments "" (a tool called without arguments): the hash of the empty string */
    check_packed(
        &msg,
        "{\"content\":\"\",\"metadata\":{\"actionType\":\"tool_call\","
        "\"argumentsHash\":\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\","
        "\"operationId\":\"" OP "\",\"previewOnly\":false,\"scopeSnapshot\":[],"
        "\"toolName\":\"add\"}}",
        NULL);
    /* a content that has the shape of a tool result's envelope, and metadata naming its hash */
    const char *env_value = "{\"action_id\":\"" ACTION "\",\"changed_entity_ids\":[],"
                            "\"changed_tokens\":[],\"operation_id\":\"" OP "\","
                            "\"replayed\":false,\"result\":1,\"status\":\"success\"}";
    char h[VG_SHA256_HEX_LEN + 1], body[4096];
    vg_sha256_hex(h, env_value, strlen(env_value));
    snprintf(body, sizeof body,
             "{\"content\":" ENVELOPE(
                 ACTION, "success",
                 "1") ",\"metadata\":{\"actionType\":"
                      "\"tool_call\",\"argumentsHash\":\"%s\",\"operationId\":\"" OP "\","
                      "\"previewOnly\":false,\"scopeSnapshot\":[],\"toolName\":\"add\"},"
                      "\"prev_id\":\"" ACTION "\"}",
             h);
    check_packed(&msg, body, NULL);
}

/* The ids a step's messages hold (prev_id, run_id: UUIDs; an operation id: a SHA-256) are
 * stored as the base64url text of their bytes (22 and 43 characters for 36 and 64), and read
 * back as their canonical text; any other text stays as written. */
TEST(a_messages_ids_are_stored_as_their_bytes)
{
    struct vg_record msg = message_row;
    msg.at = 0;
    check_packed(&msg, "{\"prev_id\":\"" ACTION "\",\"run_id\":\"" ACTION "\",\"tokens\":4}",
                 "{\"\":1572864,\"prev_id\":\"" ACTION_B64 "\",\"run_id\":\"" ACTION_B64
                 "\",\"tokens\":4}");
    /* the tool result's envelope names the action its prev_id names: read from the bytes */
    check_packed(&msg,
                 "{\"content\":" ENVELOPE(ACTION, "success", "1") ",\"metadata\":{\"actionRefId\":"
                                                                  "\"" ACTION "\",\"toolName\":"
                                                                  "\"add\"},\"prev_id\":\"" ACTION
                                                                  "\"}",
                 "{\"\":2637824,\"content\":[\"" OP_B64 "\",\"1\"],\"metadata\":[\"add\"],"
                 "\"prev_id\":\"" ACTION_B64 "\"}");
    /* not a canonical UUID (capitals, no dashes, a letter past f, one character more or less),
     * not a SHA-256's hex: kept as written */
    const char *kept[] = {
        "{\"prev_id\":\"0190AAAA-0000-7000-8000-0000000000a1\"}",
        "{\"prev_id\":\"0190aaaa000070008000-0000000000a1xxxx\"}",
        "{\"run_id\":\"0190aaaa-0000-7000-8000-0000000000g1\"}",
        "{\"run_id\":\"0190aaaa-0000-7000-8000-0000000000a\"}",
        "{\"run_id\":\"0190aaaa-0000-7000-8000-0000000000a12\"}",
        "{\"content\":" ENVELOPE(ACTION, "success", "1") ",\"prev_id\":\"r1\"}",
    };
    struct vg_buf out;
    vg_buf_init(&out, 1 << 20);
    for (size_t i = 0; i < VG_ARRAY_LEN(kept); i++) {
        vg_buf_reset(&out);
        msg.body = kept[i];
        const char *stored = vg_body_pack(&msg, &out) ? out.data : msg.body;
        ASSERT(strstr(stored, "0190") || strstr(stored, "r1"));
        check_packed(&msg, kept[i], NULL);
    }
    vg_buf_release(&out);
    /* a hole that is not what pack stores (a character outside base64url, bits past the last
     * byte, a length of another id) is not read as an id: the stored text is read as it is */
    const char *odd[] = {
        "{\"\":524288,\"prev_id\":\"AZCqqgAAcACAAAAAAAAAo+\"}",
        "{\"\":524288,\"prev_id\":\"AZCqqgAAcACAAAAAAAAAoR\"}",
        "{\"\":524288,\"prev_id\":\"AZCqqgAAcACAAAAAAAAAo\"}",
        "{\"\":524288,\"prev_id\":[\"AZCqqgAAcACAAAAAAAAAoQ\"]}",
    };
    struct vg_buf back;
    vg_buf_init(&back, 1 << 20);
    for (size_t i = 0; i < VG_ARRAY_LEN(odd); i++) {
        struct vg_record r = msg;
        r.body = odd[i];
        vg_buf_reset(&back);
        ASSERT_EQ(vg_body_unpack(&r, &back), 0);
    }
    vg_buf_release(&back);
}

/* A tool result and an action as a store of schema 20 holds them (ids as text, in the shapes of
 * then): read as written, so an older store needs no rewrite. */
TEST(ids_stored_as_text_before_read_as_written)
{
    struct vg_record msg = message_row;
    msg.at = 0;
    struct vg_buf back;
    vg_buf_init(&back, 1 << 20);
    struct vg_record r = msg;
    r.body = "{\"\":24576,\"content\":[\"" OP "\",\"\\\"12\\\"\"],\"metadata\":[\"add\"],"
             "\"prev_id\":\"" ACTION "\",\"run_id\":\"" RUN_ID "\",\"tokens\":57}";
    ASSERT_EQ(vg_body_unpack(&r, &back), 1);
    ASSERT_STREQ(back.data, "{\"content\":" ENVELOPE(
                                ACTION, "success",
                                "\\\"12\\\"") ",\"metadata\":{"
                                              "\"actionRefId\":\"" ACTION
                                              "\",\"toolName\":\"add\"},\"prev_id\":\"" ACTION
                                              "\",\"run_id\":\"" RUN_ID "\",\"tokens\":57}");
    vg_buf_reset(&back);
    r.body = "{\"\":131072,\"content\":\"{\\\"a\\\":11,\\\"b\\\":1}\",\"metadata\":[\"" OP
             "\",[\"s\"],\"add\"],\"tokens\":4}";
    ASSERT_EQ(vg_body_unpack(&r, &back), 1);
    ASSERT_CONTAINS(back.data, "\"operationId\":\"" OP "\"");
    vg_buf_release(&back);
}

/* A finished chat turn's projection (src/journal/journal.c) as bench_peer leaves it: its
 * constants, columns and shapes' keys are not stored, and it reads back as written. */
#define PROJ_AT 1795965464290
#define T0 "2026-11-29T15:17:44.126Z"
#define T1 "2026-11-29T15:17:44.290Z"
#define RUN_KEY "c78e18d072b5e7da546040f06efe9188b800b22ae90f95f1bbe8ceca00a973ec"
#define RUN_KEY_B64 "x44Y0HK159pUYEDwbv6RiLgAsirpD5Xxu-jOygCpc-w"
static const char projection[] =
    "{\"activity\":\"idle\",\"agent_id\":\"" AGENT "\",\"attention\":\"none\","
    "\"current_input_request_id\":null,\"ended_at\":\"" T1 "\",\"error\":null,"
    "\"last_sequence\":42,\"latest_activity\":{\"activity\":\"reasoning\",\"model_call\":{"
    "\"attempts\":1,\"cached_tokens\":0,\"cost_micros\":0,\"input_tokens\":260,\"latency_ms\":1,"
    "\"model\":\"steps-12\",\"output_tokens\":1,\"provider\":\"openai\",\"stop_reason\":"
    "\"end_turn\"},\"occurred_at\":\"" T1 "\",\"sequence\":40,\"telemetry\":{\"cached_tokens\":0,"
    "\"cost_micros\":0,\"input_tokens\":1820,\"model_calls\":13,\"output_tokens\":145,"
    "\"tool_calls\":12,\"total_tokens\":1965}},\"lifecycle\":\"completed\",\"model\":\"steps-12\","
    "\"parent_run_id\":null,\"processed_messages\":{\"count\":1,\"digest\":\"" OP "\"},"
    "\"processed_observations\":{\"count\":1,\"digest\":\"" HASH "\"},\"run_id\":\"" RUN_ID "\","
    "\"run_key\":\"" RUN_KEY "\",\"scope\":\"agent\",\"started_at\":\"" T0
    "\",\"summary\":\"done\","
    "\"thread_id\":\"" THREAD "\",\"timeline\":[{\"item\":\"started\",\"occurred_at\":\"" T0 "\","
    "\"run_key\":\"" RUN_KEY "\",\"sequence\":1,\"wake_reason\":\"user\"},{\"item\":\"message\","
    "\"message_id\":\"" ACTION "\",\"message_type\":\"chat\",\"occurred_at\":\"" T0 "\","
    "\"sequence\":2,\"source\":\"operator\"},{\"item\":\"delivery\",\"message_id\":\"" ACTION "\","
    "\"occurred_at\":\"" T0 "\",\"sequence\":3,\"status\":\"delivered\",\"transport\":\"model\"},"
    "{\"item\":\"chat\",\"observation_id\":\"" ACTION "\",\"occurred_at\":\"" T1 "\","
    "\"sequence\":41,\"signal\":\"message\",\"text\":\"done \\\"quoted\\\"\"},{\"attention\":"
    "\"none\",\"item\":\"state\",\"lifecycle\":\"completed\",\"occurred_at\":\"" T1 "\","
    "\"sequence\":42,\"summary\":\"done\"}],\"timeline_count\":5,\"wake_reason\":\"user\"}";

TEST(a_finished_runs_projection_stores_the_holes_of_its_shapes)
{
    struct vg_record r = {.kind = "run_projection",
                          .id = RUN_ID,
                          .owner = AGENT,
                          .k1 = RUN_ID,
                          .k2 = "",
                          .seq = 0,
                          .at = PROJ_AT};
    check_packed(
        &r, projection,
        "{\"\":131071,\"last_sequence\":42,\"latest_activity\":[1,0,0,260,1,\"steps-12\",1,"
        "\"openai\",\"end_turn\",0,40,0,0,1820,13,145,12,1965],\"model\":\"steps-12\","
        "\"processed_messages\":[1,\"" OP_B64 "\"],\"processed_observations\":[1,\"" HASH_B64 "\"],"
        "\"run_key\":\"" RUN_KEY_B64
        "\",\"started_at\":-164,\"summary\":\"done\",\"thread_id\":\"" THREAD
        "\",\"timeline\":[-164,\"" RUN_KEY_B64 "\",\"user\",\"" ACTION_B64 "\",-164,2,\"" ACTION_B64
        "\",-164,3,\"" ACTION_B64 "\",0,41,\"done \\\"quoted\\\"\",\"none\",\"completed\",0,42,"
        "\"done\"],\"timeline_count\":5}");
    /* a running turn's, a time written otherwise, a timeline of other items: read as written */
    const char *others[][2] = {
        {"\"lifecycle\":\"completed\"", "\"lifecycle\":\"running\""},
        {"\"ended_at\":\"" T1 "\"", "\"ended_at\":null"},
        {"\"started_at\":\"" T0 "\"", "\"started_at\":\"2026-11-29T15:17:44Z\""},
        {"\"started_at\":\"" T0 "\"", "\"started_at\":\"2026-11-29T15:17:44.126+00:00\""},
        {"\"source\":\"operator\"", "\"source\":\"api\""},
        {"\"sequence\":40,", "\"sequence\":\"40\","},
    };
    for (size_t i = 0; i < VG_ARRAY_LEN(others); i++) {
        char body[sizeof projection + 64];
        const char *at = strstr(projection, others[i][0]);
        ASSERT(at != NULL);
        snprintf(body, sizeof body, "%.*s%s%s", (int)(at - projection), projection, others[i][1],
                 at + strlen(others[i][0]));
        check_packed(&r, body, NULL);
    }
}

/* A finished run's record (src/journal/history.c): its status, owner, id, end and constants not
 * stored again, its start as milliseconds before its end. */
TEST(a_finished_runs_record_stores_the_holes_of_its_shapes)
{
    struct vg_record r = {.kind = "run",
                          .id = RUN_ID,
                          .owner = AGENT,
                          .k1 = "completed",
                          .k2 = "",
                          .seq = PROJ_AT - 164,
                          .at = PROJ_AT};
    static const char run[] =
        "{\"agent_id\":\"" AGENT "\",\"cost_micros\":0,\"ended_at\":\"" T1 "\",\"error\":null,"
        "\"model\":\"steps-12\",\"model_calls\":13,\"pruned_activity\":0,\"run_id\":\"" RUN_ID "\","
        "\"run_key\":\"" RUN_KEY "\",\"scope\":\"agent\",\"started_at\":\"" T0 "\","
        "\"status\":\"completed\",\"summary\":\"done\",\"thread_id\":\"" THREAD "\","
        "\"tool_calls\":12,\"usage\":{\"cached_tokens\":0,\"input_tokens\":1820,"
        "\"output_tokens\":145},\"wake_reason\":\"user\"}";
    check_packed(&r, run,
                 "{\"\":4095,\"model\":\"steps-12\",\"model_calls\":13,\"run_key\":\"" RUN_KEY_B64
                 "\",\"started_at\":-164,\"summary\":\"done\",\"thread_id\":\"" THREAD
                 "\",\"tool_calls\":12,\"usage\":[0,1820,145]}");
    /* a running one (its status another, no end yet): read as written */
    char body[sizeof run + 64];
    snprintf(body, sizeof body, "%s", run);
    memcpy(strstr(body, "\"completed\""), "\"running\"  ", 11);
    check_packed(&r, body, NULL);
}

/* A row's id stands in for its body's text only when it is written as itself between two quotes
 * (store/body.c `plain`, which reads eight bytes at a time): an id with a byte to escape, a
 * DEL or a byte past ASCII at any place, in the eight-byte part or the tail, packs to a text
 * that reads back as written, and a plain one of any length still leaves the id out. */
TEST(an_id_stands_for_its_text_only_when_plain_at_every_place)
{
    static const char *const odd[] = {"\x01", "\x1f", "\"", "\\", "\x7f", "\xc3\xa9"};
    char id[40], body[512];
    struct vg_record j = journal_row;
    j.at = 0;
    j.id = id;
    for (size_t len = 1; len <= 24; len++) {
        memset(id, 'a', len);
        id[len] = '\0';
        snprintf(body, sizeof body,
                 "{\"record_id\":\"%s\",\"tool_call\":{\"duration_ms\":0,\"name\":\"add\","
                 "\"output_message\":\"%s\",\"status\":\"succeeded\",\"tool_call_id\":\"t1\"}}",
                 id, id);
        check_packed(&j, body, "{\"\":131136,\"tool_call\":[0,\"add\",\"t1\"]}");
    }
    for (size_t k = 0; k < sizeof odd / sizeof *odd; k++)
        for (size_t at = 0; at < 20; at++) {
            struct vg_buf text;
            vg_buf_init(&text, 1 << 16);
            memset(id, 'a', 20);
            id[20] = '\0';
            memcpy(id + at, odd[k], strlen(odd[k]));
            id[at + strlen(odd[k]) > 20 ? at + strlen(odd[k]) : 20] = '\0';
            vg_json_put_string(&text, id);
            snprintf(body, sizeof body,
                     "{\"record_id\":%s,\"tool_call\":{\"duration_ms\":0,\"name\":\"add\","
                     "\"output_message\":%s,\"status\":\"succeeded\",\"tool_call_id\":\"t1\"}}",
                     text.data, text.data);
            check_packed(&j, body, NULL);
            vg_buf_release(&text);
        }
}

int main(void)
{
    RUN(a_message_keeps_its_ids_once_and_reads_as_written);
    RUN(a_messages_ids_are_stored_as_their_bytes);
    RUN(ids_stored_as_text_before_read_as_written);
    RUN(a_finished_runs_projection_stores_the_holes_of_its_shapes);
    RUN(a_finished_runs_record_stores_the_holes_of_its_shapes);
    RUN(a_value_other_than_the_columns_is_kept);
    RUN(texts_that_cannot_be_packed_read_as_written);
    RUN(rows_stored_in_the_full_form_read_as_they_are);
    RUN(pack_and_unpack_are_inverse);
    RUN(a_steps_records_store_the_holes_of_their_shapes);
    RUN(values_unlike_their_shape_are_kept_as_written);
    RUN(a_tool_result_stored_before_shapes_reads_as_written);
    RUN(a_hash_whose_content_is_left_out_reads_back);
    RUN(an_id_stands_for_its_text_only_when_plain_at_every_place);
    return 0;
}
