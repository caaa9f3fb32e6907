#!/usr/bin/env bash
# The full test suite on a fresh Debian 12 machine: installs what is missing, starts a private
# PostgreSQL server for the PostgreSQL tests, checks the tests' proves: tags (scripts/trace.sh),
# builds vigil twice (optimized, and with AddressSanitizer + UndefinedBehaviorSanitizer) and
# runs every test in both builds, a third time with ThreadSanitizer for the threaded tests, runs
# the static analysis (scripts/analyze.sh), then gives every fuzz target a short run. The core's
# line and branch coverage by the whole suite is printed from the sanitizer build (built with
# --coverage). Each step prints how long it took ("test.sh: ... took N s").
# Ends with one line: "tests: N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Every step's wall and CPU time (this shell's children that ended during it: user+sys), with
# the load average, so a slow step on a busy machine can be told from a slower step.
step_start=0
step_cpu0=0
# cpu_ms: the CPU milliseconds of this shell's children so far, the second line of `times`
# ("0m1.5s 0m0.3s"). `times` runs in this shell (in a $(...) subshell it would count the
# subshell's children only), written to a file.
times_file=$(mktemp)
cpu_now() {
  times >"$times_file"
  cpu_ms=$(tail -n 1 "$times_file" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/)
    printf "%.0f", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1000 }')
}
step_begin() {
  step_start=$SECONDS
  cpu_now
  step_cpu0=$cpu_ms
}
step_end() {
  cpu_now
  local ms=$((cpu_ms - step_cpu0))
  echo "test.sh: $1 took $((SECONDS - step_start)) s (CPU $((ms / 1000)).$((ms % 1000 / 100)) s," \
    "load $(cut -d' ' -f1-3 /proc/loadavg))"
}
suite_start=$SECONDS

step_begin
scripts/deps.sh test
step_end "installing what is missing (scripts/deps.sh)"

# A throwaway PostgreSQL cluster on a private socket, stopped when this script exits.
step_begin
if [ -z "${VIGIL_PG_URI:-}" ]; then
  source scripts/pg.sh
  pg_start "$root/build-pg"
  trap pg_stop EXIT
fi
# The PostgreSQL tests must run here, not skip.
export VIGIL_REQUIRE_PG=1
# The MCP tests' npm servers, in the project's .deps/npm (cached there); they must run too.
export VIGIL_MCP_NPM_DIR=$(scripts/npm.sh)
export VIGIL_REQUIRE_MCP=1
# The sandbox's TypeScript adapter runs Deno from the same folder (npm package deno): its tests
# must run too.
export VIGIL_DENO=$VIGIL_MCP_NPM_DIR/node_modules/deno/deno
export VIGIL_REQUIRE_DENO=1
# The web page's browser test (Debian's chromium, npm playwright-core in .deps/web) must run too.
export VIGIL_PLAYWRIGHT_DIR=$(scripts/web-test-deps.sh)
export VIGIL_REQUIRE_BROWSER=1
step_end "PostgreSQL server, npm and browser test packages"

passed=0
failed=0

# Traceability first (a second): every proves: tag in tests/ names a requirement that exists.
step_begin
if scripts/trace.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
# The tree's shape (a second each): no function in src/ over 150 lines, and every include
# between modules along an edge of scripts/layers.txt (docs/ARCHITECTURE.md, "Layers").
if scripts/funclen.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
if scripts/layers.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
step_end "proves: tags, function lengths and layers"

# Tests run at once in each ctest pass (VIGIL_CTEST_JOBS; docs/testing.md has the figures).
ctest_jobs=${VIGIL_CTEST_JOBS:-2}

# Run ctest in a build folder, keep its summary counts.
run_ctest() {
  local dir=$1
  shift
  local log=$dir/ctest-summary.log
  # Each test leaves its folder under test-tmp for a person to read after a failure; the run
  # before this one's folders go, or they pile up run after run (37 GB once).
  rm -rf "$dir/test-tmp"
  set +e
  (cd "$dir" && env "$@" ctest --output-on-failure -j"$ctest_jobs") | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  local line total bad
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1)
  total=$(echo "$line" | sed -E 's/.* out of ([0-9]+).*/\1/')
  bad=$(echo "$line" | sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/')
  passed=$((passed + ${total:-0} - ${bad:-0}))
  failed=$((failed + ${bad:-0}))
  [ -n "$line" ] || failed=$((failed + 1))
  return "$rc"
}

# VIGIL_BENCH=ON said outright: the README's benchmarks exist after this command even when the
# quick start configured this folder first. Debian's libcurl (scripts/build.sh); VIGIL_CURL=static
# in the environment tests with the static one of scripts/curl.sh instead.
step_begin
scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIGIL_BENCH=ON
step_end "optimized build"
step_begin
run_ctest build VIGIL_UNUSED=0 || true
step_end "optimized tests"

# The code sandbox must hold as root and as an unprivileged user (docs/sandbox.md): as root
# (CI), its tests run a second time as nobody, where the kernel's user namespaces, Landlock
# and seccomp are what an ordinary account gets.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
  # All at once: they mostly wait (kills, timeouts, children), 19 s of CPU in 80 s one by one.
  step_begin
  sbx_tmp=$(mktemp -d)
  chmod 777 "$sbx_tmp"
  sbx_pids=()
  for t in build/sandbox_test_*; do
    name=$(basename "$t")
    (cd "$sbx_tmp" && VIGIL_TEST_TMP=$sbx_tmp setpriv --reuid=65534 --regid=65534 \
      --clear-groups "$root/$t") >"$sbx_tmp/$name.log" 2>&1 &
    sbx_pids+=("$!:$name")
  done
  for p in "${sbx_pids[@]}"; do
    name=${p#*:}
    if wait "${p%%:*}"; then
      echo "unprivileged: $name passed"
      passed=$((passed + 1))
    else
      tail -n 20 "$sbx_tmp/$name.log"
      echo "unprivileged: $name FAILED (log above)"
      failed=$((failed + 1))
    fi
  done
  rm -rf "$sbx_tmp"
  step_end "sandbox tests as uid 65534"
fi

# The sanitizer build skips the benchmarks; it runs every test again. The crash-recovery test
# kills 25 drivers per tool kind and path there (the optimized build runs its full count, 100):
# under the sanitizers each costs some ten times as much, and the count proves nothing more; the
# same holds for the three-daemon PostgreSQL test's kills (2 there, 24 in the optimized build),
# its many-wakes section (24 wakes, one daemon killed among them; 48 and two kills optimized) and
# its notifications (8 agents; 24 optimized): most of their time there is the start of a
# sanitized `vigil` process per command (some 0.3 s of CPU each, 0.04 s optimized).
# intercept_tls_get_addr=0: clang 14's runtime misreads a dynamic TLS block (of a library loaded
# on first use, e.g. libical) that starts 16 bytes past a page for one of an old glibc's, and
# LeakSanitizer's tracer crashed at exit on the bogus range it read (tests/cli/
# test_wake_commands.sh says more); the blocks are scanned as the heap chunks they are anyway.
# -O1, as AddressSanitizer's own docs advise: the checks are the same, the CPU-bound tests take
# some 15-40% less (journal_test_oom 8.5 -> 6.5 s CPU, runtime_test_crash_recovery 94 -> 82 s,
# quiet machine); line coverage read off it is a little coarser than at -O0.
step_begin
scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O1" \
  -DVIGIL_ASAN=ON -DVIGIL_UBSAN=ON -DVIGIL_BENCH=OFF -DVIGIL_COVERAGE=ON -DCMAKE_C_COMPILER=clang
find build-asan -name '*.gcda' -delete
step_end "sanitizer build"
step_begin
run_ctest build-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 VIGIL_CRASH_ITERS=25 VIGIL_SCALE_KILLS=2 \
  VIGIL_SCALE_WAKES=24 VIGIL_SCALE_NOTES=8 || true
step_end "sanitizer tests"

# The core's coverage by the whole suite, read off the sanitizer build (built with --coverage, so
# the report costs no build of its own; scripts/coverage.sh makes an HTML report). Printed, not
# counted: a figure to watch, not a gate, so it never holds the suite up or fails it.
# - Only the objects of the library's current targets are read: an object left by a target
#   since removed, or a counter file (.gcno) of a source since deleted, holds older line
#   numbers for a source than its current object, and gcovr 5.2 stops at merging the two with
#   `assert left.lineno == right.lineno`.
# - One worker (-j 1): gcovr 5.2 runs every gcov in one folder under a lock that a failure
#   while a worker holds it never gives back (workers.py: locked_directory has no finally), so
#   with more workers the others can wait on it for ever; with one, a failure ends gcovr with
#   its traceback. (The gcov runs take that lock one at a time anyway.)
# - A bound (VIGIL_COVERAGE_TIMEOUT, 600 s) for whatever else may stall it.
# The counters are sound only when every program that ran was linked from the same objects:
# one built by itself after a source changed (`cmake --build build-asan --target X`) writes its
# old object's counters into the same .gcda as the newer programs, which clang reports as
# "cannot merge previous GCDA file: mismatched number of counters" and leaves corrupt. This
# script builds the whole folder and then deletes the counters, so its own run never mixes them.
cov_dirs=()
for d in vigil_obj vigil_http vigil_mcpserve; do
  [ -d "build-asan/CMakeFiles/$d.dir/src" ] && cov_dirs+=("build-asan/CMakeFiles/$d.dir")
done
if command -v gcovr >/dev/null && command -v llvm-cov >/dev/null && [ ${#cov_dirs[@]} -gt 0 ]; then
  step_begin
  while IFS= read -r gcno; do
    src=${gcno#build-asan/CMakeFiles/*.dir/}
    [ -f "${src%.gcno}" ] || rm -f "$gcno" "${gcno%.gcno}.gcda"
  done < <(find "${cov_dirs[@]}" -name '*.gcno')
  cov_limit=${VIGIL_COVERAGE_TIMEOUT:-600}
  if timeout --kill-after=10 "$cov_limit" gcovr -j 1 --root . --filter 'src/' \
    --gcov-executable 'llvm-cov gcov' --branches --exclude-unreachable-branches --print-summary \
    --object-directory build-asan -o build-asan/coverage.txt "${cov_dirs[@]}" \
    >build-asan/coverage.summary 2>build-asan/coverage.err; then
    sed -n 's/^\(lines\|branches\|functions\): /coverage of src\/ by the suite, \1: /p' \
      build-asan/coverage.summary
  elif [ $? -ge 124 ]; then
    echo "test.sh: no coverage report: gcovr did not finish in $cov_limit s (not counted; what it" \
      "said: build-asan/coverage.err; more time: VIGIL_COVERAGE_TIMEOUT=SECONDS)"
  else
    tail -n 5 build-asan/coverage.err
    echo "test.sh: no coverage report: gcovr failed (not counted; build-asan/coverage.err; a" \
      "folder built by parts mixes counters: build it whole and run the tests again)"
  fi
  step_end "coverage report (per file: build-asan/coverage.txt)"
fi

# ThreadSanitizer (about two minutes: a third build, then the tests labelled tsan in
# CMakeLists.txt, those where threads share state or fibers switch; src/os/fiber.c tells TSan of
# each switch). Not every test: TSan slows a process some ten times, and the single-threaded
# ones have nothing to race.
step_begin
# Only what those tests run is built: the command (the shell test serves with it) and each test
# executable.
scripts/build.sh build-tsan --target vigil_cli --target vigil_test_cli \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIGIL_TSAN=ON -DVIGIL_BENCH=OFF -DCMAKE_C_COMPILER=clang
tsan_targets=()
for t in $(cd build-tsan && ctest -N -L tsan | sed -n 's/^ *Test *#[0-9]*: //p'); do
  case $t in cli_*) ;; *) tsan_targets+=(--target "$t") ;; esac
done
cmake --build build-tsan -j"$(nproc)" "${tsan_targets[@]}"
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest -L tsan --output-on-failure -j2) >build-tsan/ctest-tsan.log 2>&1 &&
  tsan_rc=0 || tsan_rc=$?
cat build-tsan/ctest-tsan.log
if [ "$tsan_rc" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
step_end "ThreadSanitizer build and tests"

# Static analysis (scripts/analyze.sh: cppcheck, some 15 s of CPU): findings fixed or justified
# in scripts/cppcheck/suppressions.txt.
step_begin
if scripts/analyze.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
step_end "static analysis"

# The C layout (.clang-format): a file that differs fails the suite; `scripts/format.sh`
# reformats the tree. VIGIL_FORMAT_CHECK=0 skips it (a clang-format other than Debian 12's
# version 14 may lay some lines out differently).
if [ "${VIGIL_FORMAT_CHECK:-1}" = 1 ]; then
  step_begin
  if scripts/format.sh --check >/dev/null; then passed=$((passed + 1)); else
    scripts/format.sh --check | tail -n 20 || true # its status is the check's: counted here
    failed=$((failed + 1))
  fi
  step_end "format check"
fi

# Every parser of outside input has a libFuzzer target (fuzz/): build them with clang and give
# each a short run, so they stay buildable and the easy crashes are caught on every change.
# For longer runs: build-fuzz/fuzz_NAME -max_total_time=600 (docs/internals/*.md).
# Only the fuzz targets (and the libraries they link) are built there, not the tests again.
step_begin
fuzz_targets=()
for f in fuzz/fuzz_*.c; do fuzz_targets+=(--target "$(basename "$f" .c)"); done
scripts/build.sh build-fuzz "${fuzz_targets[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIGIL_FUZZ=ON \
  -DVIGIL_BENCH=OFF -DCMAKE_C_COMPILER=clang
step_end "fuzz build"
step_begin
fuzz_seconds=${VIGIL_FUZZ_SECONDS:-10}
mkdir -p fuzz/artifacts build-fuzz/results
rm -f build-fuzz/results/*
# One fuzz target for 'seconds': a failing input is kept in fuzz/artifacts/ (ignored by git), not
# in the working directory; the outcome goes to build-fuzz/results/NAME.{ok,log}.
fuzz_one() {
  local f=$1 name corpus seeds
  name=$(basename "$f")
  corpus=$(mktemp -d)
  seeds=fuzz/corpus/${name#fuzz_}
  [ -d "$seeds" ] || seeds=""
  if LSAN_OPTIONS=suppressions=$root/fuzz/lsan.supp "$f" -max_total_time="$fuzz_seconds" \
    -artifact_prefix=fuzz/artifacts/ "$corpus" $seeds >"build-fuzz/results/$name.log" 2>&1; then
    touch "build-fuzz/results/$name.ok"
  fi
  rm -rf "$corpus"
}
export -f fuzz_one
export root fuzz_seconds
# One per core at a time: each is one process.
printf '%s\n' build-fuzz/fuzz_* | xargs -P "$(nproc)" -I{} bash -c 'fuzz_one {}'
for f in build-fuzz/fuzz_*; do
  name=$(basename "$f")
  if [ -e "build-fuzz/results/$name.ok" ]; then
    echo "fuzz: $name ran ${fuzz_seconds}s clean"
    passed=$((passed + 1))
  else
    tail -n 40 "build-fuzz/results/$name.log"
    echo "fuzz: $name found a failure (log above)"
    failed=$((failed + 1))
  fi
done
step_end "fuzz runs"
echo "test.sh: the whole suite took $((SECONDS - suite_start)) s"
rm -f "$times_file"

echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
