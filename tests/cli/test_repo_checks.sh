#!/usr/bin/env bash
# scripts/funclen.sh and scripts/layers.sh (issue 27): each passes on a clean tree and fails,
# naming the place, on a function over 150 lines or an include along a forbidden edge. They run
# on copies in a temporary folder, so the real tree is never touched.
. "$(dirname "$0")/lib.sh"
set -e
src=${VIGIL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}

# check NAME WANT_STATUS CMD...: run CMD, keep its stdout+stderr in $OUT, check its status.
check() {
  local name=$1 want=$2
  shift 2
  set +e
  OUT=$("$@" 2>&1)
  local got=$?
  set -e
  if [ "$got" -eq "$want" ]; then
    passed=$((passed + 1))
  else
    echo "FAIL: $name: exited $got, expected $want"
    echo "  output: $OUT"
    fail_count
  fi
}

# A function of N body lines, '{' and '}' included, in the house style.
function_of() {
  printf 'static int %s(int a,\n                 int b)\n{\n' "$1"
  for ((i = 0; i < $2 - 3; i++)); do echo "    a += b;"; done
  printf '    return a;\n}\n\n'
}

# funclen: 150 lines pass, 151 fail with file:line and the name.
f=$T/funclen
mkdir -p "$f/scripts" "$f/src/x"
cp "$src/scripts/funclen.sh" "$f/scripts/"
{
  function_of just_fits 150
  printf 'static const int table[] = {\n    1,\n};\n\n'
} >"$f/src/x/a.c"
check "funclen, 150 lines" 0 "$f/scripts/funclen.sh"
function_of one_too_many 151 >>"$f/src/x/a.c"
check "funclen, 151 lines" 1 "$f/scripts/funclen.sh"
has "$OUT" "src/x/a.c:160: one_too_many is 151 lines"
case $OUT in *just_fits*) echo "FAIL: funclen named a function within the limit"; fail_count ;; esac
# A known one is a warning, and the check passes.
echo "src/x/a.c one_too_many" >"$f/scripts/funclen-known.txt"
check "funclen, known" 0 "$f/scripts/funclen.sh"
has "$OUT" "warning: src/x/a.c:160: one_too_many is 151 lines"

# layers: today's tree passes with no warning (there are no tolerated exceptions); a forbidden
# include fails, naming the place: a low layer including a high one, a lower module including
# the composition root, and the command including a module it has no edge to.
l=$T/layers
mkdir -p "$l/scripts"
cp "$src/scripts/layers.sh" "$src/scripts/layers.txt" "$l/scripts/"
cp -r "$src/src" "$src/cli" "$l/"
check "layers, the tree as it is" 0 "$l/scripts/layers.sh"
case $OUT in *warning*) echo "FAIL: layers warned on the tree: $OUT"; fail_count ;; esac
echo '#include "wake/wake.h"' >>"$l/src/model/http.c"
check "layers, model -> wake" 1 "$l/scripts/layers.sh"
has "$OUT" "src/model/http.c:"
has "$OUT" "model must not include \"wake/wake.h\""
cp "$src/src/model/http.c" "$l/src/model/http.c"
echo '#include "runtime/runtime.h"' >>"$l/src/tool/executor.c"
check "layers, tool -> runtime/runtime.h" 1 "$l/scripts/layers.sh"
has "$OUT" "tool must not include \"runtime/runtime.h\""
cp "$src/src/tool/executor.c" "$l/src/tool/executor.c"
echo '#include "runtime/wake_runner.h"' >>"$l/src/wake/queue.c"
check "layers, wake -> runtime" 1 "$l/scripts/layers.sh"
has "$OUT" "wake must not include \"runtime/wake_runner.h\""
cp "$src/src/wake/queue.c" "$l/src/wake/queue.c"
echo '#include "wake/wake.h"' >>"$l/cli/cmd-wake.c"
check "layers, cli -> wake" 1 "$l/scripts/layers.sh"
has "$OUT" "cli must not include \"wake/wake.h\""
cp "$src/cli/cmd-wake.c" "$l/cli/cmd-wake.c"
# The guardrail between the two domains: the host domain's code (src/todo) reaches neither the
# store nor the agent spine, so it has no path that could persist an agent's internals or
# reports; and no module of libvigil reaches the host domain's code, so the agent domain's
# writers cannot persist anything through it (the agent changes host data only through tools,
# which the command registers over include/vigil.h). proves: S0-157
for edge in "todo/db.c agent/agent.h" "todo/ops.c store/store.h" "todo/tools.c memory/memory.h" \
  "memory/block.c todo/todo.h" "runtime/runtime.c todo/todo.h" "agent/report.c todo/todo.h"; do
  set -- $edge
  from=${1%%/*}
  [ -f "$l/src/$1" ] || { echo "FAIL: layers guardrail: src/$1 is not there"; fail_count; continue; }
  echo "#include \"$2\"" >>"$l/src/$1"
  check "layers, $from -> $2" 1 "$l/scripts/layers.sh"
  has "$OUT" "$from must not include \"$2\""
  cp "$src/src/$1" "$l/src/$1"
done
# The agent loop sees ports alone: an include of an adapter (a header in a port module's
# subfolder) fails the check in the loop, as in any module but the composition root, which
# wires adapters to ports and stays free to. proves: S4-029
for edge in "loop/loop.c model/openai/openai.h" "loop/window.c store/sqlite/gate.h" \
  "memory/search.c model/scripted/scripted.h" "tool/executor.c store/pg/libpq.h"; do
  set -- $edge
  from=${1%%/*}
  [ -f "$l/src/$1" ] && [ -f "$l/src/$2" ] || { echo "FAIL: layers adapters: $1 or $2 is not there"; fail_count; continue; }
  echo "#include \"$2\"" >>"$l/src/$1"
  check "layers, $from -> the adapter $2" 1 "$l/scripts/layers.sh"
  has "$OUT" "$from must not include \"$2\": an adapter of ${2%%/*}"
  cp "$src/src/$1" "$l/src/$1"
done
echo '#include "model/openai/openai.h"' >>"$l/src/runtime/runtime.c"
check "layers, runtime wires an adapter" 0 "$l/scripts/layers.sh"
cp "$src/src/runtime/runtime.c" "$l/src/runtime/runtime.c"
check "layers, the tree restored" 0 "$l/scripts/layers.sh"
# The picture is drawn from the list: base at the bottom, runtime at the top.
check "layers, picture" 0 "$l/scripts/layers.sh" --picture
has "$(echo "$OUT" | grep 'layer 0')" "base"
has "$(echo "$OUT" | grep 'layer ' | head -n 1)" "runtime"
# A cycle in the allowed list is refused.
sed -i 's/^os -> base$/os -> base runtime/' "$l/scripts/layers.txt"
check "layers, cyclic list" 1 "$l/scripts/layers.sh"
has "$OUT" "cycle"
# The shell tests' own library: a check that fails inside a ( subshell ) still fails the
# script (its counter there is the subshell's; lib.sh keeps a file of failures).
cat >"$T/subshell_test.sh" <<EOF
. "$src/tests/cli/lib.sh"
( has "abc" "xyz" )
finish
EOF
check "lib.sh, a failure in a subshell" 1 bash "$T/subshell_test.sh" "$VIGIL"
has "$OUT" "0 passed, 1 failed"
finish
