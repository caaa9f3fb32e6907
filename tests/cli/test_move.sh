#!/usr/bin/env bash
# End-to-end: an agent moved to another store with its past (docs/storage.md, "Moving an agent
# to another store"): `vigil journal export` then `vigil journal import` into a fresh store
# gives the same agent (its id and name, its config), its runs, its memory (blocks, an archival
# note, a pending change and its history) and the calls made by hand; a second move from there
# carries it on; importing twice adds nothing. The export's checksums: a file changed after the
# export is refused (exit 5) with nothing written; an export made before them imports with a
# warning; a live agent of the same name in the target store refuses the move (exit 4), and so
# does a later export of an agent that went on in both stores. With
# VIGIL_PG_URI set, the same move from SQLite to a PostgreSQL store.
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE

A="$T/a.db" B="$T/b.db" C="$T/c.db"
expect 0 --store "$A" init
cat >"$T/filer.yaml" <<'YAML'
name: filer
tools: [set_report, "memory_*"]
limits: {max_steps: 7}
YAML
expect 0 --store "$A" agent apply "$T/filer.yaml"
id=$(printf '%s' "$OUT" | sed -n 's/.*(\([0-9a-f-]*\)).*/\1/p')
expect 0 --store "$A" memory seed filer
expect 0 --store "$A" chat filer -m "hello there"
# By hand: an archival note, a change of a familiar block that waits for approval, a report.
expect 0 --store "$A" tool call filer memory_write '{"label":"note1","content":"the parcel went to Lyon"}'
expect 0 --store "$A" tool call filer memory_append '{"label":"familiar","text":"My human is Sam."}'
expect 0 --store "$A" memory pending --agent filer --json
pending=$(printf '%s' "$OUT" | sed -n 's/.*"id": "\([0-9a-f-]*\)".*/\1/p' | head -n 1)
expect 0 --store "$A" tool call filer set_report '{"scope":"current","markdown":"# moved"}'

expect 0 --store "$A" journal export filer --dir "$T/ja"
files="$T/ja/agent-journals"
for f in "$id.interaction.jsonl" "$id.agent.jsonl" "$id.sha256"; do
  [ -f "$files/$f" ] && ok || bad "the export has no $f"
done
(cd "$files" && sha256sum -c --quiet "$id.sha256") && ok || bad "sha256sum -c of the export's sums"

# ---- into a fresh store: the same agent, with its past ----------------------------------------
expect 0 --store "$B" init
expect 0 --store "$B" journal import "$id" --dir "$T/ja"
has "$OUT" "of the agent's own"
# It says what the agent may call, as its export had it (trial H12).
has "$OUT" "the agent may call set_report, memory_*"
# The moved agent exports from there byte for byte as it did from the old store (its records,
# their revisions and times, and its journal came over unchanged).
expect 0 --store "$B" journal export filer --dir "$T/jb0"
for f in "$id.interaction.jsonl" "$id.agent.jsonl" "$id.sha256"; do
  cmp -s "$files/$f" "$T/jb0/agent-journals/$f" && ok || bad "$f differs when exported again"
done
expect 0 --store "$B" agent list
has "$OUT" "$id"
has "$OUT" "filer"
expect 0 --store "$B" agent show filer --json
has "$OUT" '"max_steps": 7'
expect 0 --store "$B" runs list --agent filer
has "$OUT" "you said: hello there"
expect 0 --store "$B" memory list filer
has "$OUT" "note1"
expect 0 --store "$B" memory search filer "parcel Lyon"
has "$OUT" "note1"
expect 0 --store "$B" tool calls filer
has "$OUT" "memory_write"
has "$OUT" "set_report"
expect 0 --store "$B" memory approve "$pending"
expect 0 --store "$B" memory history filer familiar
has "$OUT" "approved"
has "$OUT" "My human is Sam."
# Importing the same export again adds nothing.
expect 0 --store "$B" journal import "$id" --dir "$T/ja" --json
has "$OUT" '"imported": 0'
has "$OUT" '"checksums": "verified"'

# ---- it lives on there, and moves on (store to store to store) --------------------------------
expect 0 --store "$B" chat filer -m "second turn"
expect 0 --store "$B" journal export filer --dir "$T/jb"
expect 0 --store "$C" init
# By its name, which this store does not know yet: the export's agent file gives it.
expect 0 --store "$C" journal import filer --dir "$T/jb"
expect 0 --store "$C" runs list --agent filer
has "$OUT" "you said: hello there"
has "$OUT" "you said: second turn"
expect 0 --store "$C" memory show filer familiar
has "$OUT" "My human is Sam."
run=$(VIGIL_STORE="$C" "$VIGIL" runs list --agent filer --json | sed -n 's/.*"run_id": "\([^"]*\)".*/\1/p' | head -n 1)
expect 0 --store "$C" replay "$run"
has "$OUT" "matches the replay"

# ---- a file changed in transit is refused, and nothing is written -----------------------------
cp -r "$T/jb" "$T/jbad"
sed -i 's/you said: second turn/I deleted everything/' "$T/jbad/agent-journals/$id.interaction.jsonl"
expect 0 --store "$T/d.db" init
expect 5 --store "$T/d.db" journal import "$id" --dir "$T/jbad"
has "$ERR" "does not match its checksum"
has "$ERR" "nothing was imported"
expect 0 --store "$T/d.db" agent list
has "$ERR$OUT" "no agents"
expect 3 --store "$T/d.db" runs list --agent "$id"
cp -r "$T/jb" "$T/jbad2"
sed -i 's/My human is Sam./My human is Eve./' "$T/jbad2/agent-journals/$id.agent.jsonl"
expect 5 --store "$T/d.db" journal import "$id" --dir "$T/jbad2"
has "$ERR" "$id.agent.jsonl\" does not match its checksum"
# The agent's file without its sums was cut from the export: refused too.
rm "$T/jbad2/agent-journals/$id.sha256"
expect 5 --store "$T/d.db" journal import "$id" --dir "$T/jbad2"
has "$ERR" "checksums"

# ---- an export made before the checksums (its journal alone) imports, with a warning ----------
mkdir -p "$T/jold/agent-journals"
cp "$T/ja/agent-journals/$id.interaction.jsonl" "$T/jold/agent-journals/"
expect 0 --store "$T/d.db" journal import "$id" --dir "$T/jold"
has "$ERR" "warning"
has "$ERR" "imported unchecked"
expect 0 --store "$T/d.db" runs list --agent "$id"
has "$OUT" "you said: hello there"

# ---- the sums are not a signature: an import names the programs the agent brings (trial H12) --
for s in g h h2; do expect 0 --store "$T/$s.db" init; done
expect 0 --store "$T/g.db" agent create --name sneaky --config '{"tools":["*"],"command_tools":{"peek":{"command":["id"],"description":"p"}},"mcp_servers":{"w":{"command":["vigil","mcp","serve"]}}}'
expect 0 --store "$T/g.db" journal export sneaky --dir "$T/jg"
expect 0 --store "$T/h.db" journal import sneaky --dir "$T/jg"
has "$OUT" "the agent may call *"
has "$OUT" 'command tool "peek" runs ["id"]'
has "$OUT" 'MCP server "w" runs ["vigil","mcp","serve"]'
expect 0 --store "$T/h2.db" journal import sneaky --dir "$T/jg" --json
R=$OUT
is '.brings.command_tools.peek == ["id"] and .brings.tools == ["*"]'
is '.brings.mcp_servers.w == ["vigil", "mcp", "serve"]'

# ---- a live agent of the same name in the target store ----------------------------------------
expect 0 --store "$T/e.db" init
expect 0 --store "$T/e.db" agent create --name filer
expect 4 --store "$T/e.db" journal import "$id" --dir "$T/ja"
has "$ERR" "an agent named \"filer\" already exists"
expect 3 --store "$T/e.db" runs list --agent "$id"

# ---- the agent went on in the old store after the move: its later export is refused where the
# moved copy lives on (the two would mix), and brought in once that copy is deleted -------------
expect 0 --store "$A" chat filer -m "later in a"
expect 0 --store "$A" journal export filer --dir "$T/ja2"
expect 4 --store "$B" journal import "$id" --dir "$T/ja2"
has "$ERR" "is here already"
expect 0 --store "$B" runs list --agent filer
case "$OUT" in *"later in a"*) bad "the refused import wrote a run" ;; *) ok ;; esac
expect 0 --store "$B" agent destroy filer
expect 0 --store "$B" agent delete "$id"
expect 0 --store "$B" journal import "$id" --dir "$T/ja2"
expect 0 --store "$B" runs list --agent filer
has "$OUT" "you said: later in a"

# ---- from SQLite to PostgreSQL ----------------------------------------------------------------
if [ -n "${VIGIL_PG_URI:-}" ] && command -v psql >/dev/null; then
  base=${VIGIL_PG_URI%%\?*}
  query=${VIGIL_PG_URI#"$base"}
  DB="vigil_move_$$"
  psql "$VIGIL_PG_URI" -qAtc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
  psql "$VIGIL_PG_URI" -qAtc "CREATE DATABASE $DB" >/dev/null
  PG="${base%/*}/$DB$query"
  expect 0 --store "$PG" init
  expect 0 --store "$PG" journal import "$id" --dir "$T/jb"
  expect 0 --store "$PG" journal export filer --dir "$T/jpg0"
  for f in "$id.interaction.jsonl" "$id.agent.jsonl"; do
    cmp -s "$T/jb/agent-journals/$f" "$T/jpg0/agent-journals/$f" && ok || bad "$f differs from PostgreSQL"
  done
  expect 0 --store "$PG" agent list
  has "$OUT" "$id"
  expect 0 --store "$PG" runs list --agent filer
  has "$OUT" "you said: second turn"
  expect 0 --store "$PG" memory search filer "parcel Lyon"
  has "$OUT" "note1"
  expect 0 --store "$PG" memory history filer familiar
  has "$OUT" "approved"
  expect 0 --store "$PG" tool calls filer
  has "$OUT" "memory_write"
  expect 0 --store "$PG" journal import "$id" --dir "$T/jb" --json
  has "$OUT" '"imported": 0'
  expect 0 --store "$PG" chat filer -m "on postgres"
  # ... and back out of PostgreSQL into SQLite.
  expect 0 --store "$PG" journal export filer --dir "$T/jpg"
  expect 0 --store "$T/f.db" init
  expect 0 --store "$T/f.db" journal import "$id" --dir "$T/jpg"
  expect 0 --store "$T/f.db" runs list --agent filer
  has "$OUT" "you said: on postgres"
  psql "$VIGIL_PG_URI" -qAtc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true
else
  echo "note: VIGIL_PG_URI is not set: the move to PostgreSQL was not tried"
fi

finish
