#!/usr/bin/env bash
# End-to-end: the command keeps the word of docs/cli.md. A turn stopped by a kill switch exits
# 10; filters name their allowed values; --store works after the command; `vigil help`; every
# table prints its header, also when empty; the scripted model says "echo" when no cassette is
# loaded, and `vigil serve` says the model is scripted; a read-only store or folder answers
# "permission denied" with exit 10, and init on a read-only store fails.
# The daemon wait polls a real process's progress; no assertion depends on timing.
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE

expect 0 init
expect 0 agent create --name Talker
id=$OUT

# Every table prints its header, also when empty (the note that it is empty goes to stderr).
expect 0 agent create --name Quiet
quiet=$OUT
for row in "runs list|RUN" "wakes|RUN KEY" "subscription list|TOKENS" "timer list|NEXT" \
  "approvals|PREVIEW" "kill status|REASON" "memory list $quiet|LABEL" "tool list $quiet|TOOL" \
  "runs list --agent $quiet|STATUS"; do
  read -r -a args <<<"${row%|*}"
  expect 0 "${args[@]}"
  has "$OUT" "${row#*|}"
  [ -n "$ERR" ] && passed=$((passed + 1)) || { echo "FAIL: ${row%|*}: no empty note"; fail_count; }
done

# The scripted label: an echo without a cassette, a replay with one.
expect 0 chat "$id" -m hello
has "$ERR" "(scripted model, no cassette:"
has "$OUT" "hello"
cat >"$T/cassette.json" <<'JSON'
{"vigil_cassette":1,"exchanges":[{"response":{"text":"From the cassette."}}]}
JSON
VIGIL_MODEL_CASSETTE="$T/cassette.json" expect 0 chat "$id" -m again
has "$ERR" "(scripted model:"
has "$OUT" "From the cassette."

# A turn stopped by a kill switch is refused by policy: exit 10, one line, also with --json.
expect 0 kill on --agent "$id" --reason test
expect 10 chat "$id" -m "are you there"
one_line "$ERR"
has "$ERR" "kill switch"
expect 10 chat "$id" -m "are you there" --json
has "$OUT" '"end": "hard_stopped"'
expect 0 kill off --agent "$id"
expect 0 chat "$id" -m "back"

# Filters are validated and name what they accept.
expect 2 approvals --status bogus
one_line "$ERR"
has "$ERR" "pending, approved, rejected, expired"
expect 2 wakes --status bogus
one_line "$ERR"
has "$ERR" "queued, started, completed, skipped, failed"
expect 0 wakes --status completed

# Global options after the command.
other="$T/other/vigil.db"
VIGIL_STORE=/nonexistent/vigil.db expect 0 init --store "$other"
has "$OUT" "$other"
VIGIL_STORE=/nonexistent/vigil.db expect 0 agent create --name There --store "$other"
VIGIL_STORE=/nonexistent/vigil.db expect 0 agent list --store="$other"
has "$OUT" "There"
expect 2 agent list --store
one_line "$ERR"
expect 2 --store # before the command too: the path is what is missing, not the option
has "$ERR" "--store needs a path"
# An empty $VIGIL_STORE (a script's unset variable) is refused, not read as "the default store".
HOME="$T/home" VIGIL_STORE= expect 2 init
one_line "$ERR"
has "$ERR" "VIGIL_STORE is set but empty"
[ ! -e "$T/home/.local/share/vigil" ] || bad "an empty VIGIL_STORE made the default store"
VIGIL_STORE= expect 0 agent list --store "$other" # --store still wins

# vigil help and vigil help COMMAND.
expect 0 help
has "$OUT" "usage: vigil"
has "$OUT" "serve"
expect 0 help memory
has "$OUT" "vigil memory seed"
expect 2 help nothing
one_line "$ERR"

# vigil serve says on start that the model is scripted.
"$VIGIL" serve --workers 1 --poll-ms 50 >"$T/serve.log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true; chattr -i "$T/ro.db" "$T/rodir" "$T/sealed/copy.db" "$T/sealed" 2>/dev/null || true; rm -rf "$T"' EXIT
for _ in $(seq 1 400); do grep -q serving "$T/serve.log" && break; sleep 0.05; done
has "$(cat "$T/serve.log")" "the model is scripted"
kill -TERM $pid
wait $pid || true

# A read-only store or folder: "permission denied", exit 10. Root writes through file modes,
# so as root the store is made immutable (chattr +i); where that is unsupported, this part is
# skipped and says so.
make_ro() { if [ "$(id -u)" -eq 0 ]; then chattr +i "$1"; else chmod a-w "$1"; fi; }
VIGIL_STORE="$T/ro.db" expect 0 init
VIGIL_STORE="$T/ro.db" expect 0 agent create --name Frozen
mkdir "$T/rodir"
if make_ro "$T/ro.db" 2>/dev/null && make_ro "$T/rodir" 2>/dev/null; then
  VIGIL_STORE="$T/ro.db" expect 10 init
  one_line "$ERR"
  has "$ERR" "permission denied"
  VIGIL_STORE="$T/ro.db" expect 0 agent list # reading works
  has "$OUT" "Frozen"
  VIGIL_STORE="$T/ro.db" expect 10 agent create --name Thaw
  one_line "$ERR"
  has "$ERR" "permission denied"
  VIGIL_STORE="$T/rodir/vigil.db" expect 10 init
  one_line "$ERR"
  has "$ERR" "permission denied"
  VIGIL_STORE="$T/rodir/sub/vigil.db" expect 10 init
  one_line "$ERR"
  has "$ERR" "permission denied"
  # A copy of the store alone (no log beside it) in a folder nobody may write: reads work too.
  mkdir "$T/sealed"
  cp "$T/ro.db" "$T/sealed/copy.db"
  make_ro "$T/sealed/copy.db"
  make_ro "$T/sealed"
  VIGIL_STORE="$T/sealed/copy.db" expect 0 agent list
  has "$OUT" "Frozen"
  VIGIL_STORE="$T/sealed/copy.db" expect 10 agent create --name Thaw
  has "$ERR" "permission denied"
  # The daemon too, before it makes its token file (trial C18 of session 30: exit 5 about
  # the token file). It refuses at once; the timeout only bounds a daemon that would start.
  VIGIL_REAL="$VIGIL"
  VIGIL="$T/serve-timeout"
  printf '#!/bin/sh\nexec timeout 20 "%s" "$@"\n' "$VIGIL_REAL" >"$VIGIL"
  chmod +x "$VIGIL"
  VIGIL_STORE="$T/sealed/copy.db" expect 10 serve --listen 127.0.0.1:18999
  one_line "$ERR"
  has "$ERR" "permission denied: the store"
  has "$ERR" "is read-only"
  VIGIL_STORE="$T/sealed/copy.db" expect 10 serve
  has "$ERR" "is read-only"
  VIGIL="$VIGIL_REAL"
  if [ "$(id -u)" -eq 0 ]; then chattr -i "$T/sealed/copy.db" "$T/sealed"; else chmod u+w "$T/sealed/copy.db" "$T/sealed"; fi
  if [ "$(id -u)" -eq 0 ]; then chattr -i "$T/ro.db" "$T/rodir"; else chmod u+w "$T/ro.db" "$T/rodir"; fi
else
  echo "SKIP: cannot make a file read-only for this user here (chattr +i unsupported)"
fi
finish
