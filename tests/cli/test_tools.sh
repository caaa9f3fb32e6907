#!/usr/bin/env bash
# End-to-end: vigil tool, approvals, approve, reject and kill, through the built binary.
# proves: S0-133 S0-152 S0-153 S0-075
set -e
source "$(dirname "$0")/lib.sh" "$1"

expect 0 init
expect 0 kill --help
has "$OUT" "vigil kill on"
expect 0 approve --help
has "$OUT" "vigil reject ID [--reason TEXT]"
expect 0 approvals
has "$OUT" "PREVIEW" # every list prints its header, also when empty
has "$ERR" "no approvals"
expect 0 kill status
has "$OUT" "SWITCH"
has "$ERR" "no kill switch"

# An agent whose manifest allows set_report but demands approval for it.
expect 0 agent create --name "Reporter" --config '{"tools":["set_report","record_observations"],"require_approval":["set_report"]}'
agent=$OUT
expect 0 tool list "$agent"
has "$OUT" "set_report"
has "$OUT" "record_observations"

# Refused until approved: a pending approval with a preview.
expect 10 tool call "$agent" set_report '{"scope":"current","markdown":"# done"}' --run-key r1
has "$OUT" '"error_code": "confirmation_required"'
one_line "$ERR"
has "$ERR" "then repeat this call with --run-key r1" # what runs it once approved
# A long tool name (60 characters, as an MCP server's tools have) never cuts the hint: the
# approval id and the command to copy are whole, the line ends with the run key (trial E3).
long=lookup_$(printf 'x%.0s' $(seq 53))
cat >"$T/long.yaml" <<YAML
name: longtool
tools: [$long]
require_approval: [$long]
command_tools:
  $long: {command: [/bin/cat], description: echo its input}
YAML
expect 0 agent apply "$T/long.yaml"
expect 10 tool call longtool "$long" '{}' --run-key long1
one_line "$ERR"
laid=$(printf '%s\n' "$OUT" | sed -n 's/.*"approval_id": "\([^"]*\)".*/\1/p')
has "$ERR" "(vigil approve $laid), then repeat this call with --run-key long1"
[ ${#laid} -eq 36 ] && passed=$((passed + 1)) || { echo "FAIL: long approval id '$laid'"; fail_count; }
expect 0 approve "$laid"
expect 0 tool call longtool "$long" '{}' --run-key long1
has "$OUT" '"status": "success"'

expect 0 approvals --agent "$agent" --status pending --json
has "$OUT" '"status": "pending"'
aid=$(printf '%s\n' "$OUT" | grep -m1 '"id"' | sed 's/.*"id": "\([^"]*\)".*/\1/')
[ ${#aid} -eq 36 ] && passed=$((passed + 1)) || { echo "FAIL: approval id '$aid'"; fail_count; }
expect 0 approvals
has "$OUT" "$aid"
has "$OUT" "pending"

# Approve (a second time is a no-op reporting the first), then the same call runs once.
expect 0 approve "$aid" --by alice
has "$OUT" "approved"
expect 0 reject "$aid" --reason "changed my mind"
has "$OUT" "already approved by alice"
expect 0 tool call "$agent" set_report '{"scope":"current","markdown":"# done"}' --run-key r1
has "$OUT" '"status": "success"'
has "$OUT" '"replayed": false'
expect 0 tool call "$agent" set_report '{"scope":"current","markdown":"# done"}' --run-key r1
has "$OUT" '"replayed": true'

# A rejected call is refused with the person's reason. An unknown approval is "no approval"
# (exit 3), with or without a reason (trial C8 of session 30: exit 2 about --reason).
expect 10 tool call "$agent" set_report '{"scope":"daily","markdown":"x"}' --run-key r2
aid2=$(printf '%s\n' "$OUT" | grep -m1 '"approval_id"' | sed 's/.*"approval_id": "\([^"]*\)".*/\1/')
expect 3 reject 01234567-89ab-7def-8123-456789abcdef
one_line "$ERR"
has "$ERR" "approval"
expect 0 reject "$aid2" --reason "not today"
has "$OUT" "rejected"
expect 10 tool call "$agent" set_report '{"scope":"daily","markdown":"x"}' --run-key r2
has "$OUT" '"error_code": "rejected"'
has "$OUT" "not today"
# The reason is optional, as over HTTP: the agent is told a stock text.
expect 10 tool call "$agent" set_report '{"scope":"weekly","markdown":"y"}' --run-key r3
aid3=$(printf '%s\n' "$OUT" | grep -m1 '"approval_id"' | sed 's/.*"approval_id": "\([^"]*\)".*/\1/')
expect 0 reject "$aid3"
has "$OUT" "rejected"
expect 10 tool call "$agent" set_report '{"scope":"weekly","markdown":"y"}' --run-key r3
has "$OUT" "no reason given"
expect 3 approve 01234567-89ab-7def-8123-456789abcdef
one_line "$ERR"

# Invalid arguments, unknown tools, tools outside the manifest.
expect 2 tool call "$agent" record_observations '{"notes":[]}'
has "$OUT" "invalid_arguments"
expect 3 tool call "$agent" no_such_tool '{}'
has "$OUT" "unknown_tool"

# Kill switches: per agent, per class, global; persisted between commands.
expect 0 tool call "$agent" record_observations '{"notes":["before"]}' --run-key k
expect 0 kill on --agent "$agent" --reason "incident"
has "$OUT" "on"
expect 0 kill status --agent "$agent"
has "$OUT" "stopped"
expect 10 tool call "$agent" record_observations '{"notes":["during"]}' --run-key k
has "$OUT" '"error_code": "killed"'
expect 0 kill off --agent "$agent"
expect 0 kill on --tool-class agent_self
[ -z "$ERR" ] && ok || bad "a known class warned: $ERR"
expect 10 tool call "$agent" record_observations '{"notes":["during"]}' --run-key k
expect 0 kill off --tool-class agent_self
# A class no tool can have is refused; one no tool has now is set, with a warning naming the
# classes there are, so a typo in an incident does not read as a switch that stops (trial H9).
expect 2 kill on --tool-class 'x y'
has "$ERR" 'no tool can have the class "x y"'
one_line "$ERR"
expect 0 kill status --json
case $OUT in *'class:x y'*) bad "a refused switch was stored: $OUT" ;; *) ok ;; esac
expect 0 kill on --tool-class agent_slef
has "$ERR" 'warning: no tool has the class "agent_slef" now, so this switch stops nothing'
has "$ERR" ' agent_self'
expect 0 kill off --tool-class agent_slef
expect 0 kill on --tool-class mcp
[ -z "$ERR" ] && ok || bad "the mcp class warned: $ERR"
expect 0 kill off --tool-class mcp
expect 0 kill on
expect 0 kill status --json
has "$OUT" '"id": "global"'
expect 10 tool call "$agent" record_observations '{"notes":["during"]}' --run-key k
expect 0 kill off
expect 0 tool call "$agent" record_observations '{"notes":["during"]}' --run-key k
has "$OUT" '"status": "success"'
expect 0 kill status --agent "$agent"
has "$OUT" "no kill switch applies"
expect 2 kill on --agent "$agent" --tool-class x
one_line "$ERR"
expect 2 kill sideways
expect 2 kill status --agent

# Operations belong to their agent and their run: the same call for two agents without
# --run-key writes both reports (each call has a fresh run key); the same explicit run key
# replays for the same agent.
report='{"scope":"current","markdown":"# same words"}'
expect 0 agent create --name "A" --config '{"tools":["set_report"]}'
a=$OUT
expect 0 agent create --name "B" --config '{"tools":["set_report"]}'
b=$OUT
expect 0 tool call "$a" set_report "$report"
has "$OUT" '"replayed": false'
has "$OUT" '"run_key": "cli-'
expect 0 tool call "$b" set_report "$report"
has "$OUT" '"replayed": false'
for who in "$a" "$b"; do
  expect 0 agent show "$who" --json
  has "$OUT" '"markdown": "# same words"'
done
expect 0 tool call "$a" set_report "$report" --run-key same
has "$OUT" '"replayed": false'
has "$OUT" '"run_key": "same"'
first=$(printf '%s\n' "$OUT" | grep -m1 '"report_id"')
expect 0 tool call "$a" set_report "$report" --run-key same
has "$OUT" '"replayed": true'
has "$OUT" "$first"

# The calls made by hand are listed, newest first, paged; a run's own calls are not (B32).
expect 0 tool calls "$a"
has "$OUT" "RUN KEY"
has "$OUT" "same"
has "$OUT" "set_report"
[ "$(printf '%s\n' "$OUT" | grep -c set_report)" -eq 2 ] && ok || bad "two hand calls of A: $OUT"
expect 0 tool calls "$a" --limit 1 --json
has "$OUT" '"run_key": "same"'
cursor=$(printf '%s\n' "$OUT" | sed -n 's/.*"next_cursor": "\([^"]*\)".*/\1/p')
[ -n "$cursor" ] && ok || bad "a first page of one has a next cursor: $OUT"
expect 0 tool calls "$a" --limit 1 --cursor "$cursor" --json
has "$OUT" '"run_key": "cli-'
has "$OUT" '"next_cursor": null'
# A call of a tool that changes nothing is listed too, and a repeat under its run key reads
# afresh (no replay): trial E4.
expect 0 agent create --name "Reader" --config '{"tools":["memory_read"]}'
reader=$OUT
expect 0 tool call "$reader" memory_read '{"query":"anything"}' --run-key look
expect 0 tool call "$reader" memory_read '{"query":"anything"}' --run-key look --json
has "$OUT" '"replayed": false'
expect 0 tool calls "$reader"
has "$OUT" "memory_read"
has "$OUT" "look"
expect 0 tool calls "$agent" --json # the approval flow above: refused, then run
has "$OUT" '"run_key": "r1"'
has "$OUT" '"result_status": "succeeded"'
cat >"$T/calls.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"c1","name":"set_report","arguments":{"scope":"weekly","markdown":"# from a run"}}]}},
 {"response":{"text":"done"}}]}
JSON
VIGIL_MODEL_PROVIDER=scripted VIGIL_MODEL_CASSETTE="$T/calls.json" expect 0 chat "$b" -m "report"
expect 0 runs list --agent "$b" --json
has "$OUT" '"tool_calls": 1' # the run did call it
expect 0 tool calls "$b" --json
case $OUT in *"from a run"*) bad "a run's own call is listed as made by hand" ;; *) ok ;; esac
has "$OUT" "same words"
expect 3 tool calls 01234567-89ab-7def-8123-456789abcdef
has "$ERR" "no agent"
expect 2 tool calls "$a" --limit 0
expect 2 tool calls "$a" --cursor bogus
has "$ERR" "pass a next_cursor value"

# A tool name longer than the TOOL column widens it: the header and every row stay aligned.
long=a_command_tool_named_past_thirty_two_chars
printf 'command_tools:\n  %s:\n    command: ["true"]\n    description: long\n' "$long" >"$T/long.yaml"
VIGIL_CONFIG="$T/long.yaml" expect 0 tool list
column_of() { local before=${1%%"$2"*}; echo "${#before}"; }
header=$(printf '%s\n' "$OUT" | head -n 1)
row=$(printf '%s\n' "$OUT" | grep "^$long ")
if [ -n "$row" ] && [ "$(column_of "$row" "  command")" = "$(column_of "$header" "  SOURCE")" ]; then ok; else
  bad "the SOURCE column moved under a long tool name: $header / $row"
fi

# In a chat turn, a call that waits for approval says how to give it (trial E5), not the
# result's JSON cut short.
cat >"$T/approve.json" <<EOC
{"vigil_cassette": 1, "exchanges": [
 {"response": {"tool_calls": [{"id": "c1", "name": "set_report", "arguments": {"scope": "weekly", "markdown": "# w"}}]}},
 {"response": {"text": "It waits for you."}}]}
EOC
VIGIL_MODEL_PROVIDER=scripted VIGIL_MODEL_CASSETTE="$T/approve.json" expect 0 chat "$agent" -m "report"
has "$ERR" "[tool set_report waits for a person's approval: vigil approve "
case "$ERR" in *'"action_id"'*) bad "the chat printed the result's JSON: $ERR" ;; *) ok ;; esac
# Approving it with no daemon serving the store queues the agent's wake and says so: nothing
# runs until a daemon does (trial G12: it said "woken to act on it").
expect 0 approvals --agent "$agent" --status pending --json
pending=$(printf '%s' "$OUT" | jq -r '.[0].id')
expect 0 approve "$pending"
has "$OUT" "approval $pending approved; a wake of agent $agent to act on it is queued (run key "
has "$ERR" "no daemon running: the wake waits for one: start \`vigil serve\`"
expect 0 wakes --agent "$agent" --status queued --json
has "$OUT" '"status": "queued"'

finish
