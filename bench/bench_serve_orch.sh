#!/usr/bin/env bash
# bench_serve_orch.sh: the dispatcher on the user's path (issue 31: 50 us of dispatcher CPU a
# task for a 10,000-task DAG with instant agents). AGENTS agents of kind "worker" (default 4)
# and a DAG of TASKS tasks (default 1000; task i waits for (i-1)/2 and i/3, as bench_orch's),
# added with `vigil task add --blocks` before the daemon starts, then `vigil task dispatch
# --slots SLOTS` (default 8) queues the first runs and `vigil serve` carries the graph to its
# end: each run's end moves its task and refills the freed slot.
#
# The model (MODEL, default scripted):
#   scripted  the scripted one with no cassette (its echo, at once). It is serial: a worker's
#             runs go one after another, so each run's end is recorded alone.
#   http      an OpenAI-compatible server on localhost (python3, this script's) that answers
#             every request at once: the worker's runs interleave as fibers, as with a hosted
#             model, so the ends that come in together can be recorded together.
#
# Printed: the daemon's CPU (user + system, from /proc) from its "serving" line to the last
# task done, per task, and the wall time; then the dispatcher's own figures from the daemon's
# /metrics (docs/http.md: vigil_dispatcher_cpu_seconds_total, _run_ends_total, _calls_total):
# its thread CPU a task's run end (each end's move, what it unblocks, the refill, their
# commit, the wake's finish; not another fiber's while it waited), and how many ends a call
# carried (1.00: every end alone; more: ends gathered from a worker's fibers, Session 32). What it covers: the whole daemon, so each task's run
# of the agent loop (its journal, its one model call) as well as the dispatcher's share (the
# task's end, the refill's start and wake, their commit); bench_orch measures the dispatcher
# alone. Not counted: building the graph, the CLI's polling (other processes), the server.
#
# BENCH_BUILD=http adds the tasks with POST /v1/tasks on one connection (a daemon serving only
# HTTP meanwhile) instead of one `vigil task add` process each (3-5 minutes a 1,000 tasks).
#
# The daemon is stopped (SIGTERM) at the end, so a BENCH_WRAP tool writes its output.
#
#   bench/bench_serve_orch.sh [VIGIL_BINARY] [TASKS] [AGENTS] [SLOTS] [WORKERS]
# WORKERS defaults to the daemon's own default (`vigil serve` without --workers: 2), so the
# figure is the user's path; each worker keeps its own view of the graph (PERF.md, Session 33).
set -euo pipefail
VIGIL=${1:-build/vigil}
TASKS=${2:-1000}
AGENTS=${3:-4}
SLOTS=${4:-8}
WORKERS=${5:-2}
MODEL=${MODEL:-scripted}
[ -x "$VIGIL" ] || { echo "bench_serve_orch: no vigil binary at $VIGIL (build it first)" >&2; exit 2; }
VIGIL=$(cd "$(dirname "$VIGIL")" && pwd)/$(basename "$VIGIL")
DIR=$(mktemp -d "${TMPDIR:-/tmp}/vigil-bench-serve-orch.XXXXXX")
export VIGIL_STORE="$DIR/vigil.db"
unset VIGIL_MODEL_CASSETTE VIGIL_CONFIG
PID=
SRV=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    [ -n "$SRV" ] && kill "$SRV" 2>/dev/null && wait "$SRV" 2>/dev/null
    if [ -n "${BENCH_KEEP:-}" ]; then echo "bench_serve_orch: kept $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

if [ "$MODEL" = http ]; then
    cat >"$DIR/model.py" <<'EOF'
import json, sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        msg = {"role": "assistant", "content": "done"}
        use = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
        if req.get("stream"):
            chunks = [{"choices": [{"index": 0, "delta": msg, "finish_reason": None}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": use}]
            body = "".join("data: %s\n\n" % json.dumps(c) for c in chunks) + "data: [DONE]\n\n"
            ctype = "text/event-stream"
        else:
            body = json.dumps({"id": "x", "object": "chat.completion", "usage": use,
                               "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}]})
            ctype = "application/json"
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
EOF
    python3 "$DIR/model.py" >"$DIR/port" &
    SRV=$!
    for _ in $(seq 100); do [ -s "$DIR/port" ] && break; sleep 0.05; done
    export VIGIL_MODEL_PROVIDER=openai VIGIL_MODEL=instant OPENAI_API_KEY=none
    export VIGIL_MODEL_BASE_URL="http://127.0.0.1:$(cat "$DIR/port")/v1"
else
    export VIGIL_MODEL_PROVIDER=scripted
fi

# BENCH_DAG=FILE: the agents and the graph are built once into FILE (a store, with its log
# files beside it) and copied from it on later runs, so builds A and B start from the same store.
if [ -n "${BENCH_DAG:-}" ] && [ -f "$BENCH_DAG" ]; then
    for f in "$BENCH_DAG"*; do cp "$f" "$VIGIL_STORE${f#"$BENCH_DAG"}"; done
else
    "$VIGIL" init >/dev/null
    for i in $(seq "$AGENTS"); do "$VIGIL" agent create --name "w$i" --kind worker >/dev/null; done
    # Task i waits for (i-1)/2 and i/3: each is added after what it blocks, so from the last down.
    declare -A kids id
    for ((i = 1; i < TASKS; i++)); do
        kids[$(((i - 1) / 2))]+=" $i"
        [ "$i" -ge 2 ] && [ $((i / 3)) -ne $(((i - 1) / 2)) ] && kids[$((i / 3))]+=" $i"
    done
    b0=$(date +%s)
    if [ "${BENCH_BUILD:-cli}" = http ]; then
        # POST /v1/tasks on one kept connection (a daemon serving HTTP only meanwhile: the
        # dispatcher is not started yet, so it starts nothing): 10,000 tasks in minutes.
        "$VIGIL" serve --workers 1 --listen 127.0.0.1:0 >"$DIR/build.log" 2>&1 &
        PID=$!
        for _ in $(seq 600); do grep -q 'HTTP API on' "$DIR/build.log" 2>/dev/null && break; sleep 0.1; done
        bport=$(sed -n 's/.*HTTP API on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$DIR/build.log" | head -1)
        python3 - "$bport" "$("$VIGIL" token)" "$TASKS" <<'PY'
import http.client, json, sys
port, token, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
kids = {}
for i in range(1, n):
    kids.setdefault((i - 1) // 2, []).append(i)
    if i >= 2 and i // 3 != (i - 1) // 2:
        kids.setdefault(i // 3, []).append(i)
c = http.client.HTTPConnection("127.0.0.1", port)
h = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
ids = {}
for i in range(n - 1, -1, -1):  # each after what it blocks
    body = {"title": "t%d" % i, "kind": "worker", "blocks": [ids[k] for k in kids.get(i, [])]}
    c.request("POST", "/v1/tasks", json.dumps(body), h)
    r = c.getresponse()
    data = r.read()
    if r.status != 201:
        sys.exit("POST /v1/tasks: %d %s" % (r.status, data[:200]))
    ids[i] = json.loads(data)["id"]
PY
        kill "$PID"
        wait "$PID" || true
        PID=
    else
        for ((i = TASKS - 1; i >= 0; i--)); do
            args=()
            for k in ${kids[$i]:-}; do args+=(--blocks "${id[$k]}"); done
            id[$i]=$("$VIGIL" task add --title "t$i" --kind worker "${args[@]}" --json | jq -r .id)
        done
    fi
    echo "bench_serve_orch: built a DAG of $TASKS tasks in $(($(date +%s) - b0)) s"
    if [ -n "${BENCH_DAG:-}" ]; then
        for f in "$VIGIL_STORE"*; do cp "$f" "$BENCH_DAG${f#"$VIGIL_STORE"}"; done
    fi
fi
"$VIGIL" task dispatch --slots "$SLOTS" >/dev/null 2>&1 || true

# BENCH_WRAP runs the daemon under a tool, e.g. BENCH_WRAP="valgrind --tool=callgrind
# --collect-atstart=no --toggle-collect=vg_task_runs_ended --callgrind-out-file=cg.out".
${BENCH_WRAP:-} "$VIGIL" serve --workers "$WORKERS" --runs-per-worker 64 --poll-ms 200 \
    --listen 127.0.0.1:0 >"$DIR/serve.log" 2>&1 &
PID=$!
for _ in $(seq 600); do grep -q serving "$DIR/serve.log" 2>/dev/null && break; sleep 0.1; done
grep -q serving "$DIR/serve.log" || { echo "bench_serve_orch: the daemon did not start" >&2; cat "$DIR/serve.log" >&2; exit 1; }
tick=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
now_ms() { date +%s%3N; }
c0=$(cpu_ticks)
t0=$(now_ms)
ended() { sqlite3 -cmd ".timeout 5000" "file:$VIGIL_STORE?mode=ro" \
    "select count(*) from records_text where kind='task' and k1 in ('done','failed','cancelled')"; }
for _ in $(seq 36000); do [ "$(ended)" -ge "$TASKS" ] && break; sleep 0.1; done
c1=$(cpu_ticks)
t1=$(now_ms)
# The dispatcher's own counters, where an operator reads them (docs/http.md, /metrics).
port=$(sed -n 's/.*HTTP API on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$DIR/serve.log" | head -1)
curl -s -H "Authorization: Bearer $("$VIGIL" token)" "http://127.0.0.1:$port/metrics" >"$DIR/metrics" || true
kill "$PID"
wait "$PID" || true
PID=
done_n=$(sqlite3 "file:$VIGIL_STORE?mode=ro" "select count(*) from records_text where kind='task' and k1='done'")
[ "$done_n" -eq "$TASKS" ] || { echo "bench_serve_orch: $done_n of $TASKS tasks done" >&2; tail -5 "$DIR/serve.log" >&2; exit 1; }
awk -v n="$TASKS" -v a="$AGENTS" -v s="$SLOTS" -v w="$WORKERS" -v m="$MODEL" -v cpu=$((c1 - c0)) \
    -v tick="$tick" -v wall=$((t1 - t0)) 'BEGIN {
    printf "bench_serve_orch: %d tasks, %d agents, %d slots, %d workers, model %s\n", n, a, s, w, m
    printf "  daemon CPU %.0f ms: %.1f us a task; wall %d ms: %.2f ms a task\n", cpu * 1000 / tick, cpu * 1e6 / tick / n, wall, wall / n
}'
awk '/^vigil_dispatcher_cpu_seconds_total /{c=$2} /^vigil_dispatcher_run_ends_total /{e=$2}
     /^vigil_dispatcher_calls_total /{k=$2} END {
    if (e > 0) printf "  /metrics: dispatcher CPU %.1f us a task (%.3f s over %d run ends in %d calls, %.2f ends a call)\n", c * 1e6 / e, c, e, k, e / k
    else print "  /metrics: no dispatcher counters read" }' "$DIR/metrics"
