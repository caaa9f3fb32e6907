#!/usr/bin/env bash
# bench_serve.sh: vigil on the daemon's path. AGENTS agents (default 100), each subscribed to one
# token, take TURNS turns (default 5) through a running `vigil serve`: each turn is one
# `vigil notify bench.turn` from the CLI (the daemon hears it on its control socket), which wakes
# every agent once; the next turn starts when the daemon has completed every wake of this one.
# The model is the scripted one with no cassette (it answers at once, "echo"; docs/models.md)
# unless VIGIL_MODEL_* variables in the environment choose another.
#
# Printed: the daemon's CPU (user + system, from /proc) and wall time per wake run from the first
# notify to the last completed wake, its peak resident memory (VmHWM), the store's bytes per
# run, and model calls per run. What it covers: the daemon's notification intake, wake queue,
# workers and fibers, the agent loop and its store writes. What it does not: the CLI processes
# (they are other processes; their CPU is not counted), nor tool calls (the echo model asks for
# none: a run here is one model call). Agent creation and subscriptions are set up before the
# daemon starts and are not counted.
#
#   bench/bench_serve.sh [VIGIL_BINARY] [AGENTS] [TURNS] [WORKERS]
set -euo pipefail
VIGIL=${1:-build/vigil}
AGENTS=${2:-100}
TURNS=${3:-5}
WORKERS=${4:-2}
# The CLI lists at most 1000 wakes or runs a page.
[ $((AGENTS * TURNS)) -le 1000 ] || { echo "bench_serve: AGENTS x TURNS must be at most 1000" >&2; exit 2; }
[ -x "$VIGIL" ] || { echo "bench_serve: no vigil binary at $VIGIL (build it first)" >&2; exit 2; }
VIGIL=$(cd "$(dirname "$VIGIL")" && pwd)/$(basename "$VIGIL")
DIR=$(mktemp -d "${TMPDIR:-/tmp}/vigil-bench-serve.XXXXXX")
export VIGIL_STORE="$DIR/vigil.db"
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    if [ -n "${BENCH_KEEP:-}" ]; then echo "bench_serve: kept $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

"$VIGIL" init >/dev/null
for i in $(seq "$AGENTS"); do
    id=$("$VIGIL" agent create --name "bench-$i" --json | jq -r .id)
    "$VIGIL" subscription add "$id" --token bench.turn >/dev/null
done

bytes0=$(du -cb "$VIGIL_STORE"* | tail -1 | cut -f1)
# No debounce: a notification is the turn, nothing to merge it with.
"$VIGIL" serve --workers "$WORKERS" --runs-per-worker 64 --debounce-ms 0 >"$DIR/serve.log" 2>&1 &
PID=$!
for _ in $(seq 300); do [ -S "$VIGIL_STORE.sock" ] && break; sleep 0.05; done
[ -S "$VIGIL_STORE.sock" ] || { echo "bench_serve: the daemon did not start" >&2; cat "$DIR/serve.log" >&2; exit 1; }

tick=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
completed() { "$VIGIL" wakes --status completed --limit 1000 --json | jq length; }
now_ms() { date +%s%3N; }

c0=$(cpu_ticks)
c_turn=$c0
turns=
t0=$(now_ms)
for t in $(seq "$TURNS"); do
    "$VIGIL" notify bench.turn >/dev/null 2>&1
    want=$((t * AGENTS))
    # Polling is the CLI's only way to see the log; it costs the CLI's CPU, not the daemon's.
    for _ in $(seq 6000); do [ "$(completed)" -ge "$want" ] && break; sleep 0.05; done
    [ "$(completed)" -ge "$want" ] || { echo "bench_serve: turn $t did not complete" >&2; exit 1; }
    c=$(cpu_ticks)
    turns="$turns $(( (c - c_turn) * 1000 / tick ))"
    c_turn=$c
done
t1=$(now_ms)
c1=$(cpu_ticks)
hwm=$(awk '/VmHWM/{print $2}' "/proc/$PID/status")
calls=$("$VIGIL" runs list --limit 1000 --json | jq '[.items[].model_calls] | add')
runs=$("$VIGIL" runs list --limit 1000 --json | jq '.items | length')
failed=$("$VIGIL" wakes --status failed --limit 1000 --json | jq length)
kill "$PID"
wait "$PID" || true
PID=
# After the daemon closed the store (its log checkpointed and emptied in place).
bytes1=$(du -cb "$VIGIL_STORE"* | tail -1 | cut -f1)

awk -v a="$AGENTS" -v t="$TURNS" -v w="$WORKERS" -v runs="$runs" -v calls="$calls" \
    -v cpu=$((c1 - c0)) -v tick="$tick" -v wall=$((t1 - t0)) -v hwm="$hwm" -v failed="$failed" \
    -v b=$((bytes1 - bytes0)) -v turns="$turns" 'BEGIN {
    n = a * t
    printf "bench_serve: %d agents x %d turns through vigil serve (%d workers): %d runs, %d failed, %d model calls\n", a, t, w, runs, failed, calls
    printf "  daemon CPU %.0f ms: %.3f ms per run (per model call)\n", cpu * 1000 / tick, cpu * 1000 / tick / n
    printf "  wall %d ms from the first notify to the last completed wake: %.3f ms per run\n", wall, wall / n
    printf "  daemon peak RSS %.1f MB; store %.0f bytes per run\n", hwm / 1024, b / n
    printf "  daemon CPU per turn (ms, first turn first; a first run also seeds the agent'"'"'s memory):%s\n", turns
}'
