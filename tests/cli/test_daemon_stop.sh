#!/usr/bin/env bash
# End-to-end: `vigil serve` stopped with SIGTERM while its agent's command tool is still
# running (trial G4 of session 33). The tool appends a line, then blocks reading a FIFO nobody
# writes. The daemon's grace period (--grace-ms) passes, so it stops the run: the program is
# killed (its whole group) rather than waited for, the run reads `interrupted` (not `canceled`,
# which is a person's word), the call is in doubt (a non-idempotent mutating call that may
# have taken effect), and the wake is queued again as a recovery. Without the halt the daemon
# waits on the program (its timeout: an hour) and the test fails after a minute.
source "$(dirname "$0")/lib.sh" "$1"
unset VIGIL_WAKE_RUNNER
export VIGIL_MODEL_PROVIDER=scripted
PID=

check() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', expected '$2'"; fi; }
cleanup() {
  [ -z "$PID" ] || kill -9 "$PID" 2>/dev/null || true
  pkill -9 -f "vigil-stop-test-$$" 2>/dev/null || true
}
trap cleanup EXIT

mkfifo "$T/never"
cat >"$T/config.yaml" <<YAML
command_tools:
  slow_write:
    command: [sh, -c, 'cat >/dev/null; echo done >>"$T/effects"; read x <"$T/never"; echo "{}"', vigil-stop-test-$$]
    description: writes, then waits for ever
    input_schema: {type: object}
    mutating: true
    timeout_ms: 3600000
YAML
printf '%s' '{"vigil_cassette":1,"exchanges":[{"response":{"tool_calls":[{"id":"c1","name":"slow_write","arguments":{}}]}},{"response":{"text":"written"}}]}' >"$T/cassette.json"
export VIGIL_CONFIG="$T/config.yaml" VIGIL_MODEL_CASSETTE="$T/cassette.json"
"$VIGIL" init >/dev/null || bad "init"
A=$("$VIGIL" agent create --name stopper --config '{"tools":["slow_write"]}')
"$VIGIL" agent resume "$A" >/dev/null || bad "resume"
"$VIGIL" serve --workers 1 --poll-ms 20 --grace-ms 100 >"$T/serve.log" 2>&1 &
PID=$!
wait_for grep -q serving "$T/serve.log" || bad "the daemon did not start: $(cat "$T/serve.log")"
KEY=$("$VIGIL" wake "$A" -m "write it" 2>/dev/null)
wait_for test -s "$T/effects" || bad "the tool never ran: $(cat "$T/serve.log")"
kill -TERM "$PID"
# A daemon that waits the program out never exits (its timeout is an hour): a hang, not a speed
# bound, so the limit is far above the 100 ms grace.
stopped() { ! kill -0 "$PID" 2>/dev/null; }
WAIT_STEP=0.1 WAIT_TRIES=600 wait_for stopped || bad "the daemon waited for the command tool"
wait "$PID"
check "$?" "0" "exit status after the grace period"
PID=
grep -q "grace period over" "$T/serve.log" && ok || bad "no grace message: $(cat "$T/serve.log")"
# Every line the daemon writes begins with the UTC time it was written (trial G11); a
# sanitizer's own warnings (the ASan build's) are not the daemon's.
check "$(grep 'vigil serve: ' "$T/serve.log" |
  grep -cvE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z vigil serve: ')" \
  "0" "lines of the daemon's log without their time"
grep -q 'vigil serve: serving' "$T/serve.log" && ok || bad "no serving line: $(cat "$T/serve.log")"
grep -q "a tool call of agent $A is in doubt" "$T/serve.log" && ok ||
  bad "the daemon did not say a call is in doubt: $(cat "$T/serve.log")"
pgrep -f "vigil-stop-test-$$" >/dev/null && bad "the command tool outlived the stop" || ok
check "$(wc -l <"$T/effects")" "1" "effects"
RUN=$("$VIGIL" runs list --agent "$A" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); r=r.get("items", r); print(r[0]["run_id"] if "run_id" in r[0] else r[0]["id"])')
expect 0 runs show "$RUN" --json
has "$OUT" '"status": "interrupted"'
has "$OUT" "vigil stopped while it ran"
expect 0 indoubt list
has "$OUT" "slow_write"
expect 0 wakes --agent "$A" --json
has "$OUT" '"reason": "recovery"'
finish
