#!/usr/bin/env bash
# End-to-end: `vigil runs cancel` of a daemon's run whose tool call is vigil's own sandbox stops
# the program at once (trial L6): its process group is killed within about a second, not when its
# wall time of ten minutes ends; the call is recorded canceled (not in doubt: what the program
# wrote stays in its folder, and its bridge calls are operations of their own) and the run ends
# canceled. The program's bridge call is listed in `vigil runs tools` beside the model's
# execute_code, marked with the execution that made it (trial L4).
source "$(dirname "$0")/lib.sh" "$1"
unset VIGIL_WAKE_RUNNER
export VIGIL_MODEL_PROVIDER=scripted
PID=

cleanup() { [ -z "$PID" ] || kill -9 "$PID" 2>/dev/null || true; }
trap cleanup EXIT

cat >"$T/config.yaml" <<YAML
sandbox:
  root: $T/sbx
  limits: {wall_ms: 600000, cpu_ms: 600000}
YAML
export VIGIL_CONFIG="$T/config.yaml"
expect 0 sandbox check --json || { finish; exit; } # no sandbox on this kernel: nothing to stop
printf '%s' '{"vigil_cassette":1,"exchanges":[{"response":{"tool_calls":[{"id":"c1","name":"execute_code","arguments":{"code":"vigil.call(\"memory_list\", {})\nvigil.write(\"started\", \"yes\")\nwhile true do end"}}]}},{"response":{"text":"after the loop"}}]}' >"$T/cassette.json"
export VIGIL_MODEL_CASSETTE="$T/cassette.json"
"$VIGIL" init >/dev/null || bad "init"
A=$("$VIGIL" agent create --name spinner --config '{"tools":["execute_code","memory_*"],"capabilities":["code_execution"]}')
"$VIGIL" agent resume "$A" >/dev/null || bad "resume"

"$VIGIL" --store "$T/vigil.db" serve --workers 1 --poll-ms 20 \
  >"$T/serve.log" 2>&1 &
PID=$!
wait_for grep -q serving "$T/serve.log" || bad "the daemon did not start: $(cat "$T/serve.log")"
"$VIGIL" wake "$A" -m "spin" >/dev/null 2>&1 || bad "wake"
wait_for test -s "$T/sbx/$A/started" || bad "the program never ran: $(cat "$T/serve.log")"
RUN=$("$VIGIL" runs list --agent "$A" --json | jq -r '(.items // .)[0] | .run_id // .id')
expect 0 runs cancel "$RUN"
# Without the cancel reaching the sandbox the program runs its ten minutes: a hang, not a speed
# bound, so the limit is far above the second the poll takes.
ended() { "$VIGIL" runs show "$RUN" --json | grep -q '"status": "canceled"'; }
WAIT_STEP=0.2 WAIT_TRIES=300 wait_for ended || bad "the run was not canceled: $("$VIGIL" runs show "$RUN")"
expect 0 runs tools "$RUN" --json
has "$OUT" '"name": "execute_code"'
has "$OUT" '"status": "canceled"'
has "$OUT" '"error_code": "canceled"'
has "$OUT" '"name": "memory_list"'
has "$OUT" '"via": "'
expect 0 runs tools "$RUN"
has "$OUT" "[by code/"
expect 0 runs show "$RUN" --json
has "$OUT" '"tool_calls": 2'
# Not in doubt: nothing for a person to settle; what it wrote stays.
expect 0 indoubt list
case "$OUT" in *execute_code*) bad "the canceled call is in doubt: $OUT" ;; *) ok ;; esac
[ "$(cat "$T/sbx/$A/started")" = yes ] && ok || bad "the program's file is gone"
# The run ended before its next model call: the cassette's text was never asked for.
expect 0 runs show "$RUN"
case "$OUT" in *"after the loop"*) bad "the run went on: $OUT" ;; *) ok ;; esac
kill -TERM "$PID"
wait "$PID" || true
PID=
finish
