#!/usr/bin/env bash
# Fails when a function in src/ is longer than the limit (issue 27: 150 lines), counted from the
# line of its body's opening '{' to the line of its closing '}', both included.
# Usage: scripts/funclen.sh [LIMIT]   (default 150)
#
# The house style opens a function body with '{' alone in column 0 after the signature and
# closes it with '}' in column 0; a signature line ending in ") {" at column 0 is accepted too.
# The function's name is the first identifier written right before a '(' on the nearest earlier
# line that starts in column 0 and holds a '(' (so a return type on its own line above is fine,
# and so is a function that returns a function pointer).
# scripts/funclen-known.txt lists functions known to be too long ("path function" lines),
# reported as warnings until they are split; an entry that no longer applies is reported too.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${1:-150}
known=scripts/funclen-known.txt

too_long=$(find src -name '*.[ch]' | LC_ALL=C sort | xargs awk -v limit="$limit" '
  FNR == 1 { sig = ""; open = 0 }
  # A signature candidate: column 0, not a brace, comment, preprocessor line or label.
  /^[A-Za-z_]/ && /\(/ { sig = $0; sigline = FNR }
  !open && /^\{[ \t]*$/ { open = FNR; name = sig; next }
  !open && /^[A-Za-z_].*\)[ \t]*\{[ \t]*$/ && !/=/ { open = FNR; name = $0; next }
  open && /^\}/ {
    len = FNR - open + 1
    if (len > limit) {
      fn = "?"
      if (match(name, /[A-Za-z_][A-Za-z0-9_]*\(/))
        fn = substr(name, RSTART, RLENGTH - 1)
      print FILENAME ":" open " " fn " " len
    }
    open = 0
  }')

status=0
while read -r where fn len; do
  [ -n "$where" ] || continue
  file=${where%%:*}
  if [ -f "$known" ] && grep -qx "$file $fn" "$known"; then
    echo "warning: $where: $fn is $len lines (over $limit; known, issue 27: split it)"
  else
    echo "error: $where: $fn is $len lines, over the limit of $limit: split it into steps" >&2
    status=1
  fi
done <<<"$too_long"

# Entries of the known list that are no longer too long: the list should shrink with them.
if [ -f "$known" ]; then
  while read -r file fn; do
    case $file in '' | '#'*) continue ;; esac
    if ! grep -q "^$file:[0-9]* $fn " <<<"$too_long"; then
      echo "warning: $known: $file $fn is no longer over $limit lines: remove the entry"
    fi
  done <"$known"
fi
[ $status -eq 0 ] && echo "funclen: no function in src/ over $limit lines outside $known"
exit $status
