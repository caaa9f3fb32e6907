/*
 * http.c: the libcurl wrapper shared by the HTTP model adapters and embedders. On a thread's own
 * stack a request blocks, on the thread's kept easy handle (keep-alive); on a fiber it parks
 * while the scheduler's curl multi handle moves it (below). It buffers bodies under a cap,
 * streams 2xx bodies to a callback, buffers error bodies even when streaming (so the error
 * message can be read), captures the few headers the adapters need, and polls a cancel check
 * from the progress callback.
 */
#include "base/common.h"

#include <ctype.h>
#include <strings.h>
#include <pthread.h>

#include <poll.h>

#include "model/http.h"
#include "os/fiber.h"
#include "os/fs.h"
#include "os/libcurl.h"

#include <limits.h>

#define DEFAULT_MAX ((size_t)16 << 20)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static int curl_decoders; /* whether this libcurl decodes a compressed response (init_curl) */

/* Called once libcurl is loaded (vg_libcurl_load). */
static void init_curl(void)
{
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    curl_decoders =
        (v->features & (CURL_VERSION_LIBZ | CURL_VERSION_BROTLI | CURL_VERSION_ZSTD)) != 0;
}

struct xfer {
    const struct vg_http_request *req;
    struct vg_http_response *resp;
    CURL *curl;
    vigil_code cb_rc; /* failure raised inside a callback */
    vigil_error cb_err;
    int canceled;
};

void vg_http_response_init(struct vg_http_response *r)
{
    memset(r, 0, sizeof(*r));
    vg_buf_init(&r->body, DEFAULT_MAX);
    vg_buf_init(&r->headers, 1 << 20);
}

void vg_http_response_release(struct vg_http_response *r)
{
    vg_buf_release(&r->body);
    vg_buf_release(&r->headers);
}

static void copy_header_value(char *dst, size_t n, const char *v, size_t len)
{
    while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
        len--;
    while (len && (*v == ' ' || *v == '\t')) {
        v++;
        len--;
    }
    if (len >= n)
        len = n - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
}

static int header_is(const char *line, size_t len, const char *name, const char **value,
                     size_t *vlen)
{
    size_t n = strlen(name);
    if (len <= n || line[n] != ':' || strncasecmp(line, name, n) != 0)
        return 0;
    *value = line + n + 1;
    *vlen = len - n - 1;
    return 1;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *userp)
{
    struct xfer *x = userp;
    size_t len = size * nitems;
    const char *v;
    size_t vlen;
    struct vg_http_response *r = x->resp;

    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        /* A new response (after a 100 Continue or a redirect): forget earlier headers. */
        r->retry_after[0] = r->retry_after_ms[0] = r->request_id[0] = r->content_type[0] = '\0';
        vg_buf_reset(&r->headers);
        return len;
    }
    vg_buf_append(&r->headers, line, len);
    if (header_is(line, len, "retry-after", &v, &vlen))
        copy_header_value(r->retry_after, sizeof(r->retry_after), v, vlen);
    else if (header_is(line, len, "retry-after-ms", &v, &vlen))
        copy_header_value(r->retry_after_ms, sizeof(r->retry_after_ms), v, vlen);
    else if (header_is(line, len, "request-id", &v, &vlen) ||
             header_is(line, len, "x-request-id", &v, &vlen))
        copy_header_value(r->request_id, sizeof(r->request_id), v, vlen);
    else if (header_is(line, len, "content-type", &v, &vlen))
        copy_header_value(r->content_type, sizeof(r->content_type), v, vlen);
    return len;
}

int vg_http_response_header(const struct vg_http_response *r, const char *name, char *out, size_t n)
{
    const char *p = r->headers.data, *end = p ? p + r->headers.len : NULL, *v;
    size_t vlen;
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);
        if (header_is(p, len, name, &v, &vlen)) {
            copy_header_value(out, n, v, vlen);
            return 1;
        }
        p += len;
    }
    return 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userp)
{
    struct xfer *x = userp;
    size_t len = size * nmemb;
    long status = 0;

    curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
    if (x->req->on_body && status >= 200 && status < 300) {
        vigil_code rc = x->req->on_body(x->req->user, data, len, &x->cb_err);
        if (rc != VIGIL_OK) {
            x->cb_rc = rc;
            return 0; /* CURLE_WRITE_ERROR */
        }
        return len;
    }
    vg_buf_append(&x->resp->body, data, len);
    if (x->resp->body.fail) {
        x->cb_rc = vg_buf_finish(&x->resp->body, &x->cb_err);
        return 0;
    }
    return len;
}

static int on_progress(void *userp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    struct xfer *x = userp;
    if (x->req->cancel && x->req->cancel(x->req->cancel_user)) {
        x->canceled = 1;
        return 1;
    }
    return 0;
}

static vigil_code map_curl(struct xfer *x, CURLcode cc, const char *errbuf, vigil_error *err)
{
    const char *url = x->req->url;
    const char *why = errbuf[0] ? errbuf : curl_easy_strerror(cc);
    vigil_code rc;

    if (x->canceled)
        return VG_FAIL(err, VIGIL_ECANCELED, "request to \"%s\" canceled", url);
    if (x->cb_rc != VIGIL_OK) {
        vg_error_copy(err, &x->cb_err);
        if (err)
            err->code = x->cb_rc;
        return x->cb_rc;
    }
    switch (cc) {
    case CURLE_OPERATION_TIMEDOUT:
        rc = VG_FAIL(err, VIGIL_ETIMEOUT, "request to \"%s\" timed out: %s", url, why);
        break;
    case CURLE_OUT_OF_MEMORY:
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory in http client");
        break;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        rc = VG_FAIL(err, VIGIL_EINVAL, "bad url \"%s\": %s", url, why);
        break;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2_STREAM:
        rc = VG_FAIL(err, VIGIL_ENETWORK, "connection to \"%s\" broke mid-response: %s", url, why);
        break;
    default:
        rc = VG_FAIL(err, VIGIL_ENETWORK, "request to \"%s\" failed: %s", url, why);
        break;
    }
    if (err)
        err->subcode = (int)cc;
    return rc;
}

#define RECV_BUFFER 4096

/* A new easy handle with the options every request shares, set once for its life (setting
 * them again for each request, after a reset, cost every call: docs/internals/PERF.md). NULL
 * when curl cannot allocate it or them. Called after init_curl. */
static CURL *new_handle(void)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    int bad = curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L) != CURLE_OK;
    /* Every encoding the library decodes; none asked for when it decodes none (a header that
     * could only say "identity" is bytes for nothing). */
    if (curl_decoders)
        bad |= curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_USERAGENT, "vigil/" VIGIL_VERSION) != CURLE_OK;
    /* A handle keeps its receive buffer for its life, and a worker keeps a handle per model
     * call in flight: at curl's 16 KiB, 100 agents' calls held 1.5 MB of them. Answers come in
     * a few KiB at a time over loopback or TLS records (16 KiB at most), so 4 KiB costs a few
     * more reads on a long answer and nothing else (docs/internals/PERF.md, session 27). */
    bad |= curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long)RECV_BUFFER) != CURLE_OK;
    if (bad) {
        curl_easy_cleanup(h);
        return NULL;
    }
    return h;
}

/*
 * One curl handle per thread, kept between requests: its connection cache lets consecutive
 * model calls reuse a keep-alive connection (and a TLS session) instead of connecting anew
 * each turn. A thread's handle is freed when the thread exits.
 */
static pthread_key_t handle_key;
static pthread_once_t handle_once = PTHREAD_ONCE_INIT;
static int handle_key_ok;

static void free_handle(void *h)
{
    curl_easy_cleanup(h);
}

static void make_handle_key(void)
{
    handle_key_ok = pthread_key_create(&handle_key, free_handle) == 0;
}

static CURL *thread_handle(void)
{
    pthread_once(&handle_once, make_handle_key);
    CURL *h = handle_key_ok ? pthread_getspecific(handle_key) : NULL;
    if (h)
        return h;
    h = new_handle();
    if (h && handle_key_ok && pthread_setspecific(handle_key, h) != 0) {
        curl_easy_cleanup(h);
        h = NULL;
    }
    return h;
}

/*
 * On a fiber, a request does not block its thread: the easy handle joins the scheduler's curl
 * multi handle and the fiber parks until the transfer is done, while the scheduler's I/O driver
 * (below) moves every transfer of the thread. The multi handle's connection cache gives
 * keep-alive across requests; finished handles are kept for reuse, up to IDLE_MAX.
 */
#define IDLE_MAX 16

struct fiber_http {
    CURLM *multi;
    CURL *idle[IDLE_MAX];
    int n_idle;
};

struct parked {
    struct vg_fiber *fiber;
    CURLcode result;
    int done;
};

/* Wake the fibers whose transfers finished; how many. */
static int fiber_http_drain(struct fiber_http *fh)
{
    CURLMsg *m;
    int queued, woken = 0;
    while ((m = curl_multi_info_read(fh->multi, &queued))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct parked *p = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&p);
        if (p) {
            p->result = m->data.result;
            p->done = 1;
            vg_fiber_wake(p->fiber);
            woken++;
        }
    }
    return woken;
}

static void fiber_http_wait(void *user, int64_t timeout_ms, struct pollfd *fds, unsigned n_fds)
{
    struct fiber_http *fh = user;
    int running = 0;
    curl_multi_perform(fh->multi, &running);
    /* A fiber that can run now ends the wait: the scheduler was only idle until then. */
    if (fiber_http_drain(fh) || timeout_ms == 0) {
        if (n_fds)
            poll(fds, n_fds, 0); /* on failure every revents stays 0: nobody is woken */
        return;
    }
    /* The other fibers' descriptors join curl's in one wait. */
    struct curl_waitfd small[8], *extra = small;
    unsigned n_extra = n_fds;
    if (n_fds > VG_ARRAY_LEN(small) && !(extra = vg_malloc(n_fds * sizeof *extra))) {
        extra = small; /* out of memory: curl's own wait, then the descriptors polled once */
        n_extra = 0;
    }
    for (unsigned i = 0; i < n_extra; i++)
        extra[i] = (struct curl_waitfd){.fd = fds[i].fd, .events = (short)fds[i].events};
    /* Waits the full time even with no transfer (a fiber's deadline); an endless wait with
     * nothing in flight is capped, as nothing could end it. */
    int ms = timeout_ms < 0 || timeout_ms > INT_MAX ? 3600000 : (int)timeout_ms;
    if (curl_multi_poll(fh->multi, extra, n_extra, ms, NULL) == CURLM_OK) {
        for (unsigned i = 0; i < n_extra; i++)
            fds[i].revents = extra[i].revents;
    }
    if (n_extra < n_fds)
        poll(fds, n_fds, 0);
    if (extra != small)
        vg_free(extra);
    curl_multi_perform(fh->multi, &running);
    fiber_http_drain(fh);
}

static void fiber_http_release(void *user)
{
    struct fiber_http *fh = user;
    for (int i = 0; i < fh->n_idle; i++)
        curl_easy_cleanup(fh->idle[i]);
    curl_multi_cleanup(fh->multi);
    vg_free(fh);
}

/* The current fiber's scheduler's HTTP driver, installed on first use; NULL when the request
 * must block the thread (no fiber, parking not allowed now, or no memory). */
static struct fiber_http *fiber_http_here(void)
{
    if (!vg_fiber_can_park())
        return NULL;
    struct vg_fiber_sched *s = vg_fiber_current_sched();
    const struct vg_fiber_io *io = vg_fiber_sched_io(s);
    if (io)
        return io->wait == fiber_http_wait ? io->user : NULL;
    struct fiber_http *fh = vg_calloc(1, sizeof *fh);
    if (!fh || !(fh->multi = curl_multi_init())) {
        vg_free(fh);
        return NULL;
    }
    struct vg_fiber_io mine = {.wait = fiber_http_wait, .release = fiber_http_release, .user = fh};
    vg_fiber_sched_set_io(s, &mine);
    return fh;
}

static CURLcode perform_parked(struct fiber_http *fh, CURL *h)
{
    struct parked p = {.fiber = vg_fiber_current()};
    curl_easy_setopt(h, CURLOPT_PRIVATE, (char *)&p);
    if (curl_multi_add_handle(fh->multi, h) != CURLM_OK)
        return curl_easy_perform(h);
    while (!p.done)
        vg_fiber_park(-1);
    curl_multi_remove_handle(fh->multi, h);
    curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
    return p.result;
}

struct vg_http_headers {
    struct curl_slist *list;
};

/* lines and "Expect:" (no 100-continue round trip for large bodies) appended to *list. */
static int append_lines(struct curl_slist **list, const char *const *lines, size_t n)
{
    struct curl_slist *tmp;
    for (size_t i = 0; i <= n; i++) {
        if (!(tmp = curl_slist_append(*list, i < n ? lines[i] : "Expect:")))
            return -1;
        *list = tmp;
    }
    return 0;
}

struct vg_http_headers *vg_http_headers_new(const char *const *lines, size_t n)
{
    vigil_error err = {0};
    if (vg_libcurl_load(&err))
        return NULL; /* each request builds its lines, and vg_http_perform says what failed */
    struct vg_http_headers *h = vg_calloc(1, sizeof *h);
    if (h && append_lines(&h->list, lines, n)) {
        vg_http_headers_free(h);
        h = NULL;
    }
    return h;
}

void vg_http_headers_free(struct vg_http_headers *h)
{
    if (h)
        curl_slist_free_all(h->list);
    vg_free(h);
}

/* The first of two variables that is set, or "". */
static const char *either_env(const char *a, const char *b)
{
    const char *v = vg_os_getenv(a);
    if (!v && b)
        v = vg_os_getenv(b);
    return v ? v : "";
}

int vg_http_proxy_from_env(const char *url, char *proxy, size_t n, char *noproxy, size_t m)
{
    /* libcurl's order (url.c, detect_proxy): the scheme's lowercase variable, its uppercase one
     * except HTTP_PROXY (settable by a CGI request's Proxy: header), then all_proxy. */
    int https = !strncasecmp(url, "https:", 6);
    const char *v =
        https ? either_env("https_proxy", "HTTPS_PROXY") : either_env("http_proxy", NULL);
    if (!*v)
        v = either_env("all_proxy", "ALL_PROXY");
    int a = snprintf(proxy, n, "%s", v);
    int b = snprintf(noproxy, m, "%s", either_env("no_proxy", "NO_PROXY"));
    return a >= 0 && (size_t)a < n && b >= 0 && (size_t)b < m;
}

vigil_code vg_http_perform(const struct vg_http_request *req, struct vg_http_response *resp,
                           vigil_error *err)
{
    struct xfer x = {.req = req, .resp = resp};
    struct curl_slist *hdrs = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    vigil_code rc = VIGIL_OK;
    CURLcode cc;

    rc = vg_libcurl_load(err);
    if (rc)
        return rc;
    pthread_once(&curl_once, init_curl);

    resp->body.max = req->max_response ? req->max_response : DEFAULT_MAX;
    struct fiber_http *fh = fiber_http_here();
    if (fh)
        x.curl = fh->n_idle ? fh->idle[--fh->n_idle] : new_handle();
    else
        x.curl = thread_handle();
    if (!x.curl)
        return VG_FAIL(err, VIGIL_ENOMEM, "cannot create an http handle");

    if (!req->prepared && append_lines(&hdrs, req->headers, req->n_headers)) {
        rc = VG_FAIL(err, VIGIL_ENOMEM, "out of memory building http headers");
        goto out;
    }

    /* Everything that may differ between requests is set for each, so a kept handle carries
     * nothing of the last one. */
    curl_easy_setopt(x.curl, CURLOPT_URL, req->url);
    curl_easy_setopt(x.curl, CURLOPT_HTTPHEADER, req->prepared ? req->prepared->list : hdrs);
    if (req->proxy) {
        curl_easy_setopt(x.curl, CURLOPT_PROXY, req->proxy);
        curl_easy_setopt(x.curl, CURLOPT_NOPROXY, req->noproxy ? req->noproxy : "");
    }
    curl_easy_setopt(x.curl, CURLOPT_CUSTOMREQUEST, req->method ? req->method : "GET");
    if (req->body) {
        curl_easy_setopt(x.curl, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(x.curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    } else {
        curl_easy_setopt(x.curl, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(x.curl, CURLOPT_CONNECTTIMEOUT_MS,
                     req->connect_timeout_ms > 0 ? req->connect_timeout_ms : 10000L);
    curl_easy_setopt(x.curl, CURLOPT_TIMEOUT_MS, req->timeout_ms > 0 ? req->timeout_ms : 300000L);
    curl_easy_setopt(x.curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(x.curl, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(x.curl, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(x.curl, CURLOPT_XFERINFODATA, &x);

    cc = fh ? perform_parked(fh, x.curl) : curl_easy_perform(x.curl);
    curl_easy_getinfo(x.curl, CURLINFO_RESPONSE_CODE, &resp->status);
    if (cc != CURLE_OK)
        rc = map_curl(&x, cc, errbuf, err);
out:
    /* Keep the handle (and its live connections) for the next request; nothing it still
     * points to outlives this call. */
    curl_easy_setopt(x.curl, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(x.curl, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(x.curl, CURLOPT_POSTFIELDS, NULL);
    curl_easy_setopt(x.curl, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(x.curl, CURLOPT_HEADERDATA, NULL);
    curl_easy_setopt(x.curl, CURLOPT_WRITEDATA, NULL);
    curl_easy_setopt(x.curl, CURLOPT_XFERINFODATA, NULL);
    if (req->proxy) {
        curl_easy_setopt(x.curl, CURLOPT_PROXY, NULL);
        curl_easy_setopt(x.curl, CURLOPT_NOPROXY, NULL);
    }
    curl_slist_free_all(hdrs);
    if (fh) {
        if (fh->n_idle < IDLE_MAX)
            fh->idle[fh->n_idle++] = x.curl;
        else
            curl_easy_cleanup(x.curl);
    }
    return rc;
}

/* ---- credentials out of error text ------------------------------------------------------- */

/* text (n bytes of room) with each occurrence of secret (len bytes, 6 or more) as "[redacted]". */
static void redact(char *text, size_t n, const char *secret, size_t len)
{
    static const char mark[] = "[redacted]";
    char *at, cut[sizeof((vigil_error){0}.message)];
    size_t from = 0;
    if (len < 6)
        return;
    while (from < strlen(text) && (at = memmem(text + from, strlen(text + from), secret, len))) {
        size_t head = (size_t)(at - text);
        snprintf(cut, VG_MIN(sizeof cut, n), "%.*s%s%s", (int)head, text, mark, at + len);
        snprintf(text, n, "%s", cut);
        from = head + sizeof mark - 1;
    }
}

/*
 * The credentials a request carried, taken out of its error's text before anyone prints or
 * stores it (the run's error, the daemon's log, the HTTP API): a server, a proxy or a gateway may
 * quote the key it was sent in its error body, and a connection error quotes the URL, with the
 * user and password a base URL may hold (trial H5).
 */
static void redact_credentials_in(const char *url, const char *const *headers, size_t n_headers,
                                  char *text, size_t n)
{
    static const char *const secret_headers[] = {
        "authorization:", "x-api-key:", "api-key:", "proxy-authorization:"};
    for (size_t i = 0; i < n_headers; i++) {
        const char *h = headers[i], *value = h ? strchr(h, ':') : NULL;
        int secret = 0;
        for (size_t k = 0; k < VG_ARRAY_LEN(secret_headers) && value; k++)
            secret |= !strncasecmp(h, secret_headers[k], strlen(secret_headers[k]));
        if (!secret)
            continue;
        value += strspn(value + 1, " ") + 1;
        const char *token = strchr(value, ' '); /* "Bearer KEY": the key alone too */
        redact(text, n, value, strlen(value));
        if (token)
            redact(text, n, token + 1, strlen(token + 1));
    }
    const char *host = url ? strstr(url, "://") : NULL;
    const char *at = host ? strchr(host + 3, '@') : NULL,
               *path = host ? strchr(host + 3, '/') : NULL;
    if (at && (!path || at < path)) /* scheme://USER:PASSWORD@host/... */
        redact(text, n, host + 3, (size_t)(at - host - 3));
}

void vg_http_redact_credentials(const char *url, const char *const *headers, size_t n_headers,
                                vigil_error *err)
{
    if (!err)
        return;
    redact_credentials_in(url, headers, n_headers, err->message, sizeof err->message);
    redact_credentials_in(url, headers, n_headers, err->detail, sizeof err->detail);
}
