#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests that share one Optuna study between workers.
#
#   .ci/postgres.sh          install Debian's postgresql when missing, start a server on 127.0.0.1 only,
#                            create a user and a database, print the URL as the last line of stdout
#   .ci/postgres.sh stop     stop that server (its data directory stays for the next start)
#
# Everything else goes to stderr, so `URL="$(.ci/postgres.sh)"` captures only the URL. Running it again
# while the server is up prints the same URL. Settings (environment): HER_WRAP_PG_DIR (data directory,
# default /tmp/her_wrap_postgres), HER_WRAP_PG_PORT (default 55432). The Debian package's own cluster
# (port 5432) is left alone.
set -euo pipefail

PGDIR="${HER_WRAP_PG_DIR:-/tmp/her_wrap_postgres}"
PORT="${HER_WRAP_PG_PORT:-55432}"
DB_USER="her_wrap"
DB_PASSWORD="her_wrap"
DB_NAME="her_wrap_test"
DATA="$PGDIR/data"
LOG="$PGDIR/server.log"

log() { echo "postgres.sh: $*" >&2; }

find_bindir() {
    local dir
    # Newest installed major version first.
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

BINDIR="$(find_bindir || true)"
if [ -z "$BINDIR" ]; then
    if [ "${1:-}" = "stop" ]; then
        exit 0
    fi
    log "installing Debian's postgresql (apt-get)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    BINDIR="$(find_bindir)" || { log "postgresql installed but initdb/pg_ctl not found under /usr/lib/postgresql"; exit 1; }
fi

# The server refuses to run as root: run it as the `postgres` user the Debian package creates.
if [ "$(id -u)" -eq 0 ]; then
    RUN_AS=(runuser -u postgres --)
else
    RUN_AS=()
fi
pg() { "${RUN_AS[@]}" "$@"; }

if [ "${1:-}" = "stop" ]; then
    if [ -f "$DATA/postmaster.pid" ]; then
        pg "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >&2 || true
    fi
    exit 0
fi

mkdir -p "$PGDIR"
if [ "$(id -u)" -eq 0 ]; then
    chown postgres:postgres "$PGDIR"
fi

if [ ! -f "$DATA/PG_VERSION" ]; then
    log "initializing a cluster in $DATA"
    pg "$BINDIR/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --no-locale >&2
fi

if ! pg "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    log "starting the server on 127.0.0.1:$PORT"
    # listen_addresses: TCP on loopback only; the unix socket lives in the data directory, so nothing
    # needs write access to /var/run/postgresql.
    pg "$BINDIR/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories=$DATA -c max_connections=100" \
        start >&2 || { log "the server did not start; its log:"; cat "$LOG" >&2; exit 1; }
fi

psql_admin() { pg "$BINDIR/psql" -h "$DATA" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA "$@"; }

if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$DB_USER'")" != "1" ]; then
    psql_admin -c "CREATE ROLE $DB_USER LOGIN PASSWORD '$DB_PASSWORD'" >&2
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")" != "1" ]; then
    psql_admin -c "CREATE DATABASE $DB_NAME OWNER $DB_USER" >&2
fi

URL="postgresql://$DB_USER:$DB_PASSWORD@127.0.0.1:$PORT/$DB_NAME"
export HER_WRAP_TEST_POSTGRES_URL="$URL"
log "ready: $URL"
echo "$URL"
