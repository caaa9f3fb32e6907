#!/usr/bin/env bash
# Traceability: the `proves: ID` tags of tests/ against the seeds' requirements
# (../shared/REQUIREMENTS.md). Usage: scripts/trace.sh [REQUIREMENTS.md]
#
# Prints, per seed, how many of its requirements some test names and how many it has, and
# fails (exit 1) when a tag names an id that REQUIREMENTS.md does not have, or is not an id at
# all. A tag belongs on a test only when the test truly proves the requirement, so the counts
# say what is proven, not what is touched. scripts/test.sh runs it.
#
# REQUIREMENTS.md is the argument or $VIGIL_REQUIREMENTS (exit 2 if it is not there), else
# ../shared beside this checkout (as in CI), else ../shared beside the main checkout of a git
# worktree. When none is there (a clone on its own) it says so and exits 0: the tags cannot be
# checked, which is no failure of vigil's.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# A path given on purpose must be there.
given=${1:-${VIGIL_REQUIREMENTS:-}}
if [ -n "$given" ] && [ ! -f "$given" ]; then
  echo "trace: $given: no such file (the seeds' REQUIREMENTS.md)" >&2
  exit 2
fi
candidates=("$given" "$root/../shared/REQUIREMENTS.md")
common=$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
[ -n "$common" ] && candidates+=("$(dirname "$(dirname "$common")")/shared/REQUIREMENTS.md")
reqs=""
for c in "${candidates[@]}"; do
  if [ -n "$c" ] && [ -f "$c" ]; then
    reqs=$c
    break
  fi
done
if [ -z "$reqs" ]; then
  echo "trace: no REQUIREMENTS.md (looked in ../shared beside the checkout; pass its path or" \
    "set VIGIL_REQUIREMENTS); the proves: tags are not checked"
  exit 0
fi

# Every "proves:" line of tests/, as FILE:LINE:TEXT; the ids are the S<seed>-<n> words after
# the marker (prose may follow them: "proves: S0-046 — the hot window ...").
tags=$(grep -rn --include='*.c' --include='*.h' --include='*.sh' --include='*.mjs' 'proves:' tests || true)

awk -v reqs="$reqs" '
  BEGIN {
    # Checklist lines: "N. **S0-001** [tag] statement — (source)".
    while ((getline line < reqs) > 0) {
      if (match(line, /^[0-9]+\. \*\*S[0-9]+-[0-9]+\*\*/)) {
        id = substr(line, RSTART, RLENGTH)
        sub(/^[0-9]+\. \*\*/, "", id); sub(/\*\*$/, "", id)
        if (!(id in exists)) {
          exists[id] = 1
          seed = id; sub(/-.*/, "", seed)
          total[seed]++
          if (!(seed in seen_seed)) { seen_seed[seed] = 1; seeds[++nseeds] = seed }
        }
      }
    }
    if (nseeds == 0) {
      print "trace: " reqs " lists no requirement (lines \"N. **S0-001** ...\")" > "/dev/stderr"
      exit 1
    }
  }
  NF == 0 { next }
  {
    where = $0; sub(/:.*/, "", where)
    rest = $0; sub(/^[^:]*:/, "", rest); lno = rest; sub(/:.*/, "", lno)
    text = $0; sub(/.*proves:/, "", text)
    ntags++
    n = split(text, words, /[^A-Za-z0-9-]+/)
    named = 0
    for (i = 1; i <= n; i++) {
      w = words[i]
      if (w !~ /^S[0-9]+-/) continue
      named++
      if (w in exists) {
        if (!(w in proven)) { proven[w] = 1; seed = w; sub(/-.*/, "", seed); covered[seed]++ }
      } else {
        printf "trace: %s:%s names %s, which REQUIREMENTS.md does not have\n", where, lno, w > "/dev/stderr"
        bad++
      }
    }
    if (named == 0) {
      printf "trace: %s:%s has a proves: tag naming no requirement id\n", where, lno > "/dev/stderr"
      bad++
    }
  }
  END {
    if (nseeds == 0) exit 1
    for (i = 1; i <= nseeds; i++) {
      s = seeds[i]
      printf "trace: %s  %3d of %3d requirements named by a test\n", s, covered[s] + 0, total[s]
      all += total[s]; some += covered[s]
    }
    printf "trace: all %3d of %3d, from %d proves: tags (%s)\n", some, all, ntags, reqs
    if (bad) { printf "trace: %d bad tag(s) above\n", bad > "/dev/stderr"; exit 1 }
  }
' <<<"$tags"
