#!/usr/bin/env bash
# End-to-end: `vigil serve` stopped with SIGINT (Ctrl-C at its terminal) loses nothing and
# leaves nothing running (proves: S4-034). While it serves, one agent's execute_code program
# spins in the sandbox with a wall-time limit of ten minutes. On SIGINT:
#   - the sandbox child is killed once the grace period ends (without it, the daemon waits out
#     the program's ten minutes), and the run is checkpointed as interrupted, to run again;
#   - what it wrote is flushed and the store closed: the write-ahead log checkpointed into the
#     file, the control socket gone, and no process of the daemon's (its sandbox's included)
#     left.
source "$(dirname "$0")/lib.sh" "$1"
unset VIGIL_WAKE_RUNNER
export VIGIL_MODEL_PROVIDER=scripted
PID=

check() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', expected '$2'"; fi; }
# The daemon's processes: the sandbox's zygote and children are forks of it, with its command
# line, which names this test's folder.
left() { pgrep -f -- "--store $T/vigil.db serve" >/dev/null; }
cleanup() {
  [ -z "$PID" ] || kill -9 "$PID" 2>/dev/null || true
  pkill -9 -f -- "--store $T/vigil.db serve" 2>/dev/null || true
}
trap cleanup EXIT

cat >"$T/config.yaml" <<YAML
sandbox:
  root: $T/sbx
  limits: {wall_ms: 600000, cpu_ms: 600000}
YAML
export VIGIL_CONFIG="$T/config.yaml"
expect 0 sandbox check --json || { finish; exit; } # no sandbox on this kernel: nothing to stop
printf '%s' '{"vigil_cassette":1,"exchanges":[{"response":{"tool_calls":[{"id":"c1","name":"execute_code","arguments":{"code":"vigil.write(\"started\", \"yes\")\nwhile true do end"}}]}},{"response":{"text":"done"}}]}' >"$T/cassette.json"
export VIGIL_MODEL_CASSETTE="$T/cassette.json"
"$VIGIL" init >/dev/null || bad "init"
A=$("$VIGIL" agent create --name spinner --config '{"tools":["execute_code"],"capabilities":["code_execution"]}')
"$VIGIL" agent resume "$A" >/dev/null || bad "resume"

"$VIGIL" --store "$T/vigil.db" serve --workers 1 --poll-ms 20 --grace-ms 100 \
  >"$T/serve.log" 2>&1 &
PID=$!
wait_for grep -q serving "$T/serve.log" || bad "the daemon did not start: $(cat "$T/serve.log")"
"$VIGIL" wake "$A" -m "spin" >/dev/null 2>&1 || bad "wake"
wait_for test -s "$T/sbx/$A/started" || bad "the program never ran: $(cat "$T/serve.log")"
kill -INT "$PID"
stopped() { ! kill -0 "$PID" 2>/dev/null; }
# A daemon that waits for the program never exits in time (its wall limit is ten minutes): a
# hang, not a speed bound, so the limit is far above the 100 ms grace.
WAIT_STEP=0.1 WAIT_TRIES=600 wait_for stopped || bad "the daemon waited for the sandbox"
wait "$PID"
check "$?" "0" "exit status"
PID=
grep -q "SIGINT: stopping" "$T/serve.log" && ok || bad "no SIGINT line: $(cat "$T/serve.log")"
grep -q "vigil serve: stopped" "$T/serve.log" && ok || bad "no stopped line: $(cat "$T/serve.log")"
gone() { ! left; }
WAIT_STEP=0.1 WAIT_TRIES=100 wait_for gone ||
  bad "a process of the daemon outlived it: $(pgrep -af -- "--store $T/vigil.db serve")"
# The store was closed: its log checkpointed into the file (empty, if SQLite left it), the
# socket gone with the daemon.
[ -s "$T/vigil.db-wal" ] && bad "the write-ahead log still holds $(stat -c %s "$T/vigil.db-wal") bytes" || ok
test -S "$T/vigil.db.sock" && bad "the control socket is still there" || ok
# The interrupted run, checkpointed to run again under its key.
RUN=$("$VIGIL" runs list --agent "$A" --json | jq -r '(.items // .)[0] | .run_id // .id')
expect 0 runs show "$RUN" --json
has "$OUT" '"status": "interrupted"'
# The program was cut short: the call may have acted (it wrote a file), so it is in doubt.
expect 0 indoubt list
has "$OUT" "execute_code"
expect 0 wakes --agent "$A" --json
has "$OUT" '"reason": "recovery"'
finish
