#!/usr/bin/env bash
# End-to-end on the command: the quick-start story of the reference task domain (docs/todo.md)
# under the scripted model. A person makes a task and a task agent for it, edits the task, the
# agent wakes in that same command (no daemon runs), calls the task tools and writes its report,
# which `vigil agent show` reads back. The agent's own edit does not wake it again, and it
# cannot touch a task of another category; its wake, captured as a scenario, replays as it ran.
# Then the same under `vigil serve`: its workers' runtimes have the domain's tools too, and so
# do its HTTP API's (a chat turn, a tool call).
set -e
source "$(dirname "$0")/lib.sh" "$1"
here=$(cd "$(dirname "$0")/../.." && pwd)
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE
export XDG_CONFIG_HOME="$T/config"

expect 0 init
expect 0 todo category add work --name Work
expect 0 todo category add home
expect 0 todo add work "Write the report" --priority high
R=$OUT
is '.category_id == "work"'
task=$(printf '%s' "$OUT" | jq -r .task_id)
expect 0 todo add home "Fix the sink"
other=$(printf '%s' "$OUT" | jq -r .task_id)
# A category that is not there is an error, not an empty list (a typo would read as "no tasks").
expect 3 todo list wrok
has "$ERR" 'no category "wrok"'
expect 0 todo list home --json
R=$OUT
is '.tasks | length == 1'
# A task or a category that is not there exits 3 everywhere, as a missing thing does in every
# command (docs/cli.md), one line naming it; a bad value stays 2.
for cmd in "edit task-nope --title x" "item add task-nope x" "item done task-nope item-x" \
  "conclude task-nope" "rate task-nope 3" "agent task-nope" "delete task-nope" "show task-nope" \
  "add nosuch x" "list nosuch"; do
  expect 3 todo $cmd
  [ "$(printf '%s\n' "$ERR" | wc -l)" = 1 ] && ok || bad "todo $cmd: one line, got: $ERR"
done
expect 2 todo edit "$task" --priority sky
expect 0 todo agent "$task"
agent=$OUT
# one task agent a task
expect 4 todo agent "$task"
has "$ERR" "exists"
# ... also when four processes make one at once: one is made, the others refused (exit 4).
# proves: S3-059
expect 0 todo add home "Water the plants"
plants=$(printf '%s' "$OUT" | jq -r .task_id)
for i in 1 2 3 4; do
  "$VIGIL" todo agent "$plants" >"$T/race$i.out" 2>&1 &
done
codes=""
for p in $(jobs -p); do
  wait "$p" && codes="$codes 0" || codes="$codes $?"
done
made=$(printf '%s\n' $codes | grep -c '^0$')
[ "$made" = 1 ] && ok || bad "concurrent todo agent: exit statuses$codes, expected one 0"
[ "$(printf '%s\n' $codes | grep -c '^4$')" = 3 ] && ok || bad "the others: $codes (want 4)"
expect 0 agent list --json
R=$OUT
is '[.items[] | select(.name == "task '"$plants"'")] | length == 1'
# A task's agent, looked up by the task: shown when it has one, absent when not.
# proves: S3-060
expect 0 todo show "$task"
R=$OUT
is '.agent.id == "'"$agent"'" and .agent.lifecycle == "created"'
expect 0 todo show "$other"
R=$OUT
is 'has("agent") | not'
# The tools it sees: the task tools, and nothing of another category reaches it.
expect 0 tool list "$agent"
has "$OUT" "update_task_estimate"

sed "s/TASK_ID/$task/g" "$here/examples/todo/task-agent.json" >"$T/cassette.json"
export VIGIL_MODEL_CASSETTE="$T/cassette.json"
# The person edits the task: the agent wakes in this process and acts.
expect 0 todo item add "$task" outline draft
has "$ERR" "ran 1 wake"
expect 0 todo show "$task"
R=$OUT
is '.estimate_minutes == 90'
is '(.checklist | length) == 2'
expect 0 agent show "$agent" --json
R=$OUT
is '.report.markdown | contains("estimate to 90 minutes")'
# Its own edit of the task (the estimate) queued no wake.
expect 0 wakes --agent "$agent" --json
R=$OUT
is 'length == 1'
is '.[0].status == "completed"'
# Out of its category: refused by the gate, the home task unchanged.
expect 10 tool call "$agent" set_task_title "{\"task_id\":\"$other\",\"title\":\"mine now\"}"
has "$ERR$OUT" "out_of_scope"
expect 0 todo show "$other"
R=$OUT
is '.title == "Fix the sink"'
# The agent's wake, captured as a scenario, replays as it ran (docs/eval.md): the task tools
# name their target, so the capture gives each target the scope it has (CATEGORY/TASK);
# without that the replay's gate would refuse every task tool out_of_scope.
expect 0 wakes --agent "$agent" --json
wake_key=$(printf '%s' "$OUT" | jq -r '.[0].run_key')
expect 0 eval capture "$wake_key"
printf '%s\n' "$OUT" >"$T/captured-wake.json"
R=$OUT
is ".entities == {\"$task\": \"work/$task\"}"
is '.expect.calls == ["get_task succeeded", "update_task_estimate succeeded", "set_report succeeded", "record_observations succeeded"]'
# The model's answers as the run had them: the report and the observations asked for together
# stay one exchange, so the replay takes the run's 4 model turns, within the task agent's 5.
is '(.exchanges | length) == 4 and (.exchanges[2].response.tool_calls | map(.name)) == ["set_report", "record_observations"]'
# The wake says what changed and who changed it: person.OPERATION beside the ids.
is '.turns[0] | tostring | contains("person.add_multiple_checklist_items")'
expect 0 eval "$T/captured-wake.json"
has "$OUT" "PASS  captured from run"
# Under the daemon: a second task and its agent; the person's edit queues the wake for the
# daemon, whose worker runs it with the domain's tools (on_runtime).
expect 0 todo add work "Plan the offsite"
task2=$(printf '%s' "$OUT" | jq -r .task_id)
expect 0 todo agent "$task2"
agent2=$OUT
sed "s/TASK_ID/$task2/g" "$here/examples/todo/task-agent.json" >"$T/cassette2.json"
export VIGIL_MODEL_CASSETTE="$T/cassette2.json"
"$VIGIL" serve --workers 1 --poll-ms 20 >"$T/serve.log" 2>&1 &
D=$!
trap 'kill -9 $D 2>/dev/null || true' EXIT
wait_for grep -q "serving" "$T/serve.log" || bad "the daemon did not start: $(cat "$T/serve.log")"
expect 0 todo item add "$task2" venue catering
has "$ERR" "queued for the running daemon"
estimated() { "$VIGIL" todo show "$task2" | jq -e '.estimate_minutes == 90'; }
wait_for estimated || bad "the daemon's run did not set the estimate: $(cat "$T/serve.log")"
expect 0 agent show "$agent2" --json
R=$OUT
is '.report.markdown | contains("estimate to 90 minutes")'
kill -TERM $D
wait $D 2>/dev/null || true
# Over the HTTP API of `vigil serve --listen`: a chat turn with a third task's agent calls the
# domain's tools too, and so does a tool call by hand (the API's runtimes get on_runtime as the
# workers' do; without it both were unknown_tool and the estimate stayed unset).
expect 0 todo add work "Book the train"
task3=$(printf '%s' "$OUT" | jq -r .task_id)
expect 0 todo agent "$task3"
agent3=$OUT
sed "s/TASK_ID/$task3/g" "$here/examples/todo/task-agent.json" >"$T/cassette3.json"
export VIGIL_MODEL_CASSETTE="$T/cassette3.json"
serve_http --workers 1
api() {
  curl -sS -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    --data-binary "$2" "http://127.0.0.1:$PORT/v1/agents/$agent3/$1"
}
R=$(api chat '{"text":"Plan this task."}')
is '.reply == "Report updated." and .tool_calls == 4'
run3=$(printf '%s' "$R" | jq -r .run_id)
R=$(api tools/get_task/call "{\"arguments\":{\"task_id\":\"$task3\"}}")
is '.result.title == "Book the train"'
serve_stop
expect 0 todo show "$task3"
R=$OUT
is '.estimate_minutes == 90'
expect 0 runs tools "$run3" --json
R=$OUT
is '[.items[].status] == ["succeeded","succeeded","succeeded","succeeded"]'
# Concluding carries the open items to a follow-up, retires the task's agent (dormant, its
# report kept) and hands the follow-up to an agent of its own, allowed that task alone.
expect 0 todo conclude "$task"
R=$OUT
is '(.moved_item_ids | length) == 2'
is '.follow_up_task_id != null'
follow=$(printf '%s' "$OUT" | jq -r .follow_up_task_id)
has "$ERR" "agent \"task $task\" is dormant: its task $task is done"
has "$ERR" "agent \"task $follow\" is created: looks after $follow, the follow-up of $task"
expect 0 agent show "$agent" --json
R=$OUT
is '.agent.lifecycle == "dormant" and (.agent.lifecycle_reason | contains("is done"))'
is '.report.markdown | contains("estimate to 90 minutes")'
expect 0 todo show "$follow"
R=$OUT
is ".agent.name == \"task $follow\""
follow_agent=$(printf '%s' "$OUT" | jq -r .agent.id)
expect 0 agent show "$follow_agent" --json
R=$OUT
is ".agent.config.allowed_scopes == [\"work/$follow\"]"
# A watched task deleted: its agent turns dormant, with the reason, before the change (so its
# wake is skipped, not run on a task that is gone); the task is kept but out of every read and
# tool; restored, the task is as it was and the agent active again, woken to look at it.
# proves: S3-077
expect 0 todo delete "$task2"
has "$ERR" "is dormant: its task $task2 was deleted"
expect 0 agent show "$agent2" --json
R=$OUT
is '.agent.lifecycle == "dormant" and (.agent.lifecycle_reason | contains("was deleted"))'
is '.report.markdown | contains("estimate to 90 minutes")'
expect 3 todo show "$task2"
expect 0 todo list work --json
R=$OUT
is '[.tasks[].task_id] | index("'"$task2"'") == null'
expect 10 tool call "$agent2" get_task '{"task_id":"'"$task2"'"}'
has "$OUT" '"error_code": "out_of_scope"'
expect 0 wakes --agent "$agent2" --json
R=$OUT
is '.[0].status == "skipped"'
expect 3 todo delete "$task2"
has "$ERR" "no task"
expect 0 todo restore "$task2"
has "$ERR" "is active: its task $task2 is back"
expect 0 todo show "$task2"
R=$OUT
is '.estimate_minutes == 90 and (.checklist | length) == 2'
expect 0 agent show "$agent2" --json
R=$OUT
is '.agent.lifecycle == "active"'
expect 2 todo restore "$task2"
has "$ERR" "no deleted task"
finish
