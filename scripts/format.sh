#!/usr/bin/env bash
# The C layout of .clang-format over every C source and header in git (fuzz seeds and test
# fixtures are data, not code, and are left alone).
# Usage: scripts/format.sh            reformat in place
#        scripts/format.sh --check    change nothing; list the files that differ and count the
#                                     lines that would change; exit 1 when any would
#        scripts/format.sh [--check] FILE...   only those files
# Needs clang-format (Debian's clang-format package; scripts/deps.sh test installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
fmt=$(command -v clang-format || command -v clang-format-14 || true)
if [ -z "$fmt" ]; then
  echo "format.sh: no clang-format; install it (scripts/deps.sh test, or apt-get install clang-format)" >&2
  exit 2
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.c' '*.h' | grep -v -e '^fuzz/corpus/' -e '^tests/fixtures/')
fi
if [ "$check" = 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$fmt" -i --style=file
  echo "format.sh: ${#files[@]} files formatted"
  exit 0
fi
# One clang-format per 40 files, two at a time, asked only whether each file is laid out
# (--dry-run --Werror names the lines that are not); the count of lines is made for those
# files alone. One clang-format and one diff per file took over a minute for the tree.
mapfile -t differ < <(printf '%s\0' "${files[@]}" |
  xargs -0 -P2 -n 40 "$fmt" --style=file --dry-run --Werror 2>&1 >/dev/null |
  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u)
bad=0
lines=0
for f in "${differ[@]}"; do
  n=$("$fmt" --style=file "$f" | diff -U0 "$f" - | grep -c '^[-+][^-+]' || true)
  echo "format.sh: $f: $n lines differ"
  bad=$((bad + 1))
  lines=$((lines + n))
done
echo "format.sh: $bad of ${#files[@]} files differ from .clang-format ($lines lines; scripts/format.sh fixes them)"
[ "$bad" -eq 0 ]
