#!/usr/bin/env bash
# End-to-end: what vigil creates holds a person's conversations and memory, so under umask 000
# `vigil init` on the default (XDG) store, a chat, a journal export and `vigil serve` leave
# every folder they made 0700 and every file (the store, its -wal and -shm, the export, the
# daemon's lock file and control socket) 0600.
# The wait below polls a real process's progress; no assertion depends on timing.
set -e
source "$(dirname "$0")/lib.sh" "$1"
umask 000
unset VIGIL_STORE
export XDG_DATA_HOME="$T/xdg" VIGIL_MODEL_PROVIDER=scripted
data="$XDG_DATA_HOME/vigil"
PID=""
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; true' EXIT

# check_modes DIR MIN: every folder under DIR is 0700 and everything else 0600; MIN entries at
# least.
check_modes() {
  local wrong n
  wrong=$(find "$1" \( \( -type d ! -perm 0700 \) -o \( ! -type d ! -perm 0600 \) \) \
    -printf '%m %p\n')
  n=$(find "$1" | wc -l)
  if [ -z "$wrong" ] && [ "$n" -ge "$2" ]; then
    passed=$((passed + 1))
  else
    echo "FAIL: not private (or fewer than $2 entries: $n): $wrong"
    fail_count
  fi
}

expect 0 init
A=$("$VIGIL" agent create --name diary)
expect 0 chat "$A" -m "my diary entry"
has "$OUT" "my diary entry"
expect 0 journal export "$A" --dir "$data/exports"
# xdg/, xdg/vigil/, the store, its -wal and -shm, exports/, exports/agent-journals/, the export.
check_modes "$XDG_DATA_HOME" 8

# The daemon's lock file and control socket, while it serves.
"$VIGIL" serve --workers 1 --poll-ms 20 >"$T/serve.log" 2>&1 &
PID=$!
for _ in $(seq 1 400); do
  if grep -q "serving" "$T/serve.log"; then break; fi
  sleep 0.05
done
has "$(cat "$T/serve.log")" "serving"
if [ -S "$data/vigil.db.sock" ]; then
  passed=$((passed + 1))
else
  echo "FAIL: no control socket: $(ls -l "$data")"
  fail_count
fi
check_modes "$XDG_DATA_HOME" 10
kill -TERM "$PID"
wait "$PID" || true
PID=""
check_modes "$XDG_DATA_HOME" 8
finish
