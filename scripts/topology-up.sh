#!/usr/bin/env bash
# The production topology (docker-compose.yml) as local processes: the cursorops
# brokers (scripts/brokers-up.sh), a Spark standalone master and worker from the
# pyspark package, then Airflow's
# api-server, scheduler, dag-processor and triggerer (scripts/airflow-topology.sh)
# with spark_default set to that master, once `cursorops db migrate` has brought
# the metadata store up to date. PostgreSQL is yours: name the two databases.
#
#   AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=postgresql+psycopg://user@host/airflow \
#   CURSOROPS_METADATA_URL=postgresql+psycopg://user@host/cursorops \
#   CURSOROPS_HOME=/srv/cursorops \
#       scripts/topology-up.sh [AIRFLOW_HOME]
#
# Reads also SPARK_MASTER_PORT (default 7077), SPARK_MASTER_UI_PORT (default
# 18080), SPARK_WORKER_UI_PORT (default 18081), SPARK_WORKER_CORES (2),
# SPARK_WORKER_MEMORY (2g), and what airflow-topology.sh reads. Writes the
# master's URL to $CURSOROPS_HOME/spark/master-url once the worker has joined.
# The brokers: CURSOROPS_BROKERS of them (default 1; 0 for none) on ports from
# CURSOROPS_BROKER_PORT (6650) and CURSOROPS_WEB_PORT (8080) on, as brokers-up.sh
# says; it prints their multi-host service URL once all answer, and Spark starts after.
# The master and worker listen on 127.0.0.1 only (whoever reaches the master submits
# an application); the Spark Connect server requires the home's token
# ($CURSOROPS_HOME/spark-connect.token, made on first start, mode 0600).
# Stop it with SIGINT or SIGTERM: Airflow first, then the worker, then the
# master, then the brokers; it waits for each. If any of them dies, it stops the
# rest and exits 1.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
source "$here/airflow-env.sh" "${1:-}"
: "${CURSOROPS_METADATA_URL:?set CURSOROPS_METADATA_URL to the cursorops metadata database}"
: "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:?set AIRFLOW__DATABASE__SQL_ALCHEMY_CONN to the Airflow database}"
export CURSOROPS_METADATA_URL
# The store's schema first: a shared store that is behind refuses every command.
"$venv/bin/cursorops" db migrate

spark_port="${SPARK_MASTER_PORT:-7077}"
spark_ui="${SPARK_MASTER_UI_PORT:-18080}"
worker_ui="${SPARK_WORKER_UI_PORT:-18081}"
spark_dir="$CURSOROPS_HOME/spark"
mkdir -p "$spark_dir/work"
rm -f "$spark_dir/master-url"
master="spark://127.0.0.1:$spark_port"
# Executors import core from the checkout (PYTHONPATH from airflow-env.sh) with
# the venv's interpreter, as the driver does.
export PYSPARK_PYTHON="$venv/bin/python"

pids=()
names=()
stop() {
    trap - INT TERM
    # Reverse order: Airflow stops submitting before the cluster goes away.
    local i
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill -TERM "${pids[$i]}" 2>/dev/null || true
        wait "${pids[$i]}" 2>/dev/null || true
    done
}
trap 'stop; exit 0' INT TERM
echo $$ >"$spark_dir/topology-up.pid"

if [[ "${CURSOROPS_BROKERS:-1}" != 0 ]]; then
    rm -f "$CURSOROPS_HOME/brokers-url"
    "$here/brokers-up.sh" &
    pids+=($!); names+=(brokers)
    # Spark and Airflow start once every broker answers (brokers-up.sh writes the URL).
    until [[ -s "$CURSOROPS_HOME/brokers-url" ]]; do
        if ! kill -0 "${pids[0]}" 2>/dev/null; then
            echo "the brokers did not start: see $CURSOROPS_HOME/broker-*/broker.log" >&2
            stop
            exit 1
        fi
        sleep 0.5
    done
fi
spark_first=${#pids[@]}

"$venv/bin/spark-class" org.apache.spark.deploy.master.Master \
    --host 127.0.0.1 --port "$spark_port" --webui-port "$spark_ui" \
    >"$spark_dir/master.log" 2>&1 &
pids+=($!); names+=(spark-master)
"$venv/bin/spark-class" org.apache.spark.deploy.worker.Worker "$master" \
    --host 127.0.0.1 --cores "${SPARK_WORKER_CORES:-2}" --memory "${SPARK_WORKER_MEMORY:-2g}" \
    --webui-port "$worker_ui" --work-dir "$spark_dir/work" \
    >"$spark_dir/worker.log" 2>&1 &
pids+=($!); names+=(spark-worker)

# Airflow starts only once a worker has joined: a job submitted before would wait.
for _ in $(seq 1 180); do
    if "$venv/bin/python" - "$spark_ui" <<'PY'
import json, sys, urllib.request
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/json/", timeout=5) as answer:
        sys.exit(0 if int(json.load(answer).get("aliveworkers", 0)) >= 1 else 1)
except OSError:
    sys.exit(1)
PY
    then
        break
    fi
    for i in "$spark_first" $((spark_first + 1)); do
        if ! kill -0 "${pids[$i]}" 2>/dev/null; then
            echo "${names[$i]} exited: see $spark_dir/${names[$i]#spark-}.log" >&2
            stop
            exit 1
        fi
    done
    sleep 1
done
echo "$master" >"$spark_dir/master-url"
echo "Spark master $master (UI http://127.0.0.1:$spark_ui), worker joined"

# JSON form: a spark:// URI in AIRFLOW_CONN_* loses its scheme (see airflow-env.sh).
export AIRFLOW_CONN_SPARK_DEFAULT="{\"conn_type\":\"spark\",\"host\":\"$master\"}"
# The Spark Connect server airflow-topology.sh starts runs its jobs on this cluster too.
export SPARK_CONNECT_MASTER="${SPARK_CONNECT_MASTER:-$master}"
export CURSOROPS_TRIGGERER=1
"$here/airflow-topology.sh" "$AIRFLOW_HOME" &
pids+=($!); names+=(airflow)

set +e
wait -n "${pids[@]}"
status=$?
echo "a component exited ($status): stopping the others" >&2
stop
exit 1
