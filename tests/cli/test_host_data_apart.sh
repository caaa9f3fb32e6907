#!/usr/bin/env bash
# End-to-end: agent-domain data is pruned, erased, and reset entirely (the store deleted and made
# again) without changing or breaking the host's data: the reference task domain's tasks.db
# keeps every byte and every task, and a new task agent works on it after the reset
# (docs/storage.md, "Host data is never touched"; docs/todo.md, "Where it lives").
# proves: S0-007
set -e
source "$(dirname "$0")/lib.sh" "$1"
here=$(cd "$(dirname "$0")/../.." && pwd)
export VIGIL_MODEL_PROVIDER=scripted
export VIGIL_CONFIG="$T/config.yaml"
echo '{}' >"$T/config.yaml"

expect 0 init
expect 0 todo category add work
expect 0 todo add work "Write the report"
task=$(printf '%s' "$OUT" | jq -r .task_id)
expect 0 todo agent "$task"
agent=$OUT
sed "s/TASK_ID/$task/g" "$here/examples/todo/task-agent.json" >"$T/cassette.json"
export VIGIL_MODEL_CASSETTE="$T/cassette.json"
# The person's edit wakes the agent, which writes the task (its estimate) and its report.
expect 0 todo item add "$task" outline draft
has "$ERR" "ran 1 wake"
# What the host holds now: its tasks as a person reads them, and the file's bytes.
host_view() {
  "$VIGIL" todo show "$task" | jq -S 'del(.agent)'
  "$VIGIL" todo list work --all --json | jq -S .
}
host_view >"$T/host.before"
grep -q '"estimate_minutes": 90' "$T/host.before" || bad "the agent did not set the estimate"
sum_before=$(sha256sum "$T/tasks.db" | cut -d' ' -f1)
host_same() {
  host_view >"$T/host.after"
  cmp -s "$T/host.before" "$T/host.after" && ok ||
    bad "$1 changed the host's tasks: $(diff "$T/host.before" "$T/host.after")"
  [ "$(sha256sum "$T/tasks.db" | cut -d' ' -f1)" = "$sum_before" ] && ok ||
    bad "$1 changed the bytes of tasks.db"
}

# Pruned: every class past a time to live of 0s.
cat >"$T/config.yaml" <<'YAML'
retention:
  trace: 0s
  action: 0s
  report: 0s
  summary: 0s
  runtime: 0s
YAML
expect 0 prune --vacuum
host_same "vigil prune"
# Erased: the agent and all of its records.
expect 0 agent erase "$agent"
has "$OUT" "erased"
host_same "vigil agent erase"
# Reset entirely: the agent store deleted and made again.
rm -f "$T/vigil.db" "$T/vigil.db-wal" "$T/vigil.db-shm"
expect 0 init
host_same "deleting the agent store"
# Nothing of the host broke: a new task agent works on the same task.
expect 0 todo agent "$task"
expect 0 todo item add "$task" review
has "$ERR" "ran 1 wake"
expect 0 todo show "$task"
R=$OUT
is '(.checklist | length) == 3'
finish
