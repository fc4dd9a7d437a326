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

source "$(dirname "$0")/airflow-env.sh" "${1:-}"

print_logins
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
