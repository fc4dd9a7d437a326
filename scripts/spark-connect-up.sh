#!/usr/bin/env bash
# A long-lived Spark Connect server: the warm session every Spark job of
# cursorops reaches (CURSOROPS_SPARK_REMOTE=sc://127.0.0.1:15002/;token=..., or
# Airflow's spark_connect_default connection) without starting a JVM of its own.
#
#   SPARK_CONNECT_AUTHENTICATE_TOKEN=... \
#   scripts/spark-connect-up.sh [--port 15002] [--host 127.0.0.1] [--master 'local[*]']
#                               [--driver-memory 2g] [--conf key=value ...]
#
# Whoever reaches the server runs Python of their choosing in it: it refuses every
# client without SPARK_CONNECT_AUTHENTICATE_TOKEN (Spark's own check, read from the
# environment so that no command line shows it), and does not start without one.
# Reads also SPARK_CONNECT_PORT, SPARK_CONNECT_HOST, SPARK_CONNECT_MASTER,
# SPARK_CONNECT_DRIVER_MEMORY (the flags win), VENV and PYSPARK_PYTHON. Runs in
# the foreground from the venv's pyspark (its spark-connect jar; without a venv,
# as in the image, the spark-submit and python on the PATH); the Python workers
# run that interpreter with the checkout on PYTHONPATH, so the jobs' functions
# and core unpickle there by module name. SIGTERM or SIGINT stops the server
# cleanly (the JVM's shutdown hooks stop its SparkContext). The jobs share one
# server-side session (spark_apps/session.py), kept for 30 days of idleness
# rather than Spark's default hour. On a cluster,
# executors must reach the driver: give --conf spark.driver.host=<this host>.
set -euo pipefail

# The checkout, or the cursorops.airflow package of an installed wheel (which carries this
# script): only a checkout goes on the workers' PYTHONPATH.
repo="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
venv="${VENV:-$repo/.venv}"
if [[ -x "$venv/bin/spark-submit" ]]; then
    submit="$venv/bin/spark-submit"
    python="${PYSPARK_PYTHON:-$venv/bin/python}"
    export PATH="$venv/bin:$PATH"
else
    submit="$(command -v spark-submit || true)"
    python="${PYSPARK_PYTHON:-$(command -v python3 || true)}"
    [[ -n "$submit" ]] || { echo "no $venv/bin/spark-submit and none on the PATH: run make install first" >&2; exit 1; }
fi

port="${SPARK_CONNECT_PORT:-15002}"
host="${SPARK_CONNECT_HOST:-127.0.0.1}"
master="${SPARK_CONNECT_MASTER:-local[*]}"
memory="${SPARK_CONNECT_DRIVER_MEMORY:-2g}"
confs=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --port) port="$2"; shift 2 ;;
        --host) host="$2"; shift 2 ;;
        --master) master="$2"; shift 2 ;;
        --driver-memory) memory="$2"; shift 2 ;;
        --conf) confs+=(--conf "$2"); shift 2 ;;
        -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "spark-connect-up.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ "$port" =~ ^[0-9]+$ ]] || { echo "spark-connect-up.sh: --port must be a number, not '$port'" >&2; exit 2; }
[[ -n "${SPARK_CONNECT_AUTHENTICATE_TOKEN:-}" ]] || {
    echo "spark-connect-up.sh: set SPARK_CONNECT_AUTHENTICATE_TOKEN: the server accepts only clients holding it" >&2
    exit 2
}
export SPARK_CONNECT_AUTHENTICATE_TOKEN

export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
export PYSPARK_PYTHON="$python"
if [[ -f "$repo/cursorops/__init__.py" ]]; then
    export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
fi

# exec: the JVM is this process, so a supervisor's SIGTERM reaches it directly.
# Later --conf values win, so the caller's --conf overrides these.
exec "$submit" \
    --class org.apache.spark.sql.connect.service.SparkConnectServer \
    --name "cursorops Spark Connect server" \
    --master "$master" \
    --driver-memory "$memory" \
    --conf "spark.connect.grpc.binding.address=$host" \
    --conf "spark.connect.grpc.binding.port=$port" \
    --conf "spark.executorEnv.PYTHONPATH=$PYTHONPATH" \
    --conf "spark.driver.host=$SPARK_LOCAL_IP" \
    --conf "spark.driver.bindAddress=$SPARK_LOCAL_IP" \
    --conf spark.ui.enabled=false \
    --conf spark.sql.session.timeZone=UTC \
    --conf spark.sql.execution.arrow.pyspark.enabled=true \
    --conf spark.log.level=WARN \
    --conf spark.connect.session.manager.defaultSessionTimeout=30d \
    "${confs[@]}" \
    spark-internal
