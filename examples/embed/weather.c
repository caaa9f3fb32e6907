/*
 * weather.c: a small program that embeds libvigil (docs/embedding.md walks through it). It
 * opens a store (creating it), registers a C tool, creates an agent allowed to call it, runs
 * one chat turn, reads the run's tool calls back, and frees what it owns.
 *
 *   cc -std=c11 weather.c $(pkg-config --cflags --libs vigil) -o weather
 *   VIGIL_MODEL_PROVIDER=scripted VIGIL_MODEL_CASSETTE=weather.json ./weather app.db
 *
 * The model is the one the environment or config file names (docs/models.md); with the two
 * variables above it is the scripted model, answering from weather.json: it calls the tool,
 * then replies. The test suite builds and runs this program (ctest -R example_embed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vigil.h>

/*
 * The tool. vigil calls it on the thread that runs the turn, with arguments already checked
 * against the input schema. The reply is malloc()ed here and freed by vigil with free().
 * call->operation_id is stable across retries and crash replays: a real tool tags its effect
 * with it, so a repeated call can find what the first one did.
 */
static vigil_code get_weather(void *user, const vigil_tool_call_info *call, const char *args_json,
                              char **out_result_json, vigil_error *err)
{
    static const char reply[] = "{\"forecast\":\"sunny\",\"celsius\":21}";
    int *calls = user;
    (void)err; /* a failure would fill it (its message is recorded as tool_failed) */
    ++*calls;
    printf("get_weather %s (operation %.12s...)\n", args_json, call->operation_id);
    *out_result_json = malloc(sizeof reply);
    if (!*out_result_json)
        return VIGIL_ENOMEM;
    memcpy(*out_result_json, reply, sizeof reply);
    return VIGIL_OK;
}

static const vigil_tool_def weather_tool = {
    .name = "get_weather",
    .description = "The weather forecast for a city.",
    .input_schema_json = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
                         "\"required\":[\"city\"]}",
    .contract_json = "{\"mutating\":false,\"idempotency\":\"idempotent\"}",
};

/* The run id of a turn's outcome ({"run_id":"...",...}); a real program uses its JSON library. */
static int run_id_of(const char *outcome, char out[37])
{
    const char *p = strstr(outcome, "\"run_id\":\"");
    if (!p || strlen(p += 10) < 36)
        return 0;
    memcpy(out, p, 36);
    out[36] = '\0';
    return 1;
}

int main(int argc, char **argv)
{
    vigil_runtime_options opts;
    vigil_runtime *rt = NULL;
    vigil_error err = {0};
    char agent[37], run_id[37];
    char *outcome = NULL, *tools = NULL; /* owned: vigil_free */
    int calls = 0;
    vigil_code rc;

    if (argc != 2) {
        fprintf(stderr, "usage: weather STORE_PATH\n");
        return 2;
    }
    if (vigil_version_number() != VIGIL_VERSION_NUMBER)
        fprintf(stderr, "weather: built with vigil %s, running with %s\n", VIGIL_VERSION,
                vigil_version());
    vigil_runtime_options_default(&opts);
    opts.store_uri = argv[1];
    opts.create_if_missing = 1;
    rc = vigil_runtime_open(&opts, &rt, &err);

    /* Registered tools live in this runtime, not in the store: register them after each open. */
    if (rc == VIGIL_OK)
        rc = vigil_tool_register(rt, &weather_tool, get_weather, &calls, &err);
    if (rc == VIGIL_OK) {
        vigil_agent_spec spec = {.name = "Weatherman",
                                 .prompt = "You answer questions about the weather.",
                                 .config_json = "{\"tools\":[\"get_weather\"]}"};
        rc = vigil_agent_create(rt, &spec, agent, &err);
    }
    /* One user turn: model calls and tool calls, journaled as one run. */
    if (rc == VIGIL_OK)
        rc = vigil_chat(rt, agent, NULL, "What is the weather in Paris?", NULL, &outcome, &err);
    if (rc == VIGIL_OK && !run_id_of(outcome, run_id)) {
        rc = VIGIL_EPARSE;
        snprintf(err.message, sizeof err.message, "no run id in the turn's outcome");
    }
    /* Read the run back from the store: its tool calls, as `vigil runs show` lists them. */
    if (rc == VIGIL_OK)
        rc = vigil_run_tools(rt, run_id, NULL, 0, &tools, &err);

    if (rc == VIGIL_OK) {
        printf("outcome: %s\n", outcome);
        printf("tool calls of run %s: %s\n", run_id, tools);
        printf("the tool ran %d time(s)\n", calls);
    } else {
        /* err names what failed; the code gives the class (and a CLI-style exit status). */
        fprintf(stderr, "weather: %s (%s)\n", err.message, vigil_code_name(rc));
    }
    vigil_free(tools);
    vigil_free(outcome);
    vigil_runtime_close(rt); /* NULL when the open failed: a no-op */
    return rc == VIGIL_OK ? 0 : vigil_code_exit_status(rc);
}
