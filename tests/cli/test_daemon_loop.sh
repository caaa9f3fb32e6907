#!/usr/bin/env bash
# End-to-end: the daemon runs real agent loops. A notification that matches a subscription
# wakes the agent; the loop (scripted model) calls set_report through the gated executor; the
# report shows in `vigil agent show`; the wake and the run are logged; a user wake through
# `vigil wake -m` reaches the same daemon; a kill switch skips new wakes; SIGTERM exits 0.
# The waits poll a real process's progress; no assertion depends on timing.
# proves: S0-153
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
cat >"$T/cassette.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"r1","name":"set_report","arguments":{"scope":"current","markdown":"# Task 7\nDue date moved to Friday."}}]}},
 {"response":{"text":"Report updated."}},
 {"response":{"text":"Hello from the daemon."}}]}
JSON
export VIGIL_MODEL_CASSETTE="$T/cassette.json"

wait_for() {
  for _ in $(seq 1 400); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  return 1
}
completed() { "$VIGIL" wakes --agent "$id" --status completed --json | grep -c '"run_key"' | grep -qx "$1"; }

expect 0 init
expect 0 agent create --name Watcher --kind task_agent --config '{"tools":["set_report"]}'
id=$OUT
expect 0 agent resume "$id"
expect 0 subscription add "$id" --token TASK
"$VIGIL" serve --workers 1 --poll-ms 50 >"$T/serve.log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$T"' EXIT
wait_for grep -q serving "$T/serve.log" || echo "FAIL: daemon did not start: $(cat "$T/serve.log")"

expect 0 notify TASK task-7
if wait_for completed 1; then passed=$((passed + 1)); else
  echo "FAIL: the subscription wake did not complete: $(cat "$T/serve.log")"; fail_count; fi
expect 0 agent show "$id"
has "$OUT" "Due date moved to Friday."
expect 0 runs list --agent "$id" --json
has "$OUT" '"wake_reason": "subscription"'
has "$OUT" '"tool_calls": 1'

expect 0 wake "$id" -m "hello"
if wait_for completed 2; then passed=$((passed + 1)); else
  echo "FAIL: the user wake did not complete: $(cat "$T/serve.log")"; fail_count; fi
expect 0 runs list --agent "$id" --limit 1 --json
has "$OUT" "Hello from the daemon."

# Under a kill switch no new wake runs: a notification writes nothing, a user wake is logged
# as skipped with the reason.
expect 0 kill on --reason test
expect 0 notify TASK task-8
expect 10 wake "$id" -m "are you there?"   # as a chat turn under the switch (trial J6)
has "$ERR" "kill switch"
wait_for sh -c "\"$VIGIL\" wakes --agent $id --status skipped --json | grep -q 'kill switch'" &&
  passed=$((passed + 1)) || { echo "FAIL: no skipped wake under the kill switch"; fail_count; }
completed 2 && passed=$((passed + 1)) || { echo "FAIL: a wake ran under the kill switch"; fail_count; }
expect 0 kill off

kill -TERM "$pid"
if wait "$pid"; then passed=$((passed + 1)); else echo "FAIL: daemon exit status $?"; fail_count; fi
finish
