#!/usr/bin/env bash
# End-to-end: vigil subscription / timer / wake / notify / wakes without a daemon, with the
# error paths a person can hit (one-line errors, exit statuses from the code table).
# proves: S0-010
set -u
VIGIL=$1
T=$(mktemp -d "${VIGIL_TEST_TMP:-/tmp}/cli-wakecmd.XXXXXX" 2>/dev/null || mktemp -d)
export VIGIL_STORE="$T/vigil.db"
unset XDG_DATA_HOME VIGIL_WAKE_RUNNER
passed=0
failed=0
trap 'rm -rf "$T"' EXIT

# expect CODE ARGS...: run vigil, keep stdout in OUT and stderr in ERR.
expect() {
  local want=$1
  shift
  OUT=$("$VIGIL" "$@" 2>"$T/stderr")
  local got=$?
  ERR=$(cat "$T/stderr")
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: vigil $* exited $got, expected $want"
    echo "  stdout: $OUT"
    echo "  stderr: $ERR"
    failed=$((failed + 1))
    return 1
  fi
  passed=$((passed + 1))
}
has() {
  case "$1" in
  *"$2"*) passed=$((passed + 1)) ;;
  *) echo "FAIL: expected \"$2\" in: $1"; failed=$((failed + 1)) ;;
  esac
}
one_line() {
  if [ "$(printf '%s\n' "$1" | wc -l)" -eq 1 ] && [ "${1#vigil: }" != "$1" ]; then
    passed=$((passed + 1))
  else
    echo "FAIL: not a one-line error: $1"
    failed=$((failed + 1))
  fi
}

expect 0 init
expect 0 agent create --name watcher
A=$OUT
expect 0 agent resume "$A"
expect 0 --help
has "$OUT" "subscription"
has "$OUT" "serve"
expect 0 subscription --help
has "$OUT" "--where FIELD=VALUE"
expect 0 timer --help
has "$OUT" "--rrule"

# subscriptions
expect 2 subscription add "$A"
one_line "$ERR"
has "$ERR" "--token"
expect 2 subscription add "$A" --token
expect 3 subscription add 01a20685-48a5-705c-bfd4-89c42b9f4382 --token TASK
one_line "$ERR"
expect 2 subscription add "$A" --token TASK --where nothing
one_line "$ERR"
has "$ERR" "FIELD=VALUE"
expect 0 subscription add "$A" --token TASK --token task-1 --where category=gym --id gym
has "$OUT" "gym"
expect 0 subscription add "$A" --token workout.running --json
has "$OUT" '"id"'
expect 0 subscription list
has "$OUT" "TASK task-1 [category=gym]"
expect 0 subscription list --agent "$A" --json
has "$OUT" '"workout.running"'

# notify without a daemon: runs here; the gym predicate needs a gym entity, the subtype matches
expect 0 notify TASK task-1
has "$ERR" "ran 0 wake(s)"
expect 0 notify workout.running w-1
has "$ERR" "ran 1 wake(s)"
expect 2 notify
expect 0 wakes --agent "$A" --json
has "$OUT" '"reason": "subscription"'
has "$OUT" '"status": "completed"'

# timers
expect 2 timer add "$A"
one_line "$ERR"
expect 2 timer add "$A" --cron "0 7 * * *" --at 2030-01-01T00:00:00Z
expect 2 timer add "$A" --cron "61 7 * * *"
one_line "$ERR"
has "$ERR" "invalid cron expression"
expect 2 timer add "$A" --cron "0 7 * * *" --tz Mars/Base
has "$ERR" "unknown time zone"
expect 2 timer add "$A" --rrule "FREQ=MINUTELY;BYMONTHDAY=30"
has "$ERR" "minutely or hourly"
expect 2 timer add "$A" --at 2001-01-01T00:00:00Z
has "$ERR" "never fires"
expect 0 timer add "$A" --cron "0 7 * * *" --tz Europe/Berlin
TID=$OUT
expect 0 timer add "$A" --rrule "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0" --tz America/New_York
expect 0 timer list --agent "$A"
has "$OUT" "Europe/Berlin"
has "$OUT" "FREQ=WEEKLY"
expect 0 timer set-tz "$TID" Asia/Tokyo
expect 0 timer list --json
has "$OUT" "Asia/Tokyo"
expect 2 timer set-tz "$TID" Nowhere/Land
expect 0 timer remove "$TID"
expect 3 timer remove "$TID"
one_line "$ERR"

# wake
expect 0 wake "$A" -m "hello" --session s1
[ ${#OUT} -eq 64 ] && passed=$((passed + 1)) || { echo "FAIL: run key '$OUT'"; failed=$((failed + 1)); }
expect 0 wakes --agent "$A" --status completed --json
has "$OUT" ":session:s1"
expect 3 wake 01a20685-48a5-705c-bfd4-89c42b9f4382
one_line "$ERR"
expect 0 agent pause "$A"
expect 4 wake "$A"
one_line "$ERR"
has "$ERR" "agent is dormant"
expect 0 wakes --status skipped
has "$OUT" "skipped"
expect 2 wakes --limit 0
expect 0 subscription remove gym
expect 3 subscription remove gym

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
