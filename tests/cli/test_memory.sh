#!/usr/bin/env bash
# End-to-end: vigil memory ... on a seeded agent: list, show, search, history, pending, the
# error paths of approve and reject, and a person's own changes (set, delete).
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

# In an interactive session (a terminal: script(1) gives it one) the change waits for the
# person between turns: shown, and approved (y) or rejected with a reason (n) on the spot;
# "later" leaves it pending.
# proves: S4-033
cat >"$T/repl.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"c1","name":"memory_write","arguments":{"label":"familiar","content":"My human drinks tea."}}]}},
 {"response":{"text":"noted, once you agree"}},
 {"response":{"tool_calls":[{"id":"c2","name":"memory_write","arguments":{"label":"familiar","content":"My human drinks coffee."}}]}},
 {"response":{"text":"noted again"}},
 {"response":{"tool_calls":[{"id":"c3","name":"memory_write","arguments":{"label":"familiar","content":"My human drinks juice."}}]}},
 {"response":{"text":"and again"}}]}
JSON
expect 0 agent create --name "Repl" --config '{"tools":["memory_*"]}'
repl=$OUT
OUT=$(printf 'I drink tea\ny\nI drink coffee\nn\nnot true\nI drink juice\nl\n/quit\n' |
  VIGIL_MODEL_PROVIDER=scripted VIGIL_MODEL_CASSETTE="$T/repl.json" \
    timeout 60 script -qec "\"$VIGIL\" chat $repl" /dev/null | tr -d '\r')
has "$OUT" '[memory] the agent wants to'
has "$OUT" 'My human drinks tea.'
has "$OUT" '[memory] approved: block "familiar" changed'
has "$OUT" '[memory] rejected; the agent will be told why'
expect 0 memory show "$repl" familiar
has "$OUT" "My human drinks tea."
case $OUT in *coffee*) bad "the rejected change was applied: $OUT" ;; *) ok ;; esac
expect 0 memory pending --agent "$repl" --json
has "$OUT" "My human drinks juice."

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

# A person changes memory (trial E14): set creates or changes a block at once, whatever its
# permission (a read_only block, which the agent cannot change, included), delete removes one
# (an archival note too), and history says each was made by human. Nothing waits for approval.
expect 0 agent create --name "Desk" --config '{"tools":["memory_*"]}'
expect 0 memory set Desk hours --content "Open 9-17 Mon-Fri" --permission read_only
has "$OUT" 'created memory block "hours" (core, read_only)'
expect 0 memory set Desk hours --content "Open 8-18 Mon-Sat"
has "$OUT" 'updated memory block "hours" (core, read_only)'
expect 0 memory show Desk hours
has "$OUT" "Open 8-18 Mon-Sat"
has "$OUT" "permission: read_only"
expect 0 memory set Desk hours --content "Open 8-18 Mon-Sat"
has "$OUT" 'unchanged memory block "hours"'
expect 0 memory history Desk hours
has "$OUT" "update    by human"
has "$OUT" "old: Open 9-17 Mon-Fri"
has "$OUT" "new: Open 8-18 Mon-Sat"
[ "$(printf '%s\n' "$OUT" | grep -c 'by human')" -eq 2 ] && ok || bad "two changes by human expected: $OUT"
expect 0 memory pending --agent Desk --json
has "$OUT" "[]"
# The agent still cannot change the block a person set.
cat >"$T/hours.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"c1","name":"memory_write","arguments":{"label":"hours","content":"Always open"}}]}},
 {"response":{"text":"tried"}}]}
JSON
VIGIL_MODEL_PROVIDER=scripted VIGIL_MODEL_CASSETTE="$T/hours.json" expect 0 chat Desk -m "we are always open now"
expect 0 memory show Desk hours
has "$OUT" "Open 8-18 Mon-Sat"
# An archival note from a file, then deleted: gone from show and search, its deletion in history.
printf 'The guest wifi password is hunter2\n' >"$T/wifi.txt"
expect 0 memory set Desk wifi --file "$T/wifi.txt" --tier archival --json
has "$OUT" '"change": "created"'
has "$OUT" '"tier": "archival"'
expect 0 memory search Desk "wifi password"
has "$OUT" "wifi"
expect 0 memory delete Desk wifi
has "$OUT" 'deleted memory block "wifi" (archival, read_write)'
expect 3 memory show Desk wifi
expect 0 memory search Desk "wifi password hunter2"
[ "$OUT" = "no match" ] && ok || bad "a deleted note is still found: $OUT"
expect 0 memory history Desk wifi
has "$OUT" "delete    by human"
expect 3 memory delete Desk wifi
one_line "$ERR"
has "$ERR" 'no memory block "wifi"'
# A tier or permission alone is changed with the content given again; bad input is refused.
expect 0 memory set Desk hours --content "Open 8-18 Mon-Sat" --tier working --permission familiar
has "$OUT" 'updated memory block "hours" (working, familiar)'
expect 2 memory set Desk x
one_line "$ERR"
has "$ERR" "--content TEXT or --file PATH"
expect 2 memory set Desk x --content a --file "$T/wifi.txt"
expect 2 memory set Desk x --content a --tier attic
has "$ERR" "--tier"
expect 2 memory set Desk x --content a --permission sometimes
expect 2 memory set Desk "a/b" --content a
one_line "$ERR"
expect 3 memory set Nobody x --content a
one_line "$ERR"
expect 3 memory delete Nobody x

finish
