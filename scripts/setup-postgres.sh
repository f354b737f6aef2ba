#!/usr/bin/env bash
# Starts (or reuses) a private PostgreSQL cluster on 127.0.0.1 for the test suites and exports
# MWP_TEST_POSTGRES=postgres://postgres@127.0.0.1:PORT/mwp_test.
#
# Usage: source scripts/setup-postgres.sh     (./scripts/test does this)
#
# Idempotent: a server already running from the same data directory is reused. On a fresh
# Debian machine, as root, it installs the `postgresql` package first. The cluster belongs to
# the `postgres` user when run as root (initdb refuses root), listens on loopback only, trusts
# local connections, and keeps fsync on (benchmarks measure durable commits).
#
# Settings (environment): MWP_PG_DIR (data directory, default ${TMPDIR:-/tmp}/mwp-pg),
# MWP_PG_PORT (first port tried, default 55432), MWP_PG_DB (database, default mwp_test).
# Outside CI a failure only warns, so the PostgreSQL tests skip loudly; with CI=true it fails.

mwp_pg_setup() {
  local dir=${MWP_PG_DIR:-${TMPDIR:-/tmp}/mwp-pg}
  local port=${MWP_PG_PORT:-55432}
  local db=${MWP_PG_DB:-mwp_test}
  local bin as_user=()

  bin=$(find /usr/lib/postgresql/ -path '*/bin/pg_ctl' 2>/dev/null | sort -V | tail -n1)
  if [ -z "$bin" ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "setup-postgres: PostgreSQL is not installed and installing it needs root" >&2
      return 1
    fi
    echo "setup-postgres: installing PostgreSQL from Debian's packages"
    apt-get update -qq || return 1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null || return 1
    bin=$(find /usr/lib/postgresql/ -path '*/bin/pg_ctl' 2>/dev/null | sort -V | tail -n1)
    [ -n "$bin" ] || { echo "setup-postgres: pg_ctl not found after install" >&2; return 1; }
  fi
  bin=$(dirname "$bin")

  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres || return 1
    as_user=(runuser -u postgres --)
    # The postgres user must reach the data directory; a TMPDIR under /root is not reachable.
    mkdir -p "$dir" && chown postgres: "$dir" && chmod 700 "$dir" || return 1
    if ! "${as_user[@]}" test -w "$dir"; then
      dir=/tmp/mwp-pg
      mkdir -p "$dir" && chown postgres: "$dir" && chmod 700 "$dir" || return 1
    fi
  else
    mkdir -p "$dir" && chmod 700 "$dir" || return 1
  fi

  # A server already running from this data directory: reuse it (its port is line 4).
  if [ -f "$dir/postmaster.pid" ] && "${as_user[@]}" "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    port=$(sed -n 4p "$dir/postmaster.pid")
    echo "setup-postgres: reusing the server of $dir on port $port"
  else
    if [ ! -f "$dir/PG_VERSION" ]; then
      "${as_user[@]}" "$bin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C \
        >"$dir.initdb.log" 2>&1 || { cat "$dir.initdb.log" >&2; return 1; }
    fi
    # The first port from $port on that nothing answers on; if another process takes it
    # between the look and the start, the start fails and the next port is tried.
    local tries=0 started=""
    while [ "$tries" -lt 20 ]; do
      if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 1 >/dev/null 2>&1 \
        || (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        port=$((port + 1)); tries=$((tries + 1)); continue
      fi
      if "${as_user[@]}" "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 120 start \
        -o "-k /tmp -h 127.0.0.1 -p $port -c max_connections=300 -c shared_buffers=128MB" >/dev/null; then
        started=yes; break
      fi
      if ! tail -n 20 "$dir/server.log" 2>/dev/null | grep -qi -e 'could not bind' -e 'address already in use' \
        -e 'could not create any TCP/IP sockets' -e 'PGSQL.*lock.*already exists'; then
        tail -n 20 "$dir/server.log" >&2; return 1
      fi
      port=$((port + 1)); tries=$((tries + 1))
    done
    [ -n "$started" ] || { echo "setup-postgres: no free port from ${MWP_PG_PORT:-55432} on" >&2; return 1; }
    echo "setup-postgres: started a server for $dir on 127.0.0.1:$port"
  fi

  if ! "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
    "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$db" || return 1
  fi
  export MWP_TEST_POSTGRES="postgres://postgres@127.0.0.1:$port/$db"
  echo "setup-postgres: MWP_TEST_POSTGRES=$MWP_TEST_POSTGRES"
}

if ! mwp_pg_setup; then
  if [ "${CI:-}" = true ]; then
    echo "setup-postgres: FAILED; the PostgreSQL suites cannot run" >&2
    return 1 2>/dev/null || exit 1
  fi
  echo "setup-postgres: WARNING: no PostgreSQL; its tests will be skipped" >&2
fi
unset -f mwp_pg_setup
