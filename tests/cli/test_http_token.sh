#!/usr/bin/env bash
# End-to-end: `vigil token` and the HTTP options of `vigil serve` (docs/http.md, "Access"): the
# token is 64 hex characters, made once and kept mode 0600 beside the store, the same on every
# call and the one `serve --show-token` prints; a token file others can read is refused; a
# non-loopback --listen without --allow-remote, or an address this machine does not have, is
# refused before anything listens, even while another daemon serves the store; the HTTP
# options without --listen are a usage error.
set -e
source "$(dirname "$0")/lib.sh" "$1"

# Before `vigil init`, nothing is created: refused with the hint, like any other command.
VIGIL_STORE="$T/fresh/v.db" expect 3 token
has "$ERR" "vigil init"
[ ! -e "$T/fresh" ] && passed=$((passed + 1)) || { echo "FAIL: token created $T/fresh"; fail_count; }

expect 0 init
expect 0 token
token=$OUT
[ ${#token} -eq 64 ] && [ -z "${token//[0-9a-f]/}" ] && passed=$((passed + 1)) ||
  { echo "FAIL: token is not 64 hex digits: $token"; fail_count; }
has "$(stat -c %a "$T/api-token")" "600"
expect 0 token
has "$OUT" "$token"

chmod 644 "$T/api-token"
expect 10 token
one_line "$ERR"
has "$ERR" "readable by others"
chmod 600 "$T/api-token"

expect 2 serve --listen 0.0.0.0:0
has "$ERR" "--allow-remote"
expect 2 serve --listen nowhere.example:80
expect 2 serve --listen 127.0.0.1:99999
expect 2 serve --show-token
expect 2 serve --listen 127.0.0.1:0 --http-timeout-s 0

# --show-token prints the token on stdout before serving; SIGTERM stops it cleanly.
# Its stderr comes through a FIFO, read line by line until it listens (30 s safety).
mkfifo "$T/serve.err"
"$VIGIL" serve --listen 127.0.0.1:0 --show-token >"$T/serve.out" 2>"$T/serve.err" &
pid=$!
exec 3<"$T/serve.err"
listening=""
before=""
while IFS= read -r -t 30 line <&3; do
  case $line in *"HTTP API on http://127.0.0.1:"*) listening=$line && break ;; esac
  before="$before$line"$'\n'
done
has "$listening" "HTTP API on http://127.0.0.1:"
has "$(cat "$T/serve.out")" "$token"
# A bad --listen while this daemon serves the store: the address is refused (2) before the
# store lock would say "another daemon" (6). 192.0.2.1 (TEST-NET-1) is no machine's address.
expect 2 serve --listen 192.0.2.1:0 --allow-remote
one_line "$ERR"
has "$ERR" "not an address of this machine"
VIGIL_WAKE_RUNNER=bogus expect 2 serve # a bad runner too is named before the lock
has "$ERR" "unknown runner"
expect 2 serve --listen 0.0.0.0:0
has "$ERR" "--allow-remote"
expect 2 serve --listen nowhere.example:80
expect 2 serve --listen 127.0.0.1:99999
# No libmicrohttpd warning on start (its logger is its first option).
case $before in *"MHD_OPTION"*) echo "FAIL: serve warned on start: $before"; fail_count ;; *) passed=$((passed + 1)) ;; esac
# The port taken (another store, so no daemon lock is in the way): one line naming it.
port=${listening##*:}
VIGIL_STORE="$T/b/v.db" expect 0 init
VIGIL_STORE="$T/b/v.db" expect 6 serve --listen "127.0.0.1:$port"
has "$ERR" "vigil: could not listen on 127.0.0.1:$port"
case $ERR in *"port 0"* | *"serve: http:"*) echo "FAIL: the refusal names port 0: $ERR"; fail_count ;; *) passed=$((passed + 1)) ;; esac
kill -TERM $pid
cat <&3 >/dev/null # drain what it says while stopping
exec 3<&-
wait $pid && passed=$((passed + 1)) || { echo "FAIL: serve did not stop cleanly"; fail_count; }

# A PostgreSQL store keeps its own token, in a folder named by its URI under the data folder:
# not the default local store's (finding 33 of a user trial).
if [ -n "${VIGIL_PG_URI:-}" ]; then
  export XDG_DATA_HOME="$T/xdg"
  mkdir -p "$XDG_DATA_HOME/vigil"
  VIGIL_STORE="$XDG_DATA_HOME/vigil/vigil.db" expect 0 init
  VIGIL_STORE="$XDG_DATA_HOME/vigil/vigil.db" expect 0 token
  local_token=$OUT
  VIGIL_STORE=$VIGIL_PG_URI expect 0 init
  VIGIL_STORE=$VIGIL_PG_URI expect 0 token
  pg_token=$OUT
  [ "$pg_token" != "$local_token" ] && passed=$((passed + 1)) ||
    { echo "FAIL: the PostgreSQL store's token is the local store's"; fail_count; }
  files=$(ls "$XDG_DATA_HOME"/vigil/store-*/api-token)
  has "$(stat -c %a $files)" "600"
  has "$(cat $files)" "$pg_token"
  VIGIL_STORE=$VIGIL_PG_URI expect 0 token
  has "$OUT" "$pg_token"
  unset XDG_DATA_HOME
fi

finish
