#!/usr/bin/env bash
# `vigil mcp serve` over stdio, long tool calls (issue 29): a talk_to_ call with a progress token
# gets notifications/progress (the token, increasing progress, a message) before its answer,
# and none without one; a notifications/cancelled sent while the turn runs cancels the turn
# (its run ends canceled) and the request gets no answer, while the server goes on answering.
# The turn is held by the scripted model's rate-limit replay: 4 s of retry-after, during which
# the cancel arrives (the retry loop checks for a cancel before each new attempt).
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE OPENAI_API_KEY ANTHROPIC_API_KEY

expect 0 init
printf 'name: helper\nvisibility: public\n' >"$T/a.yaml"
expect 0 agent apply "$T/a.yaml"

send() { printf '%s\n' "$1" >&"${SRV[1]}"; }
recv() {
  R=""
  if ! IFS= read -r -t 20 R <&"${SRV[0]}"; then
    echo "FAIL: no answer from vigil mcp serve"
    fail_count
  fi
}
INIT='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'

# Progress: the token comes back on each notification, progress increases, the answer follows.
coproc SRV { "$VIGIL" mcp serve 2>"$T/serve.err"; }
PID=$SRV_PID
send "$INIT"
recv
send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
send '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"talk_to_helper","arguments":{"message":"hello there"},"_meta":{"progressToken":"tok-1"}}}'
notes=()
for _ in 1 2 3 4 5 6; do
  recv
  if printf '%s' "$R" | jq -e 'has("id")' >/dev/null; then break; fi
  notes+=("$R")
done
is '.id==1 and .result.isError==false and (.result.content[0].text|contains("you said: hello there"))'
[ "${#notes[@]}" -ge 1 ] && passed=$((passed + 1)) || { echo "FAIL: no progress notification"; fail_count; }
R=$(printf '%s\n' "${notes[@]}" | jq -s '.')
is 'all(.[]; .method=="notifications/progress" and .params.progressToken=="tok-1" and (.params.message|type)=="string")'
is '[.[].params.progress] as $p | ($p|length)>=1 and ($p == ($p|sort)) and ($p|unique|length)==($p|length) and $p[0]>0'
is '[.[].params.message]|index("the agent is thinking")==0'
# Without a token: the answer alone.
send '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"talk_to_helper","arguments":{"message":"again"}}}'
recv
is '.id==2 and .result.isError==false'
exec {SRV[1]}>&-
wait "$PID" || true

# Cancellation: the turn waits on a replayed rate limit; the client cancels it meanwhile.
# A turn held 4 s by a replayed rate limit (tests/fixtures/mcpserve/slow_turn.json).
export VIGIL_MODEL_CASSETTE="$(cd "$(dirname "$0")/../fixtures/mcpserve" && pwd)/slow_turn.json"
coproc SRV { "$VIGIL" mcp serve 2>"$T/serve2.err"; }
PID=$SRV_PID
send "$INIT"
recv
send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
send '{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"talk_to_helper","arguments":{"message":"take your time"},"_meta":{"progressToken":7}}}'
recv
# The turn has begun (its first progress): cancel it, then ask something else.
is '.method=="notifications/progress" and .params.progressToken==7'
send '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"changed my mind"}}'
send '{"jsonrpc":"2.0","id":3,"method":"ping"}'
recv
# The next message is the ping's answer: the cancelled call was never answered.
is '.id==3 and .result=={}'
exec {SRV[1]}>&-
rest=$(cat <&"${SRV[0]}")
wait "$PID" || true
[ -z "$rest" ] && passed=$((passed + 1)) || { echo "FAIL: an answer after the cancel: $rest"; fail_count; }
unset VIGIL_MODEL_CASSETTE
expect 0 runs list --json
R=$OUT
is '[.items[].status]|index("canceled")!=null'
is '[.items[] | select(.status=="completed")]|length==2'
finish
