#!/usr/bin/env bash
# `vigil mcp serve` checked by the MCP inspector CLI (npm @modelcontextprotocol/inspector-cli,
# the reference TypeScript client): list tools, call a chat tool, list and read resources.
# The inspector is not in scripts/npm.sh's pinned set yet: set VIGIL_MCP_INSPECTOR to its
# build/index.js to run this check (docs/mcp.md); without it the check says so and passes.
set -e
source "$(dirname "$0")/lib.sh" "$1"
if [ -z "${VIGIL_MCP_INSPECTOR:-}" ] || [ ! -f "$VIGIL_MCP_INSPECTOR" ]; then
  echo "skipped: VIGIL_MCP_INSPECTOR does not name the inspector CLI's build/index.js"
  finish
  exit 0
fi
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE OPENAI_API_KEY ANTHROPIC_API_KEY
expect 0 init
printf 'name: helper bot\nvisibility: public\nmemory:\n  - label: notes\n    content: likes tea\n' >"$T/a.yaml"
expect 0 agent apply "$T/a.yaml"
inspect() { OUT=$(node "$VIGIL_MCP_INSPECTOR" "$VIGIL" mcp serve "$@" 2>"$T/inspector.err"); }
inspect --method tools/list
has "$OUT" '"name": "talk_to_helper_bot"'
inspect --method tools/call --tool-name talk_to_helper_bot --tool-arg message=hi
has "$OUT" 'you said: hi'
inspect --method resources/list
uri=$(printf '%s' "$OUT" | jq -r '.resources[] | select(.uri|endswith("/memory/notes")) | .uri')
inspect --method resources/read --uri "$uri"
has "$OUT" '"text": "likes tea"'
finish
