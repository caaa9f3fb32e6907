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

# one_line TEXT: an error message is exactly one line starting with "vigil: ".
one_line() {
  if [ "$(printf '%s\n' "$1" | wc -l)" -eq 1 ] && [ "${1#vigil: }" != "$1" ]; then
    passed=$((passed + 1))
  else
    echo "FAIL: not a one-line error: $1"
    fail_count
  fi
}

finish() {
  local recorded
  recorded=$(cat "$T/.failures" 2>/dev/null | wc -l)
  [ "$recorded" -gt "$failed" ] && failed=$recorded
  rm -rf "$T"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
