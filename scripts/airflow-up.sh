#!/usr/bin/env bash
# Start Airflow 3.3.2 for a person on 127.0.0.1, on the embedded default:
# `airflow standalone` (api-server, scheduler, dag-processor, triggerer) with
# the LocalExecutor and the SimpleAuthManager, serving this repo's dags/. Its
# metadata database is SQLite in AIRFLOW_HOME, or with CURSOROPS_AIRFLOW_DB=postgres
# (`make up`) a PostgreSQL started (or reused) for it and stopped with it, or the one
# AIRFLOW__DATABASE__SQL_ALCHEMY_CONN names (airflow_database_start in airflow-env.sh).
#
#   scripts/airflow-up.sh [AIRFLOW_HOME]      # default: $CURSOROPS_HOME/airflow
#
# Environment it reads: CURSOROPS_HOME (default ~/.cursorops), CURSOROPS_METADATA_URL,
# CURSOROPS_LEDGER_ROOT (the tasks' cursorops_default connection, unless
# AIRFLOW_CONN_CURSOROPS_DEFAULT is set), CURSOROPS_ROLE_MAP (passed on), AIRFLOW_PORT
# (default 28080), AIRFLOW_LOG_PORT (default 28793; the trigger log server uses +1),
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS (default the four demo users below).
# With it, a Spark Connect server (scripts/spark-connect-up.sh, log in AIRFLOW_HOME) on
# 127.0.0.1:$SPARK_CONNECT_PORT (default 15002; one already listening there is reused),
# named by the spark_connect_default connection: every Spark task runs on it, with no
# JVM start of its own (CURSOROPS_SPARK_CONNECT=0: none, spark-submit per task).
# Stop it with Ctrl-C, SIGTERM, or `scripts/airflow-down.sh [AIRFLOW_HOME]` from
# elsewhere: standalone gets one SIGINT, the only signal on which it stops all its
# children, then the Spark Connect server stops, then the PostgreSQL it started.
set -euo pipefail

source "$(dirname "$0")/airflow-env.sh" "${1:-}"

print_logins
cat <<'INFO'
Each Airflow user acts as the Pulsar role of the same name (CURSOROPS_ROLE_MAP changes
that); give the approvers the skip permission, e.g.
  cursorops namespaces grant-permission acme/orders --role bob --actions consume
Ready in 15-90 s; stop with Ctrl-C.
INFO

echo $$ >"$AIRFLOW_HOME/standalone.pid"
trap 'spark_connect_stop; airflow_database_stop; exit 0' INT TERM
airflow_database_start || { airflow_database_stop; exit 1; }
spark_connect_start
# Standalone in a process group of its own, so that Ctrl-C (SIGINT to the terminal's
# group) reaches this script alone, which sends standalone exactly one SIGINT: a
# second one while it stops its components would cut its shutdown short. A
# background job of a non-interactive shell starts with SIGINT ignored, and Python
# keeps it ignored: restore the default so SIGINT stops standalone cleanly.
python -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])' \
    airflow standalone &
standalone=$!
echo "$standalone" >"$AIRFLOW_HOME/standalone.group"
airflow_warm_start
stop() {
    trap - INT TERM
    airflow_warm_stop
    stop_tasks_under "$standalone" 20
    kill -INT "$standalone" 2>/dev/null || true
    # Standalone stops its components on SIGINT, usually within seconds; one that is still
    # up after 60 s (a component stuck in shutdown) is ended with its whole process group.
    stop_within 60 "$standalone" || true
    spark_connect_stop
    airflow_database_stop
    rm -f "$AIRFLOW_HOME/standalone.group"
}
trap 'stop; exit 0' INT TERM
set +e
if ! spark_connect_wait; then
    stop
    exit 1
fi
wait "$standalone"
status=$?
trap - INT TERM
airflow_warm_stop
spark_connect_stop
airflow_database_stop
rm -f "$AIRFLOW_HOME/standalone.group"
exit "$status"
