#!/usr/bin/env bash
# End-to-end through a live `vigil serve`: an agent applied while the daemon runs (after its
# worker built its tools for another agent) calls its manifest's command tool and MCP server
# on its first wake, where it used to get unknown_tool until a restart. Changing the manifest
# (the command tool's program, the server's arguments) takes effect at the next wake: the old
# server process is stopped and a new one serves. A second server the agent declares but never
# calls never starts. The waits poll real processes; no assertion depends on timing.
set -e
source "$(dirname "$0")/lib.sh" "$1"
SRC=${VIGIL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if ! command -v node >/dev/null; then
  [ "${VIGIL_REQUIRE_MCP:-0}" = 1 ] && { echo "FAIL: node is not installed"; exit 1; }
  echo "skipped: node is not installed"
  rm -rf "$T"
  exit 0
fi
export VIGIL_MODEL_PROVIDER=scripted
cat >"$T/cassette.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"text":"warm"}},
 {"response":{"tool_calls":[{"id":"a1","name":"helper__ok","arguments":{}},
                            {"id":"a2","name":"greet","arguments":{}}]}},
 {"response":{"text":"first done"}},
 {"response":{"tool_calls":[{"id":"b1","name":"helper__ok","arguments":{}},
                            {"id":"b2","name":"greet","arguments":{}}]}},
 {"response":{"text":"second done"}}]}
JSON
export VIGIL_MODEL_CASSETTE="$T/cassette.json"

WAIT_TRIES=600 WAIT_STEP=0.05
completed() { "$VIGIL" wakes --agent "$1" --status completed --json | grep -c '"run_key"' | grep -qx "$2"; }
check() { # check WHAT CMD...: count a pass when CMD succeeds
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); else echo "FAIL: $what"; fail_count; fi
}
# manifest VERSION: the agent's manifest; the version shows in the command tool's answer and
# in the server's arguments (so its process can be told apart).
manifest() {
  cat >"$T/helper.yaml" <<YAML
name: helper-agent
tools: ["helper__*", "greet"]
command_tools:
  greet:
    command: [sh, -c, 'printf "{\"hello\": \"$1\"}"']
    description: Say which version answers
    mutating: false
mcp_servers:
  helper:
    command: [node, "$SRC/tests/mcp/fault_server.js", "$T", "$1"]
    env: {FAULT_STARTS_FILE: "$T/helper.starts"}
  idle:
    command: [node, "$SRC/tests/mcp/fault_server.js", "$T", idle]
    env: {FAULT_STARTS_FILE: "$T/idle.starts"}
YAML
}
# tools_of AGENT: the tool calls of the agent's last run, each whole, as JSON.
tools_of() {
  local run call
  run=$("$VIGIL" runs list --agent "$1" --limit 1 --json | sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' | head -n 1)
  for call in $("$VIGIL" runs tools "$run" --json | sed -n 's/.*"tool_call_id": "\([^"]*\)".*/\1/p'); do
    "$VIGIL" runs tool "$call" --json
  done
}

expect 0 init
expect 0 agent create --name warm --config '{"tools":["set_report"]}'
warm=$OUT
expect 0 agent resume "$warm"
"$VIGIL" serve --workers 1 --poll-ms 50 >"$T/serve.log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$T"' EXIT
wait_for grep -q serving "$T/serve.log" || echo "FAIL: daemon did not start: $(cat "$T/serve.log")"
# The worker builds its tools for this wake, before the helper agent exists.
expect 0 wake "$warm" -m "hello"
check "the warm-up wake did not complete: $(cat "$T/serve.log")" wait_for completed "$warm" 1

manifest v1
expect 0 agent apply "$T/helper.yaml" --json
id=$(printf '%s' "$OUT" | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -n 1)
"$VIGIL" agent resume "$id" >/dev/null 2>&1 || true
expect 0 wake "$id" -m "go"
check "the first wake did not complete: $(cat "$T/serve.log")" wait_for completed "$id" 1
calls=$(tools_of "$id")
has "$calls" "ok: 1"          # the MCP tool answered, through the gate
has "$calls" '"hello": "v1"' # the command tool answered
check "a tool was unknown: $calls" sh -c "! printf '%s' '$calls' | grep -q unknown_tool"
check "the helper server started $(cat "$T/helper.starts" 2>/dev/null | wc -l) times, not once" \
  test "$(wc -l <"$T/helper.starts")" -eq 1

# A changed manifest: the next wake uses the new command and a new server process.
manifest v2
expect 0 agent apply "$T/helper.yaml" --json
has "$OUT" '"updated"'
expect 0 wake "$id" -m "again"
check "the second wake did not complete: $(cat "$T/serve.log")" wait_for completed "$id" 2
calls=$(tools_of "$id")
has "$calls" "ok: 1" # a fresh process counts from 1 again
has "$calls" '"hello": "v2"'
check "the helper server was not started again" test "$(wc -l <"$T/helper.starts")" -eq 2
check "the old helper server still runs" sh -c "! pgrep -f 'fault_server[.]js $T v1'"
check "the new helper server does not run" pgrep -f "fault_server[.]js $T v2"
check "the server the agent never called was started" test ! -e "$T/idle.starts"

kill -TERM "$pid"
check "daemon exit status" wait "$pid"
check "a server outlived the daemon" sh -c "! pgrep -f 'fault_server[.]js $T'"
finish
