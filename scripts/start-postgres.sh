#!/usr/bin/env bash
# Start a throwaway PostgreSQL cluster for the test suite.
#
#   bash scripts/start-postgres.sh -- COMMAND [ARG...]
#       Start it, run COMMAND with CURSOROPS_TEST_PG_URL set to its SQLAlchemy URL,
#       then stop it and remove its folder (a fresh one under $TMPDIR), whatever
#       COMMAND's outcome, on Ctrl-C and on SIGTERM too. Exits with COMMAND's status.
#       A server already answering on the port is used and left running: this
#       script stops only what it started. This is what `make test` runs.
#   CURSOROPS_TEST_PG_URL=$(bash scripts/start-postgres.sh [DIR])
#       Start it (or find it running) and print its URL; it keeps running until
#       `bash scripts/stop-postgres.sh [DIR]`.
#
#   bash scripts/start-postgres.sh --port PORT --database NAME [DIR] [-- COMMAND...]
#       The same on another port and database (scripts/airflow-env.sh starts Airflow's
#       metadata database so, for `make up`).
#
# DIR (default /tmp/cursorops-pg) holds the cluster, its socket and its log.
# The server listens on 127.0.0.1:55432 (CURSOROPS_TEST_PG_PORT, or --port) with trust
# authentication, superuser "postgres", database "cursorops_test" (or --database). Durability
# settings are off: the data is disposable. CURSOROPS_TEST_PG_DURABLE=1 keeps
# PostgreSQL's defaults instead (fsync, synchronous_commit and full_page_writes on),
# for benchmarks whose figures must hold on a durable server. Everything but the URL
# goes to stderr.
set -euo pipefail

DIR=""
COMMAND=()
PORT="${CURSOROPS_TEST_PG_PORT:-55432}"
DB=cursorops_test
while (($#)); do
    case "$1" in
        --) shift; COMMAND=("$@"); break ;;
        --port) PORT="${2:-}"; shift 2 || shift ;;
        --database) DB="${2:-}"; shift 2 || shift ;;
        *) DIR="$1"; shift ;;
    esac
done
if [[ -n "$DIR" ]] && ((${#COMMAND[@]})); then
    echo "start-postgres: a command runs on a fresh folder of its own: give no DIR" >&2
    exit 2
fi
if [[ ! "$PORT" =~ ^[0-9]+$ ]] || ((PORT < 1 || PORT > 65535)); then
    echo "start-postgres: the port must be a number from 1 to 65535, not '$PORT'" >&2
    exit 2
fi
# It goes into SQL and a URL as it is.
if [[ ! "$DB" =~ ^[a-z_][a-z0-9_]{0,62}$ ]]; then
    echo "start-postgres: a database name is lower-case letters, digits and _, not '$DB'" >&2
    exit 2
fi
HOST=127.0.0.1
SUPERUSER=postgres
URL="postgresql+psycopg://${SUPERUSER}@${HOST}:${PORT}/${DB}"

log() { echo "start-postgres: $*" >&2; }

find_bindir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [[ -n "$dir" && -x "$dir/initdb" ]]; then
        echo "$dir"
    elif command -v pg_config >/dev/null 2>&1 && [[ -x "$(pg_config --bindir)/initdb" ]]; then
        pg_config --bindir
    fi
}

BINDIR=$(find_bindir)
if [[ -z "$BINDIR" ]]; then
    if [[ $(id -u) -ne 0 ]]; then
        log "PostgreSQL is not installed and installing it needs root"
        exit 1
    fi
    log "installing PostgreSQL from Debian packages"
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
    BINDIR=$(find_bindir)
    if [[ -z "$BINDIR" ]]; then
        log "PostgreSQL installed but initdb not found"
        exit 1
    fi
fi

# The server refuses to run as root: as root, run it as a dedicated OS user.
if [[ $(id -u) -eq 0 ]]; then
    OS_USER=postgres
    if ! id "$OS_USER" >/dev/null 2>&1; then
        useradd --system --home-dir /tmp/cursorops-pg --shell /usr/sbin/nologin "$OS_USER"
    fi
    as_server_user() {
        if command -v runuser >/dev/null 2>&1; then
            runuser -u "$OS_USER" -- "$@"
        else
            su -s /bin/sh "$OS_USER" -c "$(printf '%q ' "$@")"
        fi
    }
else
    OS_USER=$(id -un)
    as_server_user() { "$@"; }
fi

is_ready() { "$BINDIR/pg_isready" -q -h "$HOST" -p "$PORT" >/dev/null 2>&1; }

ensure_database() {
    local exists
    exists=$("$BINDIR/psql" -h "$HOST" -p "$PORT" -U "$SUPERUSER" -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '${DB}'")
    if [[ "$exists" != "1" ]]; then
        log "creating database ${DB}"
        "$BINDIR/createdb" -h "$HOST" -p "$PORT" -U "$SUPERUSER" "$DB"
    fi
}

run_command() {
    local status=0
    CURSOROPS_TEST_PG_URL="$URL" "${COMMAND[@]}" || status=$?
    exit "$status"
}

if is_ready; then
    ensure_database
    if ((${#COMMAND[@]})); then
        log "using the server already running on ${HOST}:${PORT} (left running)"
        run_command
    fi
    echo "$URL"
    exit 0
fi

if ((${#COMMAND[@]})); then
    # Ours to stop: a fresh folder, and a trap set before the server exists, so that
    # a failure, Ctrl-C or SIGTERM at any later point stops it and removes the folder.
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/cursorops-pg.XXXXXX")
    stop_ours() {
        trap "" INT TERM HUP
        if [[ -f "$DIR/data/postmaster.pid" ]]; then
            log "stopping the server on ${HOST}:${PORT}"
            as_server_user "$BINDIR/pg_ctl" -D "$DIR/data" -m immediate -w -t 60 stop \
                >/dev/null 2>&1 || log "pg_ctl stop failed; see $DIR/server.log"
        fi
        rm -rf "$DIR"
    }
    trap stop_ours EXIT
    # The command gets the signal too (same process group); exit once it has ended.
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
fi
DIR="${DIR:-/tmp/cursorops-pg}"
DATA="$DIR/data"
mkdir -p "$DIR"
if [[ $(id -u) -eq 0 ]]; then
    chown "$OS_USER" "$DIR"
    if ! as_server_user test -w "$DIR"; then
        log "the server runs as $OS_USER, who cannot reach $DIR: choose a folder outside root's own"
        exit 1
    fi
fi

if [[ ! -f "$DATA/PG_VERSION" ]]; then
    log "initialising a cluster in $DATA"
    as_server_user "$BINDIR/initdb" -D "$DATA" -U "$SUPERUSER" --auth=trust \
        --encoding=UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 \
        || { cat "$DIR/initdb.log" >&2; exit 1; }
fi

if [[ "${CURSOROPS_TEST_PG_DURABLE:-0}" == 1 ]]; then
    durability=""
    log "starting a durable server (fsync on) on ${HOST}:${PORT}"
else
    durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    log "starting the server on ${HOST}:${PORT}"
fi
as_server_user "$BINDIR/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 \
    -o "-h ${HOST} -p ${PORT} -k ${DIR} ${durability} -c max_connections=200" \
    start >/dev/null || { log "the server did not start; see $DIR/server.log"; exit 1; }

for _ in $(seq 1 60); do
    if is_ready; then
        break
    fi
    sleep 1
done
if ! is_ready; then
    log "the server did not become ready; see $DIR/server.log"
    exit 1
fi

ensure_database
if ((${#COMMAND[@]})); then
    run_command
fi
echo "$URL"
