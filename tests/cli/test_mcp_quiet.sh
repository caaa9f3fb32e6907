#!/usr/bin/env bash
# A command that succeeds prints nothing of an MCP server's own stderr: server-filesystem
# announces "Secure MCP Filesystem Server running on stdio" there, and `vigil mcp tools`, `vigil
# mcp call` and an agent's call through `vigil tool call` keep it off the user's terminal. A
# server that fails is quoted: its last stderr lines are in the one-line error message, so the
# user can act on them. Skips without node and the npm servers (scripts/npm.sh), fails without
# them when VIGIL_REQUIRE_MCP=1.
set -e
source "$(dirname "$0")/lib.sh" "$1"
SRC=${VIGIL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
FS=${VIGIL_MCP_NPM_DIR:-$SRC/.deps/npm}/node_modules/.bin/mcp-server-filesystem
if ! command -v node >/dev/null || [ ! -x "$FS" ]; then
  [ "${VIGIL_REQUIRE_MCP:-0}" = 1 ] && { echo "FAIL: node or $FS is missing"; exit 1; }
  echo "skipped: node or $FS is missing"
  rm -rf "$T"
  exit 0
fi
mkdir "$T/files"
echo hello >"$T/files/a.txt"
cat >"$T/config.yaml" <<YAML
mcp_servers:
  fs:
    command: ["$FS", "$T/files"]
  grumpy:
    command: [sh, -c, 'echo "starting up" >&2; echo "cannot open /nope: permission denied" >&2; exit 3']
YAML
export VIGIL_CONFIG="$T/config.yaml"

expect 0 mcp tools fs
has "$OUT" "fs__list_directory"
[ -z "$ERR" ] && ok || bad "mcp tools printed on stderr: $ERR"
expect 0 mcp call fs list_directory "{\"path\": \"$T/files\"}"
has "$OUT" "a.txt"
[ -z "$ERR" ] && ok || bad "mcp call printed on stderr: $ERR"

# An agent's MCP call (the CLI's gate path) is as quiet.
expect 0 init
printf 'name: reader\ntools: ["fs__*"]\n' >"$T/reader.yaml"
expect 0 agent apply "$T/reader.yaml" --json
ID=$(printf '%s' "$OUT" | jq -r .id)
expect 0 tool call "$ID" fs__read_text_file "{\"path\": \"$T/files/a.txt\"}"
has "$OUT" "hello"
[ -z "$ERR" ] && ok || bad "tool call printed on stderr: $ERR"

# A server that dies says why, in its own words, in the error message.
expect 9 mcp tools grumpy || true
one_line "$ERR"
has "$ERR" "its last words: starting up | cannot open /nope: permission denied"
finish
