#!/usr/bin/env bash
# `vigil slo`: service levels of the runs of a window against the config's objectives (the
# library's figures are tests/runtime/test_slo.c's): nothing to measure exits 0; a failed run
# under a 99% success objective exits 11 naming it MISSED; --json is vigil_slo's object; a bad
# window, an unknown agent and a misspelled key of the config's slo section are refused.
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted XDG_CONFIG_HOME="$T/xdg"
export VIGIL_CONFIG="$T/config.yaml"
printf 'slo:\n  success_rate: 0.99\n' >"$VIGIL_CONFIG"

expect 0 init
expect 0 slo
has "$OUT" "no data"
expect 0 agent create --name Measured
id=$OUT
expect 0 chat "$id" -m "hello"
expect 0 slo
has "$OUT" "1 completed"
has "$OUT" "success_rate             100.00%"
cat >"$T/fail.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[{"error":{"code":"EAUTH","message":"key refused"}}]}
JSON
VIGIL_MODEL_CASSETTE="$T/fail.json" expect 9 chat "$id" -m "again"
expect 11 slo --agent Measured
has "$OUT" "1 failed"
has "$OUT" "MISSED"
expect 11 slo --json --since 1h
R=$OUT
is '.figures.runs.ended == 2 and .objectives[0].name == "success_rate" and .objectives[0].met == false'
expect 2 slo --since soon
has "$ERR" "--since takes a duration"
expect 3 slo --agent Nobody
printf 'slo:\n  succes_rate: 0.99\n' >"$VIGIL_CONFIG"
expect 2 slo
has "$ERR" 'unknown key "succes_rate" under slo'
finish
