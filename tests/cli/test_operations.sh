#!/usr/bin/env bash
# docs/operations.md, run in order on a scratch store with the scripted model: the incident
# playbook's commands do what the page says. Contain (kill switches, pause), look (status,
# wakes, runs, in doubt, approvals, report), replay a failed wake's run, roll a manifest back
# (export, dry run, apply, apply the export), recover (switches off, resume: status 0) and
# close (replay, journal export, eval capture that replays as a passing scenario).
# proves: S0-154 (the playbook exists and its kill-switch steps hold) S0-140 (its rollout and
# rollback runbook checked by a dry run)
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_WAKE_RUNNER
check() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', expected '$2'"; fi; }

expect 0 init
cat >"$T/billing.yaml" <<YAML
name: billing
tools: [set_report, invoice]
command_tools:
  invoice:
    command: [sh, -c, 'cat >/dev/null; echo sent >> "$T/invoices"; echo "{\"ok\": true}"']
    description: Send an invoice
    mutating: true
    idempotency: non_idempotent
    tool_class: payments
YAML
expect 0 agent apply "$T/billing.yaml"
expect 0 chat billing -m "hello"
RUN=$("$VIGIL" runs list --agent billing --json | jq -r '.items[0].run_id')

# 1. Contain
expect 0 kill on --reason "incident 42: wrong invoices"
expect 10 tool call billing invoice '{}'
has "$OUT" '"error_code": "killed"'
[ ! -e "$T/invoices" ] && ok || bad "an invoice went out under the kill switch"
expect 11 status
has "$OUT" "kill switch"
expect 0 kill status
has "$OUT" "incident 42"
expect 0 kill off
expect 0 kill on --tool-class payments --reason "incident 42"
expect 10 tool call billing invoice '{}'
expect 0 tool call billing set_report '{"scope":"current","markdown":"# paused for incident 42"}'
expect 0 kill on --agent billing --reason "incident 42"
expect 0 agent pause billing --reason "incident 42"
expect 0 agent show billing
has "$OUT" "dormant"

# 2. Look
expect 0 wakes --status failed
expect 0 runs list --agent billing --status failed
expect 0 runs show "$RUN"
expect 0 runs tools "$RUN"
expect 0 indoubt list
expect 0 approvals --status pending
expect 0 report billing
has "$OUT" "paused for incident 42"

# 5. Roll back (the canary's manifest goes in and out again)
expect 0 agent export billing
printf '%s\n' "$OUT" >"$T/before.yaml"
sed 's/description: Send an invoice/description: Send an invoice now/' "$T/billing.yaml" >"$T/new.yaml"
expect 0 agent apply "$T/new.yaml" --dry-run
expect 0 agent export billing
check "$OUT" "$(cat "$T/before.yaml")" "a dry run changed the agent"
expect 0 agent apply "$T/new.yaml"
expect 0 agent export billing
has "$OUT" "Send an invoice now"
expect 0 agent apply "$T/before.yaml"
expect 0 agent export billing
check "$OUT" "$(cat "$T/before.yaml")" "the rollback gave back the agent as it was"

# 6. Recover
expect 0 kill off --agent billing
expect 0 kill off --tool-class payments
expect 0 agent resume billing --reason "incident 42 closed"
expect 0 status
has "$OUT" "all is well"
expect 0 tool call billing invoice '{}'
check "$(wc -l <"$T/invoices")" 1 "one invoice once the switches are off"

# 3. A wake's run, replayed as a new run that names it
expect 0 wake billing -m "check the ledger"
KEY=$(printf '%s' "$OUT" | head -n 1)
expect 0 runs rerun "$KEY"
expect 0 wakes --agent billing --json
has "$OUT" "\"rerun_of\": \"$KEY\""

# Close: the run rebuilt, the agent kept, the run as a scenario that replays
expect 0 replay "$RUN"
expect 0 journal export billing --dir "$T/incident-42"
[ -n "$(ls -A "$T/incident-42")" ] && ok || bad "journal export wrote nothing"
expect 0 eval capture "$RUN"
printf '%s\n' "$OUT" >"$T/incident-42.yaml"
expect 0 eval "$T/incident-42.yaml"

finish
