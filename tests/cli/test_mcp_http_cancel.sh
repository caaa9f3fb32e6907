#!/usr/bin/env bash
# /mcp (Streamable HTTP, revision 2025-11-25 with a session), a long tool call cancelled (issue
# 29): a talk_to_ call whose turn waits on the scripted model's replayed rate limit (20 s of
# retry-after, so the steps below fit in it on a loaded machine) is cancelled by a
# notifications/cancelled POSTed in the same session while it runs: the turn ends canceled, and
# the call's POST is answered 202 with no JSON-RPC answer. A cancel from another session, or for
# an id not running, changes nothing; a second request with the id of one still running in the
# session is refused (400, -32600), so a cancel always names one request. Revision 2026-07-28
# (no session): closing the connection of a running call cancels its turn.
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset OPENAI_API_KEY ANTHROPIC_API_KEY

expect 0 init
printf 'name: helper\nvisibility: public\n' >"$T/a.yaml"
expect 0 agent apply "$T/a.yaml"
# A turn held 20 s by a replayed rate limit (tests/fixtures/mcpserve/slow_turn_20s.json).
export VIGIL_MODEL_CASSETTE="$(cd "$(dirname "$0")/../fixtures/mcpserve" && pwd)/slow_turn_20s.json"
serve_http --workers 1
U="http://127.0.0.1:$PORT/mcp"

# post BODY [SESSION]: status in $S, body in $R, the Mcp-Session-Id answered in $SID.
post() {
  S=$(curl -sS -o "$T/body" -D "$T/headers" -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' ${2:+-H "Mcp-Session-Id: $2"} \
    --data-binary "$1" "$U")
  R=$(cat "$T/body")
  SID=$(tr -d '\r' <"$T/headers" | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
}
status() {
  [ "$S" = "$1" ] && passed=$((passed + 1)) || { echo "FAIL: HTTP $S, expected $1: $R"; fail_count; }
}
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
post "$INIT"
status 200
A=$SID
post "$INIT"
B=$SID
post '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$A"
status 202

CALL='{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"talk_to_helper","arguments":{"message":"take your time"}}}'
curl -sS -o "$T/call.body" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -H "Mcp-Session-Id: $A" --data-binary "$CALL" "$U" >"$T/call.status" &
CALL_PID=$!
# The turn is running once its run is in the store (a safety bound of 20 s, not a wait).
for _ in $(seq 200); do
  "$VIGIL" runs list --json 2>/dev/null | jq -e '[.items[].status]|index("running")!=null' >/dev/null && break
  sleep 0.1
done
# The running call's id again in the same session: refused, the running one untouched.
post "$CALL" "$A"
status 400
is '.id=="long" and .error.code==-32600 and (.error.message|test("in use"))'
# Another session's cancel, and one for an id that is not running: nothing happens.
post '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long"}}' "$B"
status 202
post '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"other"}}' "$A"
status 202
post '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"no longer needed"}}' "$A"
status 202
wait "$CALL_PID"
S=$(cat "$T/call.status")
R=$(cat "$T/call.body")
status 202
[ -z "$R" ] && passed=$((passed + 1)) || { echo "FAIL: the cancelled call was answered: $R"; fail_count; }
unset VIGIL_MODEL_CASSETTE
expect 0 runs list --json
R=$OUT
is '[.items[].status]==["canceled"]'
serve_stop

# 2026-07-28: the client closes its connection while the call runs; the turn ends canceled
# (without the cancel it would complete, "too late", once the 20 s retry is over).
export VIGIL_MODEL_CASSETTE="$(cd "$(dirname "$0")/../fixtures/mcpserve" && pwd)/slow_turn_20s.json"
exec 7<&-
rm -f "$T/serve.fifo" # serve_http makes it again
serve_http --workers 1
U="http://127.0.0.1:$PORT/mcp"
MOD='{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"talk_to_helper","arguments":{"message":"take your time"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
curl -sS -o /dev/null -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
  -H 'Mcp-Method: tools/call' -H 'Mcp-Name: talk_to_helper' --data-binary "$MOD" "$U" &
CALL_PID=$!
for _ in $(seq 200); do
  "$VIGIL" runs list --json 2>/dev/null | jq -e '.items[0].status=="running"' >/dev/null && break
  sleep 0.1
done
kill -TERM "$CALL_PID"
wait "$CALL_PID" || true
# The turn ends (canceled, or completed without the cancel): a safety bound of 30 s.
for _ in $(seq 300); do
  "$VIGIL" runs list --json 2>/dev/null | jq -e '.items[0].status!="running"' >/dev/null && break
  sleep 0.1
done
unset VIGIL_MODEL_CASSETTE
expect 0 runs list --json
R=$OUT
is '[.items[].status]==["canceled","canceled"]'
serve_stop
finish
