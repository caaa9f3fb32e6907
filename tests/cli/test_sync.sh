#!/usr/bin/env bash
# End-to-end: `vigil sync --with` between two stores, each a device. An agent made on one reaches
# the other with its chat's messages; a pause made on the other comes back; syncing again sends
# nothing; --json's summary; the exit statuses of a missing store, a copied store (one host id)
# and a usage error. The chat's messages read on the other device (`vigil chat --history`,
# trial K7: runs stay with their store, so no run view reaches them); their arrival and order
# are checked in tests/sync/test_exchange.c.
# proves: S0-180
set -e
source "$(dirname "$0")/lib.sh" "$1"
export VIGIL_MODEL_PROVIDER=scripted
unset VIGIL_MODEL_CASSETTE
export VIGIL_CONFIG="$T/config.yaml"
echo '{}' >"$T/config.yaml"
LAPTOP="$T/laptop.db"
DESKTOP="$T/desktop.db"

expect 0 --store "$LAPTOP" init
expect 0 --store "$DESKTOP" init
expect 0 --store "$LAPTOP" agent create --name Shared
id=$OUT
expect 0 --store "$LAPTOP" chat "$id" -m "hello from the laptop" --session s1
expect 0 --store "$LAPTOP" sync --with "$DESKTOP" --json
R=$OUT
# The agent, its state, the user's message and the agent's answer at least.
is '.sent.records >= 4 and .sent.changed == .sent.records and .received.records == 0'
expect 0 --store "$DESKTOP" agent show "$id" --json
has "$OUT" '"Shared"'
# The laptop's conversation, read on the desktop.
expect 0 --store "$DESKTOP" chat "$id" --history 10 --session s1
has "$OUT" "you: hello from the laptop"
expect 0 --store "$DESKTOP" chat "$id" --history 10 --session s1 --json
R=$OUT
is '.session == "s1" and (.items | length) == 2 and .items[0].kind == "user"'
expect 0 --store "$DESKTOP" chat "$id" --history 10
has "$OUT" 'no messages in session "default"'
expect 2 --store "$DESKTOP" chat "$id" --history 10 -m hi
expect 2 --store "$DESKTOP" chat "$id" --history lots
expect 3 --store "$DESKTOP" chat nobody --history 10

# The desktop pauses the agent; the laptop learns it.
expect 0 --store "$DESKTOP" agent pause "$id"
expect 0 --store "$DESKTOP" sync --with "$LAPTOP" --json
compact_out
has "$OUT" '"holes":0'
expect 0 --store "$LAPTOP" agent show "$id" --json
has "$OUT" '"dormant"'

# Nothing new: nothing is stored or changed on either side.
expect 0 --store "$LAPTOP" sync --with "$DESKTOP" --json
R=$OUT
is '.sent.changed == 0 and .received.changed == 0 and .sent.records == 0 and .received.records == 0'

# A store that does not exist, a copy of a store, no --with.
expect 3 --store "$LAPTOP" sync --with "$T/nowhere.db"
has "$ERR" "does not exist"
cp "$LAPTOP" "$T/copy.db"
expect 4 --store "$LAPTOP" sync --with "$T/copy.db"
has "$ERR" "copy"
expect 2 --store "$LAPTOP" sync
# A daemon needs its token, and a token file goes with a daemon; one that is not there is 3, no
# daemon listening 9 (the HTTP transport itself: tests/http/test_http_sync.c).
expect 2 --store "$LAPTOP" sync --with http://127.0.0.1:9
has "$ERR" "--token-file"
expect 2 --store "$LAPTOP" sync --with "$DESKTOP" --token-file "$T/token"
expect 3 --store "$LAPTOP" sync --with http://127.0.0.1:9 --token-file "$T/no-token"
printf '%s\n' 0123456789abcdef > "$T/token"
expect 9 --store "$LAPTOP" sync --with http://127.0.0.1:9 --token-file "$T/token"
expect 0 sync --help
has "$OUT" "--with OTHER_STORE"
finish
