#!/usr/bin/env bash
# Install (Debian's packages) and start a PostgreSQL server on loopback, create a role and a
# database for the tests, and print its URL on stdout (everything else goes to stderr).
# Idempotent: a second run finds the server up and the database there and prints the same URL.
# Must run as root (CI and developer machines are root); uses pg_ctlcluster when Debian's
# postgresql-common is there, else initdb + pg_ctl as the postgres user.
#
#   export BIMU_TEST_POSTGRES_URL="$(bash scripts/ci_postgres.sh)"
#
# Settings (environment): BIMU_PG_USER (bimu), BIMU_PG_PASSWORD (bimu), BIMU_PG_DB (bimu_test),
# BIMU_PG_DATA (/var/tmp/bimu-pg, only for the initdb fallback), BIMU_PG_PORT (5432, idem).
set -euo pipefail

PGUSER_NAME="${BIMU_PG_USER:-bimu}"
PGPASS="${BIMU_PG_PASSWORD:-bimu}"
PGDB="${BIMU_PG_DB:-bimu_test}"
log() { echo "ci_postgres: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
  log "must run as root (it installs packages and starts the server as the postgres user)"
  exit 1
fi

server_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

if [ -z "$(server_bin)" ] || [ ! -x "$(server_bin)/postgres" ]; then
  log "installing postgresql from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
fi
BIN="$(server_bin)"
VER="$(basename "$(dirname "$BIN")")"
as_postgres() {
  if command -v runuser >/dev/null 2>&1; then runuser -u postgres -- "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
}
mkdir -p /var/run/postgresql && chown postgres:postgres /var/run/postgresql

if command -v pg_ctlcluster >/dev/null 2>&1; then
  if ! pg_lsclusters -h 2>/dev/null | awk -v v="$VER" '$1 == v && $2 == "main"' | grep -q .; then
    log "creating cluster $VER/main"
    pg_createcluster "$VER" main >&2
  fi
  PORT="$(pg_lsclusters -h | awk -v v="$VER" '$1 == v && $2 == "main" {print $3}')"
  if ! pg_lsclusters -h | awk -v v="$VER" '$1 == v && $2 == "main" {print $4}' | grep -q online; then
    log "starting cluster $VER/main on port $PORT"
    pg_ctlcluster "$VER" main start >&2
  fi
else
  DATA="${BIMU_PG_DATA:-/var/tmp/bimu-pg}"
  PORT="${BIMU_PG_PORT:-5432}"
  if [ ! -s "$DATA/PG_VERSION" ]; then
    log "initdb in $DATA"
    mkdir -p "$DATA" && chown postgres:postgres "$DATA" && chmod 700 "$DATA"
    as_postgres "$BIN/initdb" -D "$DATA" --auth-local=peer --auth-host=scram-sha-256 >&2
  fi
  if ! as_postgres "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    log "starting the server in $DATA on port $PORT"
    as_postgres "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w \
      -o "-p $PORT -c listen_addresses=127.0.0.1 -k /var/run/postgresql" start >&2
  fi
fi

for _ in $(seq 1 60); do
  if "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then break; fi
  sleep 0.5
done
"$BIN/pg_isready" -h 127.0.0.1 -p "$PORT" >&2

psql_admin() { as_postgres "$BIN/psql" -h /var/run/postgresql -p "$PORT" -v ON_ERROR_STOP=1 -qtA "$@"; }
if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$PGUSER_NAME'")" != "1" ]; then
  log "creating role $PGUSER_NAME"
  psql_admin -c "CREATE ROLE \"$PGUSER_NAME\" LOGIN PASSWORD '$PGPASS'" >&2
else
  psql_admin -c "ALTER ROLE \"$PGUSER_NAME\" LOGIN PASSWORD '$PGPASS'" >&2
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$PGDB'")" != "1" ]; then
  log "creating database $PGDB"
  psql_admin -c "CREATE DATABASE \"$PGDB\" OWNER \"$PGUSER_NAME\"" >&2
fi

URL="postgresql://$PGUSER_NAME:$PGPASS@127.0.0.1:$PORT/$PGDB"
PGPASSWORD="$PGPASS" "$BIN/psql" "$URL" -qtA -c "SELECT 1" >/dev/null
log "ready: postgresql://$PGUSER_NAME:***@127.0.0.1:$PORT/$PGDB"
echo "$URL"
