/*
 * test_http.c: the OpenAI and Ollama embedding adapters against a loopback server speaking
 * their wire formats: request shape, vectors in order, dimension checks, HTTP errors mapped to
 * codes, and a dead service reported as a network error.
 */
#include "helpers/http_server.h"
#include "helpers/test.h"

#include "embed/embed.h"

#include <jansson.h>
#include <math.h>

/* proves: S4-047 */
TEST(openai_adapter_speaks_v1_embeddings)
{
    static const struct vg_ts_response rs[] = {
        {.body = "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":1,"
                 "\"embedding\":[0,3,4]},{\"object\":\"embedding\",\"index\":0,"
                 "\"embedding\":[1,0,0]}],\"model\":\"text-embedding-3-small\","
                 "\"usage\":{\"prompt_tokens\":4,\"total_tokens\":4}}"},
        {.body = "{\"data\":[{\"index\":0,\"embedding\":[1,2]}]}"},
        {.status = 429, .body = "{\"error\":{\"message\":\"slow down\"}}"},
        {.status = 401, .body = "{\"error\":{\"message\":\"bad key\"}}"},
    };
    struct vg_test_server *srv = vg_test_server_start(rs, VG_ARRAY_LEN(rs));
    struct vg_embed_http_options o = {.base_url = vg_test_server_url(srv),
                                      .api_key = "sk-test",
                                      .model = "text-embedding-3-small",
                                      .dimension = 3};
    struct vg_embedder *e = NULL;
    ASSERT_OK(vg_embed_openai_new(&o, &e, E));
    ASSERT_EQ(vg_embed_dimension(e), 3);
    const char *texts[] = {"hello", "world"};
    float v[6];
    ASSERT_OK(vg_embed(e, texts, 2, v, E));
    ASSERT(v[0] == 1 && v[1] == 0 && v[2] == 0);                      /* index 0 */
    ASSERT(fabsf(v[4] - 0.6f) < 1e-6f && fabsf(v[5] - 0.8f) < 1e-6f); /* normalized */
    const struct vg_ts_request *rq = vg_test_server_request(srv, 0);
    ASSERT_STREQ(rq->method, "POST");
    ASSERT_STREQ(rq->path, "/v1/embeddings");
    ASSERT_STREQ(vg_ts_header(rq, "authorization"), "Bearer sk-test");
    json_error_t je;
    json_t *body = json_loads(rq->body, 0, &je);
    ASSERT_STREQ(json_string_value(json_object_get(body, "model")), "text-embedding-3-small");
    ASSERT_EQ(json_array_size(json_object_get(body, "input")), 2);
    ASSERT_EQ(json_integer_value(json_object_get(body, "dimensions")), 3);
    json_decref(body);
    vigil_error err = {0};
    ASSERT_EQ(vg_embed(e, texts, 1, v, &err), VIGIL_EPROVIDER); /* wrong dimension */
    ASSERT_CONTAINS(err.message, "not 3 numbers");
    ASSERT_EQ(vg_embed(e, texts, 1, v, &err), VIGIL_ERATELIMIT);
    ASSERT_EQ(err.subcode, 429);
    ASSERT_EQ(vg_embed(e, texts, 1, v, &err), VIGIL_EAUTH);
    vg_embed_close(e);
    vg_test_server_stop(srv);
}

TEST(ollama_adapter_speaks_api_embed)
{
    static const struct vg_ts_response rs[] = {
        {.body = "{\"model\":\"nomic-embed-text\",\"embeddings\":[[0,0,2],[0,1,0]]}"},
        {.body = "{\"embeddings\":[[0,0]]}"},
        {.body = "not json"},
    };
    struct vg_test_server *srv = vg_test_server_start(rs, VG_ARRAY_LEN(rs));
    struct vg_embed_http_options o = {
        .base_url = vg_test_server_url(srv), .model = "nomic-embed-text", .dimension = 3};
    struct vg_embedder *e = NULL;
    ASSERT_OK(vg_embed_ollama_new(&o, &e, E));
    const char *texts[] = {"a", "b"};
    float v[6];
    ASSERT_OK(vg_embed(e, texts, 2, v, E));
    ASSERT(v[2] == 1 && v[4] == 1);
    const struct vg_ts_request *rq = vg_test_server_request(srv, 0);
    ASSERT_STREQ(rq->path, "/api/embed");
    ASSERT(vg_ts_header(rq, "authorization") == NULL);
    ASSERT_CONTAINS(rq->body, "\"input\":[\"a\",\"b\"]");
    vigil_error err = {0};
    ASSERT_EQ(vg_embed(e, texts, 2, v, &err), VIGIL_EPROVIDER); /* one vector for two texts */
    ASSERT_EQ(vg_embed(e, texts, 1, v, &err), VIGIL_EPROVIDER); /* invalid JSON */
    vg_embed_close(e);
    vg_test_server_stop(srv);

    /* nobody listening: a network error the memory manager treats as "embedder down" */
    o.base_url = "http://127.0.0.1:1";
    o.timeout_ms = 2000;
    ASSERT_OK(vg_embed_ollama_new(&o, &e, E));
    vigil_code rc = vg_embed(e, texts, 1, v, &err);
    ASSERT(rc == VIGIL_ENETWORK || rc == VIGIL_ETIMEOUT);
    vg_embed_close(e);
    ASSERT_CODE(VIGIL_EINVAL,
                vg_embed_ollama_new(&(struct vg_embed_http_options){.model = "m"}, &e, NULL));
}

/* A service (a proxy, a local gateway) that quotes the key it was sent, and a base URL's user
 * and password quoted by a connection error: the error says what failed without them, as a
 * model provider's does (trial H5), since it goes on to the memory's logs and the API. */
TEST(an_embedding_error_holds_no_key_or_password)
{
    static const struct vg_ts_response rs[] = {
        {.status = 401,
         .body = "{\"error\":{\"message\":\"Incorrect API key provided: Bearer "
                 "sk-embed-7c3d9e1f2a\"}}"},
    };
    struct vg_test_server *srv = vg_test_server_start(rs, VG_ARRAY_LEN(rs));
    struct vg_embed_http_options o = {.base_url = vg_test_server_url(srv),
                                      .api_key = "sk-embed-7c3d9e1f2a",
                                      .model = "text-embedding-3-small",
                                      .dimension = 3};
    struct vg_embedder *e = NULL;
    ASSERT_OK(vg_embed_openai_new(&o, &e, E));
    const char *texts[] = {"hello"};
    float v[3];
    vigil_error err = {0};
    ASSERT_EQ(vg_embed(e, texts, 1, v, &err), VIGIL_EAUTH);
    ASSERT(strstr(err.message, "7c3d9e1f2a") == NULL);
    ASSERT_CONTAINS(err.message, "Incorrect API key provided: [redacted]");
    vg_embed_close(e);
    vg_test_server_stop(srv);

    o.base_url = "http://admin:hunter22@127.0.0.1:1";
    o.timeout_ms = 2000;
    ASSERT_OK(vg_embed_ollama_new(&o, &e, E));
    vigil_code rc = vg_embed(e, texts, 1, v, &err);
    ASSERT(rc == VIGIL_ENETWORK || rc == VIGIL_ETIMEOUT);
    ASSERT(strstr(err.message, "hunter22") == NULL);
    ASSERT(strstr(err.detail, "hunter22") == NULL);
    vg_embed_close(e);
}

int main(void)
{
    RUN(openai_adapter_speaks_v1_embeddings);
    RUN(ollama_adapter_speaks_api_embed);
    RUN(an_embedding_error_holds_no_key_or_password);
    return 0;
}
