#!/usr/bin/env bash
# End-to-end: what `vigil agent apply` says of memory seeds, timers and subscriptions names only
# what it wrote (a changed seed of a block the agent has is kept, and said so: trial E14; a
# section dropped from the file is left alone and not named: E21), and `vigil agent export`
# prints them as the agent has them now (the block's content, not the stale seed; every
# subscription and timer), so applying the export elsewhere gives back the same agent.
set -e
source "$(dirname "$0")/lib.sh" "$1"
printf 'model:\n  provider: scripted\n' >"$T/config.yaml"
export VIGIL_CONFIG="$T/config.yaml"
expect 0 init

# E14: a changed seed of an existing block writes nothing and says the block was kept.
cat >"$T/front.yaml" <<'YAML'
name: Front Desk
memory:
  - {label: hours, content: "Open 9-17 Mon-Fri", tier: core, permission: read_only}
  - {label: tone, content: "Friendly", tier: core}
YAML
expect 0 agent apply "$T/front.yaml"
has "$OUT" 'created agent "Front Desk"'
has "$OUT" ": memory"
sed -i 's/Open 9-17 Mon-Fri/Open 8-18 Mon-Sat/' "$T/front.yaml"
expect 0 agent apply "$T/front.yaml" --dry-run
has "$OUT" 'unchanged agent "Front Desk"'
has "$OUT" "memory seeds not applied, existing blocks kept: hours"
expect 0 agent apply "$T/front.yaml"
has "$OUT" 'unchanged agent "Front Desk"'
has "$OUT" "memory seeds not applied, existing blocks kept: hours (\`vigil memory set\` changes a block)"
case $OUT in *updated*) bad "a kept seed reads as an update: $OUT" ;; *) ok ;; esac
expect 0 agent apply "$T/front.yaml" --json
compact_out
has "$OUT" '"changes":[]'
has "$OUT" '"memory_kept":["hours"]'
expect 0 memory show "Front Desk" hours
has "$OUT" "Open 9-17 Mon-Fri"
# Export prints the block as it is, not the manifest's seed.
expect 0 agent export "Front Desk"
has "$OUT" '"Open 9-17 Mon-Fri"'
case $OUT in *"8-18"*) bad "export printed the stale seed: $OUT" ;; *) ok ;; esac
# A person sets the block; then the seed matches it and apply has nothing to say.
expect 0 memory set "Front Desk" hours --content "Open 8-18 Mon-Sat"
expect 0 agent apply "$T/front.yaml"
has "$OUT" 'unchanged agent "Front Desk"'
case $OUT in *kept*) bad "a seed equal to its block reads as kept: $OUT" ;; *) ok ;; esac
expect 0 agent export "Front Desk"
has "$OUT" '"Open 8-18 Mon-Sat"'
# A seed whose block is gone makes it again: that is a write, named "memory".
expect 0 memory delete "Front Desk" tone
expect 0 agent apply "$T/front.yaml"
has "$OUT" 'updated agent "Front Desk"'
has "$OUT" ": memory"
expect 0 memory show "Front Desk" tone
has "$OUT" "Friendly"

# E21: a section dropped from the file is left alone, and not named among the changes.
cat >"$T/timed.yaml" <<'YAML'
name: timed
timers:
  - {cron: "0 7 * * *", tz: Europe/Paris}
subscriptions:
  - {tokens: ["task:changed"], where: ["status=open"]}
YAML
expect 0 agent apply "$T/timed.yaml"
has "$OUT" "subscriptions, timers"
sed -i 's/0 7 \* \* \*/30 8 * * */' "$T/timed.yaml"
expect 0 agent apply "$T/timed.yaml"
has "$OUT" 'updated agent "timed"'
has "$OUT" ": timers"
case $OUT in *subscriptions*) bad "an unchanged subscription named: $OUT" ;; *) ok ;; esac
printf 'name: timed\ntimers: []\n' >"$T/timed.yaml"
expect 0 agent apply "$T/timed.yaml"
has "$OUT" 'updated agent "timed"'
has "$OUT" ": timers"
case $OUT in *subscriptions*) bad "a subscription left alone named as changed: $OUT" ;; *) ok ;; esac
expect 0 subscription list --agent timed
has "$OUT" "task:changed"
expect 0 timer list --agent timed
case $OUT in *"30 8"*) bad "the timer was not removed: $OUT" ;; *) ok ;; esac
expect 0 agent apply "$T/timed.yaml"
has "$OUT" 'unchanged agent "timed"'
printf 'name: quiet\ntimers: []\nsubscriptions: []\nmemory: []\n' >"$T/quiet.yaml"
expect 0 agent apply "$T/quiet.yaml"
has "$OUT" 'created agent "quiet"'
case $OUT in *timers* | *subscriptions* | *memory*) bad "empty sections named: $OUT" ;; *) ok ;; esac
# Export includes the subscription the agent still has, and a timer added by hand.
expect 0 timer add timed --cron "0 9 * * 1" --tz UTC
expect 0 agent export timed
printf '%s\n' "$OUT" >"$T/timed-export.yaml"
has "$OUT" "subscriptions:"
has "$OUT" '"task:changed"'
has "$OUT" '"status=open"'
has "$OUT" '"0 9 * * 1"'
# Applied back here: unchanged; applied to another store: the same agent, which wakes on it.
expect 0 agent apply "$T/timed-export.yaml"
has "$OUT" 'unchanged agent "timed"'
VIGIL_STORE="$T/other.db" expect 0 init
VIGIL_STORE="$T/other.db" expect 0 agent apply "$T/timed-export.yaml"
has "$OUT" 'created agent "timed"'
VIGIL_STORE="$T/other.db" expect 0 subscription list --agent timed
has "$OUT" "task:changed"
has "$OUT" "status=open"
VIGIL_STORE="$T/other.db" expect 0 timer list --agent timed
has "$OUT" "0 9 * * 1"
VIGIL_STORE="$T/other.db" expect 0 agent export timed
[ "$OUT" = "$(cat "$T/timed-export.yaml")" ] && ok || bad "export differs after a round trip: $OUT"

finish
