#!/usr/bin/env bash
# airflow-init of docker-compose.yml: migrate the cursorops metadata store
# (`cursorops db migrate`: every component refuses a shared store whose schema is
# behind its code), then Airflow's database. The users listed in
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS get a generated password the first
# time the api-server starts, printed in its log (Airflow's own behaviour).
set -euo pipefail
: "${CURSOROPS_METADATA_URL:?set CURSOROPS_METADATA_URL to the cursorops metadata store}"
cursorops db migrate
exec airflow db migrate
