#!/usr/bin/env bash
# Installs the npm MCP servers the MCP tests run against into a project-local folder (never
# global) and prints that folder. Usage: scripts/npm.sh [DIR]   (default: .deps/npm)
# The versions are pinned here; a folder that already holds them is reused (a second run costs
# nothing and needs no network). Needs node and npm (scripts/deps.sh test installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.deps/npm}
pkgs=(@modelcontextprotocol/server-everything@2026.8.31
  @modelcontextprotocol/server-filesystem@2026.8.31)
stamp="$dir/.installed"
want="${pkgs[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
  [ -x "$dir/node_modules/.bin/mcp-server-everything" ]; then
  echo "$(cd "$dir" && pwd)"
  exit 0
fi
command -v npm >/dev/null || { echo "npm.sh: npm is not installed (scripts/deps.sh test)" >&2; exit 1; }
mkdir -p "$dir"
(
  cd "$dir"
  [ -f package.json ] || echo '{"name":"vigil-test-mcp-servers","private":true}' > package.json
  npm install --no-audit --no-fund --loglevel=error --no-save "${pkgs[@]}" >&2
)
echo "$want" > "$stamp"
echo "$(cd "$dir" && pwd)"
