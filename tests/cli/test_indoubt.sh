#!/usr/bin/env bash
# End-to-end: a `vigil chat -m` killed mid-turn (SIGKILL while its model call hangs) does not
# block the agent: the next chat on it runs at once and the dead run reads "crashed", linked to
# the run that recovered it. Then `vigil indoubt list|show|resolve` on an operation a crash left
# in doubt.
set -e
source "$(dirname "$0")/lib.sh" "$1"
unset VIGIL_MODEL_CASSETTE OPENAI_API_KEY ANTHROPIC_API_KEY

expect 0 init
expect 0 agent create --name Pal
id=$OUT

# A model server that accepts and never answers: the turn hangs in its model call.
python3 - "$T/port" <<'PY' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
PY
server=$!
# A check that fails ends the script early: the server must not outlive it (ctest would wait on
# its inherited output until the test's timeout).
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
VIGIL_MODEL_PROVIDER=openai VIGIL_MODEL=m VIGIL_MODEL_BASE_URL="http://127.0.0.1:$(cat "$T/port")/v1" \
  VIGIL_MODEL_TIMEOUT_MS=600000 "$VIGIL" chat "$id" -m "first words" >/dev/null 2>&1 &
chat=$!
# wait until its run is open (the model call is then in flight)
for _ in $(seq 200); do
  "$VIGIL" runs list --agent "$id" --status running --json 2>/dev/null | grep -q run_id && break
  sleep 0.05
done
kill -9 "$chat"
wait "$chat" 2>/dev/null || true

# At once, on the same agent: no wait for the lease, no "busy".
export VIGIL_MODEL_PROVIDER=scripted
start=$(date +%s%N)
expect 0 chat "$id" -m "second words"
has "$OUT" "you said: second words"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
if [ "$elapsed_ms" -lt 5000 ]; then passed=$((passed + 1)); else
  echo "FAIL: the chat after a killed one took ${elapsed_ms} ms"
  fail_count
fi
expect 0 runs list --agent "$id" --status running --json
has "$OUT" '"items": []'
expect 0 runs list --agent "$id" --status crashed --json
has "$OUT" '"status": "crashed"'
crashed=$(printf '%s' "$OUT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["run_id"])')
expect 0 runs show "$crashed" --json
has "$OUT" '"recovered_by_run_key"'
has "$OUT" 'crashed: the process running it stopped'
kill "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true

# In-doubt operations: none yet.
expect 0 indoubt list
has "$ERR" "no operations in doubt"
has "$OUT" "OPERATION"
expect 0 indoubt list --json
has "$OUT" "[]"
expect 3 indoubt list --agent nosuch
one_line "$ERR"
expect 3 indoubt show 0000000000000000000000000000000000000000000000000000000000000000
one_line "$ERR"
expect 2 indoubt resolve abc
one_line "$ERR"
expect 2 indoubt resolve abc --applied --retry
expect 2 indoubt frobnicate

# One raised by a crash (an in_doubt record as recovery writes it, for a tool this process
# does not have: a person still answers it).
op=$(printf 'a%.0s' $(seq 64))
python3 - "$VIGIL_STORE" "$id" "$op" <<'PY'
import json, re, sqlite3, sys
db, agent, op = sys.argv[1:]
c = sqlite3.connect(db)
cols = [r[1] for r in c.execute("pragma table_info(records)")]
item = {"operation_id": op, "agent_id": agent, "tool": "host_write", "run_key": "wake-1",
        "arguments": {"title": "x"}, "status": "pending", "created_at": "2026-01-01T00:00:00.000Z",
        "reason": "the process stopped while the tool ran; its effect is unknown",
        "run_id": None, "thread_id": agent + ":run:wake-1"}
opr = {"operation_id": op, "agent_id": agent, "tool": "host_write", "run_key": "wake-1",
       "arguments": {"title": "x"}, "status": "in_doubt", "started_at": "2026-01-01T00:00:00.000Z"}
packed = c.execute("select count(*) from sqlite_schema where name = 'records_text'").fetchone()[0]
def key(v):  # schema 11: a key that begins with a UUID is its 16 bytes and the rest
    if packed and re.match(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", v):
        return bytes.fromhex(v[:36].replace("-", "")) + v[36:].encode()
    return v
def put(kind, k1, k2, body):
    row = {"kind": kind, "id": key(op), "owner": key(agent), "k1": k1, "k2": k2, "seq": 1, "rev": 1,
           "at": 1, "body": json.dumps(body, sort_keys=True, separators=(",", ":"))}
    row = {k: v for k, v in row.items() if k in cols}
    c.execute("insert into records(%s) values(%s)" % (",".join(row), ",".join("?" * len(row))),
              list(row.values()))
put("in_doubt", "pending", "host_write", item)
put("operation", "in_doubt", "host_write", opr)
c.commit()
PY
expect 0 indoubt list
has "$OUT" "$op"
has "$OUT" "host_write"
expect 0 indoubt list --agent "$id" --json
has "$OUT" '"run_key": "wake-1"'
# A chat on the agent says a call of it waits in doubt, on stderr (trial G1).
expect 0 chat "$id" -m "third words"
has "$ERR" "1 tool call(s) of this agent are in doubt"
expect 0 indoubt show "$op"
has "$OUT" "known      the process stopped while the tool ran"
has "$OUT" '{"title":"x"}'
expect 0 indoubt resolve "$op" --not-applied --by alice
expect 4 indoubt resolve "$op" --applied
has "$ERR" "already resolved: not_applied by alice"
expect 0 indoubt show "$op" --json
has "$OUT" '"status": "not_applied"'
has "$OUT" '"status": "finished"'
expect 0 indoubt list
has "$ERR" "no operations in doubt"
expect 0 chat "$id" -m "fourth words"
case "$ERR" in *"in doubt"*) bad "a resolved call still said in doubt: $ERR" ;; *) ok ;; esac
finish
