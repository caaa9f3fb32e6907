#!/usr/bin/env bash
# bench_mcp_serve.sh: the time from `vigil serve` starting to an agent's first MCP call
# answered, through the daemon (issue 28), with SERVERS MCP servers declared (default 10: one
# in the agent's manifest that it calls, the others in the config file, never called). Each run
# is a fresh store and daemon: as soon as the daemon says it is serving, `vigil wake AGENT -m go`
# gives it its first run, the agent's; its scripted model asks for `s0__ok` (vigil's fault
# server, tests/mcp/fault_server.js), then answers. The run is complete when its wake is
# completed; the clock stops there.
#
# Printed per declared-server count (1 and SERVERS), over RUNS runs (default 5): the median
# wall time from the daemon's start to its "serving" line and to the first MCP call arriving at
# the server (the fault server notes the time of each tools/call), the median and
# the worst wall time from the daemon's start to the completed wake, the median CPU the daemon
# itself used by then (user + system from /proc, its children's not included), and how many
# server processes started (lazy: 1, whatever SERVERS is). The difference between the two rows is
# what the unused declarations cost the daemon's start. What the figure includes besides: the
# daemon's start, node starting the one server (the larger part, ~50-150 ms on a busy VM), the
# run's store writes, and the CLI polls (every 10 ms) that see the wake completed.
#
# BENCH_CALLGRIND=1 runs the daemon under callgrind and adds the column daemon_Ir: the
# instructions the daemon executed from its start to its exit (SIGTERM right after the wake
# completed), the most robust of these figures on a shared machine (the wall and CPU columns
# then measure valgrind).
#
#   bench/bench_mcp_serve.sh [VIGIL_BINARY] [SERVERS] [RUNS]
set -euo pipefail
VIGIL=${1:-build/vigil}
SERVERS=${2:-10}
RUNS=${3:-5}
SRC=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$VIGIL" ] || { echo "bench_mcp_serve: no vigil binary at $VIGIL (build it first)" >&2; exit 2; }
command -v node >/dev/null || { echo "bench_mcp_serve: node is not installed" >&2; exit 2; }
VIGIL=$(cd "$(dirname "$VIGIL")" && pwd)/$(basename "$VIGIL")
DIR=$(mktemp -d "${TMPDIR:-/tmp}/vigil-bench-mcp-serve.XXXXXX")
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT
export VIGIL_MODEL_PROVIDER=scripted VIGIL_MODEL_CASSETTE="$DIR/cassette.json"
cat >"$VIGIL_MODEL_CASSETTE" <<'JSON'
{"vigil_cassette":1,"exchanges":[
 {"response":{"tool_calls":[{"id":"c1","name":"s0__ok","arguments":{}}]}},
 {"response":{"text":"done"}}]}
JSON

now_ms() { date +%s%3N; }

# one_run N: a fresh store with N servers declared; prints
# "wall_ms daemon_cpu_ms started serving_ms first_call_ms daemon_Ir" (Ir "-" without callgrind).
one_run() {
    local n=$1 run=$DIR/run id t0 t1
    rm -rf "$run" && mkdir -p "$run"
    export VIGIL_STORE="$run/vigil.db" VIGIL_CONFIG="$run/config.yaml"
    { echo "mcp_servers:"
      for i in $(seq 1 $((n - 1))); do
          printf '  s%d:\n    command: [node, "%s/tests/mcp/fault_server.js"]\n' "$i" "$SRC"
          printf '    env: {FAULT_STARTS_FILE: "%s/starts"}\n' "$run"
      done; } >"$VIGIL_CONFIG"
    printf 'name: caller\ntools: ["s0__*"]\nmcp_servers:\n  s0:\n    command: [node, "%s/tests/mcp/fault_server.js"]\n    env: {FAULT_STARTS_FILE: "%s/starts", FAULT_CALLS_FILE: "%s/calls"}\n' \
        "$SRC" "$run" "$run" >"$run/caller.yaml"
    "$VIGIL" init >/dev/null
    id=$("$VIGIL" agent apply "$run/caller.yaml" --json | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -n 1)
    "$VIGIL" agent resume "$id" >/dev/null 2>&1 || true
    t0=$(now_ms)
    local wrap=()
    [ -n "${BENCH_CALLGRIND:-}" ] && wrap=(valgrind --tool=callgrind --callgrind-out-file="$run/cg.out")
    "${wrap[@]}" "$VIGIL" serve --workers 1 --poll-ms 10 >"$run/serve.log" 2>&1 &
    PID=$!
    until grep -q serving "$run/serve.log"; do
        kill -0 "$PID" 2>/dev/null || { echo "bench_mcp_serve: the daemon died: $(cat "$run/serve.log")" >&2; exit 1; }
        sleep 0.01
    done
    ts=$(now_ms)
    "$VIGIL" wake "$id" -m go >/dev/null 2>&1
    tw=$(now_ms)
    until "$VIGIL" wakes --agent "$id" --status completed --json 2>/dev/null | grep -q '"run_key"'; do
        kill -0 "$PID" 2>/dev/null || { echo "bench_mcp_serve: the daemon died: $(cat "$run/serve.log")" >&2; exit 1; }
        sleep 0.01
    done
    t1=$(now_ms)
    # The daemon's own CPU (user + system ticks; its children's, node's, are not in these two).
    cpu=$(awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$PID/stat")
    kill "$PID" && wait "$PID" 2>/dev/null || true
    PID=
    local ir=-
    [ -n "${BENCH_CALLGRIND:-}" ] &&
        ir=$(callgrind_annotate "$run/cg.out" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
    [ -n "${BENCH_VERBOSE:-}" ] && echo "serving $((ts - t0)) wake-cli $((tw - ts)) run $((t1 - tw))" >&2
    echo "$((t1 - t0)) $cpu $(wc -l <"$run/starts") $((ts - t0)) $(($(head -n 1 "$run/calls") - t0)) $ir"
}

median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
printf '%-9s %10s %15s %14s %13s %15s %15s %s\n' declared serving_ms first_call_ms wall_median_ms \
    wall_worst_ms daemon_cpu_ms daemon_Ir "servers started"
for n in 1 "$SERVERS"; do
    times=() cpus=() servings=() calls=() irs=() started=0
    for _ in $(seq "$RUNS"); do
        read -r ms cpu s serving call ir < <(one_run "$n")
        times+=("$ms")
        cpus+=("$cpu")
        servings+=("$serving")
        calls+=("$call")
        irs+=("$ir")
        started=$s
    done
    worst=$(printf '%s\n' "${times[@]}" | sort -n | tail -n 1)
    printf '%-9s %10s %15s %14s %13s %15s %15s %s\n' "$n" "$(median "${servings[@]}")" \
        "$(median "${calls[@]}")" "$(median "${times[@]}")" "$worst" "$(median "${cpus[@]}")" \
        "$(median "${irs[@]}")" "$started of $n"
done
