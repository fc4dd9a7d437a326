#!/usr/bin/env bash
# Stop what scripts/airflow-up.sh started: SIGINT to the launcher, which sends
# standalone one SIGINT (its clean stop; SIGTERM would orphan the scheduler,
# api-server and workers), then stops the Spark Connect server it started; wait.
# A stop always stops: a launcher that ignores SIGINT, or is still up after
# AIRFLOW_DOWN_SECONDS (default 120), gets SIGTERM (its trap stops what it started);
# whatever it leaves, or a launcher that was killed left, is ended from the process
# group and pid it recorded: SIGTERM, then SIGKILL after 10 s; and the PostgreSQL it
# started for Airflow's metadata (postgres.dir) is stopped, its data kept.
#   scripts/airflow-down.sh [AIRFLOW_HOME]      # default: $CURSOROPS_HOME/airflow
set -euo pipefail
home="${1:-${CURSOROPS_HOME:-$HOME/.cursorops}/airflow}"
pidfile="$home/standalone.pid"
groupfile="$home/standalone.group"
sparkfile="$home/spark-connect.pid"
pgfile="$home/postgres.dir"
seconds="${AIRFLOW_DOWN_SECONDS:-120}"
[[ -f "$pidfile" ]] || { echo "no $pidfile: not started by airflow-up.sh" >&2; exit 1; }
pid="$(cat "$pidfile")"
group="$(cat "$groupfile" 2>/dev/null || true)"
spark="$(cat "$sparkfile" 2>/dev/null || true)"

# Whether a live (not zombie) process is in process group $1.
group_alive() {
    [[ -n "$1" ]] && ps -e -o pgid= -o stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { f = 1 } END { exit !f }'
}
# Whether process $1 is alive (not a zombie).
alive() {
    [[ -n "$1" ]] && ps -o stat= -p "$1" 2>/dev/null | grep -qv '^Z'
}
# Wait up to $1 seconds while command $2.. succeeds; 1 if it still does.
wait_while() {
    local tenths=$(($1 * 10))
    shift
    while "$@"; do
        ((tenths-- > 0)) || return 1
        sleep 0.1
    done
}

# Whether process $1 ignores SIGINT: a background job of a script (`make up &`) starts so,
# and a shell cannot trap a signal it was started ignoring.
ignores_sigint() {
    local mask
    mask=$(awk '/^SigIgn:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 1
    [[ -n "$mask" ]] && (((16#$mask >> 1) & 1))
}

how="stopped"
if alive "$pid" && ignores_sigint "$pid"; then
    echo "airflow-up.sh ($pid) ignores SIGINT (started in the background by a script?): SIGTERM" >&2
    kill -TERM "$pid" 2>/dev/null || true
    wait_while "$seconds" alive "$pid" || kill -KILL "$pid" 2>/dev/null || true
elif alive "$pid"; then
    kill -INT "$pid" 2>/dev/null || true
    if ! wait_while "$seconds" alive "$pid"; then
        echo "airflow-up.sh ($pid) still running after $seconds s: SIGTERM" >&2
        kill -TERM "$pid" 2>/dev/null || true
        wait_while 30 alive "$pid" || kill -KILL "$pid" 2>/dev/null || true
        how="stopped (forced)"
    fi
elif ! group_alive "$group" && ! alive "$spark" && [[ ! -f "$pgfile" ]]; then
    rm -f "$pidfile" "$groupfile" "$sparkfile"
    echo "not running"
    exit 0
else
    echo "airflow-up.sh ($pid) is gone but left processes behind: ending them" >&2
    how="stopped (forced)"
fi
# What the launcher did not stop: standalone's group, then the Spark Connect server.
if group_alive "$group"; then
    kill -TERM -- "-$group" 2>/dev/null || true
    wait_while 10 group_alive "$group" || kill -KILL -- "-$group" 2>/dev/null || true
    how="stopped (forced)"
fi
if alive "$spark"; then
    kill -TERM "$spark" 2>/dev/null || true
    wait_while 10 alive "$spark" || kill -KILL "$spark" 2>/dev/null || true
    how="stopped (forced)"
fi
if [[ -f "$pgfile" ]]; then
    bash "$(dirname "$(readlink -f "$0")")/stop-postgres.sh" --keep "$(cat "$pgfile")" || true
    rm -f "$pgfile"
    how="stopped (forced)"
fi
rm -f "$pidfile" "$groupfile" "$sparkfile"
echo "$how"
