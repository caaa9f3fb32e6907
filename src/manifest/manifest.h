/*
 * manifest.h: agent manifests (docs/manifests.md): one agent per YAML or JSON file, validated
 * against the published JSON Schema share/schema/manifest.schema.json (embedded at build time)
 * by vigil's own validator, then applied onto the agent record (name, kind, mode, prompt,
 * model, visibility) and its config (tools, capabilities, scopes, limits, budgets, memory
 * seeds, subscriptions, timers, command_tools, mcp_servers). docs/manifests.md is the user's
 * view; this header is the module's.
 *
 * Every problem a manifest has is reported with its file, line and column (1-based) and the
 * JSON pointer of the value at fault, as a JSON array of
 * {"file","line","column","pointer","message"} objects.
 */
#ifndef VG_MANIFEST_H
#define VG_MANIFEST_H

#include "env/env.h"

#include <jansson.h>

struct vg_tool_executor;

/* The manifest keys kept in the agent's config, in schema order, NULL-terminated. */
extern const char *const vg_manifest_config_keys[];

/* The tool contract a declared command tool gets (owned): its contract fields and its name. */
json_t *vg_manifest_tool_contract(const char *name, const json_t *decl);

/* A manifest file is at most this big. */
#define VG_MANIFEST_MAX_BYTES ((size_t)1 << 20)

/*
 * Parse and validate manifest text. name is the file name used in problems; it picks the
 * format by its ending (".json": JSON, else YAML). On success *out (owned) is the manifest as
 * JSON. When the text is malformed or invalid, every problem found is appended to problems
 * (an array, borrowed) and the first one is the error's message: EPARSE for syntax, EINVAL for
 * a manifest that breaks the schema or a rule the schema cannot say (a bad glob, a bad timer,
 * a tool contract vigil refuses, a secret written inline where a ${NAME} reference belongs).
 */
vigil_code vg_manifest_parse(const char *text, size_t len, const char *name, json_t **out,
                             json_t **marks, json_t *problems, vigil_error *err);
/* With marks (optional, owned): where each value starts, {"/json/pointer": [line, column]}
 * (a mapping member's adds its key's line and column).
 * Append a problem about the value at ptr, placed by marks. */
void vg_manifest_problem(json_t *problems, const char *file, const json_t *marks, const char *ptr,
                         const char *message);

/* The published schema (a new reference). */
json_t *vg_manifest_schema(void);

/*
 * Check a `command_tools` map from anywhere (the config file) against the manifest's rules.
 * where names the source in messages ("config \"/etc/vigil.yaml\"").
 */
/* An agent's config checked as a manifest's fields are (config keys only, the same schema and
 * rules): EINVAL naming the first problem. */
vigil_code vg_manifest_check_config(const json_t *config, vigil_error *err);
vigil_code vg_manifest_check_command_tools(const json_t *tools, const char *where,
                                           vigil_error *err);

/* Apply manifests: one file, or every *.yaml, *.yml and *.json file of a directory (sorted by
 * name; two with the same agent name are an error and nothing is applied). *out (owned) is an
 * array with one {"file","id","name","action","changes"} per manifest, action "created",
 * "updated", "unchanged" (or, with dry_run, what would happen; nothing is written). Problems as
 * for vg_manifest_parse go to problems (borrowed array). */
vigil_code vg_manifest_apply_path(struct vg_env *env, const char *path, int dry_run, json_t **out,
                                  json_t *problems, vigil_error *err);
/* The same for several paths (files or directories, applied together in one transaction as a
 * directory's files are), refusing (EEXISTS, nothing written, also with dry_run) a manifest whose
 * command tool or MCP server another live agent or the config file (config: its "command_tools" and
 * "mcp_servers", borrowed; NULL: none) declares differently, or whose command tool has a name
 * taken(user, name) says a built-in tool has (NULL: none; asked only of declared tools): either
 * would be served to no agent (docs/manifests.md). */
typedef int (*vg_manifest_taken_fn)(void *user, const char *name);
vigil_code vg_manifest_apply_checked(struct vg_env *env, const char *const *paths, size_t n_paths,
                                     int dry_run, vg_manifest_taken_fn taken, void *user,
                                     const json_t *config, json_t **out, json_t *problems,
                                     vigil_error *err);

/* The likely typos of a manifest's `tools` (*out owned: an array of messages, maybe empty): a
 * plain name (no glob) that is no tool taken(user, name) knows (the runtime's own), no command
 * tool and starts with no MCP server's SERVER__, declared by config (as for
 * vg_manifest_apply_checked), a kept agent (by_name: name -> agent) or a manifest of docs
 * ([{file, doc}]). Starts no server. taken NULL: no warnings. */
vigil_code vg_manifest_tool_warnings(const json_t *doc, const json_t *docs, const json_t *by_name,
                                     const json_t *config, vg_manifest_taken_fn taken, void *user,
                                     json_t **out, vigil_error *err);

/* Whether the `tools` allowlist of an agent's config reaches name: a command tool of that name
 * (server 0), or some tool SERVER__TOOL of the MCP server called name (server 1), whose tools
 * are not known without starting it. The entry that reaches it (borrowed from config) in
 * *entry, when entry is not NULL; NULL when none does. */
int vg_manifest_allowlist_reaches(const json_t *config, const char *name, int server,
                                  const char **entry);

/* What a manifest of docs ([{file, doc}]) newly declares (a command tool or an MCP server
 * that neither config nor any kept agent of by_name declared) and which other agents' `tools`
 * reach (a kept agent's or another manifest's of docs): a new array of messages, one per pair,
 * in *out ("command tool \"memory_purge\" is now callable by agent \"reader\" (tools entry
 * \"memory_*\")"), maybe empty. One agent's manifest can widen another's grant through a glob
 * (trial H4): apply says so. */
vigil_code vg_manifest_reach_notices(const json_t *doc, const json_t *docs, const json_t *by_name,
                                     const json_t *config, int dry_run, json_t **out,
                                     vigil_error *err);

/* The manifest of a stored agent (owned JSON), which applies back to the same agent. */
vigil_code vg_manifest_export(struct vg_env *env, const char *agent_id, json_t **out,
                              vigil_error *err);
/* A manifest as YAML text (owned, vg_free): keys in schema order, block style. */
char *vg_manifest_to_yaml(const json_t *manifest);

/*
 * The declared command tools, merged (*out owned: name -> declaration): those of the config's
 * `command_tools` (may be NULL) and those every agent's manifest declared. The config's own
 * tools declared twice differently are EEXISTS. A name agents declare differently, or one that
 * taken(user, name) says a built-in tool has, or one holding "__" (an MCP tool's SERVER__TOOL,
 * stored before manifests refused it), is left out and said in clashes (borrowed object: name ->
 * {"message", "builtin"}; "builtin" true when the name's owner still serves, so only the agents
 * declaring it fail), so that only the agents it concerns fail, not every agent.
 * ${NAME} references in argv and env are expanded from the environment only when a call runs.
 */
vigil_code vg_manifest_declared_tools(struct vg_env *env, const json_t *config_tools,
                                      vg_manifest_taken_fn taken, void *user, json_t **out,
                                      json_t *clashes, vigil_error *err);
/*
 * The declared command tools a runtime serves, kept in step with their declarations (a
 * running daemon picks up an agent applied or changed after it started): vg_manifest_tools_sync
 * adds a tool for each new name (EEXISTS when another provider has it), makes a tool whose
 * declaration changed serve the new one, and one no longer declared serve nothing. Each tool is
 * a deferred provider of x, listed when first needed. The set only points at x's providers.
 */
struct vg_manifest_tools;
vigil_code vg_manifest_tools_new(struct vg_manifest_tools **out, vigil_error *err);
vigil_code vg_manifest_tools_sync(struct vg_manifest_tools *s, struct vg_tool_executor *x,
                                  const json_t *decls, vigil_error *err);
void vg_manifest_tools_free(struct vg_manifest_tools *s);
/* Whether s serves a command tool called name (declared now or before). */
int vg_manifest_tools_has(const struct vg_manifest_tools *s, const char *name);
/*
 * Add to seen (name -> {"decl", "from"}) the `key` map (command_tools, mcp_servers) of every
 * live agent, oldest first. A name seen with an equal declaration is one; with another, its entry
 * keeps the first and gets "clash": the message naming both sources and `what` it is ("command
 * tool", "MCP server"), for the callers to leave it out.
 */
vigil_code vg_manifest_collect_declared(struct vg_env *env, const char *key, const char *what,
                                        json_t *seen, vigil_error *err);
/* The same for one map of declarations (borrowed; not an object: none) declared in from, where
 * a name declared differently is EEXISTS. */
vigil_code vg_manifest_collect_from(const json_t *decls, const char *from, const char *what,
                                    json_t *seen, vigil_error *err);
/* The same for one agent (an agent record as vg_agent_get gives it, borrowed), where a name
 * declared differently is EEXISTS. */
vigil_code vg_manifest_collect_one(const json_t *agent, const char *key, const char *what,
                                   json_t *seen, vigil_error *err);

#endif
