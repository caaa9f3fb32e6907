#!/usr/bin/env bash
# End-to-end: MCP server mode over Streamable HTTP at /mcp on a live `vigil serve` (docs/http.md
# "MCP server mode"), with the scripted model. The same access rules as the API (token, Host,
# Origin); revision 2025-11-25 with sessions (initialize assigns Mcp-Session-Id, 400 without
# one, 404 for an unknown or ended one, 202 for notifications, MCP-Protocol-Version checked,
# DELETE ends a session, GET 405, the Accept pair 406); revision 2026-07-28 without sessions
# (server/discover, _meta, Mcp-Method and Mcp-Name checked against the body: -32020); then
# vigil's own MCP client (src/mcp's Streamable HTTP transport) against /mcp.
# The MCP inspector CLI against /mcp is in test_mcp_serve_inspector.sh.
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE OPENAI_API_KEY ANTHROPIC_API_KEY

expect 0 init
printf 'name: helper bot\nvisibility: public\nmemory:\n  - label: notes\n    content: likes tea\n' >"$T/a.yaml"
printf 'name: secret\n' >"$T/b.yaml"
for f in a b; do expect 0 agent apply "$T/$f.yaml"; done
serve_http --workers 1
U="http://127.0.0.1:$PORT/mcp"
ACCEPT='Accept: application/json, text/event-stream'

# mcp METHOD BODY [CURL ARGS...]: one request to /mcp with the token (AUTH) as JSON (CTYPE);
# status in $S, body in $R, response headers in $H.
mcp() {
  local method=$1 body=$2
  shift 2
  S=$(curl -sS -o "$T/body" -D "$T/headers" -w '%{http_code}' -X "$method" \
    -H "Authorization: ${AUTH:-Bearer $TOKEN}" -H "Content-Type: ${CTYPE:-application/json}" "$@" \
    ${body:+--data-binary "$body"} "$U")
  R=$(cat "$T/body")
  H=$(tr -d '\r' <"$T/headers")
}
status() {
  [ "$S" = "$1" ] && passed=$((passed + 1)) || { echo "FAIL: HTTP $S, expected $1: $R"; fail_count; }
}
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
LIST='{"jsonrpc":"2.0","id":2,"method":"tools/list"}'

# The API's access rules hold at /mcp: nothing reaches MCP without them.
S=$(curl -sS -o /dev/null -w '%{http_code}' -X POST -H "$ACCEPT" -H 'Content-Type: application/json' --data-binary "$INIT" "$U")
status 401
AUTH="Bearer $(printf '%064d' 0)" mcp POST "$INIT" -H "$ACCEPT"
status 401
mcp POST "$INIT" -H "$ACCEPT" -H 'Host: attacker.example'
status 403
mcp POST "$INIT" -H "$ACCEPT" -H 'Origin: http://attacker.example'
status 403
mcp PUT "$INIT" -H "$ACCEPT"
status 405
has "$H" "Allow: POST, DELETE"

# Revision 2025-11-25: the transport's own rules.
mcp POST "$INIT" -H 'Accept: application/json'
status 406
is '.error.code==-32000 and (.error.message|contains("text/event-stream"))'
mcp POST "$INIT" -H 'Accept:' # no Accept header at all (curl drops it): not the pair either
status 406
is '.error.code==-32000 and (.error.message|contains("text/event-stream"))'
CTYPE=text/plain mcp POST "$INIT" -H "$ACCEPT"
status 415
mcp POST "$LIST" -H "$ACCEPT"
status 400
is '.error.message|contains("Mcp-Session-Id")'
mcp POST 'not json' -H "$ACCEPT"
status 400
is '.id==null and .error.code==-32700'
mcp GET "" -H "$ACCEPT"
status 405
has "$H" "Allow: POST, DELETE"

mcp POST "$INIT" -H "$ACCEPT"
status 200
is '.id==1 and .result.protocolVersion=="2025-11-25" and .result.serverInfo.name=="vigil"'
SID=$(printf '%s\n' "$H" | sed -n 's/^Mcp-Session-Id: //p')
[ ${#SID} -eq 64 ] && passed=$((passed + 1)) || { echo "FAIL: no 64-character session id: $H"; fail_count; }
has "$H" "Content-Type: application/json"
mcp POST "$INIT" -H "$ACCEPT"
SID2=$(printf '%s\n' "$H" | sed -n 's/^Mcp-Session-Id: //p')
[ -n "$SID2" ] && [ "$SID2" != "$SID" ] && passed=$((passed + 1)) || { echo "FAIL: a second session has the same id"; fail_count; }
S1=(-H "$ACCEPT" -H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 2025-11-25')
mcp POST '{"jsonrpc":"2.0","method":"notifications/initialized"}' "${S1[@]}"
status 202
[ -z "$R" ] && passed=$((passed + 1)) || { echo "FAIL: a notification was answered: $R"; fail_count; }
mcp POST "$LIST" "${S1[@]}"
status 200
is '.id==2 and ([.result.tools[].name]==["talk_to_helper_bot","wake_helper_bot","report_of_helper_bot"])'
mcp POST '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"talk_to_helper_bot","arguments":{"message":"over http"}}}' "${S1[@]}"
is '.id==3 and .result.isError==false and (.result.content[0].text|contains("you said: over http"))'
mcp POST '{"jsonrpc":"2.0","id":4,"method":"resources/list"}' "${S1[@]}"
mem=$(printf '%s' "$R" | jq -r '.result.resources[] | select(.uri|endswith("/memory/notes")) | .uri')
mcp POST "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/read\",\"params\":{\"uri\":\"$mem\"}}" "${S1[@]}"
is '.result.contents[0].text=="likes tea"'
mcp POST '{"jsonrpc":"2.0","id":6,"method":"ping"}' -H "$ACCEPT" -H "Mcp-Session-Id: $SID"
is '.id==6 and .result=={}'
mcp POST '{"jsonrpc":"2.0","id":7,"method":"no/such"}' "${S1[@]}"
status 200
is '.id==7 and .error.code==-32601'
mcp POST "$LIST" -H "$ACCEPT" -H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 1999-01-01'
status 400
is '.error.message|contains("1999-01-01")'
mcp POST "$LIST" -H "$ACCEPT" -H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 2025-06-18'
status 400
mcp POST "$LIST" -H "$ACCEPT" -H "Mcp-Session-Id: $(printf '%064d' 0)"
status 404
mcp POST "$LIST" -H "$ACCEPT" -H 'Mcp-Session-Id: nope'
status 404
is '.error.code==-32001'
# DELETE ends the session: it is unknown after, the other one still serves.
mcp DELETE "" -H "Mcp-Session-Id: $SID"
status 204
mcp POST "$LIST" "${S1[@]}"
status 404
mcp DELETE "" -H "Mcp-Session-Id: $SID"
status 404
mcp DELETE ""
status 400
mcp POST "$LIST" -H "$ACCEPT" -H "Mcp-Session-Id: $SID2"
status 200
# Nothing of MCP is in the REST document.
S=$(curl -sS -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/openapi.json")
case $(cat "$T/body") in *'"/mcp"'*) echo "FAIL: /mcp is in /openapi.json"; fail_count ;; *) passed=$((passed + 1)) ;; esac

# Revision 2026-07-28: no session; the headers must say what the body says.
M='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
M2=(-H "$ACCEPT" -H 'MCP-Protocol-Version: 2026-07-28')
mcp POST "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"server/discover\",\"params\":{$M}}" "${M2[@]}" -H 'Mcp-Method: server/discover'
status 200
is '.id=="d" and .result.supportedVersions==["2026-07-28"] and .result.resultType=="complete"'
if printf '%s\n' "$H" | grep -qi '^Mcp-Session-Id'; then echo "FAIL: a 2026-07-28 answer opened a session"; fail_count; else passed=$((passed + 1)); fi
CALL="{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{$M,\"name\":\"talk_to_helper_bot\",\"arguments\":{\"message\":\"modern\"}}}"
mcp POST "$CALL" "${M2[@]}" -H 'Mcp-Method: tools/call' -H 'Mcp-Name: talk_to_helper_bot'
status 200
is '.id==8 and .result.resultType=="complete" and (.result.content[0].text|contains("you said: modern"))'
mcp POST "$CALL" "${M2[@]}" -H 'Mcp-Method: tools/call' -H 'Mcp-Name: talk_to_secret'
status 400
is '.id==8 and .error.code==-32020 and (.error.message|contains("Mcp-Name"))'
mcp POST "$CALL" "${M2[@]}" -H 'Mcp-Method: tools/list' -H 'Mcp-Name: talk_to_helper_bot'
status 400
is '.error.code==-32020 and (.error.message|contains("Mcp-Method"))'
mcp POST "$LIST" "${M2[@]}" -H 'Mcp-Method: tools/list'
status 400
is '.error.code==-32020'
mcp POST '{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01"}}}' -H "$ACCEPT" -H 'Mcp-Method: tools/list'
status 400
is '.error.code==-32022'

# vigil's own MCP client, its Streamable HTTP transport, against /mcp.
cat >"$T/config.yaml" <<YAML
mcp_servers:
  me:
    url: "$U"
    headers:
      Authorization: "Bearer \${VIGIL_TEST_MCP_TOKEN}"
YAML
export VIGIL_CONFIG="$T/config.yaml" VIGIL_TEST_MCP_TOKEN="$TOKEN"
expect 0 mcp tools me --json
has "$OUT" "talk_to_helper_bot"
has "$OUT" "report_of_helper_bot"
# proves: S2-017 (only an external agent is a tool of the MCP server mode; "secret" is project)
case $OUT in *talk_to_secret*) echo "FAIL: an internal agent is a tool"; fail_count ;; *) passed=$((passed + 1)) ;; esac
expect 0 mcp call me talk_to_helper_bot '{"message":"client over http"}' --json
has "$OUT" "you said: client over http"
expect 1 mcp call me talk_to_helper_bot '{}' --json
# A wrong token is an authentication failure (EAUTH: exit 9 by the code table), named as one.
VIGIL_TEST_MCP_TOKEN=$(printf '%064d' 0) expect 9 mcp tools me --json
has "$ERR" "HTTP 401"
has "$ERR" "not authenticated"
unset VIGIL_CONFIG

serve_stop
finish
