#!/usr/bin/env bash
# The quick start story, on embedded defaults: a SQLite store in a fresh temporary folder.
# Usage: examples/quickstart.sh PATH-TO-vigil
# Each step prints the command it runs, then what vigil answered.
set -euo pipefail
vigil=${1:-vigil}
work=$(mktemp -d "${TMPDIR:-/tmp}/vigil-quickstart.XXXXXX")
export VIGIL_STORE="$work/vigil.db"

step() { printf '\n\033[1m$ vigil %s\033[0m\n' "$*"; "$vigil" "$@"; }

echo "vigil quick start: store at $VIGIL_STORE"
step init
id=$("$vigil" agent create --name "Task watcher" --kind task_agent \
  --prompt "Keep a live summary of the release task.")
printf '\n\033[1m$ vigil agent create --name "Task watcher" --kind task_agent ...\033[0m\n%s\n' "$id"
step agent resume "$id" --reason "start watching"
step agent list
echo
echo "# talk to it: each turn is a journaled run; with no provider configured the scripted"
echo "# model answers and says so (set VIGIL_MODEL_PROVIDER to use a real one, docs/models.md)"
step chat "$id" -m "The release is blocked on the signing key."
step chat "$id" -m "What is blocking the release?" --session default
step agent pause "$id" --reason "the task is on hold"
step agent show "$id"
step agent resume "$id"
step agent destroy "$id" --reason "task finished"
echo
echo "# a destroyed agent stays destroyed:"
if "$vigil" agent resume "$id"; then echo "unexpected: resume succeeded"; exit 1; fi
step agent delete "$id"
step agent list --json
echo
echo "quick start done: the agent went created -> active -> dormant -> active -> destroyed,"
echo "and deleting it removed every record it had. Store: $VIGIL_STORE"
