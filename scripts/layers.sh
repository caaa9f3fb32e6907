#!/usr/bin/env bash
# The include check of issue 27: every #include "X/..." from a file of one module (src/<module>/
# or cli/) of another module's header must follow an edge of scripts/layers.txt [allowed], and
# one of another module's adapter (a header in a subfolder, "X/sub/...") is for the modules of
# [adapters] alone; any other fails the check (exit 1, naming file:line and the include). There
# are no tolerated exceptions: tests/cli/test_repo_checks.sh shows a forbidden include failing it.
# Usage: scripts/layers.sh           check src/ and cli/
#        scripts/layers.sh --picture print the layers drawn from [allowed] (for ARCHITECTURE.md)
set -euo pipefail
cd "$(dirname "$0")/.."
list=scripts/layers.txt

# "from to..." lines of a section of the list, comments and blank lines dropped.
section() {
  awk -v want="$1" '
    /^\[/ { on = ($0 == "[" want "]"); next }
    on && !/^[ \t]*(#|$)/ { sub(/[ \t]*->[ \t]*/, " "); print }' "$list"
}
allowed=$(section allowed)
[ -n "$allowed" ] || { echo "error: $list has no [allowed] section" >&2; exit 2; }
# The modules that may include another module's adapters (its subfolders): the composition root.
wirers=$(section adapters | tr '\n' ' ')

if [ "${1:-}" = --picture ]; then
  # A module's layer: one above the highest module it may include (base: 0).
  awk '
    function add(m) { if (!(m in mod)) { mod[m] = 1; order[++nmod] = m } }
    { n = split($0, w, " "); add(w[1]); deps[w[1]] = ""
      for (i = 2; i <= n; i++) { deps[w[1]] = deps[w[1]] " " w[i]; add(w[i]) } }
    function layer(m,   d, n, i, best, l) {
      if (m in memo) return memo[m]
      if (m in visiting) { print "error: the [allowed] edges make a cycle through " m > "/dev/stderr"; exit 1 }
      visiting[m] = 1
      best = 0; n = split(deps[m], d, " ")
      for (i = 1; i <= n; i++) { l = layer(d[i]) + 1; if (l > best) best = l }
      delete visiting[m]
      return memo[m] = best
    }
    END {
      top = 0
      for (k = 1; k <= nmod; k++) {
        m = order[k]
        if (m == "cli") continue
        l = layer(m); row[l] = row[l] "  " m; if (l > top) top = l
      }
      print "include layers (scripts/layers.txt: a module includes only the modules on its edge line, all below it):"
      print ""
      print "  cli        include/vigil.h" (deps["cli"] != "" ? " (and" deps["cli"] ")" : "")
      print "             ---------"
      for (l = top; l >= 0; l--) printf "  %-9s%s\n", "layer " l, row[l]
      print ""
      print "edges:"
      for (k = 1; k <= nmod; k++)
        if (deps[order[k]] != "") printf "  %-8s -> %s\n", order[k], substr(deps[order[k]], 2)
    }' <<<"$allowed"
  exit 0
fi

# The [allowed] edges themselves must not make a cycle.
"$0" --picture >/dev/null || exit 1

# Every cross-module include: "module header file:line".
edges=$(
  for dir in src/*/ cli/; do
    mod=$(basename "$dir")
    grep -rnE --include='*.[ch]' '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' "$dir" |
      sed -E 's/^([^:]+:[0-9]+):.*"([^"]+)".*/\2 \1/' |
      while read -r header where; do
        [ "${header%%/*}" = "$mod" ] || echo "$mod $header $where"
      done
  done
)

# One awk over all of them (a process per include made the check slow on a busy machine).
status=0
modules=$(cd src && ls -d -- */ | tr -d /)
awk -v list="$list" -v modules="$modules" -v wirers="$wirers" '
  BEGIN {
    n = split(modules, m, /[ \n]+/); for (i = 1; i <= n; i++) is_module[m[i]] = 1
    n = split(wirers, m, /[ \n]+/); for (i = 1; i <= n; i++) if (m[i] != "") wires[m[i]] = 1
  }
  FNR == NR { for (i = 2; i <= NF; i++) ok[$1 " " $i] = 1; next }
  NF {
    from = $1; header = $2; where = $3; to = header; sub(/\/.*/, "", to)
    if (!(to in is_module)) {
      printf "error: %s: includes \"%s\", which is not under a module of src/\n", where, header > "/dev/stderr"
      bad = 1
    } else if (!((from " " to) in ok)) {
      printf "error: %s: %s must not include \"%s\": %s -> %s is not an allowed edge of %s\n",
        where, from, header, from, to, list > "/dev/stderr"
      bad = 1
    } else if (header ~ /^[a-z_]+\/[a-z_]+\// && !(from in wires)) {
      printf "error: %s: %s must not include \"%s\": an adapter of %s; only the modules of %s [adapters] wire adapters, the others see ports alone\n",
        where, from, header, to, list > "/dev/stderr"
      bad = 1
    }
  }
  END { exit bad }' <(printf '%s\n' "$allowed") <(printf '%s\n' "$edges") || status=1

[ $status -eq 0 ] && echo "layers: every include between modules follows $list"
exit $status
