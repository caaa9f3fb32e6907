# Sourced by scripts/test.sh: start and stop a private PostgreSQL cluster for the tests.
# pg_start DIR creates a cluster in DIR (owned by the postgres user when run as root), listens
# only on a Unix socket in DIR, and exports VIGIL_PG_URI for the tests.
pg_bin() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

pg_start() {
  local dir=$1 bin run=()
  bin=$(pg_bin)
  if [ -z "$bin" ]; then
    echo "pg: no PostgreSQL server installed (scripts/deps.sh test installs it)" >&2
    return 1
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$dir"
    run=(runuser -u postgres --)
  fi
  "${run[@]}" "$bin/initdb" -D "$dir/data" -U vigil --auth=trust -E UTF8 >/dev/null
  "${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
    -o "-c listen_addresses='' -k $dir -c fsync=off" start >/dev/null
  "${run[@]}" "$bin/createdb" -h "$dir" -U vigil vigil_test
  export VIGIL_PG_URI="postgresql://vigil@/vigil_test?host=$dir"
  PG_DIR=$dir
  PG_RUN=("${run[@]}")
  echo "pg: test server at $VIGIL_PG_URI"
}

pg_stop() {
  [ -n "${PG_DIR:-}" ] || return 0
  "${PG_RUN[@]}" "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
}
