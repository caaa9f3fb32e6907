#!/usr/bin/env bash
# Installs npm packages the tests drive into a project-local folder (never global) and prints
# that folder. Usage: scripts/npm.sh [DIR [PACKAGE@VERSION...]]
#   default: the MCP servers the MCP tests run against, the MCP inspector CLI that checks
#     vigil's own MCP server mode, and Deno (npm package deno, whose binary arrives in
#     @deno/linux-x64-glibc) for the sandbox's TypeScript adapter, in .deps/npm;
#   scripts/web-test-deps.sh: playwright-core for the web page's browser test, in .deps/web.
# The versions are pinned by the callers; a folder that already holds them is reused (a second
# run costs nothing and needs no network). Needs node and npm (scripts/deps.sh test installs
# them). No browser is ever downloaded (the browser test uses Debian's chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.deps/npm}
[ $# -gt 0 ] && shift
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(@modelcontextprotocol/server-everything@2026.8.31
  @modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/inspector-cli@1.0.3
  deno@2.9.6)
stamp="$dir/.installed"
want="${pkgs[*]}"
installed() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
  for p in "${pkgs[@]}"; do [ -f "$dir/node_modules/${p%@*}/package.json" ] || return 1; done
}
if installed; then
  echo "$(cd "$dir" && pwd)"
  exit 0
fi
command -v npm >/dev/null || { echo "npm.sh: npm is not installed (scripts/deps.sh test)" >&2; exit 1; }
mkdir -p "$dir"
(
  cd "$dir"
  [ -f package.json ] || echo '{"name":"vigil-test-npm","private":true}' > package.json
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error --no-save "${pkgs[@]}" >&2
)
echo "$want" > "$stamp"
echo "$(cd "$dir" && pwd)"
