#!/usr/bin/env bash
# Start Airflow 3.3.2 as a deployment runs it: the api-server, the scheduler
# (LocalExecutor) and the dag-processor as separate processes, on the metadata
# database given by AIRFLOW__DATABASE__SQL_ALCHEMY_CONN (PostgreSQL, say),
# serving this repo's dags/ with the settings of scripts/airflow-env.sh.
#
#   AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgresql+psycopg://user@host/airflow \
#       scripts/airflow-topology.sh [AIRFLOW_HOME]
#
# No triggerer by default: in 3.3 the approval gate parks in awaiting_input, it
# does not defer. CURSOROPS_TRIGGERER=1 adds one (the compose topology has it;
# scripts/topology-up.sh sets it).
# With them, the Spark Connect server of scripts/airflow-env.sh (spark_connect_start:
# started, or reused, on SPARK_CONNECT_PORT, with master SPARK_CONNECT_MASTER) named
# by spark_connect_default, so no Spark task starts a JVM.
# Stop it with SIGINT or SIGTERM: it sends SIGTERM to each component, waits up to
# 30 s for each (then kills it), stops the Spark Connect server, and exits. If one
# component (or the server) dies, it stops the others and exits 1.
set -euo pipefail

source "$(dirname "$0")/airflow-env.sh" "${1:-}"
: "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:?set AIRFLOW__DATABASE__SQL_ALCHEMY_CONN to the metadata database}"
# The async URL beside it (airflow-env.sh); the database is the caller's.
airflow_database_start
export AIRFLOW__CORE__EXECUTOR=LocalExecutor
export AIRFLOW__API__WORKERS="${AIRFLOW__API__WORKERS:-1}"
# Task processes reach the api-server's execution API, not the default localhost:8080.
export AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:$port/execution/"
# One secret for every component: the scheduler signs the task tokens the
# api-server checks; a per-process random secret would refuse them all.
secret="$("$venv/bin/python" -c 'import secrets; print(secrets.token_urlsafe(32))')"
export AIRFLOW__API_AUTH__JWT_SECRET="${AIRFLOW__API_AUTH__JWT_SECRET:-$secret}"
export AIRFLOW__API__SECRET_KEY="${AIRFLOW__API__SECRET_KEY:-$secret}"

print_logins
airflow db migrate

pids=()
stop() {
    trap - INT TERM
    airflow_warm_stop
    if ((${#pids[@]})); then
        # The scheduler's tasks first, while the api-server they report to still runs.
        ((${#pids[@]} < 2)) || stop_tasks_under "${pids[1]}" 20
        kill -TERM "${pids[@]}" 2>/dev/null || true
        # Bounded: a component whose exit on SIGTERM is lost runs on (seen with the
        # dag-processor: its handler's sys.exit raised inside a callback, "Exception
        # ignored"). stop_within kills it, and says so on stderr.
        local pid
        for pid in "${pids[@]}"; do stop_within 30 "$pid" || true; done
    fi
    spark_connect_stop
}
trap 'stop; exit 0' INT TERM
spark_connect_start
echo $$ >"$AIRFLOW_HOME/topology.pid"
airflow api-server --host 127.0.0.1 --port "$port" &
pids+=($!)
airflow scheduler &
pids+=($!)
airflow dag-processor &
pids+=($!)
echo "api-server ${pids[0]}, scheduler ${pids[1]}, dag-processor ${pids[2]}"
airflow_warm_start
if [[ "${CURSOROPS_TRIGGERER:-0}" == 1 ]]; then
    airflow triggerer &
    pids+=($!)
    echo "triggerer ${pids[3]}"
fi
set +e
spark_connect_wait || { stop; exit 1; }
wait -n "${pids[@]}" ${spark_connect_pid:+"$spark_connect_pid"}
status=$?
echo "an Airflow component exited ($status): stopping the others" >&2
stop
exit 1
