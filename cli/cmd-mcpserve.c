/*
 * cmd-mcpserve.c: `vigil mcp serve`: the store's public agents as an MCP server on stdio
 * (docs/mcp.md, "vigil as an MCP server"). The protocol is src/mcpserve (mcpserve/mcpserve.h);
 * this file opens the store and hands it stdin and stdout. stdout carries only MCP messages.
 */
#include "cli.h"

#include "mcpserve/mcpserve.h"

static const char serve_help[] =
    "usage: vigil mcp serve [--page-size N]\n"
    "\n"
    "Speak MCP (revision 2025-11-25, JSON-RPC one message a line) on stdin and stdout until\n"
    "stdin ends. Each agent whose manifest says `visibility: external` is three tools:\n"
    "talk_to_NAME (a chat turn), wake_NAME (queue a wake) and report_of_NAME (its report);\n"
    "its report and memory blocks are read-only resources (vigil://agents/ID/...). Project\n"
    "and internal agents are not exposed. Diagnostics go to stderr. --page-size: items per\n"
    "tools/list and resources/list page (default 50).\n";

int cmd_mcp_serve(struct cli *c, int argc, char **argv)
{
    static const char *const spec[] = {"--page-size=", NULL};
    struct cli_opts o;
    if (cli_wants_help(argc, argv)) {
        fputs(serve_help, stdout);
        return 0;
    }
    if (cli_parse(argc, argv, spec, &o))
        return CLI_USAGE;
    if (o.n_positional)
        return cli_usage("mcp serve takes no arguments");
    struct vg_mcpserve_options so = {0};
    const char *ps = cli_opt(&o, spec, "--page-size");
    if (ps) {
        char *end = NULL;
        long v = strtol(ps, &end, 10);
        if (!*ps || *end || v < 1 || v > 1000)
            return cli_usage("--page-size takes a number from 1 to 1000");
        so.page_size = (int)v;
    }
    cli_open(c, 0);
    so.rt = c->rt;
    struct vg_mcpserve *s = NULL;
    vigil_error err = {0};
    if (vg_mcpserve_new(&so, &s, &err))
        return cli_fail(&err);
    size_t exposed = 0;
    if (vg_mcpserve_exposed_count(c->rt, &exposed, &err)) {
        vg_mcpserve_free(s);
        return cli_fail(&err);
    }
    /* An empty tool list says nothing of why: say it before the client asks. */
    fprintf(stderr, "vigil mcp serve: serving %s on stdio: %zu agent%s exposed%s\n", c->store_path,
            exposed, exposed == 1 ? "" : "s",
            exposed ? "" : " (only agents with visibility: external are; docs/mcp.md)");
    int rc = vg_mcpserve_stdio(s, stdin, stdout, stderr);
    vg_mcpserve_free(s);
    if (rc)
        fprintf(stderr, "vigil: mcp serve: could not write to stdout\n");
    return rc ? vigil_code_exit_status(VIGIL_EIO) : 0;
}
