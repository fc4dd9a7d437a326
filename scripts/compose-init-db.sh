#!/usr/bin/env bash
# The compose PostgreSQL's first start (docker-entrypoint-initdb.d, an empty volume):
# one role per use, each with the operator's password, none a superuser.
#
#   cursorops         owns the cursorops store: the brokers and Airflow (they migrate
#                     it and write cursor state)
#   cursorops_reader  may read the cursorops store's tables, write nothing: the Spark
#                     services, which run whatever code reaches them
#   airflow           owns Airflow's database, which no other role may even connect to
#
# Reads CURSOROPS_DB_PASSWORD, CURSOROPS_READER_PASSWORD, CURSOROPS_AIRFLOW_DB_PASSWORD
# and the superuser POSTGRES_USER (default postgres); psql reaches the server as the
# PG* variables say (the entrypoint's own socket when unset). The passwords reach the
# server as psql variables, quoted by psql, never spliced into SQL text.
set -euo pipefail

: "${CURSOROPS_DB_PASSWORD:?set CURSOROPS_DB_PASSWORD}"
: "${CURSOROPS_READER_PASSWORD:?set CURSOROPS_READER_PASSWORD}"
: "${CURSOROPS_AIRFLOW_DB_PASSWORD:?set CURSOROPS_AIRFLOW_DB_PASSWORD}"

psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" --dbname postgres \
    -v cursorops_password="$CURSOROPS_DB_PASSWORD" \
    -v reader_password="$CURSOROPS_READER_PASSWORD" \
    -v airflow_password="$CURSOROPS_AIRFLOW_DB_PASSWORD" <<'SQL'
CREATE ROLE cursorops LOGIN PASSWORD :'cursorops_password';
CREATE ROLE cursorops_reader LOGIN PASSWORD :'reader_password';
CREATE ROLE airflow LOGIN PASSWORD :'airflow_password';
CREATE DATABASE cursorops OWNER cursorops;
CREATE DATABASE airflow OWNER airflow;
-- Only the roles named below connect (an owner always may).
REVOKE ALL ON DATABASE cursorops FROM PUBLIC;
REVOKE ALL ON DATABASE airflow FROM PUBLIC;
GRANT CONNECT ON DATABASE cursorops TO cursorops_reader;

\connect cursorops
-- The tables `cursorops db migrate` creates later, as cursorops, and those already there.
GRANT USAGE ON SCHEMA public TO cursorops_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE cursorops IN SCHEMA public
    GRANT SELECT ON TABLES TO cursorops_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO cursorops_reader;
SQL
