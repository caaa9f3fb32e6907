/*
 * cmd-chat.c: `vigil chat AGENT`: an interactive conversation with streaming output (line
 * editing through libedit), or one turn with -m. Each turn is one journaled run; --session picks
 * the conversation, so turns in a row — in one REPL or many processes — share one history.
 * Ctrl-C during a turn cancels that turn, not the process.
 */
#include "cli.h"
#include "base/json.h"

#include <editline/readline.h>
#include <signal.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted;

/* readline on the terminal's own stdout (its line editing is escape sequences: cli/output.c
 * filters them out of everything else), after what this process printed so far. */
static char *read_line(const char *prompt)
{
    fflush(stdout);
    rl_outstream = cli_unfiltered_stdout();
    return readline(prompt);
}

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

struct chat_view {
    int json;     /* --json: print nothing while streaming */
    int streamed; /* some text was printed for this turn */
    int scripted; /* the scripted provider answers: say so before its first words */
    int echo;     /* ... with no cassette: it echoes the input */
};

static int label_shown;

/* The scripted label, once per process, right before the first reply text: an error exits
 * with its one line only. */
static void show_label(struct chat_view *v)
{
    if (v->scripted && !v->json && !label_shown) {
        fprintf(stderr, v->echo ? "(scripted model, no cassette: no provider configured, your "
                                  "words are echoed back, not answered; set "
                                  "VIGIL_MODEL_PROVIDER, see docs/models.md)\n"
                                : "(scripted model: no provider configured, replies are "
                                  "replayed from a cassette, not generated; set "
                                  "VIGIL_MODEL_PROVIDER, see docs/models.md)\n");
        label_shown = 1;
    }
}

static void on_text(void *user, const char *delta, size_t len)
{
    struct chat_view *v = user;
    if (v->json)
        return;
    show_label(v);
    fwrite(delta, 1, len, stdout);
    fflush(stdout);
    v->streamed = 1;
}

static void on_tool(void *user, const char *name, const char *args)
{
    struct chat_view *v = user;
    show_label(v);
    /* The text so far ends its line on stdout, where it was printed: the next text of the
     * turn is a reply of its own ("Delegating.Spawned; waiting." was glued: trial C1). */
    if (!v->json && v->streamed) {
        fputc('\n', stdout);
        fflush(stdout);
    }
    if (!v->json)
        fprintf(stderr, "[tool %s %s]\n", name, args ? args : "");
    v->streamed = 0;
}

/* A failed call said as a person reads it: a call waiting for approval says how to give it
 * (the person at the chat is the one who may), another its code and message; not the JSON
 * envelope cut at 200 bytes, which could cut the approval id off (trial E5). */
static void on_tool_done(void *user, const char *name, int is_error, const char *result)
{
    struct chat_view *v = user;
    if (v->json || !is_error)
        return;
    json_t *r = result ? json_loads(result, 0, NULL) : NULL;
    const char *code = json_string_value(json_object_get(r, "error_code"));
    const char *msg = json_string_value(json_object_get(r, "error_message"));
    const char *approval = json_string_value(json_object_get(r, "approval_id"));
    if (code && !strcmp(code, "confirmation_required") && approval)
        fprintf(stderr,
                "[tool %s waits for a person's approval: vigil approve %s (it runs at the "
                "agent's next turn; vigil reject %s --reason TEXT refuses it)]\n",
                name, approval, approval);
    else if (code)
        fprintf(stderr, "[tool %s failed: %s: %.300s]\n", name, code, msg ? msg : "");
    else
        fprintf(stderr, "[tool %s failed: %.300s]\n", name, result ? result : "");
    json_decref(r);
}

static int on_cancel(void *user)
{
    (void)user;
    return interrupted;
}

/* Whether the scripted provider answers (no real provider configured), and whether it only
 * echoes (no cassette loaded). */
static int describe(struct cli *c, int *scripted, int *echo)
{
    vigil_error err = {0};
    char *text = NULL;
    if (vigil_model_describe(c->rt, &text, &err))
        return cli_fail(&err);
    json_t *d = cli_parse_json_text(text);
    *scripted = json_is_true(json_object_get(d, "scripted"));
    *echo = *scripted && !json_is_string(json_object_get(d, "cassette"));
    json_decref(d);
    return 0;
}

/*
 * The exit status of a finished turn (docs/cli.md): a run ended by a kill switch or a budget is
 * a policy refusal (10), a doom loop a failure (1), an answer cut by max_tokens inside a tool
 * call a provider failure (9); each says so in one line on stderr. Other
 * endings that are not "completed" are noted and exit 0.
 */
static int turn_status(vigil_code code, const char *message, json_t *r, int json)
{
    const char *end = json_string_value(json_object_get(r, "end"));
    const char *why = json_string_value(json_object_get(r, "stop_reason"));
    if (code) {
        /* The line, and where to look: the switches, or which budget (the stop reason). */
        fprintf(stderr, "vigil: %s%s%s%s\n", message,
                code == VIGIL_EKILLED ? " (see `vigil kill status`)" : "",
                code == VIGIL_EBUDGET && why ? ": " : "", code == VIGIL_EBUDGET && why ? why : "");
        return vigil_code_exit_status(code);
    }
    if (end && strcmp(end, "completed") && !json)
        fprintf(stderr, "[run ended: %s%s%s]\n", end, why ? ", " : "", why ? why : "");
    else if (why && !strcmp(why, "max_tokens") && !json) /* trial F8 */
        fputs("[the answer was cut by max_tokens: raise model.max_tokens for a longer one]\n",
              stderr);
    return 0;
}

/* The children the turn's run spawned that only a daemon will start: with none running, say
 * so, or the user waits for runs that nothing runs (trial C1 of session 30). */
static void note_children(struct cli *c, const char *run_id)
{
    char *text = NULL;
    json_t *k;
    size_t i;
    int queued = 0;
    if (!run_id || vigil_run_show(c->rt, run_id, &text, NULL))
        return;
    json_t *run = json_loads(text, 0, NULL);
    vigil_free(text);
    json_array_foreach (json_object_get(run, "children"), i, k) {
        const char *st = json_string_value(json_object_get(k, "status"));
        queued += st && (!strcmp(st, "queued") || !strcmp(st, "waiting"));
    }
    json_decref(run);
    cli_note_queued(c, queued, queued == 1 ? "child run" : "child runs");
}

/* A turn that took over from a crashed one may have left a call of it in doubt (it may have
 * taken effect): said on stderr after every turn while one waits (trial G1), since nothing
 * else the person looks at says so. */
static void note_in_doubt(struct cli *c, const char *agent)
{
    vigil_error err = {0};
    char *text = NULL;
    if (vigil_indoubt_list(c->rt, agent, &text, &err))
        return;
    json_t *list = cli_parse_json_text(text), *it;
    size_t i, pending = 0;
    json_array_foreach (list, i, it) {
        const char *status = json_string_value(json_object_get(it, "status"));
        pending += status && !strcmp(status, "pending");
    }
    if (pending)
        fprintf(stderr,
                "vigil: %zu tool call(s) of this agent are in doubt (cut short by a crash, they "
                "may have taken effect): see `vigil indoubt list`\n",
                pending);
    json_decref(list);
}

/* One turn; view says how to show it (json, scripted, echo), its progress starts fresh. A
 * turn_key (--turn-key) names the turn: sent again, a turn of that key that completed answers
 * its reply again without a run (vigil_chat_keyed). */
static int turn(struct cli *c, const char *agent, const char *session, const char *turn_key,
                const char *text, struct chat_view view)
{
    int json = view.json;
    view.streamed = 0;
    vigil_chat_callbacks cb = {.user = &view,
                               .on_text = on_text,
                               .on_tool = on_tool,
                               .on_tool_done = on_tool_done,
                               .cancel = on_cancel};
    vigil_error err = {0};
    char *out = NULL;
    interrupted = 0;
    if (vigil_chat_keyed(c->rt, agent, session, turn_key, text, &cb, &out, &err)) {
        if (view.streamed)
            fputc('\n', stdout);
        return cli_fail(&err);
    }
    const char *message = NULL;
    vigil_code code = vigil_turn_code(out, &message); /* before out is given away */
    json_t *r = cli_parse_json_text(out);
    if (json) {
        vg_json_dumpf(r, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
    } else {
        const char *reply = json_string_value(json_object_get(r, "reply"));
        const char *end = json_string_value(json_object_get(r, "end"));
        int said = view.streamed || (reply && *reply);
        /* A turn refused before a word was said fails with its one line only. */
        int refused = end && (!strcmp(end, "hard_stopped") || !strcmp(end, "doom_loop") ||
                              !strcmp(end, "max_tokens"));
        if (said || !refused) {
            show_label(&view);
            if (!view.streamed && reply && *reply)
                fputs(reply, stdout);
            fputc('\n', stdout);
        }
    }
    if (json_is_true(json_object_get(r, "replayed")) && !json)
        fprintf(stderr, "[turn %s answered before: its reply again, nothing run]\n", turn_key);
    int status = turn_status(code, message, r, json);
    note_children(c, json_string_value(json_object_get(r, "run_id")));
    note_in_doubt(c, agent);
    json_decref(r);
    return status;
}

/*
 * Between turns of an interactive session: memory changes the agent asked for that need the
 * human's approval (familiar blocks) are shown one by one and resolved on the spot.
 */
static void review_pending(struct cli *c, const char *agent)
{
    vigil_error err = {0};
    char *text = NULL;
    if (vigil_memory_pending(c->rt, agent, &text, &err)) {
        fprintf(stderr, "vigil: %s\n", err.message);
        return;
    }
    json_t *list = cli_parse_json_text(text);
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *p = json_array_get(list, i);
        const char *id = json_string_value(json_object_get(p, "id"));
        const char *label = json_string_value(json_object_get(p, "label"));
        const char *op = json_string_value(json_object_get(p, "op"));
        const char *newtext = json_string_value(json_object_get(p, "text"));
        if (!id)
            continue;
        printf("\n[memory] the agent wants to %s block \"%s\":\n  %s\n", op ? op : "change",
               label ? label : "?", newtext ? newtext : "");
        char *answer = read_line("approve? [y]es / [n]o with a reason / [l]ater: ");
        if (!answer)
            break;
        char *out = NULL;
        vigil_code rc = VIGIL_OK;
        if (answer[0] == 'y' || answer[0] == 'Y') {
            rc = vigil_memory_approve(c->rt, id, &out, &err);
            if (!rc)
                printf("[memory] approved: block \"%s\" changed\n", label ? label : "?");
        } else if (answer[0] == 'n' || answer[0] == 'N') {
            char *reason = read_line("reason (the agent reads it): ");
            rc =
                vigil_memory_reject(c->rt, id, reason && *reason ? reason : "rejected", &out, &err);
            if (!rc)
                printf("[memory] rejected; the agent will be told why\n");
            free(reason);
        }
        if (rc)
            fprintf(stderr, "vigil: %s\n", err.message);
        vigil_free(out);
        free(answer);
    }
    json_decref(list);
}

static void say_text(const char *who, const char *text)
{
    printf("%s: %s\n", who, text ? text : "");
}

static void say_tool_result(const char *tool, int is_error, const char *text)
{
    printf("    %s %s: %s\n", tool ? tool : "tool", is_error ? "failed" : "answered",
           text ? text : "");
}

/* One message of a session's history as a line or two of text. */
static void history_line(json_t *m, const char *agent)
{
    const char *kind = json_string_value(json_object_get(m, "kind"));
    const char *text = json_string_value(json_object_get(m, "content"));
    const char *at = json_string_value(json_object_get(m, "created_at"));
    json_t *call;
    size_t i;
    kind = kind ? kind : "";
    if (!strcmp(kind, "action")) /* its call is shown with the thought that made it */
        return;
    printf("%s  ", at ? at : "");
    if (!strcmp(kind, "user"))
        say_text("you", text);
    else if (!strcmp(kind, "thought"))
        say_text(agent, text);
    else if (!strcmp(kind, "toolResult"))
        say_tool_result(json_string_value(json_object_get(m, "tool_name")),
                        json_is_true(json_object_get(m, "is_error")), text);
    else
        say_text(kind, text);
    json_array_foreach (json_object_get(m, "tool_calls"), i, call)
        printf("    calls %s %s\n", json_string_value(json_object_get(call, "name")),
               json_string_value(json_object_get(call, "arguments")));
}

/* `vigil chat AGENT --history N`: the session's last N messages, whoever's device ran them. */
static int chat_history(struct cli *c, const char *agent, const char *session, const char *n,
                        int json)
{
    char *end = NULL, *text = NULL;
    vigil_error err = {0};
    long limit = strtol(n, &end, 10);
    if (!*n || *end || limit < 1 || limit > 1000)
        return cli_usage("--history takes a number of messages from 1 to 1000");
    if (vigil_session_messages(c->rt, agent, session, (int)limit, &text, &err))
        return cli_fail(&err);
    if (json) {
        cli_print_json_text(text);
        return 0;
    }
    json_t *v = json_loads(text, 0, NULL), *m;
    size_t i;
    vigil_free(text);
    if (!json_array_size(json_object_get(v, "items")))
        printf("(no messages in session \"%s\" yet)\n",
               json_string_value(json_object_get(v, "session")));
    json_array_foreach (json_object_get(v, "items"), i, m)
        history_line(m, "agent");
    json_decref(v);
    return 0;
}

int cmd_chat(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {
        "-m=", "--message=", "--session=", "--turn-key=", "--json", "--history=", NULL};
    struct cli_opts o;
    if (cli_wants_help(argc, argv)) {
        printf("usage: vigil chat AGENT [-m TEXT [--turn-key KEY]] [--session NAME] [--json]\n"
               "       vigil chat AGENT --history N [--session NAME] [--json]\n\n"
               "Talk with an agent. Without -m: an interactive session (Ctrl-C cancels the\n"
               "current turn, Ctrl-D or /quit leaves). With -m: one turn, the reply on stdout.\n"
               "--session NAME picks the conversation (default: \"default\"); turns in a row,\n"
               "even from separate processes, continue it. --json prints each turn as JSON.\n"
               "--turn-key KEY (1 to 64 bytes without ':') names the turn, so a script may send\n"
               "it again after a timeout: a turn of that key that completed answers its reply\n"
               "again without a second run; one that did not runs again (docs/chat.md).\n"
               "--history N prints the session's last N messages (also turns another device ran,\n"
               "come by `vigil sync`) and runs no turn.\n"
               "The model comes from the config (docs/models.md); with none configured the\n"
               "scripted provider answers and says so.\n");
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional != 1)
        return cli_usage("chat needs exactly one agent id");
    const char *agent = o.positional[0];
    const char *msg =
        cli_opt(&o, spec, "-m") ? cli_opt(&o, spec, "-m") : cli_opt(&o, spec, "--message");
    const char *session = cli_opt(&o, spec, "--session");
    int json = cli_opt(&o, spec, "--json") != NULL;
    const char *turn_key = cli_opt(&o, spec, "--turn-key");
    if (msg && !*msg) /* a turn would start for nothing; HTTP chat refuses "" the same way */
        return cli_usage("chat -m needs some text: an empty message is not sent");
    if (turn_key && !msg) /* an interactive session's turns would all share one key */
        return cli_usage("--turn-key names one turn: give it with -m TEXT");
    if (cli_opt(&o, spec, "--history") && (msg || turn_key))
        return cli_usage("--history reads the session: give it without -m or --turn-key");
    cli_open(c, 0);
    agent = cli_agent(c, agent);
    if (cli_opt(&o, spec, "--history"))
        return chat_history(c, agent, session, cli_opt(&o, spec, "--history"), json);

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint; /* no SA_RESTART: a blocking read returns, the turn ends */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    struct chat_view view = {.json = json};
    int rc = describe(c, &view.scripted, &view.echo);
    if (rc)
        return rc;
    if (msg)
        return turn(c, agent, session, turn_key, msg, view);

    int tty = isatty(STDIN_FILENO);
    for (;;) {
        interrupted = 0;
        char *line = read_line(tty ? "you> " : "");
        if (!line) {
            if (interrupted) { /* Ctrl-C at the prompt: a fresh prompt, not an exit */
                fputc('\n', stdout);
                continue;
            }
            break;
        }
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) {
            free(line);
            break;
        }
        if (*line) {
            add_history(line);
            rc = turn(c, agent, session, NULL, line, view);
            if (tty && !interrupted)
                review_pending(c, agent);
            if (interrupted)
                fprintf(stderr, "[turn canceled]\n");
            else if (rc && rc != vigil_code_exit_status(VIGIL_ECANCELED) && !tty) {
                free(line);
                return rc; /* scripted input: stop at the first failure */
            }
        }
        free(line);
    }
    return 0;
}
