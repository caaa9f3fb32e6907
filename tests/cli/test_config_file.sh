#!/usr/bin/env bash
# One config file covers what seed 004's config.toml did, each setting taking effect where it
# is used, and the environment overrides it for secrets and per-run choices: the database
# (`store:`, where `vigil init` puts the store), the model (provider and cassette), the embedder,
# the agent limits (max_tool_rounds ends a turn after that many tool rounds; max_code_size,
# code_timeout and max_tool_calls_per_exec are the sandbox's code_bytes, wall_ms and tool_calls;
# context_budget), the sandbox's working directory (sandbox.root: an agent's files beneath it)
# and the hosts its programs may fetch (sandbox.fetch.allow_hosts). An API key is taken from
# the environment only: a file holding one is refused. proves: S4-060
source "$(dirname "$0")/lib.sh" "$1"
unset VIGIL_STORE VIGIL_MODEL_PROVIDER VIGIL_MODEL_CASSETTE VIGIL_MODEL OPENAI_API_KEY
export XDG_CONFIG_HOME="$T/xdg" XDG_DATA_HOME="$T/data"
export VIGIL_CONFIG="$T/config.yaml"
mkdir -p "$T/sbx"
cat >"$T/rounds.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"r1","name":"memory_list","arguments":{}}]}},
 {"response":{"tool_calls":[{"id":"r2","name":"memory_list","arguments":{}}]}},
 {"response":{"tool_calls":[{"id":"r3","name":"memory_list","arguments":{}}]}},
 {"response":{"text":"done after two rounds"}}]}
JSON
cat >"$VIGIL_CONFIG" <<YAML
store: $T/from-config.db
model:
  provider: scripted
  cassette: $T/rounds.json
embed:
  provider: builtin
agent:
  max_tool_rounds: 2
  max_code_size: 200
  code_timeout: 60000
  max_tool_calls_per_exec: 1
  context_budget: 0.8
sandbox:
  root: $T/sbx
  fetch:
    allow_hosts: [api.example.com]
YAML

# the database: the store is where the file says
expect 0 init
[ -f "$T/from-config.db" ] && ok || bad "no store at the config's store: path"
expect 0 agent create --name Limited --config '{"tools":["memory_*","execute_code"],"capabilities":["code_execution"]}'
id=$OUT

# the model and the agent's tool rounds: two rounds, then the turn ends
expect 0 chat "$id" -m "list your memory, again and again" --json
R=$OUT
is '.stop_reason == "max_tool_rounds" and .end == "hard_stopped"'
is '.scripted == true'

# the environment overrides the file (a per-run choice here; secrets come only from it)
cat >"$T/other.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[{"response":{"text":"the environment's cassette"}}]}
JSON
VIGIL_MODEL_CASSETTE="$T/other.json" expect 0 chat "$id" -m "hello" --json
R=$OUT
is '.reply == "the environment'"'"'s cassette" and .end == "completed"'

# the code limits: code_bytes, tool calls per execution (code_timeout, wall_ms, is read with
# them; tests/sandbox covers the kill at the wall time)
head -c 300 /dev/zero | tr '\0' '-' >"$T/long.lua"
expect 2 sandbox run "$T/long.lua" --agent "$id"
has "$ERR" "code_too_large"
printf 'vigil.call("memory_list", {})\nreturn vigil.call("memory_list", {})\n' >"$T/two.lua"
expect 1 sandbox run "$T/two.lua" --agent "$id" --json
R=$OUT
is '.error.code == "tool_limit"'
# the working directory: beneath sandbox.root, the agent's own
printf 'vigil.write("note.txt", "kept")\nreturn vigil.read("note.txt")\n' >"$T/write.lua"
expect 0 sandbox run "$T/write.lua" --agent "$id"
[ "$(cat "$T/sbx/$id/note.txt" 2>/dev/null)" = kept ] && ok || bad "no note.txt under sandbox.root/$id"
# the hosts a program may fetch: any other is refused, naming allow_hosts
printf 'local ok, e = pcall(vigil.fetch, "https://elsewhere.example.org/")\nreturn e\n' >"$T/fetch.lua"
expect 0 sandbox run "$T/fetch.lua" --agent "$id" --json
R=$OUT
is '.result.code == "denied" and (.result.message | test("not on sandbox.fetch.allow_hosts"))'

# secrets: an API key in the file is refused; the environment's is the one
printf 'model:\n  provider: openai\n  api_key: sk-in-the-file\n' >"$T/secret.yaml"
VIGIL_CONFIG="$T/secret.yaml" expect 2 chat "$id" -m hi
has "$ERR" "environment"
finish
