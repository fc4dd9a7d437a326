#!/usr/bin/env bash
# airflow-init of docker-compose.yml: migrate the cursorops metadata store
# (`cursorops db migrate`: every component refuses a shared store whose schema is
# behind its code) and Airflow's database, and give the
# read-only account the skip DAGs re-read approvals with (cursorops_airflow_api,
# a viewer) the password the deployer chose, in the simple auth manager's
# passwords file on the airflow-auth volume. Every other user listed in
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS gets a generated password the first
# time the api-server starts, printed in its log (Airflow's own behaviour).
# Passwords already in the file are kept.
set -euo pipefail
: "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?set AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE}"
: "${CURSOROPS_AIRFLOW_API_PASSWORD:?set CURSOROPS_AIRFLOW_API_PASSWORD}"
: "${CURSOROPS_METADATA_URL:?set CURSOROPS_METADATA_URL to the cursorops metadata store}"
cursorops db migrate
python - <<'PY'
import json
import os
from pathlib import Path

path = Path(os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
path.parent.mkdir(parents=True, exist_ok=True)
text = path.read_text() if path.exists() else ""
passwords = json.loads(text) if text.strip() else {}
passwords["cursorops_airflow_api"] = os.environ["CURSOROPS_AIRFLOW_API_PASSWORD"]
path.write_text(json.dumps(passwords) + "\n")
PY
exec airflow db migrate
