#!/usr/bin/env bash
# End-to-end: text an agent, a model or a manifest wrote reaches the terminal without its
# control characters acting: ESC ] 52 (set the clipboard), ESC ] 0 (the window title), ESC [
# and \r (erase what was shown) print as \u00XX, in text views and in error lines alike, while
# newlines, tabs and other UTF-8 pass as they are and --json still gives back the exact text
# (trial H2).
set -e
source "$(dirname "$0")/lib.sh" "$1"

ESC=$'\033'
raw_control() { # TEXT holds a C0 control character other than newline and tab, or C1's CSI
  printf '%s' "$1" | LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]\|\xc2\x9b'
}
no_raw() {
  if raw_control "$1"; then bad "raw control characters in: $(printf '%s' "$1" | cat -v)"; else ok; fi
}

expect 0 init
# A name with a control character is refused where it comes in, exit 2 (the rest of trial H2):
# by create, by apply (dry run too), C1's CSI as well; a tab or a newline is one too.
expect 2 agent create --name "evil${ESC}[2Khidden"
has "$ERR" 'vigil: an agent name may not hold a control character'
expect 2 agent create --name "tab	name"
expect 2 agent create --name "csi$(printf '\xc2\x9b')31m"
printf 'name: "evil\\e]0;owned\\a"\ntools: []\n' >"$T/evil.yaml"
expect 2 agent apply "$T/evil.yaml" --dry-run
has "$ERR" 'evil.yaml:1:7: an agent name may not hold a control character'
expect 2 agent apply "$T/evil.yaml"
expect 0 agent list --json
[ "$(printf '%s' "$OUT" | jq '.items | length')" = 0 ] && ok || bad "a refused name was stored: $OUT"
# A plain name with other UTF-8 is a name.
expect 0 agent create --name "évil ✓" --config '{"tools":["set_report"]}'
ID=$OUT
# One stored before the rule (written into the store by hand) still lists escaped.
if command -v sqlite3 >/dev/null; then
  sqlite3 "$VIGIL_STORE" "update records set body = replace(body, 'évil ✓', 'evil\u001b[2Khidden') where kind = 'agent'"
  expect 0 agent list
  no_raw "$OUT"
  has "$OUT" 'evil\u001b[2Khidden'
fi

# A report the agent writes: OSC 52 and a carriage return, beside text that must pass.
REPORT=$(jq -cn --arg m "ok${ESC}]52;c;cm0gLXJmIH4=$(printf '\a')"$'\r'"tab	é ✓ $(printf '\xc2\x9b')31m" \
  '{scope: "current", markdown: $m}')
expect 0 tool call "$ID" set_report "$REPORT"
expect 0 agent show "$ID"
no_raw "$OUT"
has "$OUT" 'ok\u001b]52;c;cm0gLXJmIH4=\u0007\u000dtab	é ✓ \u009b31m'

# A model's reply, as vigil chat prints it and as run history shows it.
jq -cn --arg t "Hello ${ESC}]0;owned$(printf '\a') bye" \
  '{vigil_cassette: 1, exchanges: [{response: {text: $t}}]}' >"$T/c.json"
VIGIL_MODEL_PROVIDER=scripted VIGIL_MODEL_CASSETTE="$T/c.json" expect 0 chat "$ID" -m hi
no_raw "$OUT"
has "$OUT" 'Hello \u001b]0;owned\u0007 bye'
expect 0 runs list --agent "$ID" --json
RUN=$(printf '%s' "$OUT" | jq -r '.items[0].run_id')
expect 0 runs messages "$RUN"
no_raw "$OUT"
has "$OUT" 'Hello \u001b]0;owned\u0007 bye'

# An error line that quotes such text.
expect 3 runs show "x${ESC}]0;t"
no_raw "$ERR"
has "$ERR" 'x\u001b]0;t'

# --json is still JSON and gives back the exact text, the C1 character included.
expect 0 agent show "$ID" --json
no_raw "$OUT"
R=$(printf '%s' "$OUT" | jq -c .)
GOT=$(printf '%s' "$R" | jq -r '.report.markdown')
WANT=$(printf '%s' "$REPORT" | jq -r .markdown)
[ "$GOT" = "$WANT" ] && ok || bad "agent show --json did not give the report back: $(printf '%s' "$R" | cat -v)"

finish
