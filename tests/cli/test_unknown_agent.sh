#!/usr/bin/env bash
# End-to-end: every command that takes an agent id answers `no agent "X"` (exit 3) for an agent
# that does not exist — a well-formed id never created, a malformed one, an empty one, one
# deleted — and writes nothing: the store's bytes and the export folder stay as they were.
# `journal import` is the one exception (it brings an agent's journals into a store that may
# not have it) and is not in the table.
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE

expect 0 init
expect 0 agent create --name Real --config '{"tools":["set_report"]}'
real=$OUT
expect 0 agent create --name Gone
gone=$OUT
expect 0 agent destroy "$gone"
expect 0 agent delete "$gone"

# Every command taking an agent id; @ stands for the id.
commands=(
  "agent show @" "agent pause @" "agent resume @" "agent destroy @" "agent delete @"
  "chat @ -m hi" "chat @ -m hi --json"
  "runs list --agent @" "journal export @ --dir $T/export"
  "memory list @" "memory show @ persona" "memory search @ hello" "memory history @ persona"
  "memory pending --agent @" "memory seed @" "memory set @ hours --content x" "memory delete @ hours"
  "approvals --agent @"
  "kill on --agent @" "kill off --agent @" "kill status --agent @" "kill status --agent @ --json"
  "tool list @" "tool call @ set_report {}"
  "subscription add @ --token T" "subscription list --agent @"
  "timer add @ --cron @daily" "timer list --agent @"
  "wake @" "wake @ -m hi"
  "wakes --agent @"
)

store_sum() { cat "$VIGIL_STORE" "$VIGIL_STORE-wal" 2>/dev/null | cksum; }

for bad in 01999999-0000-7000-8000-000000000000 nonsense "" "$gone"; do
  for cmd in "${commands[@]}"; do
    # Split the template into words, then put the id in (it may be empty: a word of its own).
    read -r -a words <<<"$cmd"
    args=()
    for w in "${words[@]}"; do
      if [ "$w" = "@" ]; then args+=("$bad"); else args+=("$w"); fi
    done
    before=$(store_sum)
    expect 3 "${args[@]}" || continue
    has "$ERR" "no agent \"$bad\""
    one_line "$ERR"
    [ "$(store_sum)" = "$before" ] && passed=$((passed + 1)) ||
      { echo "FAIL: vigil ${args[*]} changed the store"; fail_count; }
    [ ! -e "$T/export" ] && passed=$((passed + 1)) ||
      { echo "FAIL: vigil ${args[*]} wrote $T/export"; fail_count; rm -rf "$T/export"; }
  done
done

# The agent that exists still works, and `kill status` tells its real lifecycle.
expect 0 memory list "$real"
expect 0 kill status --agent "$real"
has "$OUT" "agent $real: created, no kill switch applies"
expect 0 agent resume "$real"
expect 0 agent pause "$real"
expect 0 kill status --agent "$real"
has "$OUT" "agent $real: dormant, no kill switch applies"
expect 0 kill on --agent "$real"
expect 0 kill status --agent "$real" --json
has "$OUT" '"lifecycle": "dormant"'
has "$OUT" '"stopped": true'
finish
