#!/usr/bin/env bash
# End-to-end: vigil memory ... on a seeded agent: list, show, search, history, pending, and the
# error paths of approve and reject.
# proves: S4-035, S4-040
set -e
source "$(dirname "$0")/lib.sh" "$1"

expect 0 init
expect 0 agent create --name "Ada"
id=$OUT

expect 0 memory --help
has "$OUT" "vigil memory pending"
expect 2 memory
expect 0 memory list "$id"
has "$OUT" "TIER"
has "$ERR" "no memory blocks"

expect 0 memory seed "$id"
has "$OUT" "seeded"
expect 0 memory seed "$id"
has "$OUT" "nothing seeded"
expect 0 memory list "$id"
has "$OUT" "read_only"
has "$OUT" "persona"
has "$OUT" "familiar"
expect 0 memory list "$id" --tier core --json
has "$OUT" '"permission": "read_only"'
expect 2 memory list "$id" --tier attic
one_line "$ERR"
has "$ERR" "unknown memory tier"

expect 0 memory show "$id" persona
has "$OUT" "permission: familiar"
expect 3 memory show "$id" nothing
one_line "$ERR"
has "$ERR" "no memory block \"nothing\""

expect 0 memory search "$id" "careful assistant"
has "$OUT" "persona"
has "$OUT" "words, like" # found by its words, and how alike it is
# A word memory does not hold is no match: the core blocks are not listed as if they were.
expect 0 memory search "$id" Ada
[ "$OUT" = "no match" ] && passed=$((passed + 1)) || { echo "FAIL: search Ada listed: $OUT"; fail_count; }
expect 0 memory search "$id" Ada --json
[ "$OUT" = "[]" ] && passed=$((passed + 1)) || { echo "FAIL: search Ada --json: $OUT"; fail_count; }
expect 0 memory search "$id" 'NEAR("a" OR' --json
expect 0 memory history "$id" system
has "$OUT" "create"
has "$OUT" "config"
expect 0 memory history "$id" system --json
has "$OUT" '"type": "create"'

expect 0 memory pending
has "$OUT" "no pending memory changes"
expect 0 memory pending --agent "$id" --json
has "$OUT" "[]"
expect 3 memory approve 0190aaaa-0000-7000-8000-000000000000
one_line "$ERR"
has "$ERR" "no pending change"
expect 2 memory reject 0190aaaa-0000-7000-8000-000000000000
has "$ERR" "--reason"

# An approval without a reason: the history shows no empty "reason:" line.
cat >"$T/write.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"c1","name":"memory_write","arguments":{"label":"familiar","content":"My human is Ada."}}]}},
 {"response":{"text":"proposed"}}]}
JSON
expect 0 agent create --name "Writer" --config '{"tools":["memory_*"]}'
writer=$OUT
VIGIL_MODEL_PROVIDER=scripted VIGIL_MODEL_CASSETTE="$T/write.json" expect 0 chat "$writer" -m "I am Ada"
expect 0 memory pending --agent "$writer" --json
pending=$(printf '%s' "$OUT" | sed -n 's/.*"id": "\([^"]*\)".*/\1/p' | head -n 1)
expect 0 memory approve "$pending"
# A second resolution the same way changes nothing and says so (not "approved" again).
expect 0 memory approve "$pending"
has "$OUT" "was already approved by human"
has "$OUT" "nothing changed"
expect 0 memory approve "$pending" --json
has "$OUT" '"already": true'
expect 0 memory history "$writer" familiar
has "$OUT" "approved"
case $OUT in *"reason: "$'\n'* | *"reason: ") bad "an empty reason line: $OUT" ;; *) ok ;; esac

# a persona file without the required sections
printf '# persona\nonly this\n' >"$T/p.md"
expect 0 agent create --name "Bob"
bob=$OUT
expect 2 memory seed "$bob" --persona "$T/p.md"
one_line "$ERR"
has "$ERR" "no \"# system\" section"
VIGIL_PERSONA="$VIGIL_SOURCE_DIR/share/persona/default.md" expect 0 memory seed "$bob"

# An approved append: its history shows where the content changed, not two lines that read the
# same from the start (trial E16).
cat >"$T/append.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"c1","name":"memory_append","arguments":{"label":"familiar","text":" My human is called Sam."}}]}},
 {"response":{"text":"proposed"}}]}
JSON
expect 0 agent create --name "Appender" --config '{"tools":["memory_*"]}'
appender=$OUT
VIGIL_PERSONA="$VIGIL_SOURCE_DIR/share/persona/default.md" expect 0 memory seed "$appender"
VIGIL_MODEL_PROVIDER=scripted VIGIL_MODEL_CASSETTE="$T/append.json" expect 0 chat "$appender" -m "I am Sam"
expect 0 memory pending --agent "$appender" --json
pending=$(printf '%s' "$OUT" | sed -n 's/.*"id": "\([^"]*\)".*/\1/p' | head -n 1)
expect 0 memory approve "$pending"
expect 0 memory history "$appender" familiar
has "$OUT" "new: ..."
has "$OUT" "My human is called Sam."

finish
