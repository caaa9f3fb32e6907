# Sourced by tests/cli/*.sh: run the vigil binary and check exit codes and output.
# Each test script gets the binary as $1 and works in a fresh folder.
set -u
VIGIL=$1
T=$(mktemp -d "${VIGIL_TEST_TMP:-/tmp}/cli.XXXXXX" 2>/dev/null || mktemp -d)
export VIGIL_STORE="$T/vigil.db"
unset XDG_DATA_HOME VIGIL_CONFIG
passed=0
failed=0

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
    failed=$((failed + 1))
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
    failed=$((failed + 1))
    ;;
  esac
}

# one_line TEXT: an error message is exactly one line starting with "vigil: ".
one_line() {
  if [ "$(printf '%s\n' "$1" | wc -l)" -eq 1 ] && [ "${1#vigil: }" != "$1" ]; then
    passed=$((passed + 1))
  else
    echo "FAIL: not a one-line error: $1"
    failed=$((failed + 1))
  fi
}

finish() {
  rm -rf "$T"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
