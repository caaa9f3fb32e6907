#!/usr/bin/env bash
# libcurl is loaded by the first HTTP call and libmicrohttpd by `vigil serve`'s HTTP API, not at
# start (src/os/libcurl.h, src/http/mhd.h): a command that needs neither loads neither, by the
# dynamic loader's own account (LD_DEBUG=files names every library it loads, at start or by
# dlopen); a model call over HTTP loads libcurl, the HTTP API libmicrohttpd; and without one only
# what needs it fails, with one line that says what to install.
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE OPENAI_API_KEY ANTHROPIC_API_KEY VIGIL_LIBCURL VIGIL_LIBMICROHTTPD

# loads_curl ARGS...: whether `vigil ARGS` loads libcurl (its exit status is not checked); the
# loader's account stays in $T/ld.log.
loads_curl() {
  LD_DEBUG=files "$VIGIL" "$@" >/dev/null 2>"$T/ld.log" || true
  grep -q 'file=libcurl\.so' "$T/ld.log"
}
# no_curl ARGS...: `vigil ARGS` loads neither libcurl nor libmicrohttpd.
no_curl() {
  if loads_curl "$@" || grep -q 'file=libmicrohttpd' "$T/ld.log"; then
    echo "FAIL: vigil $* loaded: $(grep -E 'file=lib(curl|microhttpd)' "$T/ld.log")"
    fail_count
  else
    passed=$((passed + 1))
  fi
}

no_curl --version
expect 0 init
no_curl agent list
expect 0 agent create --name Pal --prompt "You help."
id=$OUT
no_curl agent list
no_curl chat "$id" -m "hello" # the scripted model: no HTTP
expect 0 chat "$id" -m "hello"
has "$OUT" "you said: hello"

# over_http CMD...: CMD with an OpenAI model on a closed port (nothing listens on port 1), so its
# call fails at once, once libcurl is loaded.
over_http() {
  VIGIL_MODEL_PROVIDER=openai VIGIL_MODEL=gpt-x OPENAI_API_KEY=sk-test \
    VIGIL_MODEL_BASE_URL=http://127.0.0.1:1/v1 VIGIL_MODEL_MAX_RETRIES=0 "$@"
}
over_http expect 9 chat "$id" -m hi
one_line "$ERR"
has "$ERR" "127.0.0.1"

# The static libcurl of scripts/curl.sh (VIGIL_CURL_DIR) is linked, not loaded: such a binary
# has no VIGIL_LIBCURL to read, and the rest of this part is about loading.
if grep -qa VIGIL_LIBCURL "$VIGIL"; then
  if over_http loads_curl chat "$id" -m hi &&
    grep -q 'file=libcurl.*dynamically loaded' "$T/ld.log"; then
    passed=$((passed + 1))
  else
    bad "a model call over HTTP did not load libcurl when it needed it"
  fi
  # Without libcurl: the HTTP call says what to install; the rest of the command still works.
  export VIGIL_LIBCURL=/nonexistent/libcurl.so.4
  over_http expect 1 chat "$id" -m hi
  one_line "$ERR"
  has "$ERR" "need libcurl"
  has "$ERR" "apt-get install libcurl4"
  has "$ERR" "VIGIL_LIBCURL"
  expect 0 chat "$id" -m "still here"
  has "$OUT" "you said: still here"
  unset VIGIL_LIBCURL
fi

# The HTTP API loads libmicrohttpd when it starts, and answers.
serve_http --workers 1
if grep -q '/libmicrohttpd\.so' "/proc/$SERVE_PID/maps"; then
  passed=$((passed + 1))
else
  bad "vigil serve did not load libmicrohttpd when it started the HTTP API"
fi
if curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/agents" >"$T/agents.json"
then
  has "$(cat "$T/agents.json")" "$id"
else
  bad "the HTTP API did not answer GET /v1/agents"
fi
serve_stop

# Without libmicrohttpd the HTTP API cannot start, and says what to install (after the scripted
# model's warning). (timeout: a daemon that did start must not hang the suite; it would exit 124.)
set +e
ERR=$(VIGIL_LIBMICROHTTPD=/nonexistent/libmicrohttpd.so.12 timeout 60 "$VIGIL" serve \
  --listen 127.0.0.1:0 --workers 1 2>&1 >/dev/null)
got=$?
set -e
if [ "$got" -eq 1 ]; then passed=$((passed + 1)); else
  bad "vigil serve without libmicrohttpd exited $got, expected 1: $ERR"
fi
one_line "$(printf '%s\n' "$ERR" | tail -n 1)"
has "$ERR" "the HTTP API needs libmicrohttpd"
has "$ERR" "apt-get install libmicrohttpd12"
has "$ERR" "VIGIL_LIBMICROHTTPD"
finish
