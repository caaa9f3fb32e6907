#!/usr/bin/env bash
# vigil as an MCP server checked by the MCP inspector CLI (npm @modelcontextprotocol/inspector-cli,
# the reference TypeScript client, revision 2025-11-25), over both transports: `vigil mcp serve`
# on stdio and /mcp on a live `vigil serve` (Streamable HTTP, the bearer token as a header):
# list tools, call a chat tool, list and read resources.
# The inspector is pinned in scripts/npm.sh (VIGIL_MCP_NPM_DIR, as scripts/test.sh sets it), or
# named by VIGIL_MCP_INSPECTOR (its build/index.js). Without it (or node) the check is skipped
# (exit 77), or fails when VIGIL_REQUIRE_MCP=1.
set -e
source "$(dirname "$0")/lib.sh" "$1"
INSPECTOR=${VIGIL_MCP_INSPECTOR:-${VIGIL_MCP_NPM_DIR:-$VIGIL_SOURCE_DIR/.deps/npm}/node_modules/@modelcontextprotocol/inspector-cli/build/index.js}
if [ ! -f "$INSPECTOR" ] || ! command -v node >/dev/null; then
  rm -rf "$T"
  if [ "${VIGIL_REQUIRE_MCP:-}" = 1 ]; then
    echo "FAIL: VIGIL_REQUIRE_MCP=1 but the MCP inspector CLI is not at $INSPECTOR (or node is missing; run scripts/npm.sh)"
    exit 1
  fi
  echo "skip: no MCP inspector CLI at $INSPECTOR (or no node; scripts/npm.sh installs it)"
  exit 77
fi
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE OPENAI_API_KEY ANTHROPIC_API_KEY
expect 0 init
printf 'name: helper bot\nvisibility: public\nmemory:\n  - label: notes\n    content: likes tea\n' >"$T/a.yaml"
expect 0 agent apply "$T/a.yaml"

# check TARGET...: the four calls through the inspector against one server.
check() {
  local uri
  # Run from its build folder: it finds its package.json relative to the working directory.
  inspect() { OUT=$(cd "$(dirname "$INSPECTOR")" && node "$INSPECTOR" "$@" 2>"$T/inspector.err") || echo "inspector: $(cat "$T/inspector.err")"; }
  inspect "$@" --method tools/list
  has "$OUT" '"name": "talk_to_helper_bot"'
  inspect "$@" --method tools/call --tool-name talk_to_helper_bot --tool-arg message=hi
  has "$OUT" 'you said: hi'
  inspect "$@" --method resources/list
  uri=$(printf '%s' "$OUT" | jq -r '.resources[] | select(.uri|endswith("/memory/notes")) | .uri')
  inspect "$@" --method resources/read --uri "$uri"
  has "$OUT" '"text": "likes tea"'
}
check "$(realpath "$VIGIL")" mcp serve
serve_http --workers 1
check "http://127.0.0.1:$PORT/mcp" --transport http --header "Authorization: Bearer $TOKEN"
# Without the token the inspector gets nothing.
if (cd "$(dirname "$INSPECTOR")" && node "$INSPECTOR" "http://127.0.0.1:$PORT/mcp" --transport http --method tools/list) >"$T/out" 2>&1; then
  echo "FAIL: the inspector listed tools without the token: $(cat "$T/out")"
  fail_count
else
  passed=$((passed + 1))
fi
serve_stop
finish
