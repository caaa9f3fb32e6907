#!/usr/bin/env bash
# Installs what the web admin page's browser test drives Chromium with (npm playwright-core,
# pinned) into a project-local folder (never global) and prints that folder.
# Usage: scripts/web-test-deps.sh [DIR]   (default: .deps/web)
# The browser itself is Debian's chromium (scripts/deps.sh test); playwright-core downloads no
# browser. A folder that already holds the pinned version is reused (no network).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.deps/web}
pkgs=(playwright-core@1.65.1)
stamp="$dir/.installed"
want="${pkgs[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
  [ -f "$dir/node_modules/playwright-core/package.json" ]; then
  echo "$(cd "$dir" && pwd)"
  exit 0
fi
command -v npm >/dev/null || { echo "web-test-deps.sh: npm is not installed (scripts/deps.sh test)" >&2; exit 1; }
mkdir -p "$dir"
(
  cd "$dir"
  [ -f package.json ] || echo '{"name":"vigil-web-test","private":true}' > package.json
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error --no-save "${pkgs[@]}" >&2
)
echo "$want" > "$stamp"
echo "$(cd "$dir" && pwd)"
