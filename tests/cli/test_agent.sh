#!/usr/bin/env bash
# End-to-end: vigil init and vigil agent ..., with every error path a person can hit.
# proves: S0-001
set -e
source "$(dirname "$0")/lib.sh" "$1"

# Before init: reads fail with a hint, not a crash.
expect 3 agent list
one_line "$ERR"
has "$ERR" "vigil init"

expect 0 init
has "$OUT" "store ready"
expect 0 init # idempotent
expect 0 --help
has "$OUT" "agent"
expect 0 agent --help
has "$OUT" "vigil agent create"
expect 0 --version

expect 0 agent create --name "Watcher" --kind task_agent
id=$OUT
[ ${#id} -eq 36 ] && passed=$((passed + 1)) || { echo "FAIL: id '$id'"; fail_count; }
expect 0 agent create --name "Second" --json
has "$OUT" '"id"'
other_agent=$(printf '%s\n' "$OUT" | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -1)

expect 0 agent list
has "$OUT" "Watcher"
has "$OUT" "created"
expect 0 agent list --json
has "$OUT" '"next_cursor"'
expect 0 agent list --limit 1
has "$ERR" "--cursor"
expect 0 agent show "$id" --json
has "$OUT" '"lifecycle": "created"'

# Lifecycle: refused transitions name the current state and exit 4.
expect 4 agent pause "$id"
one_line "$ERR"
has "$ERR" "is created"
expect 0 agent resume "$id"
expect 4 agent resume "$id"
has "$ERR" "already active"
expect 0 agent pause "$id" --reason "night"
expect 0 agent show "$id"
has "$OUT" "dormant"
has "$OUT" "night"
expect 4 agent delete "$id"
has "$ERR" "destroy it first"
# What would wake it goes with it: a destroyed agent keeps no timer or subscription.
expect 0 timer add "$id" --cron '*/5 * * * *'
expect 0 subscription add "$id" --token TASK
expect 0 timer add "$other_agent" --cron '*/5 * * * *'
expect 0 agent destroy "$id"
expect 0 timer list --json
case $OUT in *"$id"*) echo "FAIL: a destroyed agent's timer is listed"; fail_count ;; *) passed=$((passed + 1)) ;; esac
has "$OUT" "$other_agent" # another agent's stays
expect 0 subscription list --json
case $OUT in *"$id"*) echo "FAIL: a destroyed agent's subscription is listed"; fail_count ;; *) passed=$((passed + 1)) ;; esac
expect 4 agent resume "$id"
has "$ERR" "destroyed is final"
# A destroyed agent is still listed (until it is deleted), and one lifecycle lists alone.
# proves: S3-056
expect 0 agent list --json
has "$OUT" "$id"
expect 0 agent list --lifecycle destroyed --json
has "$OUT" "$id"
case $OUT in *"$other_agent"*) echo "FAIL: --lifecycle destroyed lists a live agent"; fail_count ;; *) passed=$((passed + 1)) ;; esac
expect 0 agent list --lifecycle created --json
has "$OUT" "$other_agent"
expect 2 agent list --lifecycle sleeping
has "$ERR" "invalid lifecycle"
expect 0 agent delete "$id"
expect 3 agent show "$id"
has "$ERR" "no agent"

# Usage errors exit 2 with one line.
expect 2 agent create
one_line "$ERR"
expect 2 agent frobnicate
expect 2 agent show
expect 2 agent list --limit 0
expect 2 nosuchcommand
expect 2 agent create --name x --mode sleepy
has "$ERR" "invalid mode"
expect 2 agent create --name x --config '[1'
has "$ERR" "config"
expect 2 agent list --cursor bogus
has "$ERR" "invalid cursor"

# An agent by its name where an id is taken (a manifest names its agent; the id is the store's):
# the one agent of that name, the live one over destroyed ones of the same name; several live
# ones are refused with their ids; a name no agent has reads as no agent.
expect 0 agent create --name "by-name"
named=$OUT
expect 0 agent show by-name --json
has "$OUT" "\"id\": \"$named\""
expect 0 kill status --agent by-name
has "$OUT" "agent $named"
expect 0 chat by-name -m "hello by name"
expect 0 memory list by-name
has "$OUT" "persona"
expect 0 runs list --agent by-name --json
has "$OUT" "hello by name"
expect 0 agent destroy by-name
expect 0 agent create --name "by-name"
again=$OUT
expect 0 agent show by-name --json
has "$OUT" "\"id\": \"$again\""
# A second live agent of a name would make the name reach neither: refused, already exists.
expect 4 agent create --name "by-name"
one_line "$ERR"
has "$ERR" "an agent named \"by-name\" already exists ($again)"
has "$ERR" "vigil agent destroy $again"
expect 0 agent list --json
R=$OUT is '[.items[] | select(.name == "by-name" and .lifecycle != "destroyed")] | length == 1'
expect 0 agent show by-name --json
has "$OUT" "\"id\": \"$again\""
expect 3 agent show nobody-has-this-name
has "$ERR" 'no agent "nobody-has-this-name"'

# A file that is not a vigil store, and one of another program.
echo "not a database" >"$T/junk.db"
expect 5 --store "$T/junk.db" agent list
one_line "$ERR"
has "$ERR" "not a vigil store"
if command -v sqlite3 >/dev/null; then
  sqlite3 "$T/other.db" "CREATE TABLE notes(x); INSERT INTO notes VALUES (1);"
  expect 5 --store "$T/other.db" agent list
  has "$ERR" "another program"
fi

# An unwritable place for the store (skipped as root, who can write anywhere).
if [ "$(id -u)" -ne 0 ]; then
  mkdir -p "$T/ro" && chmod 500 "$T/ro"
  expect 5 --store "$T/ro/sub/v.db" init || true
fi
expect 5 --store /proc/vigil/v.db init
one_line "$ERR"

# A config file that does not load (here an unknown key beside its `store:`) leaves the store
# unknown: refused, not replaced by the default store; --store still names one.
printf 'store: %s\nbogus_key: 1\n' "$T/vigil.db" >"$T/typo.yaml"
(
  unset VIGIL_STORE
  export XDG_DATA_HOME="$T/xdg" VIGIL_CONFIG="$T/typo.yaml"
  expect 2 agent list
  has "$ERR" 'unknown key "bogus_key" at the top level'
  [ ! -e "$T/xdg/vigil/vigil.db" ] || bad "the default store was used"
  expect 0 --store "$T/vigil.db" agent list
)
# --config is checked as a manifest's fields are (trial E28): an unknown key, a wrong type or a
# bad MCP server is refused (exit 2, naming it) and nothing is stored; what is accepted exports
# to a manifest that applies back unchanged.
expect 2 agent create --name cfg1 --config '{"tool":["memory_*"]}'
has "$ERR" 'config: unknown key "tool"'
expect 2 agent create --name cfg1 --config '{"tools":["memory_*"],"limits":{"max_steps":"ten"}}'
has "$ERR" 'config: /limits/max_steps: expected integer, got string'
expect 2 agent create --name cfg1 --config '{"mcp_servers":{"BAD":{"command":"x"}}}'
has "$ERR" 'config: /mcp_servers/BAD'
expect 3 agent show cfg1
expect 0 agent create --name cfg1 --config '{"tools":["memory_*"],"limits":{"max_steps":10,"context_tokens":32000}}'
expect 0 agent export cfg1
printf '%s\n' "$OUT" >"$T/cfg1.yaml"
expect 0 agent apply "$T/cfg1.yaml"
has "$OUT" 'unchanged agent "cfg1"'
finish
