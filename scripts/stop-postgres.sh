#!/usr/bin/env bash
# Stop the PostgreSQL that `scripts/start-postgres.sh [DIR]` started and remove DIR.
#
#   bash scripts/stop-postgres.sh [DIR]          # default /tmp/cursorops-pg
#   bash scripts/stop-postgres.sh --keep DIR     # stop it, keep its data (Airflow's, `make up`)
#
# (`scripts/start-postgres.sh -- COMMAND` stops its own server: nothing to do then.)
set -euo pipefail

KEEP=0
if [[ "${1:-}" == --keep ]]; then
    KEEP=1
    shift
fi
DIR="${1:-/tmp/cursorops-pg}"
DATA="$DIR/data"

log() { echo "stop-postgres: $*" >&2; }

if [[ ! -f "$DATA/PG_VERSION" ]]; then
    log "no cluster in $DATA"
    exit 0
fi
BINDIR=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [[ -z "$BINDIR" || ! -x "$BINDIR/pg_ctl" ]]; then
    BINDIR=$(pg_config --bindir)
fi
if [[ $(id -u) -eq 0 ]]; then
    as_owner() { runuser -u "$(stat -c %U "$DATA")" -- "$@"; }
else
    as_owner() { "$@"; }
fi
if [[ -f "$DATA/postmaster.pid" ]]; then
    as_owner "$BINDIR/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >&2
fi
if ((KEEP)); then
    log "stopped; its data kept in $DIR"
    exit 0
fi
rm -rf "$DIR"
log "stopped; removed $DIR"
