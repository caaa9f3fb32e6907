#!/usr/bin/env bash
# End-to-end: vigil sandbox check and run — the interface issue 30's checks use: what the
# machine offers, one execution with and without an agent, and every failure a structured
# error with exit 1 (10 when the agent may not run code).
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_CONFIG="$T/config.yaml"
mkdir -p "$T/sbx"
printf 'sandbox:\n  root: %s/sbx\n  limits: {wall_ms: 20000, cpu_ms: 2000}\n' "$T" > "$VIGIL_CONFIG"

expect 0 sandbox check --json
has "$OUT" '"can_run": true'
has "$OUT" '"seccomp"'
# The cgroup layer: what the machine has, which kind a run uses, and why it is missing when it is.
has "$OUT" '"cgroup": {'
has "$OUT" '"usable": '
has "$OUT" '"mode": '
has "$OUT" '"used": '
expect 0 sandbox check
has "$OUT" "applied"
expect 2 sandbox
expect 0 sandbox --help
has "$OUT" "vigil sandbox run"

expect 0 init
printf 'print("hello")\nreturn {sum = 1 + 2}\n' > "$T/ok.lua"
expect 0 sandbox run "$T/ok.lua" --json
# --json is indented with its keys sorted, as cli.md says of every --json
[ "$(printf '%s\n' "$OUT" | head -n 2)" = "$(printf '{\n  "cgroup": {')" ] && passed=$((passed + 1)) ||
  { echo "FAIL: sandbox run --json is not indented and sorted: $OUT"; fail_count; }
compact_out
has "$OUT" '"ok":true'
has "$OUT" '"result":{"sum":3}'
has "$OUT" '"output":"hello\n"'
expect 0 sandbox run "$T/ok.lua"
has "$OUT" '{"sum":3}'

printf 'return (' > "$T/syntax.lua"
expect 1 sandbox run "$T/syntax.lua" --json
compact_out
has "$OUT" '"code":"syntax_error"'
printf 'os.execute("id")' > "$T/exec.lua"
expect 1 sandbox run "$T/exec.lua" --json
compact_out
has "$OUT" '"code":"runtime_error"'
printf 'return vigil.read("../../etc/passwd")' > "$T/escape.lua"
expect 1 sandbox run "$T/escape.lua" --json
compact_out
has "$OUT" '"code":"bridge_error"'
has "$OUT" 'denied'
expect 1 sandbox run "$T/escape.lua"
one_line "$ERR"
# A file neither .lua nor .ts is refused before it runs, rather than run as Lua.
printf 'print("hi")\n' > "$T/f.py"
expect 2 sandbox run "$T/f.py"
one_line "$ERR"
has "$ERR" 'use a .lua (Lua), .ts (TypeScript) or .js (JavaScript) file'
has "$ERR" 'Python is not offered'
[ -z "$OUT" ] && passed=$((passed + 1)) || { echo "FAIL: f.py ran: $OUT"; fail_count; }
expect 3 sandbox run "$T/missing.lua"
has "$ERR" 'could not read "'"$T"'/missing.lua": No such file'
expect 3 sandbox run "$T/sbx" # a directory opens, but is no program: not run as an empty one
has "$ERR" "Is a directory"
# A file longer than 16 MiB is read whole, never cut off and run: over the code limit it is
# refused (exit 2, ETOOBIG) naming its real size; under a raised limit its last line runs.
{ head -c 16777216 /dev/zero | tr '\0' ' '; printf '\nreturn 42\n'; } > "$T/big.lua"
expect 2 sandbox run "$T/big.lua"
one_line "$ERR"
has "$ERR" "the program is 16777227 bytes; the limit is 51200"
has "$ERR" "code_bytes"
printf 'sandbox:\n  root: %s/sbx\n  limits: {wall_ms: 20000, cpu_ms: 2000, code_bytes: 33554432}\n' "$T" > "$VIGIL_CONFIG"
expect 0 sandbox run "$T/big.lua"
has "$OUT" "42"
printf 'sandbox:\n  root: %s/sbx\n  limits: {wall_ms: 20000, cpu_ms: 2000}\n' "$T" > "$VIGIL_CONFIG"
rm -f "$T/big.lua"

# Through an agent's gate: granted by manifest and capability, journaled as its own call.
expect 0 agent create --name "Coder" --config '{"tools":["execute_code","set_report"],"capabilities":["code_execution"]}'
coder=$OUT
printf 'vigil.write("n.txt", "7") return tonumber(vigil.read("n.txt")) * 6' > "$T/agent.lua"
expect 0 sandbox run "$T/agent.lua" --agent "$coder" --json
compact_out
has "$OUT" '"result":42'
[ "$(cat "$T/sbx/$coder/n.txt")" = 7 ] && passed=$((passed + 1)) || { echo "FAIL: n.txt"; fail_count; }
expect 0 agent create --name "Plain" --config '{"tools":["set_report"]}'
plain=$OUT
# An agent whose manifest does not grant execute_code: refused by policy, exit 10.
expect 10 sandbox run "$T/agent.lua" --agent "$plain" --json
compact_out
has "$OUT" '"code":"not_allowed"'
expect 10 sandbox run "$T/agent.lua" --agent "$plain"
one_line "$ERR"
has "$ERR" 'may not call "execute_code": it is not in the agent'"'"'s manifest tools'
# The tool granted but not the capability: the message names the capability to add.
expect 0 agent create --name "NoCap" --config '{"tools":["execute_code"]}'
expect 10 sandbox run "$T/agent.lua" --agent NoCap
one_line "$ERR"
has "$ERR" 'it needs the capability "code_execution", not in the agent'"'"'s manifest capabilities'

# sandbox.risk high: every program waits for a person (sandbox.md), from sandbox run and tool
# call alike; the refusal names the run key, and the approved run repeats under it (E23, E24).
printf 'sandbox:\n  root: %s/sbx\n  risk: high\n  limits: {wall_ms: 20000, cpu_ms: 2000}\n' "$T" > "$VIGIL_CONFIG"
expect 10 sandbox run "$T/agent.lua" --agent "$coder" --json
compact_out
has "$OUT" '"code":"confirmation_required"'
aid=$(printf '%s\n' "$OUT" | sed -n 's/.*"approval_id":"\([^"]*\)".*/\1/p')
key=$(printf '%s\n' "$OUT" | sed -n 's/.*"run_key":"\([^"]*\)".*/\1/p')
has "$ERR" "needs approval $aid (vigil approve $aid), then repeat this call with --run-key $key"
[ ! -e "$T/sbx/$coder/m.txt" ] && passed=$((passed + 1)) || { echo "FAIL: ran unapproved"; fail_count; }
printf 'vigil.write("m.txt", "8") return 8' > "$T/approved.lua"
expect 10 sandbox run "$T/approved.lua" --agent "$coder" --run-key sb1 --json
has "$ERR" "then repeat this call with --run-key sb1"
compact_out
aid=$(printf '%s\n' "$OUT" | sed -n 's/.*"approval_id":"\([^"]*\)".*/\1/p')
[ ! -e "$T/sbx/$coder/m.txt" ] && passed=$((passed + 1)) || { echo "FAIL: ran unapproved"; fail_count; }
expect 0 approve "$aid"
expect 0 sandbox run "$T/approved.lua" --agent "$coder" --run-key sb1
has "$OUT" "8"
[ "$(cat "$T/sbx/$coder/m.txt")" = 8 ] && passed=$((passed + 1)) || { echo "FAIL: m.txt"; fail_count; }
expect 10 tool call "$coder" execute_code '{"code":"return 1"}'
has "$OUT" '"error_code": "confirmation_required"'
expect 2 sandbox run "$T/agent.lua" --run-key sb2 # no agent, no gate to repeat
printf 'sandbox:\n  root: %s/sbx\n  limits: {wall_ms: 20000, cpu_ms: 2000}\n' "$T" > "$VIGIL_CONFIG"

# Without sandbox.root the working folders go beside the store, not in the home folder.
printf 'sandbox:\n  limits: {wall_ms: 20000, cpu_ms: 2000}\n' > "$VIGIL_CONFIG"
expect 0 sandbox run "$T/agent.lua" --agent "$coder" --json
compact_out
has "$OUT" '"result":42'
[ "$(cat "$T/sandbox/$coder/n.txt")" = 7 ] && passed=$((passed + 1)) || { echo "FAIL: beside the store"; failed=$((failed + 1)); }
printf 'sandbox:\n  root: %s/sbx\n  limits: {wall_ms: 20000, cpu_ms: 2000}\n' "$T" > "$VIGIL_CONFIG"

# A manifest's sandbox.limits are the agent's: a 400 ms wall time stops a spin as a timeout.
cat > "$T/spinner.yaml" <<'YAML'
name: spinner
tools: [execute_code]
capabilities: [code_execution]
sandbox:
  limits: {wall_ms: 400}
YAML
expect 0 agent apply "$T/spinner.yaml" --json
spinner=$(printf '%s\n' "$OUT" | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -n 1)
printf 'while true do end' > "$T/spin.lua"
expect 1 sandbox run "$T/spin.lua" --agent "$spinner" --json
compact_out
has "$OUT" '"code":"timeout"'
has "$OUT" '400 ms'

finish
