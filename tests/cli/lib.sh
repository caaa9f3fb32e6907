# Sourced by tests/cli/*.sh: run the vigil binary and check exit codes and output.
# Each test script gets the binary as $1 and works in a fresh folder.
set -u
VIGIL=$1
T=$(mktemp -d "${VIGIL_TEST_TMP:-/tmp}/cli.XXXXXX" 2>/dev/null || mktemp -d)
export VIGIL_STORE="$T/vigil.db"
unset XDG_DATA_HOME VIGIL_CONFIG
passed=0
failed=0

# fail_count: one failure more. It is also written to a file, because a check made inside a
# ( subshell ) or a pipeline changes only that subshell's counter; finish() counts the file.
fail_count() {
  failed=$((failed + 1))
  echo x >>"$T/.failures"
}

# ok: one pass more. bad TEXT: one failure more, saying TEXT.
ok() { passed=$((passed + 1)); }
bad() {
  echo "FAIL: $*"
  fail_count
}

# wait_for CMD...: poll until CMD succeeds, every WAIT_STEP seconds (default 0.01), at most
# WAIT_TRIES times (default 2000: 20 s and more, since the sleeps add to the polls' own time).
wait_for() {
  local i
  for ((i = 0; i < ${WAIT_TRIES:-2000}; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep "${WAIT_STEP:-0.01}"
  done
  return 1
}

# expect CODE CMD... : run vigil with args, keep stdout in $OUT and stderr in $ERR.
expect() {
  local want=$1
  shift
  set +e
  OUT=$("$VIGIL" "$@" 2>"$T/stderr")
  local got=$?
  set -e
  ERR=$(cat "$T/stderr")
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: vigil $* exited $got, expected $want"
    echo "  stdout: $OUT"
    echo "  stderr: $ERR"
    fail_count
    return 1
  fi
  passed=$((passed + 1))
}

# has TEXT NEEDLE: TEXT contains NEEDLE.
has() {
  case "$1" in
  *"$2"*) passed=$((passed + 1)) ;;
  *)
    echo "FAIL: expected to find \"$2\" in: $1"
    fail_count
    ;;
  esac
}

# compact_out: $OUT (indented JSON, as every --json prints it) as one compact line, keys sorted,
# so a check can look for '"ok":true' and '"result":{"sum":3}'.
compact_out() {
  OUT=$(printf '%s' "$OUT" | jq -cS . 2>&1)
}

# is JQ_FILTER: the JSON answer in $R satisfies the filter.
is() {
  if printf '%s' "$R" | jq -e "$1" >/dev/null 2>&1; then
    passed=$((passed + 1))
  else
    echo "FAIL: answer does not satisfy $1: $R"
    fail_count
  fi
}

# one_line TEXT: an error message is exactly one line starting with "vigil: ".
one_line() {
  if [ "$(printf '%s\n' "$1" | wc -l)" -eq 1 ] && [ "${1#vigil: }" != "$1" ]; then
    passed=$((passed + 1))
  else
    echo "FAIL: not a one-line error: $1"
    fail_count
  fi
}

# finish: the closing line; the test's folder is removed, or kept for a look when a check failed.
finish() {
  local recorded
  recorded=$(cat "$T/.failures" 2>/dev/null | wc -l)
  [ "$recorded" -gt "$failed" ] && failed=$recorded
  if [ "$failed" -eq 0 ]; then rm -rf "$T"; else echo "kept $T"; fi
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# serve_http [ARGS...]: start `vigil serve --listen 127.0.0.1:0 ARGS` in the background and wait
# (30 s safety) until it listens: PORT is its port, SERVE_PID its process, TOKEN the API token.
# Its stderr goes on to $T/serve.log. serve_stop ends it with SIGTERM and reaps it.
serve_http() {
  local line
  mkfifo "$T/serve.fifo"
  "$VIGIL" serve --listen 127.0.0.1:0 "$@" 2>"$T/serve.fifo" >/dev/null &
  SERVE_PID=$!
  trap 'kill -TERM $SERVE_PID 2>/dev/null || true' EXIT # a check that stops the script ends it too
  exec 7<"$T/serve.fifo"
  PORT=""
  while IFS= read -r -t 30 line <&7; do
    case $line in *"HTTP API on http://127.0.0.1:"*) PORT=${line##*:} && break ;; esac
    printf '%s\n' "$line" >>"$T/serve.log"
  done
  if [ -z "$PORT" ]; then
    echo "FAIL: vigil serve did not listen: $(cat "$T/serve.log" 2>/dev/null)"
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    fail_count
    finish
    exit 1
  fi
  cat <&7 >>"$T/serve.log" & # drained, so the daemon never waits on its stderr
  TOKEN=$("$VIGIL" token)
}
serve_stop() {
  local st=0
  kill -TERM "$SERVE_PID"
  wait "$SERVE_PID" || st=$?
  if [ "$st" -eq 0 ]; then
    passed=$((passed + 1))
  else
    echo "FAIL: vigil serve exited $st on SIGTERM: $(cat "$T/serve.log")"
    fail_count
  fi
}
