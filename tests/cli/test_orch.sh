#!/usr/bin/env bash
# End-to-end: delegation and the task graph from the command line, with `vigil serve` running
# the children. A manifest enables spawning (spawn: {enabled: true}); the parent's spawn call
# (made here with `vigil tool call`, as its run would make it) admits three children under a
# concurrency cap of 1; the daemon is killed with SIGKILL once a child has finished, started
# again, and afterwards every child ran once, the parent was woken once with every result, and
# `vigil agent tree` shows the lineage and the decisions. Then the task graph: add with
# --blocks, a cycle refused with nothing written, list, graph, cancel, and a dispatch that the
# daemon carries to the end in dependency order. And `vigil runs rerun` / `vigil runs cancel`. The scripted model answers with its labelled
# echo (no cassette). The waits poll the store; no assertion depends on timing.
source "$(dirname "$0")/lib.sh" "$1"
unset VIGIL_WAKE_RUNNER VIGIL_MODEL_CASSETTE
export VIGIL_MODEL_PROVIDER=scripted
PID=

check() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', expected '$2'"; fi; }

# The trap returns 0: under set -e a failing command in it would end the script with 1.
cleanup() { [ -z "$PID" ] || kill -9 "$PID" 2>/dev/null || true; }
trap cleanup EXIT

WAIT_TRIES=3000 # 30 s
sql() { sqlite3 -cmd ".timeout 5000" "$VIGIL_STORE" "$1"; }
# The log is shared by every start: wait for this start's own "serving" line (an earlier
# daemon's would let a check run before this one took the store).
serving_after() { [ "$(grep -c serving "$T/serve.log")" -gt "$1" ]; }
serve() {
  local before
  before=$(grep -c serving "$T/serve.log" 2>/dev/null || true)
  "$VIGIL" serve --workers 1 --poll-ms 20 >>"$T/serve.log" 2>&1 &
  PID=$!
  wait_for serving_after "${before:-0}" || bad "the daemon did not start: $(cat "$T/serve.log")"
}
stop() {
  kill -TERM "$PID"
  wait "$PID" 2>/dev/null
  PID=
}

SECONDS=0
"$VIGIL" init >/dev/null || bad "init"
mkdir "$T/m"
cat >"$T/m/boss.yaml" <<'YAML'
name: boss
kind: lead
prompt: You split work.
tools: [spawn_agents, list_available_agents]
spawn: {enabled: true, max_concurrent: 1}
YAML
for i in 1 2 3; do printf 'name: w%d\nkind: worker\nprompt: You do one part.\n' "$i" >"$T/m/w$i.yaml"; done
"$VIGIL" agent apply "$T/m" >/dev/null || bad "apply"
B=$(sql "select id from records_text where kind='agent' and json_extract(body,'$.name')='boss'")
W1=$(sql "select id from records_text where kind='agent' and json_extract(body,'$.name')='w1'")
has "$("$VIGIL" agent export "$B")" "spawn:"
has "$("$VIGIL" tool list "$B")" "spawn_agents"
case "$("$VIGIL" tool list "$W1" 2>&1)" in *spawn_agents*) bad "w1 sees spawn_agents" ;; *) ok ;; esac

# A manifest that lists spawn_agents without enabling spawning: the refusal says what to set.
printf 'name: nospawn\nkind: lead\ntools: [spawn_agents]\n' >"$T/nospawn.yaml"
"$VIGIL" agent apply "$T/nospawn.yaml" >/dev/null || bad "apply nospawn"
st=0
out=$("$VIGIL" tool call nospawn spawn_agents '{"requests":[{"agent":"w1","goal":"x"}]}' 2>&1) || st=$?
check "$st" 10 "spawning while it is off"
has "$out" "spawn: {enabled: true}"

# ---- visibility: internal agents only with --all; agents still see them ---------------------
printf 'name: backroom\nkind: helper\nvisibility: internal\n' >"$T/hidden.yaml"
"$VIGIL" agent apply "$T/hidden.yaml" >/dev/null || bad "apply an internal agent"
case "$("$VIGIL" agent list 2>/dev/null)" in *backroom*) bad "agent list shows an internal agent" ;; *) ok ;; esac
has "$("$VIGIL" agent list 2>/dev/null)" "boss"
has "$("$VIGIL" agent list --all 2>/dev/null)" "backroom"
has "$("$VIGIL" tool call "$B" list_available_agents '{"kind":"helper"}' --run-key boss-look)" "backroom"

# ---- delegation across a SIGKILL of the daemon ----------------------------------------------
"$VIGIL" tool call "$B" spawn_agents \
  '{"requests":[{"agent":"w1","goal":"part one"},{"agent":"w2","goal":"part two"},{"agent":"w3","goal":"part three"},{"kind":"nobody","goal":"x"}]}' \
  --run-key boss-run-1 >"$T/spawn.json" || bad "spawn call: $(cat "$T/spawn.json")"
has "$(cat "$T/spawn.json")" '"queued"'
check "$(sql "select count(*) from records_text where kind='spawn_child' and k1='running'")" 1 "running at once under a cap of 1"
children_done() { [ "$(sql "select count(*) from records_text where kind='spawn_child' and k1='completed'")" -ge "$1" ]; }
serve
wait_for children_done 1 || bad "no child finished: $(cat "$T/serve.log")"
kill -9 "$PID"
wait "$PID" 2>/dev/null
PID=
serve
parent_woken() { [ "$(sql "select count(*) from records_text where kind='wake_run' and owner='$B' and k1='completed'")" -ge 1 ]; }
wait_for parent_woken || bad "the parent was not woken after the restart: $(cat "$T/serve.log")"
stop
check "$(sql "select count(*) from records_text where kind='spawn_child' and k1='completed'")" 3 "children completed"
for n in w1 w2 w3; do
  id=$(sql "select id from records_text where kind='agent' and json_extract(body,'$.name')='$n'")
  check "$(sql "select count(*) from records_text where kind='wake_run' and owner='$id'")" 1 "$n ran once"
done
check "$(sql "select count(*) from records_text where kind='wake_run' and owner='$B'")" 1 "the parent woken once"
has "$(sql "select json_extract(body,'$.seed_input') from records_text where kind='wake_run' and owner='$B'")" "part three"
# Runs no person asked for say why they ran (not "user"): the children's, and the parent's.
# (a child the kill -9 cut short was queued again as `recovery`, its first reason kept)
check "$(sql "select group_concat(distinct coalesce(nullif(json_extract(body,'\$.original_reason'),''), k2)) from records_text where kind='wake_run' and owner='$W1'")" spawn "a spawned child's wake reason"
# (the parent's wake too, when the kill -9 came after the last child ended, as it may)
check "$(sql "select coalesce(nullif(json_extract(body,'\$.original_reason'),''), k2) from records_text where kind='wake_run' and owner='$B'")" children "the parent's wake reason"
check "$(sql "select group_concat(distinct json_extract(body,'\$.wake_reason')) from records_text where kind='run' and owner='$W1'")" spawn "a spawned child's run's wake reason"
"$VIGIL" agent tree "$B" --json >"$T/tree.json" || bad "agent tree"
check "$(grep -c '"status": "completed"' "$T/tree.json")" 3 "the tree's completed children"
has "$(cat "$T/tree.json")" "no live agent of the requested kind"
has "$("$VIGIL" agent tree "$B")" "denied (no live agent"
# each admitted decision says the scopes it granted (boss has none, so its children get none)
has "$("$VIGIL" agent tree "$B")" "-> $W1, scopes: none"
# Upwards too: a child's lineage names the agent that spawned it, and the parent's run.
has "$("$VIGIL" agent tree "$W1")" "spawned by boss ($B), run "
"$VIGIL" agent tree "$W1" --json >"$T/tree-w1.json" || bad "agent tree of a child"
has "$(cat "$T/tree-w1.json")" '"parent_run_key": "boss-run-1"'
has "$(cat "$T/tree-w1.json")" '"goal": "part one"'
set +e
"$VIGIL" agent tree 00000000-0000-0000-0000-000000000000 >/dev/null 2>&1
check "$?" 3 "agent tree of an unknown agent"
set -e

# ---- run controls: re-run a finished run with an override, cancel the queued re-run ---------
K1=$(sql "select id from records_text where kind='wake_run' and owner='$W1'")
# A spawned child's run is continued with resume, never re-run: its grant and depth are its
# parent's, which a run of the agent's own would not have. Nothing is queued.
set +e
out=$("$VIGIL" runs rerun "$K1" 2>&1)
check "$?" 2 "re-running a spawned child's run"
has "$out" "vigil runs resume"
set -e
check "$(sql "select count(*) from records_text where kind='wake_run' and owner='$W1'")" 1 "nothing queued"
KU=$("$VIGIL" wake "$W1" -m "part one" 2>/dev/null) # a run of w1's own, run here (no daemon)
K2=$("$VIGIL" runs rerun "$KU" --prompt "part one, again" --queue 2>/dev/null)
check "$(sql "select json_extract(body,'\$.meta.rerun_of') from records_text where kind='wake_run' and id='$K2'")" "$KU" "the re-run names the old run"
check "$(sql "select json_extract(body,'\$.seed_input') from records_text where kind='wake_run' and id='$K2'")" "part one, again" "the override"
check "$(sql "select k2 from records_text where kind='wake_run' and id='$K2'")" rerun "a re-run's wake reason"
"$VIGIL" runs cancel "$K2" 2>/dev/null || bad "cancel a queued run"
check "$(sql "select k1 from records_text where kind='wake_run' and id='$K2'")" cancelled "the cancelled run's status"
set +e
"$VIGIL" runs cancel "$K2" 2>/dev/null
check "$?" 4 "cancelling a cancelled run"
"$VIGIL" runs cancel no-such-run 2>/dev/null
check "$?" 3 "cancelling an unknown run"
"$VIGIL" runs cancel "${K2:0:16}" 2>/dev/null # the run key as vigil wakes shows it: found
check "$?" 4 "cancelling a cancelled run by its key's first 16 characters"
"$VIGIL" runs resume "$K2" 2>/dev/null # a re-run is no sub-agent's run
check "$?" 2 "resuming a run no spawn made"
"$VIGIL" runs rerun "$KU" --model "" 2>/dev/null
check "$?" 2 "a re-run's empty model name"
"$VIGIL" runs resume "$K2" --model other 2>/dev/null
check "$?" 2 "--model with resume"
set -e
# A re-run's model and tools: kept as its override, the tools as its grant.
K3=$("$VIGIL" runs rerun "$KU" --model other-model --tools 'memory_*,set_report' --queue 2>/dev/null)
check "$(sql "select json_extract(body,'\$.meta.override.model') from records_text where kind='wake_run' and id='$K3'")" other-model "the model override"
check "$(sql "select json_extract(body,'\$.meta.override.tools[1]') from records_text where kind='wake_run' and id='$K3'")" set_report "the tools override"
check "$(sql "select count(*) from records_text where kind='tool_grant' and id='$K3'")" 1 "the tools as the run's grant"
"$VIGIL" runs cancel "$K3" 2>/dev/null || bad "cancel the queued re-run"
# An allowlist that names none of the agent's tools is said (a typo would leave no tools).
printf 'name: w1\nkind: worker\nprompt: You do one part.\ntools: [memory_read]\n' >"$T/m/w1.yaml"
"$VIGIL" agent apply "$T/m/w1.yaml" >/dev/null || bad "apply w1 with a tool"
err=$("$VIGIL" runs rerun "$KU" --tools nosuchtool --queue 2>&1 >"$T/k4") || bad "rerun --tools nosuchtool"
has "$err" "names none of the agent's"
"$VIGIL" runs cancel "$(cat "$T/k4")" 2>/dev/null || bad "cancel the queued re-run"
err=$("$VIGIL" runs rerun "$KU" --tools 'memory_*' --queue 2>&1 >"$T/k4") || bad "rerun --tools memory_*"
case "$err" in *"names none"*) bad "a warning for an allowlist that names a tool" ;; esac
"$VIGIL" runs cancel "$(cat "$T/k4")" 2>/dev/null || bad "cancel the queued re-run"
# A dormant agent takes no re-run: refused, nothing queued (it used to say a key and skip it).
"$VIGIL" agent pause "$W1" >/dev/null 2>&1 || bad "pause w1"
before=$(sql "select count(*) from records_text where kind='wake_run' and owner='$W1'")
set +e
"$VIGIL" runs rerun "$KU" --queue >/dev/null 2>&1
check "$?" 4 "re-running a dormant agent's run"
set -e
check "$(sql "select count(*) from records_text where kind='wake_run' and owner='$W1'")" "$before" "nothing queued for a dormant agent"
"$VIGIL" agent resume "$W1" >/dev/null 2>&1 || bad "resume w1"
# ---- resume a sub-agent's run: its own session, the steps stated, linked to the old run ------
K3=$("$VIGIL" runs resume "$K1" --prompt "add a summary" --queue 2>/dev/null)
check "$(sql "select json_extract(body,'\$.session_id') from records_text where kind='wake_run' and id='$K3'")" \
  "$(sql "select json_extract(body,'\$.session_id') from records_text where kind='wake_run' and id='$K1'")" "the resumed run's session"
has "$(sql "select json_extract(body,'\$.seed_input') from records_text where kind='wake_run' and id='$K3'")" "after 1 steps"
check "$(sql "select k1 from records_text where kind='run_resume' and id='$K3'")" "$K1" "the resume names the old run"
check "$(sql "select k2 from records_text where kind='wake_run' and id='$K3'")" resume "a resume's wake reason"
"$VIGIL" runs cancel "$K3" 2>/dev/null || bad "cancel the queued resume"
echo "delegation part: ${SECONDS}s"
# ---- the task graph ---------------------------------------------------------------------------
set +e
A=$("$VIGIL" task add --title "design" --kind worker --json | sed 's/.*"id": "\([^"]*\)".*/\1/')
C=$("$VIGIL" task add --title "ship" --kind worker --json | sed 's/.*"id": "\([^"]*\)".*/\1/')
Bt=$("$VIGIL" task add --title "build" --kind worker --blocks "$C" --json | sed 's/.*"id": "\([^"]*\)".*/\1/')
"$VIGIL" task block "$A" "$Bt" || bad "block"
before=$(sql "select group_concat(id||rev) from records_text where kind='task'")
"$VIGIL" task block "$C" "$A" 2>"$T/cycle.err"
check "$?" 2 "a cycle's exit status"
has "$(cat "$T/cycle.err")" "would close a cycle"
check "$(sql "select group_concat(id||rev) from records_text where kind='task'")" "$before" "a refused edge wrote nothing"
"$VIGIL" task block "$A" "$Bt" 2>"$T/again.err" || bad "an edge that exists again"
has "$(cat "$T/again.err")" "already blocks"
check "$(sql "select group_concat(id||rev) from records_text where kind='task'")" "$before" "an existing edge wrote nothing"
# `task graph --json` is the graph (nodes and edges), as GET /v1/tasks/graph answers.
graph=$("$VIGIL" task graph --json)
has "$graph" '"edges"'
has "$(printf '%s' "$graph" | tr -d ' \n')" "\"from\":\"$A\",\"to\":\"$Bt\""
# The list's columns: the agent one is a column ("-" until dispatched), the title last.
listed=$("$VIGIL" task list)
has "$(echo "$listed" | head -1)" "AGENT"
has "$listed" "$A  ready     -"
has "$("$VIGIL" task graph)" "$A -> $Bt"
# graph and show name tasks by their titles too; show labels each field
graph=$("$VIGIL" task graph)
has "$graph" "$A [ready] design"
has "$graph" "$A -> $Bt  (design -> build)"
shown=$("$VIGIL" task show "$Bt")
has "$shown" "title:      build"
has "$shown" "status:     pending"
has "$shown" "kind:       worker"
has "$shown" "agent:      (not dispatched)"
has "$shown" "attempts:   0"
has "$shown" "version:    "
has "$shown" "created:    20"
has "$shown" "blocked by: $A [ready] design"
has "$shown" "blocks:     $C [pending] ship"
has "$("$VIGIL" task show "$Bt" --json)" '"created_ms": '
has "$("$VIGIL" task list --json)" "\"status\": \"pending\""
check "$("$VIGIL" task list | head -1 | cut -c1-2)" ID "task list's header"
"$VIGIL" task list --status bogus >/dev/null 2>"$T/status.err"
check "$?" 2 "task list of an unknown status"
has "$(cat "$T/status.err")" "pending, ready, running, attention, done, failed, cancelled"
Y=$("$VIGIL" task add --title "extra" --kind nobody)
X=$("$VIGIL" task add --title "dropped" --kind nobody --blocks "$Y")
"$VIGIL" task cancel "$X" 2>/dev/null || bad "cancel"
has "$("$VIGIL" task show "$X" --json)" '"cancelled"'
has "$("$VIGIL" task show "$Y" --json)" '"cancelled"'
has "$("$VIGIL" task show "$X")" "reason:     cancelled by a person"
"$VIGIL" task cancel "$X" 2>/dev/null
check "$?" 4 "cancelling a cancelled task"
set -e
"$VIGIL" task dispatch --slots 1 >/dev/null || bad "dispatch"
serve
all_done() { [ "$(sql "select count(*) from records_text where kind='task' and k1='done'")" -eq 3 ]; }
wait_for all_done || bad "the tasks did not finish: $("$VIGIL" task list)"
stop
# A dispatched run's wake names its task by its session, "task:ID".
order=$(sql "select json_extract(t.body,'\$.title') from records_text r join records_text t on t.kind='task' and 'task:'||t.id=json_extract(r.body,'\$.session_id') where r.kind='wake_run' order by r.rowid")
check "$(echo $order)" "design build ship" "dependency order"
check "$(sql "select group_concat(distinct k2) from records_text where kind='wake_run' and json_extract(body,'\$.session_id') like 'task:%'")" task "a task's wake reason"
shown=$("$VIGIL" task show "$C")
has "$shown" "status:     done"
has "$shown" "run "
has "$shown" "attempts:   1"
has "$shown" "result:     "
has "$shown" "blocked by: $Bt [done] build"
case $shown in *"agent:      (not dispatched)"*) bad "a done task names no agent" ;; *) ok ;; esac


# ---- a task's run across a SIGKILL of the daemon --------------------------------------------
# A start is its wake only (the task row is not written: it reads running because the wake of
# its next attempt exists). The daemon is killed while the task's run records its notes; the
# next daemon recovers the wake: the task is started once, its run's effects are stored once,
# and its end writes the task done.
export VIGIL_STORE="$T/taskcrash/vigil.db"
mkdir -p "$T/taskcrash"
: >"$T/serve.log"
"$VIGIL" init >/dev/null || bad "init (task crash)"
printf 'name: tw\nkind: scribe\nprompt: You note things.\ntools: [record_observations]\n' >"$T/tw.yaml"
"$VIGIL" agent apply "$T/tw.yaml" >/dev/null || bad "apply tw"
TW=$(sql "select id from records_text where kind='agent' and json_extract(body,'$.name')='tw'")
{
  printf '{"vigil_cassette":1,"exchanges":['
  for i in $(seq 1 12); do
    printf '{"response":{"tool_calls":[{"id":"c%d","name":"record_observations","arguments":{"notes":["note-%d"]}}]}},' "$i" "$i"
  done
  printf '{"response":{"text":"all noted"}}]}'
} >"$T/task-cassette.json"
export VIGIL_MODEL_CASSETTE="$T/task-cassette.json"
TK=$("$VIGIL" task add --title "note it all" --kind scribe)
"$VIGIL" task dispatch --slots 1 >/dev/null || bad "dispatch (task crash)"
check "$(sql "select k1 from records_text where kind='task' and id='$TK'")" ready "a started task's row, as stored"
has "$("$VIGIL" task show "$TK")" "status:     running"
has "$("$VIGIL" task list --status running)" "$TK"
has "$("$VIGIL" wakes --agent "$TW" --json)" '"queued"'
tnotes() { sql "select count(*) from records_text where kind='message' and owner='$TW' and k2='observation'"; }
tnotes_at_least() { [ "$(tnotes)" -ge "$1" ]; }
serve
wait_for tnotes_at_least 3 || bad "the task's run did not get under way: $(cat "$T/serve.log")"
kill -9 "$PID"
wait "$PID" 2>/dev/null || true # killed: its status is not 0
PID=
# running (its wake started, to be recovered), or done if the run ended before the kill
case "$("$VIGIL" task show "$TK")" in *"status:     running"* | *"status:     done"*) ok ;; *) bad "the task after the kill" ;; esac
: >"$T/serve.log" # the next daemon's own "serving"
serve
task_done() { [ "$(sql "select k1 from records_text where kind='task' and id='$TK'")" = done ]; }
wait_for task_done || bad "the task did not finish after the restart: $(cat "$T/serve.log")"
stop
check "$(sql "select count(*) from records_text where kind='wake_run' and owner='$TW'")" 1 "the task started once"
check "$(sql "select count(*) from (select 1 from records_text where kind='message' and owner='$TW' and k2='observation' group by json_extract(body,'$.content') having count(*) > 1)")" 0 "notes stored twice"
check "$(tnotes)" 12 "the task run's notes"
shown=$("$VIGIL" task show "$TK")
has "$shown" "status:     done"
has "$shown" "attempts:   1"
unset VIGIL_MODEL_CASSETTE

finish
