#!/usr/bin/env bash
# End-to-end: TypeScript in the code sandbox through the command: `vigil sandbox check` says
# whether Deno is there, `vigil sandbox run FILE.ts` runs one program in Deno, and the language
# follows the file's extension, the agent's manifest (sandbox.language) or the config. Skips
# (77) without a deno binary; fails when VIGIL_REQUIRE_DENO=1.
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_DENO=${VIGIL_DENO:-$VIGIL_SOURCE_DIR/.deps/npm/node_modules/deno/deno}
if [ ! -x "$VIGIL_DENO" ]; then
  if [ "${VIGIL_REQUIRE_DENO:-}" = 1 ]; then
    echo "FAIL: VIGIL_REQUIRE_DENO=1 but no deno at $VIGIL_DENO (run scripts/npm.sh)"
    exit 1
  fi
  echo "skip: no deno at $VIGIL_DENO (scripts/npm.sh installs it)"
  exit 77
fi
export VIGIL_CONFIG="$T/config.yaml"
mkdir -p "$T/sbx"
printf 'sandbox:\n  root: %s/sbx\n  limits: {wall_ms: 30000, cpu_ms: 10000}\n' "$T" > "$VIGIL_CONFIG"

expect 0 sandbox check --json
has "$OUT" '"available": true'
has "$OUT" '"version": "2.'
expect 0 sandbox check
has "$OUT" "typescript        yes, 2."
VIGIL_DENO=/nonexistent/deno expect 0 sandbox check --json
has "$OUT" '"available": false'

expect 0 init
printf 'const n: number = 1 + 2;\nconsole.log("hello");\nreturn {sum: n};\n' > "$T/ok.ts"
expect 0 sandbox run "$T/ok.ts" --json
compact_out
has "$OUT" '"ok":true'
has "$OUT" '"result":{"sum":3}'
has "$OUT" '"output":"hello\n"'
expect 0 sandbox run "$T/ok.ts"
has "$OUT" '{"sum":3}'

# Plain JavaScript (trial L8): a .js file, and the language named javascript, run in Deno.
printf 'console.log("hi from js");\nreturn [1, 2, 3].map(x => x * 2);\n' > "$T/ok.js"
expect 0 sandbox run "$T/ok.js" --json
compact_out
has "$OUT" '"ok":true'
has "$OUT" '"result":[2,4,6]'
has "$OUT" '"output":"hi from js\n"'

printf 'let y = = 1;\n' > "$T/syntax.ts"
expect 1 sandbox run "$T/syntax.ts" --json
compact_out
has "$OUT" '"code":"syntax_error"'
printf 'new Deno.Command("/usr/bin/id").outputSync();\n' > "$T/spawn.ts"
expect 1 sandbox run "$T/spawn.ts" --json
compact_out
has "$OUT" '"code":"runtime_error"'
has "$OUT" 'NotCapable'
expect 1 sandbox run "$T/spawn.ts"
one_line "$ERR"
VIGIL_DENO=/nonexistent/deno expect 1 sandbox run "$T/ok.ts" --json
compact_out
has "$OUT" '"code":"sandbox_unavailable"'
has "$OUT" 'VIGIL_DENO'

# The agent's manifest chooses TypeScript: a file without an extension runs in Deno, through
# the agent's gate, in its own working directory.
cat > "$T/coder.yaml" <<'YAML'
name: tscoder
tools: [execute_code]
capabilities: [code_execution]
sandbox:
  language: typescript
YAML
expect 0 agent apply "$T/coder.yaml" --json
coder=$(printf '%s\n' "$OUT" | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -n 1)
printf 'vigil.write("n.txt", "7");\nreturn Number(vigil.read("n.txt")) * 6;\n' > "$T/prog"
expect 0 sandbox run "$T/prog" --agent "$coder" --json
compact_out
has "$OUT" '"result":42'
[ "$(cat "$T/sbx/$coder/n.txt")" = 7 ] && passed=$((passed + 1)) || { echo "FAIL: n.txt"; failed=$((failed + 1)); }

# The config's sandbox.language, for a run without an agent.
printf 'sandbox:\n  root: %s/sbx\n  language: typescript\n' "$T" > "$VIGIL_CONFIG"
printf 'return [1, 2].map((x: number) => x * 2);\n' > "$T/plain"
expect 0 sandbox run "$T/plain" --json
compact_out
has "$OUT" '"result":[2,4]'
printf 'sandbox:\n  root: %s/sbx\n  language: javascript\n' "$T" > "$VIGIL_CONFIG"
printf 'return [3, 4].map(x => x + 1);\n' > "$T/plainjs"
expect 0 sandbox run "$T/plainjs" --json
compact_out
has "$OUT" '"result":[4,5]'
# The agent's manifest may name javascript too; the program runs through its gate.
sed 's/language: typescript/language: javascript/' "$T/coder.yaml" > "$T/coder-js.yaml"
expect 0 agent apply "$T/coder-js.yaml" --json
printf 'return typeof Deno;\n' > "$T/prog-js"
expect 0 sandbox run "$T/prog-js" --agent "$coder" --json
compact_out
has "$OUT" '"result":"object"'
printf 'sandbox:\n  language: cobol\n' > "$VIGIL_CONFIG"
expect 2 sandbox run "$T/plain" --agent "$coder" --json
compact_out
has "$ERR" 'sandbox.language must be lua, typescript or javascript'

finish
