#!/usr/bin/env bash
# End-to-end: a manifest that declares a new command tool or MCP server says which other
# agents' `tools` globs it reaches, since their grant widens with nothing in their own manifest
# changing (trial H4): on stderr, under "reaches" with --json and in POST /v1/agents's answer.
set -e
source "$(dirname "$0")/lib.sh" "$1"

expect 0 init
cat >"$T/reader.yaml" <<'YAML'
name: reader
tools: ["memory_*", set_report]
YAML
cat >"$T/worker.yaml" <<'YAML'
name: worker
tools: [memory_purge]
YAML
cat >"$T/helper.yaml" <<'YAML'
name: helper
tools: []
command_tools:
  memory_purge: {command: [/bin/cat], description: "Purge memory"}
mcp_servers:
  memory: {url: "https://memory.example.invalid/mcp"}
YAML
expect 0 agent apply "$T/reader.yaml"
expect 0 agent apply "$T/worker.yaml"

# A dry run says what would be reached; nothing is written.
expect 0 agent apply "$T/helper.yaml" --dry-run
has "$ERR" 'vigil: note: agent "helper": command tool "memory_purge" would be callable by agent "reader" (its tools entry "memory_*")'
has "$ERR" 'command tool "memory_purge" would be callable by agent "worker" (its tools entry "memory_purge")'
has "$ERR" 'MCP server "memory"'"'"'s tools (memory__*) would be callable by agent "reader" (its tools entry "memory_*")'

expect 0 agent apply "$T/helper.yaml" --json
R=$OUT
is '.reaches | length == 3'
is '.reaches | index("command tool \"memory_purge\" is now callable by agent \"reader\" (its tools entry \"memory_*\")") != null'
# The grant it reports is real.
expect 0 tool list reader
has "$OUT" memory_purge

# Applied again, nothing is new: no note. Nor for an agent no glob reaches.
expect 0 agent apply "$T/helper.yaml"
[ -z "$ERR" ] && ok || bad "a second apply noted again: $ERR"
printf 'name: lone\ntools: []\ncommand_tools:\n  zz_tool: {command: [/bin/cat], description: z}\n' >"$T/lone.yaml"
expect 0 agent apply "$T/lone.yaml"
[ -z "$ERR" ] && ok || bad "a tool no glob reaches was noted: $ERR"

# The API's create says the same under "reaches".
serve_http --workers 1
R=$(curl -s -H "Authorization: Bearer $TOKEN" -X POST "http://127.0.0.1:$PORT/v1/agents" \
  -d '{"name":"helper2","tools":[],"command_tools":{"memory_wipe":{"command":["/bin/cat"],"description":"w"}}}')
is '.[0].reaches == ["command tool \"memory_wipe\" is now callable by agent \"reader\" (its tools entry \"memory_*\")"]'
serve_stop

finish
