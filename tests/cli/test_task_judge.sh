#!/usr/bin/env bash
# End-to-end: how the dispatcher picks an agent, from the command line (docs/orchestration.md,
# "Picking the agent"). Manifests give agents tags; `vigil task add --tag` needs them; when the
# rules tie, the judge model the config names (`dispatch.judge_model`) is asked, here the
# scripted provider answering from a cassette, and its answer is recorded in the task
# (`vigil task show`). The daemon then runs the tasks on the agents picked. The waits poll the
# store; no assertion depends on timing.
source "$(dirname "$0")/lib.sh" "$1"
unset VIGIL_WAKE_RUNNER VIGIL_MODEL_CASSETTE VIGIL_DISPATCH_JUDGE_MODEL
export VIGIL_MODEL_PROVIDER=scripted
PID=
cleanup() { [ -z "$PID" ] || kill -9 "$PID" 2>/dev/null || true; }
trap cleanup EXIT
sql() { sqlite3 -cmd ".timeout 5000" "$VIGIL_STORE" "$1"; }
id_of() { sed 's/.*"id": "\([^"]*\)".*/\1/'; }

"$VIGIL" init >/dev/null || bad "init"
mkdir "$T/m"
for n in alpha beta; do
  printf 'name: %s\nkind: worker\nprompt: "%s handles general work."\n' "$n" "$n" >"$T/m/$n.yaml"
done
printf 'name: gpu1\nkind: worker\ntags: [gpu, big]\nprompt: "Runs on the GPU box."\n' >"$T/m/gpu1.yaml"
"$VIGIL" agent apply "$T/m" >/dev/null || bad "apply"
printf 'name: t\ntags: ["Not OK"]\n' >"$T/badtag.yaml"
expect 2 agent apply "$T/badtag.yaml"
has "$ERR" "tags"
ALPHA=$(sql "select id from records_text where kind='agent' and json_extract(body,'$.name')='alpha'")
BETA=$(sql "select id from records_text where kind='agent' and json_extract(body,'$.name')='beta'")
GPU=$(sql "select id from records_text where kind='agent' and json_extract(body,'$.name')='gpu1'")

# Tags: only gpu1 holds gpu; a tag nobody holds waits ready; a bad tag is refused, exit 2.
G=$("$VIGIL" task add --title "train" --kind worker --tag gpu --json | id_of)
N=$("$VIGIL" task add --title "quantum" --kind worker --tag qpu --json | id_of)
expect 2 task add --title x --tag "Bad Tag"
has "$ERR" "invalid tag"
expect 0 task show "$G"
has "$OUT" "tags:       gpu"

# The judge: alpha and beta tie for an untagged task (gpu1 is busy with the first), and the
# cassette's answer names beta (the rules alone would take the first by id).
cat >"$T/cassette.json" <<EOF
{"vigil_cassette": 1, "exchanges": [{"response": {"text": "beta fits best"}}]}
EOF
cat >"$T/config.yaml" <<EOF
dispatch:
  judge_model: cheap-model
model:
  provider: scripted
  cassette: $T/cassette.json
EOF
export VIGIL_CONFIG="$T/config.yaml"
J=$("$VIGIL" task add --title "write the report" --kind worker --json | id_of)
expect 0 task dispatch --slots 3
expect 0 task show "$G" --json
R=$OUT
is ".agent == \"$GPU\""
expect 0 task show "$N"
has "$OUT" "status:     ready"
expect 0 task show "$J" --json
R=$OUT
is ".agent == \"$BETA\""
is '.judgement.model == "cheap-model" and .judgement.text == "beta fits best"'
is '(.judgement.candidates | length) == 2 and (.selection | startswith("judge"))'
expect 0 task show "$J"
has "$OUT" "judgement:  chose $BETA (model cheap-model, 2 candidates)"
expect 0 task list --json
R=$OUT
is "map(select(.id == \"$J\"))[0].judgement.agent == \"$BETA\""

# A config key the dispatch section does not know is refused, naming the section.
printf 'dispatch:\n  judge: x\n' >"$T/bad.yaml"
VIGIL_CONFIG="$T/bad.yaml" expect 2 chat alpha -m hi
has "$ERR" 'unknown key "judge" under dispatch'
unset VIGIL_CONFIG

# The daemon runs them where they were sent (the echo model: no cassette for the runs).
"$VIGIL" serve --workers 1 --poll-ms 20 >>"$T/serve.log" 2>&1 &
PID=$!
done_tasks() { [ "$(sql "select count(*) from records_text where kind='task' and k1='done'")" -ge 2 ]; }
wait_for done_tasks || bad "the tasks did not finish: $(cat "$T/serve.log")"
kill -TERM "$PID"
wait "$PID" 2>/dev/null
PID=
expect 0 runs list --agent "$BETA" --json
R=$OUT
is '(.items | length) == 1 and .items[0].wake_reason == "task"'
expect 0 runs list --agent "$ALPHA" --json
R=$OUT
is '(.items | length) == 0'
finish
