#!/usr/bin/env bash
# vigil serve stopping (SIGTERM) while a whole (not streamed) chat turn over HTTP waits on its
# model: the turn ends canceled and the daemon exits at once, instead of waiting out the model's
# retry-after (20 s here) and then completing the turn after it was told to stop.
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset OPENAI_API_KEY ANTHROPIC_API_KEY

expect 0 init
expect 0 agent create --name waiter
id=$OUT
# A turn held 20 s by a replayed rate limit, then answered "too late".
export VIGIL_MODEL_CASSETTE="$(cd "$(dirname "$0")/../fixtures/mcpserve" && pwd)/slow_turn_20s.json"
serve_http --workers 1
curl -sS -o "$T/chat.body" -X POST -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' --data-binary '{"text":"take your time"}' \
  "http://127.0.0.1:$PORT/v1/agents/$id/chat" 2>/dev/null &
CHAT_PID=$!
# The turn is running once its run is in the store (a safety bound of 20 s, not a wait).
for _ in $(seq 200); do
  "$VIGIL" runs list --json 2>/dev/null | jq -e '.items[0].status=="running"' >/dev/null && break
  sleep 0.1
done
serve_stop
wait "$CHAT_PID" || true
unset VIGIL_MODEL_CASSETTE
expect 0 runs list --json
R=$OUT
is '[.items[].status]==["canceled"]'
finish
