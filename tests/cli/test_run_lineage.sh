#!/usr/bin/env bash
# End-to-end: a delegation seen from `vigil chat`, `vigil runs show` and `vigil agent tree` with
# no daemon (trial D of session 30: C1, C2, C5, C6, C20). A chat turn of `planner` spawns two `worker`
# children; they are only queued, so the chat says a daemon must run them (as `task dispatch`
# does for a task's run), the tree says `queued`, the parent's run lists both
# children, and `runs show` of a child's run key shows the queued run (and its parent) instead
# of "not found". Once the children ran, each child's run names its parent run, and over HTTP
# `GET /v1/runs/{run}` carries the same. The scripted model answers from a cassette, then with
# its echo.
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE VIGIL_WAKE_RUNNER

mkdir "$T/m"
cat >"$T/m/planner.yaml" <<'YAML'
name: planner
kind: lead
prompt: You split work.
tools: [spawn_agents, list_available_agents]
spawn: {enabled: true, max_concurrent: 3}
YAML
printf 'name: worker\nkind: worker\nprompt: You do one part.\n' >"$T/m/worker.yaml"
cat >"$T/c.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"text":"Delegating.","tool_calls":[{"id":"s1","name":"spawn_agents","arguments":{"requests":[{"agent":"worker","goal":"part one"},{"agent":"worker","goal":"part two"}]}}],"stop_reason":"tool_use"}},
 {"response":{"text":"Spawned; waiting."}}]}
JSON
expect 0 init
expect 0 agent apply "$T/m"
VIGIL_MODEL_CASSETTE="$T/c.json" expect 0 chat planner -m "plan it"
# C1: the turn's two replies each on their own line, and the user is told that only a daemon
# runs the children it admitted.
has "$OUT" "Delegating.
Spawned; waiting."
has "$ERR" 'no daemon running: 2 child runs queued: start `vigil serve` to run them'
expect 0 wakes --agent worker --json
keys=$(printf '%s' "$OUT" | jq -r '.[].run_key')
k1=$(printf '%s\n' "$keys" | sed -n 1p)
k2=$(printf '%s\n' "$keys" | sed -n 2p)
[ -n "$k1" ] && [ -n "$k2" ] && ok || bad "two children queued: $OUT"

# C1: admitted children that no worker has started are `queued`, not `running`.
expect 0 agent tree planner
has "$OUT" "run ${k1:0:16}  queued, depth 1"
has "$OUT" "run ${k2:0:16}  queued, depth 1"
case "$OUT" in *running*) bad "the tree says running: $OUT" ;; *) ok ;; esac
# C2: an admitted decision's reason is not the verdict again.
case "$OUT" in *"admitted (admitted)"*) bad "admitted (admitted): $OUT" ;; *) ok ;; esac

# C2: the parent's run lists its children, with their run keys.
expect 0 runs list --agent planner --json
parent=$(printf '%s' "$OUT" | sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' | head -n 1)
pkey=$(printf '%s' "$OUT" | sed -n 's/.*"run_key": "\([^"]*\)".*/\1/p' | head -n 1)
expect 0 runs show "$parent"
has "$OUT" "children     2:"
has "$OUT" "run ${k1:0:16}  queued"
has "$OUT" "run ${k2:0:16}  queued"
case "$OUT" in *"admitted"*": admitted"*) bad "a decision's reason repeats its verdict: $OUT" ;; *) ok ;; esac
expect 0 runs show "$parent" --json
has "$OUT" "\"run_key\": \"$k1\""

# C6: a queued run is shown from its wake-log entry (the key `vigil wakes` prints works too),
# and C5: a child names the run that spawned it.
expect 0 runs show "${k1:0:16}"
has "$OUT" "status       queued"
has "$OUT" "reason       spawn"
has "$OUT" "run key      $k1"
has "$OUT" "queued       "
has "$OUT" "parent       run ${pkey:0:16} of agent "
has "$OUT" "not started yet"
expect 0 runs show "$k1" --json
compact_out
has "$OUT" '"started":false'
has "$OUT" '"status":"queued"'
has "$OUT" "\"parent\":{\"agent_id\":"
has "$OUT" "\"run_key\":\"$pkey\""
expect 3 runs show nosuch-run-key
has "$ERR" '"nosuch-run-key" not found'

# C20: a dispatched task's run waits in the queue for a daemon: the command says so.
expect 0 task add --title "a part" --kind worker
expect 0 task dispatch
has "$OUT" "1 task started"
has "$ERR" 'no daemon running: 1 task run queued: start `vigil serve` to run it'

# The children run (no daemon: `vigil wake` runs what is queued in this process).
expect 0 runs cancel "$k2" --by tester
expect 0 wake worker -m "anything else"
expect 0 runs show "$k1"
has "$OUT" "status       completed"
has "$OUT" "parent       run ${pkey:0:16} of agent "
expect 0 runs show "$k1" --json
compact_out
has "$OUT" "\"parent\":{\"agent_id\":"
has "$OUT" "\"run_id\":\"$parent\""
expect 0 runs show "$parent"
has "$OUT" "run ${k1:0:16}  completed"
has "$OUT" "run ${k2:0:16}  cancelled"
# The cancelled child never started: shown from the wake log, with who cancelled it.
expect 0 runs show "$k2"
has "$OUT" "status       cancelled"
has "$OUT" "cancelled by tester"

# The same over HTTP: GET /v1/runs/{run} is vigil_run_show.
serve_http --workers 1
R=$(curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/runs/$k1")
is ".parent.run_key == \"$pkey\" and .status == \"completed\""
R=$(curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/runs/$parent")
is "(.children | length) == 2 and (.children | map(.run_key) | index(\"$k2\")) != null"
R=$(curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/runs/${k2:0:16}")
is ".started == false and .status == \"cancelled\" and .parent.run_key == \"$pkey\""
serve_stop
finish
