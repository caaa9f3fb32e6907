#!/usr/bin/env bash
# End-to-end: `vigil serve` killed with SIGKILL while its agent runs tool calls, then started
# again, at several kill points. A user wake (`vigil wake ID -m ...`) runs the agent loop with
# the scripted model: STEPS tool calls of record_observations, each recording one note
# ("note-N") as a message of the agent's thread, then a final answer. The daemon is killed once
# the run is under way (kill point 0) or once N notes are stored; the next daemon takes the
# dead one's run over. Afterwards, every time:
#  - the wake completes under its run key, and its final answer is there;
#  - no effect twice: every note is stored exactly once;
#  - no run is left running, and no tool call either (a crashed run's calls are closed
#    `crashed`, saying what recovery decided);
#  - every operation in doubt is listed by `vigil indoubt list`.
# Then the same with an effect outside the store: a command tool declared in the config file
# that appends its operation id to a file. Afterwards no operation id is in the file twice,
# every operation is finished or in doubt (and listed), and nothing is left running.
# The waits poll a real process's progress; no assertion depends on timing.
# proves: S3-016
source "$(dirname "$0")/lib.sh" "$1"
unset VIGIL_WAKE_RUNNER
export VIGIL_MODEL_PROVIDER=scripted
STEPS=16
PID=

check() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', expected '$2'"; fi; }

cleanup() { [ -z "$PID" ] || kill -9 "$PID" 2>/dev/null || true; }
trap cleanup EXIT


sql() { sqlite3 -cmd ".timeout 5000" "$VIGIL_STORE" "$1"; }
notes() { sql "select count(*) from records_text where kind='message' and owner='$A' and k2='observation'"; }
notes_at_least() { [ "$(notes)" -ge "$1" ]; }
run_started() { [ "$(sql "select count(*) from records_text where kind='run' and owner='$A'")" -ge 1 ]; }
completed() { "$VIGIL" wakes --agent "$A" --status completed --json | grep -q '"run_key"'; }

serve() {
  "$VIGIL" serve --workers 1 --poll-ms 20 >>"$T/serve.log" 2>&1 &
  PID=$!
  wait_for grep -q serving "$T/serve.log" || bad "the daemon did not start: $(cat "$T/serve.log")"
}

# The cassette: STEPS calls of record_observations, then the answer.
{
  printf '{"vigil_cassette":1,"exchanges":['
  for i in $(seq 1 "$STEPS"); do
    printf '{"response":{"tool_calls":[{"id":"c%d","name":"record_observations","arguments":{"notes":["note-%d"]}}]}},' "$i" "$i"
  done
  printf '{"response":{"text":"all noted"}}]}'
} >"$T/cassette.json"
export VIGIL_MODEL_CASSETTE="$T/cassette.json"

# One kill point: a fresh store, a wake, SIGKILL at the point, a new daemon, the checks.
crash_at() {
  local point=$1
  export VIGIL_STORE="$T/store-$point/vigil.db"
  mkdir -p "$T/store-$point"
  : >"$T/serve.log"
  "$VIGIL" init >/dev/null || bad "init"
  A=$("$VIGIL" agent create --name crashy --config '{"tools":["record_observations"]}')
  "$VIGIL" agent resume "$A" >/dev/null || bad "resume"
  serve
  "$VIGIL" wake "$A" -m "note everything" >/dev/null 2>>"$T/wake.log" || bad "wake (kill point $point)"
  if [ "$point" -eq 0 ]; then wait_for run_started; else wait_for notes_at_least "$point"; fi ||
    bad "kill point $point never came: $(cat "$T/serve.log")"
  kill -9 "$PID"
  wait "$PID" 2>/dev/null
  PID=
  local cut_short
  cut_short=$(sql "select count(*) from records_text where kind='run' and owner='$A' and k1='running'")
  serve
  wait_for completed || bad "kill point $point: the wake did not complete after the restart: $(cat "$T/serve.log")"
  kill -TERM "$PID"
  wait "$PID" 2>/dev/null
  PID=
  # no effect twice, none lost
  check "$(sql "select count(*) from (select body from records_text where kind='message' and owner='$A' and k2='observation' group by json_extract(body,'$.content') having count(*) > 1)")" 0 \
    "kill point $point: notes stored twice"
  check "$(notes)" "$STEPS" "kill point $point: notes stored"
  "$VIGIL" runs list --agent "$A" --json >"$T/runs.json"
  grep -q "\"summary_preview\": \"all noted\"" "$T/runs.json" && ok || bad "kill point $point: no run gave the final answer"
  check "$(grep -c '"status": "running"' "$T/runs.json")" 0 "kill point $point: runs left running"
  # a run's tool calls are its journal's records: listed by `runs tools`, none still running
  local run left=0
  for run in $(sql "select id from records_text where kind='run' and owner='$A'"); do
    left=$((left + $("$VIGIL" runs tools "$run" --limit 1000 --json | grep -c '"status": "running"' || true)))
  done
  check "$left" 0 "kill point $point: tool calls left running"
  check "$(sql "select count(*) from records_text where kind='operation' and k1='started'")" 0 \
    "kill point $point: operations left started"
  check "$("$VIGIL" indoubt list --json | grep -c '"operation_id"')" \
    "$(sql "select count(*) from records_text where kind='operation' and k1='in_doubt'")" \
    "kill point $point: in-doubt operations listed"
  # a run the kill cut short is closed crashed
  check "$(sql "select count(*) from records_text where kind='run' and owner='$A' and k1='crashed'")" \
    "$cut_short" "kill point $point: runs closed crashed"
  cut_total=$((cut_total + cut_short))
}

cut_total=0
for point in 0 1 3 6 10 14; do
  crash_at "$point"
done
echo "kills that cut a run short: $cut_total of 6"

# ---- an effect outside the store: a command tool appending its operation id ----------------
cat >"$T/config.yaml" <<YAML
command_tools:
  append_op:
    command: [sh, -c, 'cat >/dev/null; echo "\$VIGIL_OPERATION_ID" >>"$T/effects"; echo "{}"']
    description: appends its operation id to a file
    input_schema: {type: object}
    risk: low
    mutating: true
YAML
{
  printf '{"vigil_cassette":1,"exchanges":['
  for i in $(seq 1 "$STEPS"); do
    printf '{"response":{"tool_calls":[{"id":"c%d","name":"append_op","arguments":{"n":%d}}]}},' "$i" "$i"
  done
  printf '{"response":{"text":"all appended"}}]}'
} >"$T/cassette-cmd.json"
effects_at_least() { [ "$(wc -l <"$T/effects")" -ge "$1" ]; }

command_crash_at() {
  local point=$1
  export VIGIL_STORE="$T/cmd-$point/vigil.db" VIGIL_CONFIG="$T/config.yaml"
  export VIGIL_MODEL_CASSETTE="$T/cassette-cmd.json"
  mkdir -p "$T/cmd-$point"
  : >"$T/serve.log"
  : >"$T/effects"
  "$VIGIL" init >/dev/null || bad "init"
  A=$("$VIGIL" agent create --name effects --config '{"tools":["append_op"]}')
  "$VIGIL" agent resume "$A" >/dev/null || bad "resume"
  serve
  "$VIGIL" wake "$A" -m "append everything" >/dev/null 2>>"$T/wake.log" ||
    bad "wake (command, kill point $point)"
  wait_for effects_at_least "$point" ||
    bad "command kill point $point never came: $(cat "$T/serve.log")"
  kill -9 "$PID"
  wait "$PID" 2>/dev/null
  PID=
  serve
  wait_for completed ||
    bad "command kill point $point: the wake did not complete after the restart: $(cat "$T/serve.log")"
  kill -TERM "$PID"
  wait "$PID" 2>/dev/null
  PID=
  check "$(sort "$T/effects" | uniq -d | wc -l)" 0 "command kill point $point: an effect ran twice"
  check "$(sql "select count(*) from records_text where kind='operation' and k1 not in ('finished','in_doubt')")" 0 \
    "command kill point $point: operations neither finished nor in doubt"
  check "$("$VIGIL" indoubt list --json | grep -c '"operation_id"')" \
    "$(sql "select count(*) from records_text where kind='operation' and k1='in_doubt'")" \
    "command kill point $point: in-doubt operations listed"
  check "$(sql "select count(*) from records_text where kind='run' and owner='$A' and k1='running'")" 0 \
    "command kill point $point: runs left running"
  # The operator watching the daemon hears of each call left in doubt (trial G1).
  if [ "$(sql "select count(*) from records_text where kind='operation' and k1='in_doubt'")" -gt 0 ]; then
    grep -q "a tool call of agent $A is in doubt" "$T/serve.log" && ok ||
      bad "command kill point $point: no line about the call in doubt: $(cat "$T/serve.log")"
  fi
  local finished
  finished=$(sql "select count(*) from records_text where kind='operation' and k1='finished'")
  if [ "$(wc -l <"$T/effects")" -ge "$finished" ]; then ok; else
    bad "command kill point $point: $finished operations finished, fewer effects in the file"
  fi
  echo "command kill point $point: $(wc -l <"$T/effects") effects, $finished finished," \
    "$(sql "select count(*) from records_text where kind='operation' and k1='in_doubt'") in doubt"
  unset VIGIL_CONFIG
}
for point in 1 5 11; do
  command_crash_at "$point"
done

# ---- what a recovery run recovers (trial G12) ------------------------------------------------
# A manual wake whose tool blocks while a file exists; the daemon is killed during the call and
# a new one runs the wake again under its run key: `runs show` of that run says it recovers the
# run of its key cut short, first queued as manual; the cut-short run says nothing of the kind.
BLOCK="$T/block"
cat >"$T/config-block.yaml" <<YAML
command_tools:
  wait_file:
    command: [sh, -c, 'cat >/dev/null; touch "$BLOCK.reached"; while [ -f "$BLOCK" ]; do sleep 0.05; done; echo "{}"']
    description: returns once a file is gone
    input_schema: {type: object}
    risk: low
    mutating: false
YAML
printf '{"vigil_cassette":1,"exchanges":[{"response":{"tool_calls":[{"id":"w1","name":"wait_file","arguments":{}}]}},{"response":{"text":"waited"}}]}' >"$T/cassette-block.json"
export VIGIL_STORE="$T/recovers/vigil.db" VIGIL_CONFIG="$T/config-block.yaml"
export VIGIL_MODEL_CASSETTE="$T/cassette-block.json"
mkdir -p "$T/recovers"
: >"$T/serve.log"
touch "$BLOCK"
"$VIGIL" init >/dev/null || bad "init (recovers)"
A=$("$VIGIL" agent create --name waiter --config '{"tools":["wait_file"]}')
"$VIGIL" agent resume "$A" >/dev/null || bad "resume (recovers)"
serve
KEY=$("$VIGIL" wake "$A" 2>>"$T/wake.log")
wait_for test -f "$BLOCK.reached" || bad "the blocking tool never started: $(cat "$T/serve.log")"
kill -9 "$PID"
wait "$PID" 2>/dev/null
PID=
rm -f "$BLOCK"
serve
wait_for completed || bad "the recovered wake did not complete: $(cat "$T/serve.log")"
kill -TERM "$PID"
wait "$PID" 2>/dev/null
PID=
first=$(sql "select id from records_text where kind='run' and owner='$A' and json_extract(body,'\$.wake_reason')='manual'")
second=$(sql "select id from records_text where kind='run' and owner='$A' and json_extract(body,'\$.wake_reason')='recovery'")
[ -n "$first" ] && [ -n "$second" ] && ok || bad "runs: manual '$first', recovery '$second'"
expect 0 runs show "$second"
has "$OUT" "recovers     the run of this run key cut short (a crash, or a stop past its grace); first queued as manual"
expect 0 runs show "$second" --json
has "$OUT" '"kind": "interrupted"'
has "$OUT" "\"run_key\": \"$KEY\""
expect 0 runs show "$first" --json
case "$OUT" in *'"recovers"'*) bad "the cut-short run says it recovers: $OUT" ;; *) ok ;; esac
unset VIGIL_CONFIG

finish
