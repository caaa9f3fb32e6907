#!/usr/bin/env bash
# /mcp (Streamable HTTP), progress over the answer's stream (issue 29; MCP 2025-11-25 and
# 2026-07-28 "Sending Messages"): a tools/call carrying params._meta.progressToken is answered
# as a server-sent event stream (Content-Type text/event-stream, X-Accel-Buffering: no) that
# carries its notifications/progress (the token, increasing progress, a message) and then its
# response, which ends the stream; no event has an id (no resumption is offered). Without a
# token, or with one of the wrong type, the answer is one JSON body as before. Checked with a raw
# client (curl) in both revisions and with the MCP TypeScript SDK's client (onprogress), when
# node and the SDK are there (scripts/npm.sh). Cancellation of a streamed call: in 2025-11-25 a
# notifications/cancelled of the session ends the turn canceled and the stream with no response;
# in 2026-07-28 closing the stream cancels the turn. The turns are held by the scripted model's
# replayed rate limit (20 s of retry-after, so the steps fit in it on a loaded machine).
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE OPENAI_API_KEY ANTHROPIC_API_KEY

expect 0 init
printf 'name: helper\nvisibility: public\n' >"$T/a.yaml"
printf 'name: other\nvisibility: public\n' >"$T/b.yaml"
for f in a b; do expect 0 agent apply "$T/$f.yaml"; done
serve_http --workers 1
U="http://127.0.0.1:$PORT/mcp"
ACCEPT='Accept: application/json, text/event-stream'

# post BODY [CURL ARGS...]: status in $S, body in $R, headers in $H.
post() {
  local body=$1
  shift
  S=$(curl -sS -o "$T/body" -D "$T/headers" -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -H "$ACCEPT" "$@" \
    --data-binary "$body" "$U")
  R=$(cat "$T/body")
  H=$(tr -d '\r' <"$T/headers")
}
status() {
  [ "$S" = "$1" ] && ok || bad "HTTP $S, expected $1: $R"
}
# events FILE: the data of each SSE event of FILE as a JSON array (checked: every event is
# "event: message" with one data line, no id line).
events() {
  grep -q '^id:' "$1" && bad "an event has an id: $(cat "$1")"
  [ "$(grep -c '^event: message$' "$1")" = "$(grep -c '^data: ' "$1")" ] && ok ||
    bad "not one data line per message event: $(cat "$1")"
  sed -n 's/^data: //p' "$1" | jq -s '.'
}
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
post "$INIT"
SID=$(printf '%s\n' "$H" | sed -n 's/^Mcp-Session-Id: //p')
S1=(-H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 2025-11-25')
post '{"jsonrpc":"2.0","method":"notifications/initialized"}' "${S1[@]}"
status 202

# 2025-11-25: the progress, then the response, on one stream.
post '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"talk_to_helper","arguments":{"message":"hello"},"_meta":{"progressToken":"p-1"}}}' "${S1[@]}"
status 200
has "$H" "Content-Type: text/event-stream"
has "$H" "X-Accel-Buffering: no"
R=$(events "$T/body")
is 'length>=2 and (.[-1]|.id==2 and .result.isError==false and (.result.content[0].text|contains("you said: hello")))'
is '.[:-1] | all(.method=="notifications/progress" and .params.progressToken=="p-1" and (.params.message|type)=="string")'
is '[.[:-1][].params.progress] as $p | ($p == ($p|sort)) and ($p|unique|length)==($p|length) and $p[0]>0'
is '.[0].params.message=="the agent is thinking"'
# An integer token comes back as an integer.
post '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"talk_to_helper","arguments":{"message":"again"},"_meta":{"progressToken":7}}}' "${S1[@]}"
R=$(events "$T/body")
is '.[0].params.progressToken==7 and .[-1].id==3'
# No token: one JSON body. A token of the wrong type: refused in one JSON body.
post '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"talk_to_helper","arguments":{"message":"plain"}}}' "${S1[@]}"
has "$H" "Content-Type: application/json"
is '.id==4 and .result.isError==false'
post '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"talk_to_helper","arguments":{"message":"x"},"_meta":{"progressToken":{"a":1}}}}' "${S1[@]}"
has "$H" "Content-Type: application/json"
is '.id==5 and .error.code==-32602'
# An unknown tool with a token: the error is the stream's one message.
post '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"talk_to_nobody","arguments":{},"_meta":{"progressToken":"p-6"}}}' "${S1[@]}"
R=$(events "$T/body")
is 'length==1 and .[0].id==6 and .[0].error.code==-32602'

# 2026-07-28: the same stream, the response with its resultType.
M='"_meta":{"progressToken":"m-1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
post "{\"jsonrpc\":\"2.0\",\"id\":\"m\",\"method\":\"tools/call\",\"params\":{$M,\"name\":\"talk_to_helper\",\"arguments\":{\"message\":\"modern\"}}}" \
  -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: talk_to_helper'
status 200
has "$H" "Content-Type: text/event-stream"
R=$(events "$T/body")
is '(.[0]|.method=="notifications/progress" and .params.progressToken=="m-1") and (.[-1]|.id=="m" and .result.resultType=="complete" and (.result.content[0].text|contains("you said: modern")))'

# The MCP TypeScript SDK's client: its onprogress hears the stream's notifications.
SDK=${VIGIL_MCP_NPM_DIR:-$VIGIL_SOURCE_DIR/.deps/npm}/node_modules/@modelcontextprotocol/sdk
if [ -d "$SDK/dist/esm/client" ] && command -v node >/dev/null; then
  R=$(node "$(dirname "$0")/mcp_progress_client.mjs" "$SDK" "$U" "$TOKEN" talk_to_helper "from the sdk" 2>"$T/sdk.err") ||
    bad "the SDK client failed: $(cat "$T/sdk.err")"
  is '(.progress|length)>=1 and .progress[0].message=="the agent is thinking" and (.result.content[0].text|contains("you said: from the sdk"))'
elif [ "${VIGIL_REQUIRE_MCP:-}" = 1 ]; then
  bad "VIGIL_REQUIRE_MCP=1 but the MCP SDK is not at $SDK (or node is missing; run scripts/npm.sh)"
else
  echo "note: no MCP SDK at $SDK (or no node): the SDK client's check is skipped"
fi
serve_stop

# Cancellation of streamed calls, both revisions at once on one daemon (two agents: an agent
# runs one turn at a time). The daemon's turns share one position in the cassette
# (docs/models.md): its first two exchanges are each turn's first, slow, model call.
exec 7<&-
rm -f "$T/serve.fifo" # serve_http makes it again
export VIGIL_MODEL_CASSETTE="$(cd "$(dirname "$0")/../fixtures/mcpserve" && pwd)/slow_two_turns_20s.json"
serve_http --workers 1
U="http://127.0.0.1:$PORT/mcp"
unset VIGIL_MODEL_CASSETTE
post "$INIT"
SID=$(printf '%s\n' "$H" | sed -n 's/^Mcp-Session-Id: //p')
S1=(-H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 2025-11-25')
stream() { # stream FILE BODY [CURL ARGS...]: a call whose stream goes to FILE as it comes (run in
  # the background: curl is then the background process itself, which the test may kill)
  local file=$1 body=$2
  shift 2
  exec curl -sS -N -o "$file" -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -H "$ACCEPT" "$@" --data-binary "$body" "$U"
}
stream "$T/legacy.sse" '{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"talk_to_helper","arguments":{"message":"take your time"},"_meta":{"progressToken":"c-1"}}}' "${S1[@]}" &
LEGACY_PID=$!
stream "$T/modern.sse" "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"_meta\":{\"progressToken\":\"c-2\",\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}},\"name\":\"talk_to_other\",\"arguments\":{\"message\":\"take your time\"}}}" \
  -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: talk_to_other' &
MODERN_PID=$!
# Both turns are running once both streams carried their first progress and both runs are in
# the store (safety bounds of 20 s, not waits).
wait_for grep -q '"c-1"' "$T/legacy.sse" || bad "no progress on the 2025-11-25 stream"
wait_for grep -q '"c-2"' "$T/modern.sse" || bad "no progress on the 2026-07-28 stream"
running() { "$VIGIL" runs list --json | jq -e '[.items[]|select(.status=="running")]|length==2'; }
WAIT_STEP=0.1 WAIT_TRIES=200 wait_for running || bad "the two turns never ran together"
post '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"no longer needed"}}' "${S1[@]}"
status 202
kill -TERM "$MODERN_PID"
wait "$MODERN_PID" || true
wait "$LEGACY_PID" && ok || bad "the cancelled 2025-11-25 stream did not end cleanly"
R=$(events "$T/legacy.sse")
is 'length>=1 and all(.[]; .method=="notifications/progress")'
# Both turns end canceled (without the cancels they complete, "too late", after the 20 s).
settled() { "$VIGIL" runs list --json | jq -e '[.items[]|select(.status=="running")]|length==0'; }
WAIT_STEP=0.1 WAIT_TRIES=300 wait_for settled || bad "a turn still runs"
expect 0 runs list --json
R=$OUT
is '[.items[].status|select(.!="completed")]==["canceled","canceled"]'
serve_stop
finish
