#!/usr/bin/env bash
# End-to-end: one daemon worker runs several agents at once. The loopback OpenAI-compatible
# server below holds every answer until three requests are waiting, then answers them all:
# with one worker thread and --runs-per-worker 3 the three agents' runs are in flight together
# (each a fiber parked on its model call) and all complete. Runs taken one at a time would each
# wait for the others, and the server would answer 503 after its patience ran out.
# The waits poll a real process's progress; no assertion depends on timing.
set -e
source "$(dirname "$0")/lib.sh" "$1"

cat >"$T/server.py" <<'PY'
import http.server, json, sys, threading
need = 3
cond = threading.Condition()
waiting = 0
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_POST(self):
        global waiting
        self.rfile.read(int(self.headers.get("content-length", 0)))
        with cond:
            waiting += 1
            cond.notify_all()
            ok = cond.wait_for(lambda: waiting >= need, timeout=20)
        if ok:
            body = json.dumps({"id": "c1", "object": "chat.completion", "model": "test",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "all together"}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}})
            code = 200
        else:
            body = json.dumps({"error": {"message": "not all runs arrived", "type": "server_error"}})
            code = 503
        data = body.encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
python3 "$T/server.py" >"$T/port" &
spid=$!
trap 'kill -9 $spid ${pid:-} 2>/dev/null || true; rm -rf "$T"' EXIT
for _ in $(seq 1 100); do [ -s "$T/port" ] && break; sleep 0.05; done
export VIGIL_MODEL_PROVIDER=openai VIGIL_MODEL=test OPENAI_API_KEY=test-key
export VIGIL_MODEL_BASE_URL="http://127.0.0.1:$(cat "$T/port")/v1"

wait_for() {
  for _ in $(seq 1 600); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  return 1
}
completed() { "$VIGIL" wakes --status completed --json | grep -c '"run_key"' | grep -qx "$1"; }

expect 0 init
ids=()
for n in 1 2 3; do
  expect 0 agent create --name "Agent $n"
  ids+=("$OUT")
  expect 0 agent resume "$OUT"
done
"$VIGIL" serve --workers 1 --runs-per-worker 3 --poll-ms 50 >"$T/serve.log" 2>&1 &
pid=$!
wait_for grep -q serving "$T/serve.log" || echo "FAIL: daemon did not start: $(cat "$T/serve.log")"
has "$(cat "$T/serve.log")" "1 worker(s) of up to 3 run(s) each"
for id in "${ids[@]}"; do expect 0 wake "$id" -m "hello"; done

if wait_for completed 3; then passed=$((passed + 1)); else
  echo "FAIL: the three runs did not all complete: $(cat "$T/serve.log")"
  "$VIGIL" wakes --json
  fail_count
fi
for id in "${ids[@]}"; do
  expect 0 runs list --agent "$id" --limit 1 --json
  has "$OUT" "all together"
done

expect 2 serve --runs-per-worker 0
has "$ERR" "--runs-per-worker takes a number from 1 to 1024"

kill -TERM "$pid"
if wait "$pid"; then passed=$((passed + 1)); else echo "FAIL: daemon exit status $?"; fail_count; fi
finish
