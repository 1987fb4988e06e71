#!/usr/bin/env bash
# Start a throwaway PostgreSQL 15 cluster for reactchat's tests and benchmarks.
#
# Run as root (or as the postgres user). Creates the cluster in $PGDATA_DIR
# (default /tmp/reactchat-pg) owned by the postgres user, starts it on
# 127.0.0.1:$PGPORT (default 55432) with trust auth, creates the database
# reactchat_test and prints its URL on stdout. Idempotent: when the server is
# already running it only makes sure the database exists. Nothing here is for
# production: trust auth on loopback.
set -euo pipefail

# the newest PostgreSQL Debian installed (15 on bookworm), unless PGBIN says otherwise
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGDATA_DIR=${PGDATA_DIR:-/tmp/reactchat-pg}
PGPORT=${PGPORT:-55432}
DB=${PGDATABASE_NAME:-reactchat_test}
URL="postgresql://postgres@127.0.0.1:${PGPORT}/${DB}"

as_postgres() {
    if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}

if [ ! -x "$PGBIN/pg_ctl" ]; then
    echo "start-postgres: no PostgreSQL binaries in $PGBIN (apt-get install postgresql)" >&2
    exit 1
fi

if [ ! -s "$PGDATA_DIR/PG_VERSION" ]; then
    mkdir -p "$PGDATA_DIR"
    chown postgres: "$PGDATA_DIR" 2>/dev/null || true
    chmod 700 "$PGDATA_DIR"
    as_postgres "$PGBIN/initdb" -D "$PGDATA_DIR" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
fi

if ! as_postgres "$PGBIN/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1; then
    # the unix socket goes into the data directory: /var/run/postgresql may not exist
    as_postgres "$PGBIN/pg_ctl" -D "$PGDATA_DIR" -l "$PGDATA_DIR/server.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $PGPORT -c unix_socket_directories=$PGDATA_DIR -c max_connections=200" \
        start >/dev/null
fi

for _ in $(seq 1 50); do
    if as_postgres "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -Atqc "select 1" >/dev/null 2>&1; then
        break
    fi
    sleep 0.2
done

if ! as_postgres "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -Atqc \
    "select 1 from pg_database where datname = '$DB'" | grep -q 1; then
    as_postgres "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -qc "create database $DB" >/dev/null
fi

echo "$URL"
