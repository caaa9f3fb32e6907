#!/usr/bin/env bash
# End-to-end: `vigil mcp serve` run as a child on a temp store with the scripted model, spoken
# to over pipes (bash coproc): the 2025-11-25 lifecycle (version negotiation, nothing before
# initialize, notifications unanswered, ping), tools/list and resources/list pages with
# cursors, a chat turn, a wake and a report as tool calls, resources/read, JSON-RPC errors
# (bad JSON, batch, unknown method, bad params, bad cursor, unknown tool), ids kept with their
# type, stdout only protocol, exit 0 at EOF. Internal agents are invisible. Then vigil's own
# MCP client (`vigil mcp tools` / `vigil mcp call`) against `vigil mcp serve` declared as a
# stdio server.
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE OPENAI_API_KEY ANTHROPIC_API_KEY

expect 0 init
printf 'name: helper bot\nvisibility: public\nmemory:\n  - label: notes\n    content: likes tea\n' >"$T/a.yaml"
printf 'name: secret\n' >"$T/b.yaml"
printf 'name: second\nvisibility: public\n' >"$T/c.yaml"
printf 'name: hidden\nvisibility: private\n' >"$T/d.yaml"
for f in a b c d; do expect 0 agent apply "$T/$f.yaml"; done
expect 0 agent list --json
secret=$(printf '%s' "$OUT" | jq -r '.items[] | select(.name=="secret") | .id')

# send JSON: one line to the server; recv: its next stdout line into $R (10 s safety timeout).
send() { printf '%s\n' "$1" >&"${SRV[1]}"; }
recv() {
  R=""
  if ! IFS= read -r -t 10 R <&"${SRV[0]}"; then
    echo "FAIL: no answer from vigil mcp serve"
    fail_count
  fi
}
ask() { send "$1"; recv; }

coproc SRV { "$VIGIL" mcp serve --page-size 2 2>"$T/serve.err"; }
PID=$SRV_PID

ask '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
is '.id==1 and .error.code==-32600'
ask '{"jsonrpc":"2.0","id":0,"method":"ping"}'
is '.id==0 and .result=={}'
ask '{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
is '.id=="init" and .result.protocolVersion=="2025-11-25" and .result.serverInfo.name=="vigil"'
is '.result.capabilities.tools and .result.capabilities.resources'
send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
send '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}'
ask '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
# The notifications got no answer: this is the answer to id 2.
is '.id==2 and (.result.tools|length)==2 and .result.nextCursor'
is '[.result.tools[].name]==["talk_to_helper_bot","wake_helper_bot"]'
cur=$(printf '%s' "$R" | jq -r .result.nextCursor)
ask "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{\"cursor\":\"$cur\"}}"
is '[.result.tools[].name]==["report_of_helper_bot","talk_to_second"]'
cur=$(printf '%s' "$R" | jq -r .result.nextCursor)
ask "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{\"cursor\":\"$cur\"}}"
is '[.result.tools[].name]==["wake_second","report_of_second"] and (.result|has("nextCursor")|not)'
ask '{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"zz"}}'
is '.id==5 and .error.code==-32602'

# A chat turn through the tool; a second turn continues the same conversation.
ask '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"talk_to_helper_bot","arguments":{"message":"hello there"}}}'
is '.result.isError==false and (.result.content[0].text|contains("you said: hello there"))'
is '.result.structuredContent.run_id|length==36'
# Schema-invalid arguments are a tool error the calling model can correct (isError).
ask '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"talk_to_helper_bot","arguments":{}}}'
is '.id==7 and .result.isError==true'
# A member the schema does not name is refused too, naming it (E10 of session 31's trial).
ask '{"jsonrpc":"2.0","id":71,"method":"tools/call","params":{"name":"talk_to_helper_bot","arguments":{"message":"x","sesion":"s"}}}'
is '.id==71 and .result.isError==true and (.result.content[0].text|contains("unknown member \"sesion\""))'
ask '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"wake_second","arguments":{"message":"go"}}}'
is '.result.isError==false and (.result.structuredContent.run_key|test("^[0-9a-f]{64}$"))'
ask '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"report_of_helper_bot"}}'
is '.result.isError==false and .result.structuredContent.report==null'
# Unknown tools, internal agents included: a protocol error.
ask '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"talk_to_secret","arguments":{"message":"x"}}}'
is '.id==10 and .error.code==-32602'
ask '{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"talk_to_helper_bot","arguments":[1]}}'
is '.id==11 and .error.code==-32602'

# Resources: the public agents' reports and memory blocks, paged.
ask '{"jsonrpc":"2.0","id":12,"method":"resources/list"}'
is '(.result.resources|length)==2 and .result.nextCursor=="2"'
mem=$(printf '%s' "$R" | jq -r '.result.resources[] | select(.uri|endswith("/memory/notes")) | .uri')
ask "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"resources/read\",\"params\":{\"uri\":\"$mem\"}}"
is '.result.contents[0].text=="likes tea" and .result.contents[0].mimeType=="text/plain"'
ask '{"jsonrpc":"2.0","id":14,"method":"resources/list","params":{"cursor":"2"}}'
is '[.result.resources[].name]==["report of second"]'
ask "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"resources/read\",\"params\":{\"uri\":\"vigil://agents/$secret/report\"}}"
is '.id==15 and .error.code==-32002'
ask '{"jsonrpc":"2.0","id":16,"method":"resources/read","params":{}}'
is '.error.code==-32602'

# Malformed messages.
ask 'this is not json'
is '.id==null and .error.code==-32700'
ask '[{"jsonrpc":"2.0","id":17,"method":"ping"}]'
is '.id==null and .error.code==-32600'
ask '{"jsonrpc":"1.0","id":18,"method":"ping"}'
is '.id==18 and .error.code==-32600'
ask '{"jsonrpc":"2.0","id":"req-abc","method":"no/such"}'
is '.id=="req-abc" and .error.code==-32601'
ask '{"jsonrpc":"2.0","id":19,"method":"ping","params":[]}'
is '.id==19 and .error.code==-32602'
# A malformed notification is not answered either: the next line answers id 20.
send '{"jsonrpc":"2.0","method":"notifications/odd","params":[1]}'
ask '{"jsonrpc":"2.0","id":20,"method":"ping"}'
is '.id==20 and .result=={}'

# EOF: the server exits 0, having written nothing but protocol to stdout.
exec {SRV[1]}>&-
rest=$(cat <&"${SRV[0]}")
set +e
wait "$PID"
st=$?
set -e
[ "$st" -eq 0 ] && passed=$((passed + 1)) || { echo "FAIL: mcp serve exited $st"; fail_count; }
[ -z "$rest" ] && passed=$((passed + 1)) || { echo "FAIL: extra stdout: $rest"; fail_count; }
has "$(cat "$T/serve.err")" "method not found"
has "$(cat "$T/serve.err")" "2 agents exposed" # said on start: the two public ones

# A version we speak is echoed.
R=$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}' | "$VIGIL" mcp serve 2>/dev/null)
is '.result.protocolVersion=="2025-06-18"'

# Revision 2026-07-28: no handshake; each request carries its version in _meta.
M='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"server/discover\",\"params\":{$M}}" \
  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{$M}}" \
  "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{$M,\"name\":\"talk_to_second\",\"arguments\":{\"message\":\"modern\"}}}" \
  "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":{$M}}" \
  '{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01"}}}' |
  "$VIGIL" mcp serve 2>/dev/null >"$T/modern.out"
R=$(sed -n 1p "$T/modern.out")
is '.id=="d" and .result.supportedVersions==["2026-07-28"] and .result.resultType=="complete" and .result.capabilities.tools'
is '.result._meta["io.modelcontextprotocol/serverInfo"].name=="vigil"'
R=$(sed -n 2p "$T/modern.out")
is '.id==2 and .result.resultType=="complete" and (.result.tools|length)==6'
R=$(sed -n 3p "$T/modern.out")
is '.id==3 and .result.resultType=="complete" and (.result.content[0].text|contains("you said: modern"))'
R=$(sed -n 4p "$T/modern.out")
is '.id==4 and .error.code==-32601'
R=$(sed -n 5p "$T/modern.out")
is '.id==5 and .error.code==-32022 and .error.data.requested=="1900-01-01" and (.error.data.supported|index("2026-07-28"))==0'

# vigil's own MCP client against `vigil mcp serve`.
cat >"$T/config.yaml" <<YAML
mcp_servers:
  me:
    command: ["$VIGIL", "mcp", "serve"]
    env:
      VIGIL_STORE: "$VIGIL_STORE"
      VIGIL_MODEL_PROVIDER: scripted
YAML
export VIGIL_CONFIG="$T/config.yaml"
expect 0 mcp tools me --json
has "$OUT" "talk_to_helper_bot"
has "$OUT" "report_of_second"
expect 0 mcp call me talk_to_second '{"message":"ping pong"}' --json
has "$OUT" "you said: ping pong"
expect 1 mcp call me talk_to_second '{}' --json
# A store with no public agent: an empty tool list, and the start says why.
VIGIL_STORE="$T/none/v.db" expect 0 init
VIGIL_STORE="$T/none/v.db" "$VIGIL" mcp serve </dev/null 2>"$T/none.err" >/dev/null
has "$(cat "$T/none.err")" "0 agents exposed (only agents with visibility: external are"

finish
