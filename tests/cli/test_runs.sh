#!/usr/bin/env bash
# End-to-end: chat turns become runs; run history pages by cursor, shows one run, its messages
# and tool calls; replay matches the stored projection; export then import into a fresh store
# replays to the same state.
# proves: S2-018 S2-019
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE

expect 0 init
expect 0 agent create --name Runner --config '{"tools":["set_report"]}'
id=$OUT
cat >"$T/tool.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"t1","name":"set_report","arguments":{"scope":"current","markdown":"# Status\nall good","confidence":0.8}}]}},
 {"response":{"text":"Report written."}}]}
JSON
for i in 1 2 3; do expect 0 chat "$id" -m "turn $i"; done
VIGIL_MODEL_CASSETTE="$T/tool.json" expect 0 chat "$id" -m "write the report"
has "$OUT" "Report written."

expect 0 runs list --agent "$id" --limit 2 --json
has "$OUT" '"next_cursor": "'
cursor=$(printf '%s' "$OUT" | sed -n 's/.*"next_cursor": "\([^"]*\)".*/\1/p')
expect 0 runs list --agent "$id" --limit 2 --cursor "$cursor" --json
has "$OUT" '"next_cursor": null'
expect 0 runs list --status completed
has "$OUT" "completed"
expect 0 runs list --agent "$id" --json --limit 1
run=$(printf '%s' "$OUT" | sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' | head -n 1)

expect 0 runs show "$run"
has "$OUT" "1 tool calls"
has "$OUT" "status       completed"
expect 0 runs show "$run" --json
has "$OUT" '"tool_calls": 1'
expect 0 runs tools "$run"
has "$OUT" "set_report"
expect 0 runs tools "$run" --json
tool=$(printf '%s' "$OUT" | sed -n 's/.*"tool_call_id": "\([^"]*\)".*/\1/p' | head -n 1)
# The stored arguments' real as given, not jansson's 0.80000000000000004 (trial J5).
has "$OUT" '{\"confidence\":0.8,\"markdown\"'
expect 0 runs tool "$tool"
has "$OUT" "tool         set_report"
has "$OUT" "all good"
expect 0 runs tool "$tool" --json
has "$OUT" '"name": "set_report"'
expect 0 runs messages "$run"
has "$OUT" "Report written."
# A call the gate refused before the tool ran is `denied` (docs/runs.md), not `failed`.
cat >"$T/denied.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"d1","name":"memory_write","arguments":{"label":"x","content":"y"}}]}},
 {"response":{"text":"Not allowed, fine."}}]}
JSON
VIGIL_MODEL_CASSETTE="$T/denied.json" expect 0 chat "$id" -m "write memory"
expect 0 runs list --agent "$id" --json --limit 1
drun=$(printf '%s' "$OUT" | sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' | head -n 1)
expect 0 runs tools "$drun" --json
R=$OUT
is '.items[0].status == "denied" and .items[0].error_code == "not_allowed"'
# `runs message` takes the id `runs messages --json` prints, as well as the record id.
expect 0 runs messages "$run" --json
msg=$(printf '%s\n' "$OUT" | sed -n 's/.*"id": "\([^"]*\)".*/\1/p' | tail -n 1)
rec=$(printf '%s\n' "$OUT" | sed -n 's/.*"record_id": "\([^"]*\)".*/\1/p' | tail -n 1)
expect 0 runs message "$msg"
has "$OUT" "Report written."
has "$OUT" "record       $rec"
expect 0 runs message "$rec" --json
has "$OUT" '"content": "Report written."'
expect 0 replay "$run"
has "$OUT" "matches the replay"

# A run is named by its run id, its run key (`runs show` prints it, `vigil wakes` prints its
# first 16 characters) or a unique start of the key, as `runs cancel|rerun|resume` take one.
expect 0 runs show "$run" --json
key=$(printf '%s' "$OUT" | sed -n 's/.*"run_key": "\([^"]*\)".*/\1/p' | head -n 1)
expect 0 runs show "$key"
has "$OUT" "run          $run"
expect 0 runs show "${key:0:16}"
has "$OUT" "run          $run"
expect 0 runs messages "${key:0:16}"
has "$OUT" "Report written."
expect 0 runs tools "${key:0:8}"
has "$OUT" "set_report"
expect 0 replay "${key:0:16}"
has "$OUT" "matches the replay"

expect 0 journal export "$id" --dir "$T/export"
[ -s "$T/export/agent-journals/$id.interaction.jsonl" ] && passed=$((passed + 1)) || { echo "FAIL: no export file"; fail_count; }
VIGIL_STORE="$T/other.db" expect 0 init
VIGIL_STORE="$T/other.db" expect 0 journal import "$id" --dir "$T/export"
VIGIL_STORE="$T/other.db" expect 0 replay "$run" --json
has "$OUT" '"stored_projection_matches": true'
VIGIL_STORE="$T/other.db" expect 0 journal import "$id" --dir "$T/export" --json
has "$OUT" '"imported": 0'
# By a name this store does not know (export took it; the file is named by the id): say so,
# with the ids the folder holds.
VIGIL_STORE="$T/fresh.db" expect 0 init
VIGIL_STORE="$T/fresh.db" expect 3 journal import Stranger --dir "$T/export"
one_line "$ERR"
has "$ERR" "give the exported agent's id ($id)"

# Errors.
expect 3 runs show 00000000-0000-7000-8000-000000000000
one_line "$ERR"
# One exit status (3, not found) for whatever names no run, and the message names all of it.
nokey=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
for verb in "runs show" "runs messages" "runs tools" "replay"; do
  # shellcheck disable=SC2086
  expect 3 $verb nosuch
  has "$ERR" '"nosuch" not found'
  # shellcheck disable=SC2086
  expect 3 $verb "$nokey"
  has "$ERR" "\"$nokey\""
  one_line "$ERR"
done
expect 2 runs list --status sleeping

# The cancelled state has two spellings (runs `canceled`, the wake log and tasks `cancelled`):
# every --status filter takes both (trial C14 of session 30).
expect 0 wake "$id" -m "a run to re-run"
expect 0 runs rerun "$(printf '%s' "$OUT" | head -n 1)" --queue
queued=$(printf '%s' "$OUT" | head -n 1)
expect 0 runs cancel "$queued"
for spelling in cancelled canceled; do
  expect 0 wakes --status "$spelling"
  has "$OUT" "${queued:0:16}"
  expect 0 runs list --status "$spelling"
  expect 0 task list --status "$spelling"
done
# `runs show` names the model a run used, and a re-run's override with the run it re-ran
# (trial C9 of session 30).
expect 0 runs rerun "$queued" --model other-model --tools memory_read --prompt "redo it"
again=$(printf '%s' "$OUT" | head -n 1)
expect 0 runs show "$again"
has "$OUT" "model        other-model"
has "$OUT" "re-run of    run ${queued:0:16}; model other-model; tools [\"memory_read\"]; prompt redo it"
expect 0 runs show "$again" --json
compact_out
has "$OUT" '"override":{"model":"other-model","prompt":"redo it","tools":["memory_read"]}'
has "$OUT" "\"rerun_of\":\"$queued\""
expect 0 runs show "$run"
has "$OUT" "model        "
expect 0 task add --title "never wanted"
expect 0 task cancel "$OUT"
expect 0 task list --status canceled
has "$OUT" "never wanted"
expect 2 runs list --cursor nonsense
has "$ERR" "pass a next_cursor value"
expect 2 notify # no token: one line, not the whole usage
one_line "$ERR"
expect 2 runs show
expect 2 runs list --limit 5000
echo '{"not":"a journal record"}' >"$T/bad/agent-journals/$id.interaction.jsonl" 2>/dev/null || {
  mkdir -p "$T/bad/agent-journals"
  echo '{"not":"a journal record"}' >"$T/bad/agent-journals/$id.interaction.jsonl"
}
expect 2 journal import "$id" --dir "$T/bad"
has "$ERR" "line 1"
finish
