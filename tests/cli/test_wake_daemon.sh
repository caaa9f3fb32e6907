#!/usr/bin/env bash
# End-to-end: `vigil serve` with a test runner that writes one effect record per step (each
# guarded by an operation id) and blocks after step 1 while a file exists.
#  1. one daemon per store: a second `vigil serve` is refused with a clear message;
#  2. kill -9 in the middle of a run, restart: the run is re-queued under its run key, finishes,
#     no step's effect is applied twice and no record is lost;
#  3. SIGTERM with a short grace period: the blocked run is checkpointed as interrupted
#     (re-queued), the daemon exits 0, and the next daemon completes it;
#  4. `vigil notify` reaches a running daemon through the durable queue;
#  5. a wake reaches a daemon through its control socket without polling;
#  6. a due timer that cannot be computed (libical missing) is reported and retried at the next
#     poll, not in a loop, and the daemon still stops on SIGTERM.
# The waits below poll a real process's progress; no assertion depends on timing.
# proves: S3-016 S0-173 S0-172 S0-014 S0-020
source "$(dirname "$0")/lib.sh" "$1"
# The test runner is not in the product's command: vigil-test is the same command with it.
VIGIL_TEST=${VIGIL_TEST_CLI:-$(dirname "$VIGIL")/vigil-test}
unset VIGIL_WAKE_RUNNER
PIDS=()

check() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', expected '$2'"; fi; }

cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

WAIT_TRIES=400 WAIT_STEP=0.05 # every look runs vigil and python3

# field KEY FIELD: a field of the run with run key KEY, from `vigil wakes --json`.
field() {
  "$VIGIL" wakes --json --limit 1000 | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    if r["run_key"] == sys.argv[1]:
        v = r.get(sys.argv[2]); print("" if v is None else v); break
' "$1" "$2"
}

run_status_is() { [ "$(field "$1" status)" = "$2" ]; }
effects() { sqlite3 "$VIGIL_STORE" "select count(*) from records_text where kind='test_effect' and k1='$1'"; }

"$VIGIL" init >/dev/null || bad "init"
A=$("$VIGIL" agent create --name crashy)
"$VIGIL" agent resume "$A" >/dev/null || bad "resume"

BLOCK="$T/block"
touch "$BLOCK"
VIGIL_WAKE_RUNNER="test:steps=3:block=$BLOCK" "$VIGIL_TEST" serve --workers 1 --poll-ms 20 \
  >"$T/serve1.log" 2>&1 &
D1=$!
PIDS+=("$D1")
wait_for grep -q "serving" "$T/serve1.log" || bad "daemon 1 did not start: $(cat "$T/serve1.log")"

# 1. a second daemon on the same store is refused
"$VIGIL" serve >"$T/out" 2>"$T/err"
check "$?" "6" "second daemon exit status"
grep -q "already serves store" "$T/err" && ok || bad "second daemon message: $(cat "$T/err")"
check "$(wc -l <"$T/err" | tr -d ' ')" "1" "one-line error"

# 2. kill -9 in the middle of a run
KEY=$("$VIGIL" wake "$A" 2>"$T/err")
grep -q "queued for the running daemon" "$T/err" && ok || bad "wake did not reach the daemon"
wait_for test -f "$BLOCK.reached" || bad "the run never reached its first step"
check "$(cat "$BLOCK.reached")" "$KEY" "the blocked run is ours"
check "$(field "$KEY" status)" "started" "status while running"
check "$(effects "$KEY")" "1" "effects before the crash"
kill -9 "$D1" 2>/dev/null
wait "$D1" 2>/dev/null || true
rm -f "$BLOCK" "$BLOCK.reached"

VIGIL_WAKE_RUNNER="test:steps=3" "$VIGIL_TEST" serve --workers 1 --poll-ms 20 >"$T/serve2.log" 2>&1 &
D2=$!
PIDS+=("$D2")
wait_for run_status_is "$KEY" completed || bad "run not completed after restart: $(field "$KEY" status)"
grep -q "re-queued 1 interrupted run" "$T/serve2.log" && ok || bad "no recovery line: $(cat "$T/serve2.log")"
check "$(field "$KEY" attempts)" "2" "attempts"
check "$(field "$KEY" reason)" "recovery" "reason after recovery"
check "$(field "$KEY" original_reason)" "manual" "original reason"
check "$(effects "$KEY")" "3" "each step's effect exactly once"
check "$("$VIGIL" wakes --agent "$A" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" \
  "1" "one run in the log"

# 4. notify reaches the running daemon
"$VIGIL" subscription add "$A" --token TASK >/dev/null || bad "subscription add"
"$VIGIL" notify TASK task-7 2>"$T/err" || bad "notify"
grep -q "queued for the running daemon" "$T/err" && ok || bad "notify did not reach the daemon"
sub_done() {
  "$VIGIL" wakes --agent "$A" --status completed --json |
    python3 -c 'import json,sys; sys.exit(0 if any(r["reason"]=="subscription" and "task-7" in r["tokens"] for r in json.load(sys.stdin)) else 1)'
}
wait_for sub_done || bad "the subscription wake did not run: $("$VIGIL" wakes)"

kill -TERM "$D2"
wait "$D2"
check "$?" "0" "daemon 2 exit status on SIGTERM"

# 3. SIGTERM while a run is blocked: checkpointed as interrupted, re-queued, exit 0
touch "$BLOCK"
VIGIL_WAKE_RUNNER="test:steps=2:block=$BLOCK" "$VIGIL_TEST" serve --workers 1 --poll-ms 20 --grace-ms 100 \
  >"$T/serve3.log" 2>&1 &
D3=$!
PIDS+=("$D3")
wait_for grep -q "serving" "$T/serve3.log" || bad "daemon 3 did not start"
K2=$("$VIGIL" wake "$A" 2>/dev/null)
wait_for test -f "$BLOCK.reached" || bad "run 2 never started"
kill -TERM "$D3"
wait "$D3"
check "$?" "0" "daemon 3 exit status after the grace period"
grep -q "grace period over" "$T/serve3.log" && ok || bad "no grace message: $(cat "$T/serve3.log")"
check "$(field "$K2" status)" "queued" "interrupted run is queued again"
check "$(field "$K2" reason)" "recovery" "interrupted run reason"
rm -f "$BLOCK"
# No daemon now: `vigil wake` runs the queue in-process, the interrupted run included.
VIGIL_WAKE_RUNNER="test:steps=2" "$VIGIL_TEST" wake "$A" >/dev/null 2>"$T/err"
grep -q "no daemon running" "$T/err" && ok || bad "in-process run: $(cat "$T/err")"
check "$(field "$K2" status)" "completed" "interrupted run completed later"
check "$(effects "$K2")" "2" "run 2 effects exactly once"

# 5. event-driven: with a one-minute poll, `vigil wake` still runs at once (control socket)
VIGIL_WAKE_RUNNER="test:steps=1" "$VIGIL_TEST" serve --workers 1 --poll-ms 60000 >"$T/serve4.log" 2>&1 &
D4=$!
PIDS+=("$D4")
wait_for test -S "$VIGIL_STORE.sock" || bad "no control socket: $(cat "$T/serve4.log")"
# The start-up tick is a zero-delay timer, and libuv runs timers before any socket callback,
# so once a first wake has completed the start-up tick is behind us: the next wake can only be
# run through the socket (the next tick is a minute away).
K0=$("$VIGIL" wake "$A" 2>/dev/null)
wait_for run_status_is "$K0" completed || bad "first wake not run: $(field "$K0" status)"
K3=$("$VIGIL" wake "$A" 2>/dev/null)
wait_for run_status_is "$K3" completed || bad "wake not run without polling: $(field "$K3" status)"
kill -TERM "$D4"
wait "$D4"
check "$?" "0" "daemon 4 exit status"
[ ! -e "$VIGIL_STORE.sock" ] && ok || bad "control socket left behind"

# 6. a due timer the daemon cannot compute: one error per tick, not a busy loop
"$VIGIL" timer add "$A" --cron "0 7 * * *" >/dev/null || bad "timer add"
sqlite3 "$VIGIL_STORE" "update records set seq = 1000, body = json_set(body, '$.next_run_ms', 1000) where kind = 'timer'" # due long ago
VIGIL_LIBICAL=/nonexistent/libical.so.3 "$VIGIL" serve --workers 1 --poll-ms 60000 \
  >"$T/serve5.log" 2>&1 &
D5=$!
PIDS+=("$D5")
wait_for grep -q "timers need libical" "$T/serve5.log" || bad "no libical error: $(cat "$T/serve5.log")"
"$VIGIL" agent list >/dev/null # a round trip of another process: a spinning loop logs thousands
n=$(grep -c "timers need libical" "$T/serve5.log")
[ "$n" -le 3 ] && ok || bad "the daemon retried the timer $n times without waiting for a tick"
kill -TERM "$D5"
wait "$D5"
check "$?" "0" "daemon 5 exit status"

# 7. libvigil ships only what users run: the product's command knows no test runner, and says
#    so in a message that names the runner (exit 2, EINVAL), on a store of its own.
P="$T/product.db"
VIGIL_STORE="$P" "$VIGIL" init >/dev/null || bad "init $P"
VIGIL_WAKE_RUNNER="test:steps=1" VIGIL_STORE="$P" "$VIGIL" serve >/dev/null 2>"$T/err"
check "$?" "2" "serve with a test runner, product command"
grep -q 'unknown runner "test:steps=1"' "$T/err" && ok || bad "no unknown runner message: $(cat "$T/err")"

finish
