/*
 * test_sse.c: the server-sent-events parser: line endings (\n, \r\n, \r, also split across
 * feeds), comments, multi-line data, event names and ids, fields with and without the space,
 * a leading BOM, and the same events for every way of chunking the same bytes.
 */
#include "helpers/test.h"

#include "base/buf.h"
#include "model/sse.h"

/* Collects events as "event|data|id\n" lines. */
static vigil_code collect(void *user, const struct vg_sse_event *ev, vigil_error *err)
{
    struct vg_buf *b = user;
    vg_buf_printf(b, "%s|", ev->event);
    vg_buf_append(b, ev->data, ev->data_len);
    vg_buf_printf(b, "|%s\n", ev->id);
    return VIGIL_OK;
}

static char *parse_chunked(const char *text, size_t len, size_t chunk)
{
    struct vg_buf out;
    struct vg_sse p;
    vg_buf_init(&out, 0);
    vg_sse_init(&p, 0, collect, &out);
    for (size_t off = 0; off < len; off += chunk)
        ASSERT_OK(vg_sse_feed(&p, text + off, VG_MIN(chunk, len - off), E));
    ASSERT_OK(vg_sse_finish(&p, E));
    vg_sse_release(&p);
    return vg_buf_detach(&out, NULL);
}

static void expect(const char *text, const char *want)
{
    size_t len = strlen(text);
    for (size_t chunk = 1; chunk <= len + 1; chunk++) {
        char *got = parse_chunked(text, len, chunk);
        if (strcmp(got ? got : "", want) != 0)
            TEST_FAIL_("chunk %zu: got \"%s\", want \"%s\"", chunk, got ? got : "", want);
        vg_free(got);
    }
}

TEST(basic_events_and_names)
{
    expect("event: a\ndata: one\n\ndata: two\n\n", "a|one|\nmessage|two|\n");
}

TEST(line_endings_crlf_cr_lf)
{
    expect("data: x\r\n\r\ndata: y\r\rdata: z\n\n", "message|x|\nmessage|y|\nmessage|z|\n");
    /* A CR at the end of one feed and the LF at the start of the next make one line end. */
    expect("data: a\r\ndata: b\r\n\r\n", "message|a\nb|\n");
}

TEST(comments_multiline_and_spacing)
{
    expect(": keep-alive\ndata:no space\ndata:  two spaces\n\n",
           "message|no space\n two spaces|\n");
    expect("data\n\n", "message||\n");           /* field without colon: empty data */
    expect("data:\ndata:\n\n", "message|\n|\n"); /* two empty lines of data */
    expect("event: only\n\n", "");               /* no data: nothing dispatched */
    expect("retry: 100\nfoo: bar\ndata: d\n\n", "message|d|\n");
}

TEST(ids_are_kept)
{
    expect("id: 7\ndata: a\n\ndata: b\n\n", "message|a|7\nmessage|b|7\n");
}

/* retry: sets the reconnection time when it is all digits (MCP's GET stream reconnects after
 * it); anything else leaves it as it was. */
TEST(retry_is_kept_for_reconnecting)
{
    struct vg_buf out;
    struct vg_sse p;
    vg_buf_init(&out, 0);
    vg_sse_init(&p, 0, collect, &out);
    ASSERT_EQ(p.retry_ms, -1);
    const char *text = "retry: 250\ndata: a\n\nretry: 1x\nretry:\n\n";
    ASSERT_OK(vg_sse_feed(&p, text, strlen(text), E));
    ASSERT_EQ(p.retry_ms, 250);
    vg_sse_release(&p);
    vg_buf_release(&out);
}

TEST(bom_is_skipped_once)
{
    expect("\xEF\xBB\xBF"
           "data: a\n\n",
           "message|a|\n");
    expect("\xEF\xBB"
           "data: a\n\n",
           ""); /* a broken BOM glues onto the field name */
}

TEST(unterminated_last_event_is_discarded)
{
    expect("data: a\n\ndata: b", "message|a|\n");
    expect("data: a\n\ndata: b\n", "message|a|\n");
}

TEST(fixture_stream_any_chunking)
{
    const char *s = "event: message_start\ndata: {\"type\":\"message_start\"}\n\n"
                    "event: ping\ndata: {\"type\": \"ping\"}\n\n"
                    "data: [DONE]\n\n";
    expect(s, "message_start|{\"type\":\"message_start\"}|\nping|{\"type\": \"ping\"}|\n"
              "message|[DONE]|\n");
}

TEST(oversized_line_is_etoobig)
{
    struct vg_sse p;
    char big[200];
    memset(big, 'x', sizeof(big));
    vg_sse_init(&p, 64, NULL, NULL);
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_ETOOBIG, vg_sse_feed(&p, big, sizeof(big), &err));
    ASSERT_CODE(VIGIL_ETOOBIG, vg_sse_feed(&p, "\n", 1, &err)); /* sticky */
    vg_sse_release(&p);
}

static vigil_code stop_at_second(void *user, const struct vg_sse_event *ev, vigil_error *err)
{
    int *n = user;
    if (++*n == 2)
        return VG_FAIL(err, VIGIL_EPARSE, "stop");
    return VIGIL_OK;
}

TEST(callback_error_stops_the_parser)
{
    struct vg_sse p;
    int n = 0;
    vg_sse_init(&p, 0, stop_at_second, &n);
    vigil_error err = {0};
    ASSERT_CODE(VIGIL_EPARSE, vg_sse_feed(&p, "data: 1\n\ndata: 2\n\ndata: 3\n\n", 27, &err));
    ASSERT_EQ(n, 2);
    vg_sse_release(&p);
}

int main(void)
{
    RUN(basic_events_and_names);
    RUN(line_endings_crlf_cr_lf);
    RUN(comments_multiline_and_spacing);
    RUN(ids_are_kept);
    RUN(retry_is_kept_for_reconnecting);
    RUN(bom_is_skipped_once);
    RUN(unterminated_last_event_is_discarded);
    RUN(fixture_stream_any_chunking);
    RUN(oversized_line_is_etoobig);
    RUN(callback_error_stops_the_parser);
    return 0;
}
