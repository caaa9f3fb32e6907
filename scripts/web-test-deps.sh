#!/usr/bin/env bash
# Installs npm playwright-core (pinned), which the web admin page's browser test
# (tests/web/test_page.mjs) drives Debian's chromium with, into a project-local folder and
# prints it. Usage: scripts/web-test-deps.sh [DIR]   (default: .deps/web)
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/npm.sh "${1:-.deps/web}" playwright-core@1.65.1
