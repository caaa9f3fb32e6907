#!/usr/bin/env bash
# End-to-end, trial L of session 38: a task graph across a kill -9 of the daemon mid-call, on
# SQLite and (with VIGIL_PG_URI) on PostgreSQL with a second daemon taking over.
#
# A task T (kind coder) blocks U (kind analyse). T's run calls a mutating command tool that
# blocks while a file exists; the daemon running it is killed with SIGKILL during the call, and
# the next daemon (SQLite: a new one; PostgreSQL: a second one already serving) takes the run
# over under its run key: the call is in doubt (it may have taken effect) and the run goes on to
# its answer. Then (L3) T is `attention`, not done, and U does not run, until a person settles
# the call with `vigil indoubt resolve`: --applied makes T done, and the daemon starts U by
# itself (L9: no `vigil task dispatch`); --not-applied runs T again (its second attempt), then
# U. Neither task runs twice. Also: `task list` and `task show` name the agent (L11), and a
# re-run of an ended task's run is refused naming `vigil task add` (L7).
# The waits poll real progress; no assertion depends on timing.
# proves: S2-031
source "$(dirname "$0")/lib.sh" "$1"
unset VIGIL_WAKE_RUNNER
export VIGIL_MODEL_PROVIDER=scripted
WAIT_TRIES=3000 # 30 s
PIDS=()

check() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', expected '$2'"; fi; }
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -f "$T/block"
}
trap cleanup EXIT

BLOCK="$T/block"
cat >"$T/config.yaml" <<YAML
command_tools:
  crunch:
    command: [sh, -c, 'cat >/dev/null; touch "$BLOCK.reached"; while [ -f "$BLOCK" ]; do sleep 0.05; done; echo "{}"']
    description: crunches the numbers (returns once a file is gone)
    input_schema: {type: object}
    risk: low
    mutating: true
YAML
export VIGIL_CONFIG="$T/config.yaml"
mkdir -p "$T/m"
printf 'name: coder\nkind: coder\nprompt: You crunch.\ntools: [crunch]\n' >"$T/m/coder.yaml"
printf 'name: analyst\nkind: analyse\nprompt: You summarise.\n' >"$T/m/analyst.yaml"
# The first daemon's model calls the tool; the next daemon's answers in text.
printf '{"vigil_cassette":1,"exchanges":[{"response":{"tool_calls":[{"id":"k1","name":"crunch","arguments":{}}]}}]}' >"$T/first.json"
# (applied: T's answer, then U's; not applied: T's, T's second attempt's, then U's)
printf '{"vigil_cassette":1,"exchanges":[{"response":{"text":"crunched"}},{"response":{"text":"summarised"}}]}' >"$T/next-applied.json"
printf '{"vigil_cassette":1,"exchanges":[{"response":{"text":"crunched"}},{"response":{"text":"crunched again"}},{"response":{"text":"summarised"}}]}' >"$T/next-not-applied.json"

serving() { [ "$(grep -c 'vigil serve: serving' "$1")" -ge 1 ]; }
serve() { # serve LOG CASSETTE: a daemon, once it serves; its pid in $LAST
  VIGIL_MODEL_CASSETTE=$2 "$VIGIL" serve --workers 1 --poll-ms 20 >>"$1" 2>&1 &
  LAST=$!
  PIDS+=("$LAST")
  wait_for serving "$1" || bad "a daemon did not start: $(cat "$1")"
}
field() { "$VIGIL" task show "$1" --json | jq -r "$2"; }
status_is() { [ "$(field "$1" .status)" = "$2" ]; }

# scenario NAME ANSWER SHARED: one store, the kill, the checks, the answer (applied or
# not-applied). SHARED 1: a PostgreSQL store, the second daemon serving before the kill.
scenario() {
  local name=$1 answer=$2 shared=$3
  : >"$T/$name-a.log"
  : >"$T/$name-b.log"
  rm -f "$BLOCK.reached"
  touch "$BLOCK"
  "$VIGIL" init >/dev/null || bad "$name: init"
  "$VIGIL" agent apply "$T/m" >/dev/null || bad "$name: apply"
  local t u
  u=$("$VIGIL" task add --title "summarise the crunch" --kind analyse)
  t=$("$VIGIL" task add --title "crunch the numbers" --kind coder --blocks "$u")
  "$VIGIL" task dispatch >/dev/null 2>&1 || bad "$name: dispatch"
  serve "$T/$name-a.log" "$T/first.json"
  local first=$LAST
  wait_for test -f "$BLOCK.reached" || bad "$name: the call never started: $(cat "$T/$name-a.log")"
  # L11: the agent by name, its id in --json
  has "$("$VIGIL" task list)" "running   coder"
  has "$("$VIGIL" task show "$t")" "agent:      coder ("
  [ "$shared" = 1 ] && serve "$T/$name-b.log" "$T/next-$answer.json"
  kill -9 "$first"
  wait "$first" 2>/dev/null || true
  rm -f "$BLOCK"
  [ "$shared" = 1 ] || serve "$T/$name-b.log" "$T/next-$answer.json"
  # L3: the run went on to its answer, but its call is in doubt: T waits, U does not run
  wait_for status_is "$t" attention || bad "$name: T is $(field "$t" .status): $(cat "$T/$name-b.log")"
  check "$(field "$t" .result)" crunched "$name: T's result, kept"
  check "$(field "$t" .in_doubt.calls)" 1 "$name: T's calls in doubt"
  check "$(field "$u" .status)" pending "$name: U while T's call is in doubt"
  has "$("$VIGIL" task list --status attention)" "$t"
  # vigil status counts it among what waits for a person (exit 11: something does)
  local st=0
  "$VIGIL" status --json >"$T/$name-status.json" 2>/dev/null || st=$?
  check "$st" 11 "$name: vigil status's exit while T is in attention"
  check "$(jq .tasks_attention "$T/$name-status.json")" 1 "$name: vigil status's tasks in attention"
  has "$(jq -r '.attention[]' "$T/$name-status.json")" "1 task(s) in attention"
  has "$("$VIGIL" task show "$t")" "in doubt:   1 call(s) of run"
  local op
  op=$("$VIGIL" indoubt list --json | jq -r '.[0].operation_id')
  [ -n "$op" ] && [ "$op" != null ] && ok || bad "$name: no call in doubt listed"
  expect 0 indoubt resolve "$op" "--$answer" --by tester
  if [ "$answer" = applied ]; then
    wait_for status_is "$u" done || bad "$name: U after T was settled: $(field "$u" .status)"
    check "$(field "$t" .status)" done "$name: T settled applied"
    check "$(field "$t" .attempts)" 1 "$name: T's attempts"
    check "$(field "$u" .result)" summarised "$name: U's answer"
  else
    wait_for status_is "$u" done || bad "$name: U after T was run again: $(field "$u" .status)"
    check "$(field "$t" .status)" done "$name: T run again"
    check "$(field "$t" .attempts)" 2 "$name: T's attempts"
    check "$(field "$t" .result)" crunched\ again "$name: T's second answer"
    check "$(field "$u" .result)" summarised "$name: U's answer"
  fi
  check "$("$VIGIL" indoubt list --json | jq length)" 0 "$name: calls left in doubt"
  # L7: a re-run of an ended task's run is refused, naming `vigil task add`
  expect 4 runs rerun "$(field "$t" .run_key)"
  has "$ERR" "has ended (done)"
  has "$ERR" "vigil task add"
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  # each task's attempts ran once: one wake each
  check "$("$VIGIL" wakes --json | jq '[.[] | select(.session_id | startswith("task:"))] | length')" \
    "$([ "$answer" = applied ] && echo 2 || echo 3)" "$name: task runs"
}

export VIGIL_STORE="$T/lap/vigil.db"
mkdir -p "$T/lap"
scenario sqlite-applied applied 0
export VIGIL_STORE="$T/lap2/vigil.db"
mkdir -p "$T/lap2"
scenario sqlite-not-applied not-applied 0

if [ -n "${VIGIL_PG_URI:-}" ]; then
  base=${VIGIL_PG_URI%%\?*}
  query=${VIGIL_PG_URI#"$base"}
  for a in applied not-applied; do
    DB="vigil_doubt_${a//-/_}_$$"
    psql "$VIGIL_PG_URI" -qAtc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
    psql "$VIGIL_PG_URI" -qAtc "CREATE DATABASE $DB" >/dev/null || bad "create database"
    export VIGIL_STORE="${base%/*}/$DB$query"
    scenario "pg-$a" "$a" 1
    psql "$VIGIL_PG_URI" -qAtc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
  done
else
  echo "skipped the PostgreSQL part: VIGIL_PG_URI is not set"
fi
finish
