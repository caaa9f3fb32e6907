#!/usr/bin/env bash
# The tool lists vigil keeps for MCP servers (trial E): a tool a server gained since its list
# was stored is callable at once, and `vigil mcp tools` / `mcp list --check` store what they
# learn (E8); a refused tool is said once, not at every command (E6), and `mcp tools` shows a
# name two tools share as refused (E26 a); `mcp call` warns that it bypasses a kill switch
# (E26 b); `agent apply` warns of a misspelled tool in a store with MCP servers, on --dry-run
# too (E1). The server is vigil's fault server, whose extra tools come from a file it reads at
# each start (as after an update of a real server: the declaration is unchanged).
set -e
source "$(dirname "$0")/lib.sh" "$1"
SRC=${VIGIL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if ! command -v node >/dev/null; then
  [ "${VIGIL_REQUIRE_MCP:-0}" = 1 ] && { echo "FAIL: node is not installed"; exit 1; }
  echo "skipped: node is not installed"
  rm -rf "$T"
  exit 0
fi
FAULT="$SRC/tests/mcp/fault_server.js"
echo '[]' >"$T/extra.json"
printf '[{"name": "tasky", "execution": {"taskSupport": "required"}}, {"name": "OK"}]\n' \
  >"$T/task.json"
cat >"$T/config.yaml" <<YAML
mcp_servers:
  fake:
    command: [node, "$FAULT"]
    env: {FAULT_TOOLS_FILE: "$T/extra.json"}
  task:
    command: [node, "$FAULT"]
    env: {FAULT_TOOLS_FILE: "$T/task.json"}
YAML
export VIGIL_CONFIG="$T/config.yaml"
lacks() { case "$1" in *"$2"*) bad "did not expect \"$2\" in: $1" ;; *) ok ;; esac; }
count() { printf '%s\n' "$1" | grep -c -- "$2" || true; }

expect 0 init
printf 'name: tester\ntools: ["fake__*"]\n' >"$T/tester.yaml"
expect 0 agent apply "$T/tester.yaml" --json
ID=$(printf '%s' "$OUT" | jq -r .id)
expect 0 tool list "$ID"
has "$OUT" "fake__ok"

# E8: the server gains a tool. The stored list does not have it yet, but a call of it asks the
# server once instead of answering unknown_tool.
echo '[{"name": "mhang"}]' >"$T/extra.json"
expect 0 tool list "$ID"
lacks "$OUT" "fake__mhang" # the stored list, nothing started
expect 0 tool call "$ID" fake__mhang '{}'
has "$OUT" "extra: mhang"
expect 0 tool list "$ID"
has "$OUT" "fake__mhang" # what the call learnt is stored

# E6: a tool vigil refuses is said when the server's list is first learnt, not again at each
# command that reads the stored list.
printf 'name: tasker\ntools: ["task__*"]\n' >"$T/tasker.yaml"
expect 0 agent apply "$T/tasker.yaml" --json
TID=$(printf '%s' "$OUT" | jq -r .id)
expect 0 tool list "$TID"
[ "$(count "$ERR" "can only run as a task")" = 1 ] && ok || bad "said other than once: $ERR"
expect 0 tool list "$TID"
lacks "$ERR" "can only run as a task"
expect 0 tool call "$TID" task__ok '{}'
lacks "$ERR" "can only run as a task"

# E8: what `mcp tools` and `mcp list --check` learn becomes the list agents are offered.
echo '[{"name": "mhang"}, {"name": "newer"}]' >"$T/extra.json"
expect 0 mcp tools fake
has "$OUT" "fake__newer"
expect 0 tool list "$ID"
has "$OUT" "fake__newer"
echo '[]' >"$T/extra.json"
expect 0 mcp list --check
expect 0 tool list "$ID"
lacks "$OUT" "fake__mhang" # a removed tool is no longer offered
lacks "$OUT" "fake__newer"

# E26 a: two tools whose vigil names are the same: `mcp tools` shows the second as refused.
expect 0 mcp tools task
has "$OUT" "OK"
has "$OUT" "refused: its name task__ok is taken by ok"
[ "$(count "$OUT" "^task__ok ")" = 1 ] && ok || bad "task__ok shown as served twice: $OUT"

# E26 b: `mcp call` goes around the gate; with a kill switch on it says so.
expect 0 mcp call fake ok '{}'
lacks "$ERR" "kill switch"
expect 0 kill on
expect 0 mcp call fake ok '{}'
has "$ERR" "warning: a kill switch is on; \`vigil mcp call\` bypasses it"
expect 0 kill off

# E7: a manifest's server takes the keys the config file's does; a wrong one is named at its
# line.
cat >"$T/owner.yaml" <<YAML
name: owner
tools: ["own__*"]
mcp_servers:
  own:
    command: [node, "$FAULT"]
    timeout_ms: 3000
    max_message_bytes: 1048576
    tools: {ok: {risk: high, idempotent: true}}
YAML
expect 0 agent apply "$T/owner.yaml"
expect 0 mcp tools own
has "$OUT" "own__ok                                  risk=high"
sed 's/timeout_ms/timout_ms/' "$T/owner.yaml" >"$T/owner2.yaml"
expect 2 agent apply "$T/owner2.yaml"
has "$ERR" 'owner2.yaml:6:5: unknown key "timout_ms"'

# E1: in a store where MCP servers are declared, a plain name that is no tool, a SERVER__TOOL
# of no declared server and a "!" entry are warned of, on --dry-run too; a declared server's
# tool, a glob and the manifest's own command tool are not.
cat >"$T/typo.yaml" <<'YAML'
name: typo
tools: [set_reprot, "memory_*", nope__x, fake__anything, "!set_report", mine]
command_tools:
  mine: {command: [/bin/cat], description: echo}
YAML
expect 0 agent apply "$T/typo.yaml" --dry-run
has "$OUT" 'would create agent "typo"'
has "$ERR" 'agent "typo": tools entry "set_reprot" names no known tool'
has "$ERR" 'tools entry "nope__x" names no known tool (no MCP server'
has "$ERR" 'tools entry "!set_report" names no known tool (`!` does not take a tool away'
lacks "$ERR" "fake__anything"
lacks "$ERR" "memory_"
lacks "$ERR" '"mine"'
[ "$(printf '%s\n' "$ERR" | grep -c warning)" = 3 ] && ok || bad "3 warnings expected: $ERR"
expect 0 agent apply "$T/typo.yaml" --json
has "$ERR" 'tools entry "set_reprot" names no known tool'
printf '%s' "$OUT" | jq -e '.warnings | length == 3' >/dev/null && ok || bad "no warnings: $OUT"

finish
