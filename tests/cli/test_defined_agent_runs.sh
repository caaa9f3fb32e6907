#!/usr/bin/env bash
# End-to-end: an agent defined by a manifest runs. Its run is a model loop with the manifest's
# tools, and ends completed or failed with its status, duration, step count (model calls),
# summary and error kept in the store, as `vigil runs show` reads them back (docs/runs.md).
# proves: S2-001
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE

expect 0 init
cat >"$T/agent.yaml" <<'YAML'
name: defined
prompt: You keep a status report.
tools: [set_report]
limits: {max_steps: 6}
YAML
expect 0 agent apply "$T/agent.yaml" --json
id=$(printf '%s' "$OUT" | jq -r .id)
cat >"$T/ok.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"t1","name":"set_report","arguments":{"scope":"current","markdown":"# Status\nall good"}}]}},
 {"response":{"text":"Report written."}}]}
JSON
VIGIL_MODEL_CASSETTE="$T/ok.json" expect 0 chat "$id" -m "write the report"
expect 0 runs list --agent "$id" --json
run=$(printf '%s' "$OUT" | jq -r '.items[0].run_id')
expect 0 runs show "$run" --json
R=$OUT
is '.status == "completed" and .error == null'
is '.summary == "Report written."'
is '.model_calls == 2 and .tool_calls == 1'
is '(.duration_ms | type) == "number" and .duration_ms >= 0'
is '(.started_at | type) == "string" and (.ended_at | type) == "string"'
# A run whose model stops answering fails, and says why.
cat >"$T/cut.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"t1","name":"set_report","arguments":{"scope":"current","markdown":"# Status\nhalf"}}]}}]}
JSON
set +e
VIGIL_MODEL_CASSETTE="$T/cut.json" "$VIGIL" chat "$id" -m "again" >/dev/null 2>&1
set -e
expect 0 runs list --agent "$id" --status failed --json
failed_run=$(printf '%s' "$OUT" | jq -r '.items[0].run_id')
[ -n "$failed_run" ] && [ "$failed_run" != null ] && ok || bad "no failed run listed: $OUT"
expect 0 runs show "$failed_run" --json
R=$OUT
is '.status == "failed"'
is '(.error | type) == "string" and (.error | length) > 0'
is '.model_calls >= 1 and .tool_calls == 1'
is '(.duration_ms | type) == "number"'
finish
