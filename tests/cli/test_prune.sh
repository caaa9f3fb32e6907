#!/usr/bin/env bash
# End-to-end: the store stops growing forever (trial G6). `vigil prune --dry-run` counts by
# class and removes nothing; `vigil prune` removes what is past its retention and prints the
# bytes; a pruned run still shows (as pruned), replays and exports; a hold keeps a run; a
# manifest's retention: block is checked like its other fields; `--vacuum` gives the space back;
# `vigil agent erase` leaves no record of the agent and no byte of its words in the files; the
# daemon prunes on its own; POST /v1/prune answers the report.
# proves: S0-137
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE
export VIGIL_CONFIG="$T/config.yaml"
echo '{}' >"$T/config.yaml"

expect 0 init
expect 0 agent create --name Pruned
id=$OUT
for i in 1 2 3; do expect 0 chat "$id" -m "turn $i" --session "s$i"; done
expect 0 runs list --agent "$id" --json
run=$(printf '%s' "$OUT" | sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' | head -n 1)
held=$(printf '%s' "$OUT" | sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' | tail -n 1)

# Under the defaults (30 days) nothing of today goes.
expect 0 prune
has "$OUT" "total               0"
# A time to live of 0s: every finished run's trace is past it. The dry run counts, removes
# nothing.
cat >"$T/config.yaml" <<'YAML'
retention:
  trace: 0s
  action: 0s
YAML
expect 0 prune hold "$held"
has "$OUT" "on hold"
expect 0 prune holds
has "$OUT" "run:$held"
expect 0 prune --dry-run --json
compact_out
has "$OUT" '"dry_run":true'
has "$OUT" '"runs_pruned":2'
expect 0 prune --dry-run
has "$OUT" "would go"
expect 0 prune
has "$OUT" "runs whose trace went: 2"
has "$OUT" "trace"
expect 0 prune --json
compact_out
has "$OUT" '"runs_pruned":0'

# The pruned run reads as pruned, replays to its state, and its journal exports.
expect 0 runs show "$run"
has "$OUT" "status       completed"
has "$OUT" "pruned at"
expect 0 replay "$run"
has "$OUT" "trace pruned"
has "$OUT" "matches the replay"
expect 0 runs show "$held"
case "$OUT" in *"pruned at"*) bad "a held run was pruned" ;; *) ok ;; esac
expect 0 journal export "$id" --dir "$T/export"
(
  export VIGIL_STORE="$T/other.db"
  expect 0 init
  expect 0 journal import "$id" --dir "$T/export"
  expect 0 replay "$run"
  has "$OUT" "matches the replay"
)
expect 0 chat "$id" -m "after pruning" --session s1
has "$OUT" "after pruning"

# A manifest's retention: block is checked like its other fields.
cat >"$T/bad.yaml" <<'YAML'
name: Bad
retention:
  trace: 30 days
YAML
expect 2 agent apply "$T/bad.yaml"
has "$ERR" "bad.yaml:3"
cat >"$T/good.yaml" <<'YAML'
name: Kept
retention:
  trace: 7d
  hold: true
YAML
expect 0 agent apply "$T/good.yaml"
expect 0 agent export Kept
has "$OUT" "retention:"
has "$OUT" "hold: true"

# Erasure leaves no byte of the agent's words in the files.
expect 0 agent create --name Secret
secret=$OUT
expect 0 chat "$secret" -m "the code is walrus-9931"
if grep -qa "walrus-9931" "$T/vigil.db" "$T/vigil.db-wal" 2>/dev/null; then ok; else bad "the search finds nothing"; fi
expect 0 agent erase "$secret"
has "$OUT" "erased"
expect 3 agent show "$secret"
if grep -qa "walrus-9931" "$T/vigil.db" "$T/vigil.db-wal" 2>/dev/null; then
  bad "the erased agent's words are still in the store's files"
else
  ok
fi
# Vacuum gives the space back: the file shrinks to the pages in use.
expect 0 prune --vacuum --json
compact_out
has "$OUT" '"vacuumed":true'
size=$(stat -c %s "$T/vigil.db")
inuse=$(printf '%s' "$OUT" | jq '.used_bytes.after')
[ "$size" -le "$((inuse + 4096))" ] && ok || bad "the file ($size) is larger than its pages in use ($inuse)"
expect 4 agent erase Kept
has "$ERR" "on hold"

# The daemon prunes on its own when it starts (then every retention.interval), and the HTTP API
# prunes as the command does.
expect 0 chat "$id" -m "one more turn" --session s9
serve_http
wait_for grep -q "retention: pruned" "$T/serve.log" && ok || bad "the daemon did not prune: $(cat "$T/serve.log")"
R=$(curl -s -X POST -H "Authorization: Bearer $TOKEN" -d '{"dry_run":true}' "http://127.0.0.1:$PORT/v1/prune")
is '.dry_run == true and .runs_pruned == 0'
serve_stop
finish
