#!/usr/bin/env bash
# The quick start story, on embedded defaults: a SQLite store in a fresh temporary folder, the
# built-in offline embedder, and — when no model provider is configured — the scripted model,
# which replays the hand-written cassettes in examples/quickstart/ and says so on screen.
# Usage: examples/quickstart.sh PATH-TO-vigil
# Every step is a separate `vigil` process: what the agent knows in a later step, it read back
# from the store.
set -euo pipefail
vigil=${1:-vigil}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/vigil-quickstart.XXXXXX")
export VIGIL_STORE="$work/vigil.db"
# execute_code keeps each agent's files under sandbox.root (docs/sandbox.md)
export VIGIL_CONFIG="$work/config.yaml"
printf 'sandbox:\n  root: %s/sandbox\n' "$work" > "$VIGIL_CONFIG"
scripted=0
if [ -z "${VIGIL_MODEL_PROVIDER:-}" ]; then
  export VIGIL_MODEL_PROVIDER=scripted
  scripted=1
fi

if [ -t 1 ]; then # bold only on a terminal: a file or a pipe gets the plain text
  b() { printf '\n\033[1m%s\033[0m\n' "$*"; }
else
  b() { printf '\n%s\n' "$*"; }
fi
step() { b "\$ vigil $*"; "$vigil" "$@"; }
say() { printf '\n# %s\n' "$*"; }
cassette() { [ "$scripted" -eq 1 ] && export VIGIL_MODEL_CASSETTE="$here/quickstart/$1" || true; }
json_field() { sed -n "s/.*\"$1\": \"\([^\"]*\)\".*/\1/p" | head -n 1; }

echo "vigil quick start: store at $VIGIL_STORE"
if [ "$scripted" -eq 1 ]; then
  echo "model: the SCRIPTED provider (no provider configured): replies are replayed from"
  echo "examples/quickstart/*.json, not generated. Set VIGIL_MODEL_PROVIDER to use a real model."
fi
step init
id=$("$vigil" agent create --name "Pal" --kind assistant \
  --config '{"tools":["memory_*","set_report","record_observations","execute_code"],"capabilities":["code_execution"]}')
b "\$ vigil agent create --name Pal --config '{\"tools\":[\"memory_*\",...,\"execute_code\"],\"capabilities\":[\"code_execution\"]}'"
echo "$id"

say "a personal agent: its core memory is seeded from the default persona on its first run"
cassette 1-introduce.json
step chat "$id" -m "Hi! I'm Ada. My 2.0 release ships Friday; the signing key is the last blocker."
step memory list "$id"

say "the 'familiar' block holds what the agent knows about you: it may not change it alone"
step memory pending --agent "$id"
pending=$("$vigil" memory pending --agent "$id" --json | json_field id)

say "a new process, a new turn: the agent recalls the release from memory (memory_read)"
cassette 2-recall.json
step chat "$id" -m "When does my release ship?"
run=$("$vigil" runs list --agent "$id" --limit 1 --json | json_field run_id)
say "what the recall really returned (memory_read over the store), from the run's journal:"
step runs tools "$run"
tool=$("$vigil" runs tools "$run" --json | json_field tool_call_id)
step runs tool "$tool"

say "the agent writes and runs a program (execute_code, a confined Lua sandbox): it reads its"
say "memory through the tool bridge, computes, and saves the answer in its working directory"
cassette 3-compute.json
step chat "$id" -m "How many days until my release? Work it out with a small program and save it."
run=$("$vigil" runs list --agent "$id" --limit 1 --json | json_field run_id)
step runs tools "$run"
echo "saved: $(cat "$work/sandbox/$id/release.txt")"

say "approve the pending change; the agent is told on its next turn"
step memory approve "$pending"
step memory show "$id" familiar
step memory history "$id" familiar

say "every run is journaled and replayable"
step runs list --agent "$id"
step replay "$run"

say "lifecycle: pause, resume, destroy, delete"
step agent pause "$id" --reason "done for today"
step agent resume "$id"
step agent destroy "$id" --reason "quick start finished"
step agent delete "$id"
say "a task agent on the task domain (docs/todo.md): it looks after one task and wakes when"
say "the task changes; its tools reach the task's category only"
step todo category add work
b "\$ vigil todo add work \"Write the report\""
task=$("$vigil" todo add work "Write the report" | tee /dev/stderr | json_field task_id)
b "\$ vigil todo agent $task"
keeper=$("$vigil" todo agent "$task")
echo "$keeper"
if [ "$scripted" -eq 1 ]; then # the cassette names the task: its id is made here
  sed "s/TASK_ID/$task/g" "$here/todo/task-agent.json" >"$work/task-agent.json"
  export VIGIL_MODEL_CASSETTE="$work/task-agent.json"
fi
say "a person edits the task: the agent wakes (here, no daemon runs), reads it, sets an estimate"
step todo item add "$task" outline draft
step todo show "$task"
say "its report, read back without a model call"
step agent show "$keeper"
echo
echo "quick start done. Store: $VIGIL_STORE"
