#!/usr/bin/env bash
# End-to-end: `vigil agent apply` creates and updates agents from manifests by name, prints what
# changes, writes nothing on --dry-run or when nothing changed; `vigil agent export` writes a
# manifest that applies back to the same agent; a manifest's limits end its runs; a command tool
# declared in a manifest runs under the scripted provider, its secret read from the environment
# at call time and found nowhere in the store or the export.
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE
printf 'model:\n  provider: scripted\n' >"$T/config.yaml"
export VIGIL_CONFIG="$T/config.yaml"
# The store's bytes, after a read-only command has let SQLite settle its files (a checkpoint on
# close is not a write of apply's).
store_sum() { "$VIGIL" agent list >/dev/null && cat "$VIGIL_STORE"* 2>/dev/null | sha256sum; }

expect 0 init
mkdir "$T/m"
cat >"$T/m/helper.yaml" <<'YAML'
name: helper
kind: helper
mode: autonomous
prompt: You help.
tools: [set_report, "memory_*", lookup]
limits: {max_steps: 5, max_tool_rounds: 1}
memory:
  - {label: notes, content: start here, tier: core, permission: read_write}
timers:
  - {cron: "0 7 * * *", tz: Europe/Paris}
subscriptions:
  - {tokens: ["task:changed"]}
command_tools:
  lookup:
    command: [sh, -c, 'read -r in; printf "{\"key_len\": %d, \"other\": \"%s\", \"dir\": \"%s\", \"in\": %s}" "$${#API_KEY}" "$${OTHER_SECRET:-unset}" "$(pwd)" "$in"']
    cwd: /tmp
    env: {API_KEY: "${LOOKUP_KEY}"}
    description: Look a word up
    input_schema: {type: object, properties: {q: {type: string}}, required: [q]}
    mutating: false
    idempotency: idempotent
    risk: low
mcp_servers:
  docs: {url: "https://example.invalid/mcp", headers: {Authorization: "Bearer ${DOCS_TOKEN}"}}
YAML
cat >"$T/m/second.json" <<'JSON'
{"name": "second", "prompt": "Second.", "tools": ["set_report"], "limits": {"max_steps": 2}}
JSON

# --dry-run prints what would happen and writes nothing.
before=$(store_sum)
expect 0 agent apply "$T/m" --dry-run
has "$OUT" 'would create agent "helper"'
has "$OUT" 'would create agent "second"'
[ "$(store_sum)" = "$before" ] && passed=$((passed + 1)) || { echo "FAIL: dry run wrote"; fail_count; }
expect 0 agent list --json
has "$OUT" '"items": []'

# Create, then a second apply: unchanged, nothing written.
expect 0 agent apply "$T/m" --json
has "$OUT" '"action":"created"'
id=$(printf '%s\n' "$OUT" | sed -n 's/.*"id":"\([^"]*\)","memory_kept":\[\],"name":"helper".*/\1/p')
[ -n "$id" ] && passed=$((passed + 1)) || { echo "FAIL: no id for helper in $OUT"; fail_count; }
before=$(store_sum)
expect 0 agent apply "$T/m"
has "$OUT" 'unchanged agent "helper"'
has "$OUT" 'unchanged agent "second"'
[ "$(store_sum)" = "$before" ] && passed=$((passed + 1)) || { echo "FAIL: unchanged apply wrote"; fail_count; }
expect 0 agent apply "$T/m/helper.yaml" --json
has "$OUT" "{\"action\":\"unchanged\",\"changes\":[],\"dry_run\":false,\"file\":\"$T/m/helper.yaml\",\"id\":\"$id\",\"memory_kept\":[],\"name\":\"helper\"}"

# The manifest's effects: memory seed, timer, subscription.
expect 0 memory list "$id"
has "$OUT" "notes"
expect 0 timer list --agent "$id"
has "$OUT" "Europe/Paris"
# The AGENT column names the agent as it was given (trial G12: its id alone before).
agent_column_is() { # LIST_ROW_NEEDLE: the row holding it has the name in the AGENT column
  printf '%s\n' "$OUT" | grep "$1" | awk '{print $2}' | grep -qx helper && ok ||
    bad "the AGENT column of \"$1\" is not the name: $OUT"
}
agent_column_is "Europe/Paris"
expect 0 subscription list
has "$OUT" "task:changed"
agent_column_is "task:changed"
expect 0 timer list --agent "$id" --json
has "$OUT" '"agent_name": "helper"'
has "$OUT" "\"agent_id\": \"$id\""
expect 0 subscription list --json
has "$OUT" '"agent_name": "helper"'

# Update by name: only what changed is named.
sed -i 's/^prompt: You help./prompt: You help a lot./' "$T/m/helper.yaml"
expect 0 agent apply "$T/m/helper.yaml" --dry-run
has "$OUT" "would update agent \"helper\" ($id): prompt"
expect 0 agent apply "$T/m/helper.yaml"
has "$OUT" "updated agent \"helper\" ($id): prompt"
expect 0 agent show "$id" --json
has "$OUT" '"prompt": "You help a lot."'

# Export applies back to the same agent, unchanged; into a fresh store it makes the same agent.
expect 0 agent export "$id"
printf '%s\n' "$OUT" >"$T/export.yaml"
has "$OUT" 'API_KEY: "${LOOKUP_KEY}"'
expect 0 agent apply "$T/export.yaml"
has "$OUT" "unchanged agent \"helper\" ($id)"
VIGIL_STORE="$T/other.db" expect 0 init
VIGIL_STORE="$T/other.db" expect 0 agent apply "$T/export.yaml" --json
id2=$(printf '%s\n' "$OUT" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
VIGIL_STORE="$T/other.db" expect 0 agent export "$id2"
[ "$OUT" = "$(cat "$T/export.yaml")" ] && passed=$((passed + 1)) || { echo "FAIL: export differs after a round trip"; fail_count; }

# Invalid manifests: every problem with file:line:column; nothing applied.
cat >"$T/bad.yaml" <<'YAML'
name: bad
tools: ["memory_["]
limits:
  max_steps: ten
  retries: 3
timers:
  - cron: "61 * * * *"
YAML
expect 2 agent apply "$T/bad.yaml"
has "$ERR" "$T/bad.yaml:2:9: /tools/0: bad glob"
has "$ERR" "$T/bad.yaml:4:14: /limits/max_steps: expected integer, got string" # the value
has "$ERR" "$T/bad.yaml:5:3: unknown key \"retries\"" # the key
has "$ERR" "$T/bad.yaml:7:11: /timers/0/cron: bad cron schedule"
has "$ERR" "vigil: 4 problems in the manifests (above); nothing was applied"
printf 'name: broken\ntools: [a, b\n' >"$T/syntax.yaml"
expect 2 agent apply "$T/syntax.yaml"
has "$ERR" "$T/syntax.yaml:2:8: malformed YAML: flow sequence without a closing bracket" # the [
one_line "$ERR" # one problem: said once, in the error line
printf 'model: [unclosed' >"$T/c5.yaml" # the config file too: the [ on line 1, not past the end
VIGIL_CONFIG="$T/c5.yaml" expect 2 chat Pal -m hi
has "$ERR" "c5.yaml\" at line 1, column 8: flow sequence without a closing bracket"
one_line "$ERR" # one problem: said once, in the error line
mkdir "$T/dup"
printf 'name: twin\n' >"$T/dup/a.yaml"
printf '{"name": "twin"}' >"$T/dup/b.json"
expect 2 agent apply "$T/dup"
has "$ERR" "$T/dup/b.json:1:10: /name: agent name \"twin\" is already used by $T/dup/a.yaml"
expect 0 agent list
case "$OUT" in *twin*) echo "FAIL: a bad directory was partly applied"; fail_count ;; *) passed=$((passed + 1)) ;; esac
expect 3 agent apply "$T/none.yaml"
one_line "$ERR"
# Several files at once (trial L11): all applied together; a bad one among them applies none,
# and a name in two of them is an error as in one directory.
printf 'name: extractor\nkind: extract\n' >"$T/ex1.yaml"
printf 'name: extractor2\nkind: extract\n' >"$T/ex2.yaml"
printf 'name: analyst\nkind: analyse\ntools: ["memory_["]\n' >"$T/an.yaml"
expect 2 agent apply "$T/ex1.yaml" "$T/ex2.yaml" "$T/an.yaml"
has "$ERR" "$T/an.yaml:3:9: /tools/0: bad glob"
expect 0 agent list
case "$OUT" in *extractor*) echo "FAIL: a bad file among several let the others apply"; fail_count ;; *) passed=$((passed + 1)) ;; esac
expect 2 agent apply "$T/ex1.yaml" "$T/dup/a.yaml" "$T/ex1.yaml"
has "$ERR" "agent name \"extractor\" is already used by $T/ex1.yaml"
printf 'name: analyst\nkind: analyse\n' >"$T/an.yaml"
expect 0 agent apply "$T/ex1.yaml" "$T/ex2.yaml" "$T/an.yaml"
has "$OUT" 'created agent "extractor" ('
has "$OUT" 'created agent "extractor2" ('
has "$OUT" 'created agent "analyst" ('
has "$OUT" "[$T/an.yaml]"
expect 0 agent apply "$T/ex2.yaml" "$T/dup/a.yaml" --dry-run --json
has "$OUT" '"action":"unchanged"'
has "$OUT" '"action":"created"'
has "$OUT" '"name":"twin"'
expect 3 agent apply "$T/ex1.yaml" "$T/none.yaml"
one_line "$ERR"
expect 3 agent export 00000000-0000-7000-8000-000000000000

# The declared command tool: secret from the environment at call time, minimal environment,
# working directory; called by hand and by the model; the result is journaled.
export LOOKUP_KEY=s3cr3t-Value-42 OTHER_SECRET=not-for-tools
expect 0 tool call "$id" lookup '{"q": "vigil"}'
has "$OUT" '"key_len": 15'
has "$OUT" '"other": "unset"'
has "$OUT" '"dir": "/tmp"'
cat >"$T/lookup.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"c1","name":"lookup","arguments":{"q":"word"}}]}},
 {"response":{"text":"Looked it up."}}]}
JSON
VIGIL_MODEL_CASSETTE="$T/lookup.json" expect 0 chat "$id" -m "look up word" --json
has "$OUT" '"tool_calls": 1'
expect 0 runs list --agent "$id" --json --limit 1
run=$(printf '%s' "$OUT" | sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' | head -n 1)
expect 0 runs tools "$run" --json
has "$OUT" '"lookup"'
tc=$(printf '%s' "$OUT" | sed -n 's/.*"tool_call_id": "\([^"]*\)".*/\1/p' | head -n 1)
expect 0 runs tool "$tc"
has "$OUT" 'key_len'
# A secret not set is the user's to fix: not_configured, EINVAL, exit 2 (not an internal error).
# (Not in a subshell: its failures would not be counted.)
unset LOOKUP_KEY
expect 2 tool call "$id" lookup '{"q": "again"}'
has "$ERR" "LOOKUP_KEY, which is not set"
has "$OUT$ERR" "not_configured"
export LOOKUP_KEY=s3cr3t-Value-42
for f in "$VIGIL_STORE"* "$T/export.yaml"; do
  if grep -q 's3cr3t-Value-42' "$f"; then echo "FAIL: the secret is in $f"; fail_count; else passed=$((passed + 1)); fi
done

# Limits: max_tool_rounds 1 ends a run the cassette would carry on for three rounds.
cat >"$T/rounds.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"r1","name":"lookup","arguments":{"q":"a"}}]}},
 {"response":{"tool_calls":[{"id":"r2","name":"lookup","arguments":{"q":"b"}}]}},
 {"response":{"tool_calls":[{"id":"r3","name":"lookup","arguments":{"q":"c"}}]}},
 {"response":{"text":"done"}}]}
JSON
VIGIL_MODEL_CASSETTE="$T/rounds.json" expect 0 chat "$id" --session limits -m "go" --json
has "$OUT" '"stop_reason": "max_tool_rounds"'
has "$OUT" '"steps": 2'
# Raised in the manifest, the same cassette runs to its end.
sed -i 's/max_tool_rounds: 1}/max_tool_rounds: 10}/' "$T/m/helper.yaml"
expect 0 agent apply "$T/m/helper.yaml"
has "$OUT" "updated agent \"helper\" ($id): limits"
VIGIL_MODEL_CASSETTE="$T/rounds.json" expect 0 chat "$id" --session limits2 -m "go" --json
has "$OUT" '"end": "completed"'
has "$OUT" '"tool_calls": 3'
# max_steps 2 (agent "second"): the third model call never happens.
id3=$("$VIGIL" agent list --json | sed -n 's/.*"id": "\([^"]*\)".*/\1/p' | while read -r a; do
  "$VIGIL" agent show "$a" --json | grep -q '"name": "second"' && echo "$a"; done | head -n 1)
cat >"$T/steps.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"s1","name":"set_report","arguments":{"scope":"current","markdown":"one"}}]}},
 {"response":{"tool_calls":[{"id":"s2","name":"set_report","arguments":{"scope":"current","markdown":"two"}}]}},
 {"response":{"tool_calls":[{"id":"s3","name":"set_report","arguments":{"scope":"current","markdown":"three"}}]}},
 {"response":{"text":"done"}}]}
JSON
VIGIL_MODEL_CASSETTE="$T/steps.json" expect 0 chat "$id3" -m "go" --json
has "$OUT" '"stop_reason": "max_steps"'
# Command tools declared in the config file: available to any agent whose tools allow them.
# A script without a "#!" line runs under /bin/sh, as a shell would run it.
printf 'printf "{\\"bare\\": true}"\n' >"$T/bare-script"
chmod +x "$T/bare-script"
cat >"$T/config.yaml" <<'YAML'
model:
  provider: scripted
command_tools:
  echo_back:
    command: [sh, -c, 'read -r in; printf "{\"got\": %s}" "$in"']
    description: Echo the arguments
    mutating: false
  where:
    command: [sh, -c, 'printf "{\"dir\": \"%s\"}" "$(pwd)"']
    description: Where it runs
    mutating: false
    cwd: /usr
  lost:
    command: [pwd]
    description: Runs nowhere
    mutating: false
    cwd: /nonexistent/dir
  missing:
    command: [/nonexistent/prog]
    description: Is not there
    mutating: false
  bare:
    command: [BARE_SCRIPT]
    description: A script without its interpreter line
    mutating: false
YAML
sed -i "s|BARE_SCRIPT|$T/bare-script|" "$T/config.yaml"
expect 0 agent create --name Echoer --config '{"tools":["echo_back","where","lost","missing","bare"]}'
eid=$OUT
expect 0 tool call "$eid" echo_back '{"x": 1}'
has "$OUT" '"got"'
# A command runs in its declared working directory; one that cannot enter it, or whose program
# is missing, fails as a shell would (126, 127) and says why.
expect 0 tool call "$eid" where '{}'
has "$OUT" '"dir": "/usr"'
expect 1 tool call "$eid" lost '{}'
has "$ERR" 'exited with status 126: vigil: could not enter the working directory'
expect 1 tool call "$eid" missing '{}'
has "$ERR" 'exited with status 127: vigil: could not execute the command'
expect 0 tool call "$eid" bare '{}'
has "$OUT" '"bare": true'
expect 0 tool list "$eid"
has "$OUT" "echo_back"
# The same name declared differently by a manifest: apply refuses it, naming both; put in the
# store another way, using the tool fails and names both.
printf 'name: clash
command_tools:
  echo_back: {command: [cat], description: Other}
' >"$T/clash.yaml"
expect 4 agent apply "$T/clash.yaml"
has "$ERR" 'command tool "echo_back" is declared differently by the config file and by agent "clash"'
expect 0 agent create --name clash --config '{"command_tools":{"echo_back":{"command":["cat"],"description":"Other"}}}'
expect 4 tool call "$eid" echo_back '{"x": 1}'
has "$ERR" 'command tool "echo_back" is declared differently by the config file and by agent "clash"'

# A plain tools entry that names no known tool (a typo: memory_search for memory_read) is
# applied, since a program embedding libvigil may register it, but said on stderr, as is an MCP
# tool (NAME__TOOL) of a server no one declares; globs and known names are not. (A store of its
# own, without the clash above.)
export VIGIL_STORE="$T/coder.db"
expect 0 init
printf 'name: coder\ntools: [execute_code, memory_search, memory_read, "memory_*", "files__x"]\n' \
  >"$T/coder.yaml"
expect 0 agent apply "$T/coder.yaml"
has "$ERR" 'vigil: warning: agent "coder": tools entry "memory_search" names no known tool'
has "$ERR" 'tools entry "files__x" names no known tool (no MCP server named before its __'
[ "$(printf '%s\n' "$ERR" | grep -c warning)" -eq 2 ] && ok || bad "warnings: $ERR"

# A file of two YAML documents is refused at the second one's line, never half applied (E19).
printf 'name: multi1\n---\nname: multi2\n' >"$T/multi.yaml"
expect 2 agent apply "$T/multi.yaml" --dry-run
has "$ERR" "multi.yaml:2:1: one manifest a file: a second YAML document starts here"
expect 2 agent apply "$T/multi.yaml"
expect 3 agent show multi1
printf -- '---\nname: multi1\n...\n' >"$T/one.yaml" # one document, marked: applied
expect 0 agent apply "$T/one.yaml" --dry-run
# YAML aliases of a list or a mapping are the anchored value, not a string (E20).
printf 'name: anch\ntools: &t [set_report]\nrequire_approval: *t\n' >"$T/anch.yaml"
expect 0 agent apply "$T/anch.yaml" --dry-run
has "$OUT" "tools, require_approval"
printf 'name: anch2\nlimits: &l {max_steps: 5}\nbudgets: *l\n' >"$T/anch2.yaml"
expect 2 agent apply "$T/anch2.yaml"
has "$ERR" 'unknown key "max_steps"' # the mapping itself, checked as budgets
printf 'name: laughs\na: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n' >"$T/laughs.yaml"
expect 2 agent apply "$T/laughs.yaml"
has "$ERR" "more than 100000 values"
# Few values, long strings: 1000 copies of 200 KB would be 200 MB (10,000 copies took 1.5 GB
# before, and failed as "not valid UTF-8": trial H11); refused at 16 MiB of text, quickly.
{
  printf 'name: longlaughs
prompt: &p "%s"
' "$(head -c 200000 /dev/zero | tr '\0' x)"
  printf 'a: &a [*p, *p, *p, *p, *p, *p, *p, *p, *p, *p]
'
  printf 'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
'
  printf 'c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
'
} >"$T/longlaughs.yaml"
expect 2 agent apply "$T/longlaughs.yaml" --dry-run
has "$ERR" "more than 16 MiB of text once aliases are expanded"
finish
