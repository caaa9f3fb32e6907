#!/usr/bin/env bash
# Migration: a store written by vigil before retention existed (tests/fixtures/stores/
# pre-retention.db.gz: one agent, two chat turns, two turns that each wrote the `current` report
# through a tool call; made with the `vigil` of the commit before retention) prunes correctly:
# every class finds its records, each run's trace goes and its replay still matches, the head
# report stays, and the agent chats on in its pruned threads.
# proves: S0-136
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE
export VIGIL_CONFIG="$T/config.yaml"
gunzip -c "$(dirname "$0")/../fixtures/stores/pre-retention.db.gz" >"$T/vigil.db"
agent=01a226c8-f14e-703d-847f-8e3df54939fb
cat >"$T/config.yaml" <<'YAML'
retention:
  trace: 0s
  action: 0s
  report: 0s
YAML

expect 0 runs list --agent "$agent" --json
runs=$(printf '%s' "$OUT" | sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p')
[ "$(printf '%s\n' "$runs" | wc -l)" -eq 4 ] && ok || bad "the fixture has 4 runs: $runs"
expect 0 prune --json
compact_out
has "$OUT" '"runs_pruned":4'
has "$OUT" '"action":{"bytes":'
is_json() { R=$OUT; is "$1"; }
is_json '.classes.action.records == 2'
is_json '.classes.report.records == 1'
is_json '.classes.trace.records > 0'
for run in $runs; do
  expect 0 replay "$run"
  has "$OUT" "trace pruned"
  has "$OUT" "matches the replay"
  expect 0 runs show "$run"
  has "$OUT" "pruned at"
done
expect 0 agent show "$agent" --json
has "$OUT" "Status two"
expect 0 chat "$agent" -m "still here" --session r
has "$OUT" "still here"
expect 0 prune --json
compact_out
has "$OUT" '"runs_pruned":1' # the turn just taken
finish
