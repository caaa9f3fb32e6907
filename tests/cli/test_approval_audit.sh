#!/usr/bin/env bash
# End-to-end: what an operator reads about approvals and empty tool lists (trial H13):
# destroying an agent rejects its pending approvals (none left to approve in vain), an approval
# of a destroyed agent is not "approved", resolved_by names the login when --by is not given,
# the JSON of a hand call waiting for approval says how to repeat it, an agent whose tools glob
# reaches only an MCP server that lists no tools is not told to fix its manifest, and `vigil mcp
# list` prints no "(null)".
set -e
source "$(dirname "$0")/lib.sh" "$1"
lacks() { case "$1" in *"$2"*) bad "did not expect \"$2\" in: $1" ;; *) ok ;; esac; }

expect 0 init
expect 0 agent create --name gated --config '{"tools":["set_report"],"require_approval":["set_report"]}'
ID=$OUT

# The JSON of a call waiting for approval carries the repeat hint the stderr line gives.
expect 10 tool call gated set_report '{"scope":"current","markdown":"# a"}' --run-key r1
R=$OUT
AID=$(printf '%s' "$R" | jq -r .approval_id)
is '.hint == "once approved (vigil approve '"$AID"'), repeat this call with --run-key r1"'

# Without --by the login of the user running the command is recorded, not "human".
expect 0 approve "$AID" --json
R=$OUT
is '.resolved_by == "'"$(id -un)"'"'

# Destroy rejects what is still pending, in the same transaction.
expect 10 tool call gated set_report '{"scope":"daily","markdown":"# b"}' --run-key r2
AID2=$(printf '%s' "$OUT" | jq -r .approval_id)
expect 0 agent destroy gated
expect 0 approvals --status pending --json
R=$OUT
is 'length == 0'
expect 0 approve "$AID2"
has "$OUT" "was already rejected by destroy"
expect 0 approvals --agent "$ID" --status rejected --json
R=$OUT
is '.[0].reason == "the agent was destroyed"'
# One left pending by an older version (put back by hand here) cannot be approved: the agent
# would never act on it.
if command -v sqlite3 >/dev/null; then
  sqlite3 "$VIGIL_STORE" "update records set k1 = 'pending', body = replace(body, '\"status\":\"rejected\"', '\"status\":\"pending\"') where kind = 'approval' and body like '%$AID2%'"
  expect 0 approvals --status pending --json
  R=$OUT
  is 'length == 1'
  expect 4 approve "$AID2"
  has "$ERR" "is destroyed: it will never act on approval"
  expect 0 reject "$AID2"
  has "$OUT" "rejected"
fi

# An agent whose tools glob reaches only an MCP server that lists no tools (here vigil's own
# server over an empty store) is told so, not "set tools in its manifest".
expect 0 --store "$T/empty.db" init
VIGIL_BIN=$(cd "$(dirname "$VIGIL")" && pwd)/$(basename "$VIGIL")
expect 0 agent create --name mcpuser --config '{"tools":["v__*"],"mcp_servers":{"v":{"command":["'"$VIGIL_BIN"'","--store","'"$T/empty.db"'","mcp","serve"]}}}'
expect 0 tool list mcpuser
has "$ERR" "no tool served now matches its tools (v__*)"
lacks "$ERR" "set tools in its manifest"
expect 0 agent create --name bare
expect 0 tool list bare
has "$ERR" "set tools in its manifest"
expect 0 mcp list
has "$OUT" '(agent "mcpuser")'
lacks "$OUT" "(null)"
expect 0 mcp list --json
R=$OUT
is '.[0] | has("clash") | not'

finish
