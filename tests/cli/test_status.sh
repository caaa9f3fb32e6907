#!/usr/bin/env bash
# `vigil status` (trial G7): the store, its daemons, the queue, what waits for a person, the
# next timer, and what needs attention, with exit 0 when all is well and 11 when something needs
# a person.
#  1. SQLite: a fresh store is well (exit 0); a timer names its agent; a kill switch on needs
#     attention (exit 11); a daemon serving the store is listed with its pid (from the lock);
#     killed with -9 mid-run, its wake reads running with its process gone ("orphaned"); a wake
#     queued with no daemon says so; --json gives the same as one object.
#  2. PostgreSQL (VIGIL_PG_URI; skipped without it): a daemon's record is listed alive; killed
#     with -9 it is stale (exit 11, saying how to clear it), `--prune-stale` removes it, and a
#     live daemon removes on its own a record whose beat is a day old.
# The waits poll real progress; no assertion depends on timing.
source "$(dirname "$0")/lib.sh" "$1"
VIGIL_TEST=${VIGIL_TEST_CLI:-$(dirname "$VIGIL")/vigil-test}
unset VIGIL_WAKE_RUNNER
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
WAIT_TRIES=600 WAIT_STEP=0.05

j() { printf '%s' "$OUT" | jq -r "$1"; }
check() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', expected '$2'"; fi; }

# ---- 1. SQLite ------------------------------------------------------------------------------
expect 0 init
expect 0 status
has "$OUT" "store        $VIGIL_STORE (sqlite, schema "
has "$OUT" "daemons      0 alive, 0 stale"
has "$OUT" "next timer   none"
has "$OUT" "all is well"
A=$("$VIGIL" agent create --name Watcher)
"$VIGIL" agent resume "$A" >/dev/null || bad "resume"
expect 0 timer add Watcher --cron "*/5 * * * *"
expect 0 status --json
check "$(j .next_timer.agent_name)" "Watcher" "the next timer's agent"
check "$(j .next_timer.agent_id)" "$A" "the next timer's agent id"
check "$(j .agents.active)" "1" "active agents"
check "$(j .store.kind)" "sqlite" "store kind"
check "$(j '.attention | length')" "0" "nothing needs attention"

expect 0 kill on --reason "maintenance"
expect 11 status
has "$OUT" "kill switch  ON:"
has "$OUT" "needs attention:"
has "$OUT" "a kill switch is on"
expect 0 kill off

# A daemon serving the store, blocked in a run: alive, one wake running.
BLOCK="$T/block"
touch "$BLOCK"
VIGIL_WAKE_RUNNER="test:steps=2:block=$BLOCK" "$VIGIL_TEST" serve --workers 1 --poll-ms 20 \
  >"$T/serve1.log" 2>&1 &
D1=$!
PIDS+=("$D1")
wait_for grep -q "serving" "$T/serve1.log" || bad "daemon 1 did not start: $(cat "$T/serve1.log")"
KEY=$("$VIGIL" wake "$A" 2>/dev/null)
wait_for test -f "$BLOCK.reached" || bad "the run never reached its first step"
expect 0 status --json
check "$(j '.daemons | length')" "1" "one daemon"
check "$(j '.daemons[0].pid')" "$D1" "the daemon's pid"
check "$(j '.daemons[0].stale')" "false" "the daemon is alive"
check "$(j .wakes.running)" "1" "one wake running"
check "$(j .wakes.orphaned)" "0" "none orphaned"
expect 0 status
has "$OUT" "pid $D1 on "

# Killed with -9: its wake still reads running, and nobody runs it.
kill -9 "$D1"
wait "$D1" 2>/dev/null || true
expect 11 status --json
check "$(j '.daemons | length')" "0" "no daemon after the kill"
check "$(j .wakes.orphaned)" "1" "the wake is orphaned"
has "$(j '.attention[]')" "process is gone: the next \`vigil serve\` or \`vigil wake\` recovers"

# SIGTERM past its grace: the run is queued again, with no daemon to run it.
rm -f "$BLOCK" "$BLOCK.reached"
touch "$BLOCK"
VIGIL_WAKE_RUNNER="test:steps=2:block=$BLOCK" "$VIGIL_TEST" serve --workers 1 --poll-ms 20 \
  --grace-ms 100 >"$T/serve2.log" 2>&1 &
D2=$!
PIDS+=("$D2")
wait_for test -f "$BLOCK.reached" || bad "the recovered run never started: $(cat "$T/serve2.log")"
kill -TERM "$D2"
wait "$D2"
expect 11 status --json
check "$(j .wakes.queued)" "1" "one wake queued"
check "$(j .wakes.oldest_queued_agent_name)" "Watcher" "the oldest queued wake's agent"
[ "$(j .wakes.oldest_queued_age_ms)" -ge 0 ] && ok || bad "oldest queued age: $(j .wakes.oldest_queued_age_ms)"
has "$(j '.attention[]')" "1 wake(s) queued and no daemon runs: start \`vigil serve\`"
expect 11 status
has "$OUT" "oldest queued: "
has "$OUT" "agent Watcher ($A)"
rm -f "$BLOCK"
VIGIL_WAKE_RUNNER="test:steps=2" "$VIGIL_TEST" wake "$A" >/dev/null 2>&1
expect 0 status --json
check "$(j .wakes.queued)" "0" "the queue ran"
check "$(j '.attention | length')" "0" "well again"

# No store: exit 3 with the usual hint.
expect 3 --store "$T/none.db" status
has "$ERR" "does not exist"

# ---- 2. PostgreSQL ------------------------------------------------------------------------------
if [ -n "${VIGIL_PG_URI:-}" ] && command -v psql >/dev/null; then
  base=${VIGIL_PG_URI%%\?*}
  query=${VIGIL_PG_URI#"$base"}
  DB="vigil_status_$$"
  psql "$VIGIL_PG_URI" -qAtc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
  psql "$VIGIL_PG_URI" -qAtc "CREATE DATABASE $DB" >/dev/null || bad "create database"
  export VIGIL_STORE="${base%/*}/$DB$query"
  sql() { psql "$VIGIL_STORE" -qAtc "$1"; }
  expect 0 init
  expect 0 status --json
  check "$(j .store.kind)" "postgres" "store kind"
  check "$(j .store.uri)" "$VIGIL_STORE" "store uri"
  check "$(j '.daemons | length')" "0" "no daemon yet"
  B=$("$VIGIL" agent create --name pgWatcher)

  "$VIGIL" serve --workers 1 --poll-ms 20 >"$T/pg1.log" 2>&1 &
  P1=$!
  PIDS+=("$P1")
  wait_for grep -q "serving" "$T/pg1.log" || bad "pg daemon did not start: $(cat "$T/pg1.log")"
  has_record() { [ "$(sql "select count(*) from records where kind='daemon'")" -ge "$1" ]; }
  wait_for has_record 1 || bad "no daemon record"
  expect 0 status --json
  check "$(j '.daemons | length')" "1" "one daemon recorded"
  check "$(j '.daemons[0].pid')" "$P1" "its pid"
  check "$(j '.daemons[0].stale')" "false" "alive"
  expect 0 status
  has "$OUT" "daemons      1 alive, 0 stale"
  has "$OUT" "pid $P1 on "

  kill -9 "$P1"
  wait "$P1" 2>/dev/null || true
  expect 11 status --json
  check "$(j '.daemons[0].stale')" "true" "the killed daemon's record is stale"
  has "$(j '.attention[]')" "vigil status --prune-stale"
  expect 11 status
  has "$OUT" "daemons      0 alive, 1 stale"
  has "$OUT" "STALE (killed, or its host is down)"
  expect 0 status --prune-stale --json
  has "$ERR" "removed 1 stale daemon record(s)"
  check "$(j '.daemons | length')" "0" "the stale record is gone"

  # A record of a daemon on another host, silent for two days: a live daemon removes it.
  old=$(($(date +%s) * 1000 - 2 * 86400 * 1000))
  sql "insert into records(kind,id,owner,k1,k2,seq,rev,at,body) values('daemon','daemon:1:gone','','elsewhere','',$old,1,$old,'{\"holder\":\"daemon:1:gone\",\"host\":\"elsewhere\",\"pid\":1,\"started_ms\":$old,\"beat_ms\":$old,\"runs\":0}')"
  expect 11 status --json
  check "$(j '.daemons[0].host')" "elsewhere" "the other host's record"
  check "$(j '.daemons[0].stale')" "true" "stale by its beats"
  "$VIGIL" serve --workers 1 --poll-ms 20 >"$T/pg2.log" 2>&1 &
  P2=$!
  PIDS+=("$P2")
  gone_old() { [ "$(sql "select count(*) from records where kind='daemon' and id='daemon:1:gone'")" = 0 ]; }
  wait_for gone_old || bad "the live daemon did not remove the day-old record"
  wait_for grep -q "removed 1 record(s) of daemons silent for a day" "$T/pg2.log" && ok ||
    bad "no line for the removal: $(cat "$T/pg2.log")"
  expect 0 status --json
  check "$(j '.daemons | length')" "1" "only the live daemon"
  check "$(j '.daemons[0].pid')" "$P2" "the live daemon's pid"
  kill -TERM "$P2"
  wait "$P2"
  psql "$VIGIL_PG_URI" -qAtc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1
else
  echo "PostgreSQL part skipped: VIGIL_PG_URI is not set"
fi

finish
