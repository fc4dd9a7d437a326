#!/usr/bin/env bash
# Start Airflow 3.3.2 for a person on 127.0.0.1, on the embedded default:
# `airflow standalone` (api-server, scheduler, dag-processor, triggerer) with
# SQLite, the LocalExecutor and the SimpleAuthManager, serving this repo's dags/.
#
#   scripts/airflow-up.sh [AIRFLOW_HOME]      # default: $CURSOROPS_HOME/airflow
#
# Environment it reads: CURSOROPS_HOME (default ~/.cursorops), CURSOROPS_METADATA_URL,
# CURSOROPS_LEDGER_ROOT, CURSOROPS_ROLE_MAP (passed on to the tasks), AIRFLOW_PORT
# (default 28080), AIRFLOW_LOG_PORT (default 28793; the trigger log server uses +1),
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS (default the four demo users below).
# Stop it with Ctrl-C, or `scripts/airflow-down.sh [AIRFLOW_HOME]` from elsewhere:
# both send SIGINT, the only signal on which standalone stops all its children.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${VENV:-$repo/.venv}"
[[ -x "$venv/bin/airflow" ]] || { echo "no $venv/bin/airflow: run make install first" >&2; exit 1; }
export CURSOROPS_HOME="${CURSOROPS_HOME:-$HOME/.cursorops}"
export AIRFLOW_HOME="$(mkdir -p "${1:-$CURSOROPS_HOME/airflow}" && cd "${1:-$CURSOROPS_HOME/airflow}" && pwd)"
port="${AIRFLOW_PORT:-28080}"
log_port="${AIRFLOW_LOG_PORT:-28793}"

# Standalone spawns bare `airflow`, and SparkSubmitOperator bare `spark-submit`:
# both must be on the PATH every child inherits.
export PATH="$venv/bin:$PATH"
# The glue package, importable before the next `make install` registers it.
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"

export AIRFLOW__CORE__DAGS_FOLDER="$repo/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$repo/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__PARALLELISM=4
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=False
export AIRFLOW__API__HOST=127.0.0.1
export AIRFLOW__API__PORT="$port"
export AIRFLOW__API__BASE_URL="http://127.0.0.1:$port"
# The log servers bind every interface (host hard-coded in Airflow): at least
# move them off the default ports other installations use.
export AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT="$log_port"
export AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT="$((log_port + 1))"
export AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL=20
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-admin:admin,alice:op,bob:op,carol:viewer}"

# Known passwords for the demo users; standalone keeps the ones it finds.
passwords="$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
if [[ ! -f "$passwords" ]]; then
    printf '%s\n' '{"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}' \
        >"$passwords"
fi

# JSON form on purpose: the URI `spark://local[2]` silently becomes master `yarn`.
spark_default='{"conn_type":"spark","host":"local[*]"}'
export AIRFLOW_CONN_SPARK_DEFAULT="${AIRFLOW_CONN_SPARK_DEFAULT:-$spark_default}"
export SPARK_LOCAL_IP=127.0.0.1
# The read-only account apply_skip uses to re-read the approval from Airflow itself.
AIRFLOW_CONN_CURSOROPS_AIRFLOW_API="$("$venv/bin/python" - "$passwords" "$port" <<'PY'
import json, sys
passwords = json.load(open(sys.argv[1]))
print(json.dumps({"conn_type": "http", "host": "127.0.0.1", "port": int(sys.argv[2]),
                  "schema": "http", "login": "carol", "password": passwords["carol"]}))
PY
)"
export AIRFLOW_CONN_CURSOROPS_AIRFLOW_API

echo "Airflow: http://127.0.0.1:$port   (AIRFLOW_HOME=$AIRFLOW_HOME, cursorops home $CURSOROPS_HOME)"
"$venv/bin/python" - "$passwords" "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS" <<'PY'
import json, sys
passwords = json.load(open(sys.argv[1]))
print(f"Logins (passwords in {sys.argv[1]}):")
for pair in sys.argv[2].split(","):
    user, _, role = pair.partition(":")
    print(f"  {user:<6} / {passwords.get(user, '(generated: see the api-server log)'):<12} Airflow {role}")
PY
cat <<'INFO'
Each Airflow user acts as the Pulsar role of the same name (CURSOROPS_ROLE_MAP changes
that); give the approvers the skip permission, e.g.
  cursorops namespaces grant-permission acme/orders --role bob --actions consume
The read-only service account carol re-reads approvals. Ready in 15-90 s; stop with Ctrl-C.
INFO

echo $$ >"$AIRFLOW_HOME/standalone.pid"
# A background job of a non-interactive shell starts with SIGINT ignored, and
# Python keeps it ignored: restore the default so SIGINT stops standalone cleanly.
exec python -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
    airflow standalone
