#!/usr/bin/env bash
# End-to-end: a call made by hand (`vigil tool call --run-key K`) repeated while the first one
# still runs its effect (a script retrying a slow call, trial E's E31): the repeat is refused
# with "still running" (exit 6, EBUSY) and writes nothing, the first records its effect, and a
# repeat after it reads the result; nothing goes to a person as "in doubt", and the effect ran
# once. The tool waits for a file the test writes, so no check depends on timing.
source "$(dirname "$0")/lib.sh" "$1"
unset VIGIL_MODEL_CASSETTE
export VIGIL_MODEL_PROVIDER=scripted
cat >"$T/stamp.sh" <<EOS
#!/bin/sh
cat >/dev/null
echo started >>"$T/stamp.log"
while [ ! -e "$T/go" ]; do sleep 0.01; done
echo '{"stamped": true}'
EOS
chmod +x "$T/stamp.sh"
cat >"$T/stamper.yaml" <<EOY
name: stamper
tools: [stamp]
command_tools:
  stamp:
    command: ["$T/stamp.sh"]
    description: Stamp once
    mutating: true
    idempotency: non_idempotent
EOY
expect 0 init
expect 0 agent apply "$T/stamper.yaml"
"$VIGIL" tool call stamper stamp '{}' --run-key K1 >"$T/first.out" 2>"$T/first.err" &
FIRST=$!
wait_for grep -q started "$T/stamp.log" || bad "the first call did not start its effect"
expect 6 tool call stamper stamp '{}' --run-key K1
has "$ERR" "still running in process $FIRST"
touch "$T/go"
wait "$FIRST" || bad "the first call failed: $(cat "$T/first.err")"
has "$(cat "$T/first.out")" '"stamped": true'
expect 0 tool call stamper stamp '{}' --run-key K1 --json
R=$OUT
is '.replayed == true'
runs=$(wc -l <"$T/stamp.log")
if [ "$runs" -eq 1 ]; then ok; else bad "the effect ran $runs times"; fi
expect 0 indoubt list --json
R=$OUT
is 'length == 0'
finish
