/*
 * model.h: what the rest of vigil uses to talk to a language model. One normalized request and
 * one normalized response for every provider; vg_model_complete and vg_model_stream make one
 * turn, with retries, backoff and latency measurement done here, not in the adapters.
 *
 * Ownership: a request and everything it points to is borrowed for the duration of the call.
 * A response is owned by the caller and freed with vg_model_response_free; every string in it
 * belongs to it. A struct vg_model is freed with vg_model_free.
 *
 * Threads: one struct vg_model serves one thread at a time (the scripted provider keeps a
 * cursor); build one per thread to call models in parallel.
 */
#ifndef VG_MODEL_H
#define VG_MODEL_H

#include <stddef.h>
#include <stdint.h>

struct vg_clock;
struct vg_ids;
struct vg_config;
struct vg_model;

/* Capability bits an adapter advertises (vg_model_caps). */
enum vg_model_caps {
    VG_MODEL_CAP_TOOLS = (1 << 0),
    VG_MODEL_CAP_STREAM = (1 << 1),
    VG_MODEL_CAP_PROMPT_CACHE = (1 << 2),
    /* Every request must name a model (the agent's, else the provider's default): a run is
     * refused before it starts when neither is set, rather than failing at its first call. */
    VG_MODEL_CAP_NAMED_MODEL = (1 << 3),
    /* Replies are replayed from a cassette or echoed, not generated (the scripted adapter):
     * never asked to summarize, and described as scripted. */
    VG_MODEL_CAP_SCRIPTED = (1 << 4),
    /* The adapter answers one conversation in order: runs sharing it must not take turns
     * (the daemon's runs do not park while it is theirs). */
    VG_MODEL_CAP_SERIAL = (1 << 5)
};

enum vg_model_role { VG_MODEL_USER = 0, VG_MODEL_ASSISTANT = 1, VG_MODEL_TOOL = 2 };

/* A tool call the model asked for. arguments is a JSON object text ("{}" when empty). */
struct vg_model_tool_call {
    const char *id;
    const char *name;
    const char *arguments;
};

/*
 * One conversation message. user: text. assistant: text (may be NULL) and tool_calls.
 * tool: tool_call_id, text (the result) and is_error.
 */
struct vg_model_message {
    enum vg_model_role role;
    const char *text;
    const struct vg_model_tool_call *tool_calls;
    size_t n_tool_calls;
    const char *tool_call_id;
    int is_error;
};

/* A tool offered to the model. input_schema is a JSON Schema object text. */
struct vg_model_tool {
    const char *name;
    const char *description;
    const char *input_schema;
    /* Non-zero: input_schema is what vg_json_dump wrote for a JSON object, so the body builders
     * send it as it is; otherwise they parse it (it must be an object) and write it compactly.
     * The loop offers the same tools at every turn: that was a parse and a dump per call. */
    int schema_dumped;
};

enum vg_model_tool_choice {
    VG_MODEL_TOOL_CHOICE_DEFAULT = 0, /* send nothing: the provider's default (auto) */
    VG_MODEL_TOOL_CHOICE_AUTO,
    VG_MODEL_TOOL_CHOICE_NONE,
    VG_MODEL_TOOL_CHOICE_ANY, /* must call some tool ("required" for OpenAI) */
    VG_MODEL_TOOL_CHOICE_TOOL /* must call tool_choice_name */
};

/* The normalized request. Zero-initialize and set what you need; all pointers are borrowed. */
struct vg_model_request {
    const char *model;  /* NULL: the provider's configured model */
    const char *system; /* system prompt; NULL: none */
    const struct vg_model_message *messages;
    size_t n_messages;
    const struct vg_model_tool *tools;
    size_t n_tools;
    int max_tokens;      /* 0: provider default (Anthropic 1024; OpenAI sends none) */
    int has_temperature; /* non-zero: send temperature */
    double temperature;
    const char *const *stop; /* stop sequences */
    size_t n_stop;
    int cache_prompt; /* non-zero: mark the stable prefix (tools + system) for prompt caching */
    enum vg_model_tool_choice tool_choice;
    const char *tool_choice_name;
    int parallel_tool_calls; /* 0: provider default, 1: allow, -1: forbid */
    /* vg_model_complete: polled during the transfer (at least about once a second) and
     * between retries; non-zero cancels the call with VIGIL_ECANCELED (a stopping daemon).
     * vg_model_stream uses the callbacks' cancel instead. May be NULL. */
    int (*cancel)(void *user);
    void *cancel_user;
};

enum vg_model_stop {
    VG_MODEL_STOP_END_TURN = 0,
    VG_MODEL_STOP_TOOL_USE,
    VG_MODEL_STOP_MAX_TOKENS,
    VG_MODEL_STOP_STOP_SEQUENCE,
    VG_MODEL_STOP_REFUSAL,
    VG_MODEL_STOP_OTHER
};

/*
 * Token counts. input counts input tokens NOT read from the cache (Anthropic's meaning; the
 * OpenAI adapter subtracts cached_tokens from prompt_tokens), so the four add up to the bill.
 */
struct vg_model_usage {
    int64_t input_tokens;
    int64_t output_tokens;
    int64_t cache_read_tokens;
    int64_t cache_write_tokens;
};

/* The normalized response. Owned by the caller: free with vg_model_response_free. */
struct vg_model_response {
    char **text_blocks; /* each text block in order */
    size_t n_text_blocks;
    char *text; /* all text blocks concatenated; never NULL ("" when none) */
    struct vg_model_tool_call *tool_calls; /* in the order the model emitted them */
    size_t n_tool_calls;
    enum vg_model_stop stop_reason;
    char *stop_raw; /* the provider's own stop reason text ("end_turn", "length"); may be NULL */
    /* Non-zero: the answer was cut by max_tokens while the model was writing its tool calls
     * (OpenAI finish_reason "length", Anthropic stop_reason "max_tokens", with tool calls): the
     * last call's arguments are cut short and more calls may be missing, so no call of this
     * answer may run. The calls are kept as the model wrote them, for the record. */
    int tool_calls_cut;
    struct vg_model_usage usage;
    char *model;          /* the model that answered, as the provider reported it; may be NULL */
    char *response_id;    /* the provider's id for the response; may be NULL */
    char *request_id;     /* the HTTP request id header (request-id / x-request-id); may be NULL */
    const char *provider; /* static adapter name ("openai", "anthropic", "scripted") */
    int64_t latency_ms;   /* clock-port time of the whole call, retries and waits included */
    int attempts;         /* attempts made (1 when the first one succeeded) */
    int scripted;         /* non-zero: replayed by the scripted provider, not a real model */
};

/* Streaming callbacks. Every member may be NULL. Text and tool pointers are borrowed for the
 * duration of the callback. index is the tool call's position in the final response. */
struct vg_model_stream_cb {
    void *user;
    void (*on_text)(void *user, const char *delta, size_t len);
    void (*on_tool_start)(void *user, size_t index, const char *id, const char *name);
    void (*on_tool_args)(void *user, size_t index, const char *delta, size_t len);
    /* Polled during the transfer (at least about once a second); non-zero cancels the turn
     * with VIGIL_ECANCELED. */
    int (*cancel)(void *user);
};

/* Everything needed to build a provider. Zero-initialize; unset fields take the defaults. */
struct vg_model_options {
    const char *provider;    /* "openai", "anthropic", "scripted"; NULL: "scripted" */
    const char *model;       /* default model id when a request names none */
    const char *base_url;    /* NULL: https://api.openai.com/v1 or https://api.anthropic.com/v1 */
    const char *api_key;     /* NULL: from OPENAI_API_KEY / ANTHROPIC_API_KEY when set */
    const char *cassette;    /* scripted: the cassette to replay */
    const char *record;      /* real providers: also write every exchange to this cassette */
    int check_requests;      /* scripted: 1 compare each request with the recording, 0 not */
    int max_retries;         /* retries after the first attempt; <0: none; 0: default 2 */
    int timeout_ms;          /* whole transfer; 0: 300000 */
    int connect_timeout_ms;  /* 0: 10000 */
    int64_t backoff_base_ms; /* first backoff ceiling; 0: 500 */
    int64_t backoff_max_ms;  /* backoff ceiling; 0: 30000 */
    int64_t retry_after_max_ms; /* longer retry-after: give up instead; 0: 60000 */
    int stream_usage;           /* openai: 0 ask for usage in streams, -1 do not (old servers) */
    int max_tokens; /* a request's max_tokens when it sets none; 0: the adapter's own default
                     * (Anthropic 1024, OpenAI none sent) */
    const char *anthropic_version; /* NULL: 2023-06-01 */
    size_t max_response_bytes;     /* 0: 16 MiB */
    struct vg_clock *clock;        /* NULL: the real clock */
    struct vg_ids *ids;            /* randomness for jitter; NULL: a real source owned here */
};

/* Build a provider. *out is owned; free with vg_model_free. Errors: EINVAL (unknown provider
 * or bad option), ENOTFOUND/EPARSE (scripted: cassette missing or malformed), ENOMEM. */
vigil_code vg_model_new(const struct vg_model_options *opts, struct vg_model **out,
                        vigil_error *err);
/* Build the provider the config names (model.* keys, environment already applied by
 * vg_config_load). clock and ids are borrowed and may be NULL (real ones). */
vigil_code vg_model_from_config(const struct vg_config *cfg, struct vg_clock *clock,
                                struct vg_ids *ids, struct vg_model **out, vigil_error *err);
void vg_model_free(struct vg_model *m);

/* The adapter name ("openai"), its capability bits, and the default model id (may be NULL). */
const char *vg_model_name(const struct vg_model *m);
unsigned vg_model_caps(const struct vg_model *m);
const char *vg_model_default_model(const struct vg_model *m);

/*
 * One turn. On success *out is an owned response. Retries what is retryable (rate limit,
 * overload, 5xx, timeouts, connection failures) with exponential backoff and full jitter,
 * waiting through the clock port. Errors: EAUTH, EINVAL (the provider's message), ERATELIMIT,
 * EOVERLOAD, EPROVIDER, ETIMEOUT, ENETWORK, EPARSE, ECANCELED; err->subcode is the HTTP status
 * when there was one.
 */
vigil_code vg_model_complete(struct vg_model *m, const struct vg_model_request *req,
                             struct vg_model_response **out, vigil_error *err);
/* The same, delivering text and tool calls through cb as they arrive. A stream that already
 * delivered something is never retried: its failure is reported instead. */
vigil_code vg_model_stream(struct vg_model *m, const struct vg_model_request *req,
                           const struct vg_model_stream_cb *cb, struct vg_model_response **out,
                           vigil_error *err);

void vg_model_response_free(struct vg_model_response *r);
/* Whether two responses say the same: text blocks, tool calls, stop reason (and its raw
 * text), usage, model and response id (not the call's latency, attempts or request id). For
 * tests and fuzz targets that hold two readers of one answer together. */
int vg_model_response_same(const struct vg_model_response *a, const struct vg_model_response *b);

/* "end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "other". */
const char *vg_model_stop_name(enum vg_model_stop s);
/* Parse those names back; -1 when unknown. */
int vg_model_stop_parse(const char *name);

/* Whether a failure code is worth retrying. */
int vg_model_code_retryable(vigil_code code);

/*
 * Cost in USD of a response's usage from the price table in config (model.prices.<model>
 * with input, output and optional cache_read, cache_write, all USD per million tokens).
 * Returns 1 and sets *usd when the model has a price, 0 otherwise.
 */
int vg_model_cost_usd(const struct vg_config *cfg, const char *model,
                      const struct vg_model_usage *usage, double *usd);

/* The normalized request as a JSON object text (owned, vg_free): what cassettes record. */
vigil_code vg_model_request_to_json(const struct vg_model_request *req, char **out,
                                    vigil_error *err);

#endif
