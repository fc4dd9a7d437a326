#!/usr/bin/env bash
# Stop what scripts/airflow-up.sh started: SIGINT to the launcher, which sends
# standalone one SIGINT (its clean stop; SIGTERM would orphan the scheduler,
# api-server and workers), then stops the Spark Connect server it started; wait.
#   scripts/airflow-down.sh [AIRFLOW_HOME]      # default: $CURSOROPS_HOME/airflow
set -euo pipefail
home="${1:-${CURSOROPS_HOME:-$HOME/.cursorops}/airflow}"
pidfile="$home/standalone.pid"
[[ -f "$pidfile" ]] || { echo "no $pidfile: not started by airflow-up.sh" >&2; exit 1; }
pid="$(cat "$pidfile")"
if kill -INT "$pid" 2>/dev/null; then
    for _ in $(seq 1 120); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; echo "stopped"; exit 0; }
        sleep 1
    done
    echo "airflow-up.sh ($pid) still running after 120 s" >&2
    exit 1
fi
rm -f "$pidfile"
echo "not running"
