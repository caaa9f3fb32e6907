#!/usr/bin/env bash
# `vigil report` (docs/memory.md, "Reports"): an agent's report of a scope read without a model
# call, with its confidence, sources and freshness; its history; `vigil agent show` with the
# same; a manifest's reports.fresh_for; and every refusal with its exit status.
source "$(dirname "$0")/lib.sh" "$1"
j() { printf '%s' "$OUT" | jq -r "$1"; }
check() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', expected '$2'"; fi; }

expect 0 init
cat >"$T/rep.yaml" <<'YAML'
name: reporter
tools: [set_report]
reports:
  fresh_for: {daily: 36h, weekly: never}
YAML
expect 0 agent apply "$T/rep.yaml"
expect 3 report reporter
one_line "$ERR"
has "$ERR" 'has no current report yet'

expect 0 tool call reporter set_report '{"scope":"daily","markdown":"# Monday\nall quiet"}'
expect 0 tool call reporter set_report \
  '{"scope":"daily","markdown":"# Tuesday\none task late","confidence":0.8,"sources":["task-7","https://example.org/board"]}'
# A confidence out of range or a source that is not text: refused by the tool's contract.
expect 2 tool call reporter set_report '{"scope":"daily","markdown":"x","confidence":1.2}'
has "$OUT" '"error_code": "invalid_arguments"'
expect 2 tool call reporter set_report '{"scope":"daily","markdown":"x","sources":[7]}'
has "$OUT" '"error_code": "invalid_arguments"'

# proves: S3-003 (the latest report, read without a model call)
expect 0 report reporter --scope daily
has "$OUT" "daily report #2, written "
has "$OUT" "confidence 0.80"
has "$OUT" "fresh until "
has "$OUT" "  source: task-7"
has "$OUT" "  source: https://example.org/board"
has "$OUT" "one task late"
expect 0 report reporter --scope daily --history 5 --json
# The confidence as it was given, not the double nearest to it (0.80000000000000004).
has "$OUT" '"confidence": 0.8,'
check "$(j .report.markdown)" $'# Tuesday\none task late' "latest"
check "$(j .report.stale)" false "stale"
check "$(j '.report.sources | length')" 2 "sources"
check "$(j '.history | length')" 1 "history"
check "$(j '.history[0].markdown')" $'# Monday\nall quiet' "earlier"
created=$(j .report.created_at)
stale_at=$(j .report.stale_at)
# 36 hours after it was written, as the manifest says (not the daily default of 26 hours)
span=$(($(date -d "$stale_at" +%s) - $(date -d "$created" +%s)))
check "$span" 129600 "fresh_for daily 36h"
expect 0 report reporter --scope daily --history 1
has "$OUT" "# Monday"

# weekly: never stale
expect 0 tool call reporter set_report '{"scope":"weekly","markdown":"# week 48"}'
expect 0 report reporter --scope weekly --json
check "$(j .report.stale_at)" null "never"
# agent show: the current report with the same line
expect 0 tool call reporter set_report '{"scope":"current","markdown":"# now","confidence":0.5}'
expect 0 agent show reporter
has "$OUT" "current report #1, written "
has "$OUT" "confidence 0.50"

# Refusals: each one line with its exit status.
expect 2 report reporter --scope yearly
one_line "$ERR"
expect 2 report reporter --history 0
one_line "$ERR"
expect 2 report
one_line "$ERR"
expect 3 report nobody
one_line "$ERR"
has "$ERR" 'no agent "nobody"'
expect 0 report --help
has "$OUT" "usage: vigil report AGENT"
# A freshness that is no duration: the manifest is refused, nothing applied.
printf 'name: reporter\ntools: [set_report]\nreports:\n  fresh_for: {daily: soon}\n' >"$T/bad.yaml"
expect 2 agent apply "$T/bad.yaml"
has "$ERR" "fresh_for"
expect 0 report reporter --scope daily --json
check "$(($(date -d "$(j .report.stale_at)" +%s) - $(date -d "$(j .report.created_at)" +%s)))" \
  129600 "the refused manifest changed nothing"

finish
