# Sourced by scripts/airflow-up.sh (standalone) and scripts/airflow-topology.sh
# (separate processes): the one place that configures a local Airflow 3.3.2 for
# this repo's dags/ and plugins/.
#
#   source scripts/airflow-env.sh [AIRFLOW_HOME]   # default: $CURSOROPS_HOME/airflow
#
# Reads: VENV, CURSOROPS_HOME (default ~/.cursorops), AIRFLOW_PORT (default 28080),
# AIRFLOW_LOG_PORT (default 28793; the trigger log server uses +1),
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS (default the four demo users below),
# AIRFLOW_CONN_CURSOROPS_DEFAULT (default: built from CURSOROPS_HOME, CURSOROPS_METADATA_URL
# and CURSOROPS_LEDGER_ROOT), AIRFLOW_CONN_SPARK_DEFAULT, and for the Spark Connect server the launchers start
# (spark_connect_start): SPARK_CONNECT_PORT (default 15002), SPARK_CONNECT_MASTER,
# $CURSOROPS_HOME/spark-connect.token (its token; made when missing),
# AIRFLOW_CONN_SPARK_CONNECT_DEFAULT (set: that server, none started) and
# CURSOROPS_SPARK_CONNECT (0: none, every Spark task spark-submits); and for Airflow's
# metadata database (airflow_database_start) AIRFLOW__DATABASE__SQL_ALCHEMY_CONN,
# CURSOROPS_AIRFLOW_DB (postgres: a PostgreSQL of its own), AIRFLOW_PG_PORT, AIRFLOW_PG_DATABASE
# and AIRFLOW_PG_DIR.
# Sets: repo, venv, port, passwords, and the AIRFLOW_* / SPARK_* variables every
# Airflow process and task inherits.
#
# repo is the folder holding dags/ and scripts/: the checkout, or the cursorops.airflow
# package of an installed wheel (cursorops/airflow/bundle.py). Only a checkout serves its
# plugins/ and goes on PYTHONPATH; an installed wheel's entry point registers the plugin,
# and its venv is the one cursorops runs from (VENV, which cursorops passes).

repo="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
if [[ -f "$repo/cursorops/__init__.py" ]]; then
    checkout=1
    venv="${VENV:-$repo/.venv}"
    [[ -x "$venv/bin/airflow" ]] || { echo "no $venv/bin/airflow: run make install first" >&2; exit 1; }
else
    checkout=0
    [[ -n "${VENV:-}" ]] || { echo "VENV is not set: the environment cursorops[airflow] is installed in" >&2; exit 1; }
    venv="$VENV"
    [[ -x "$venv/bin/airflow" ]] || { echo "no $venv/bin/airflow: pip install 'cursorops[airflow]'" >&2; exit 1; }
fi
export CURSOROPS_HOME="${CURSOROPS_HOME:-$HOME/.cursorops}"
export AIRFLOW_HOME="$(mkdir -p "${1:-$CURSOROPS_HOME/airflow}" && cd "${1:-$CURSOROPS_HOME/airflow}" && pwd)"
port="${AIRFLOW_PORT:-28080}"
log_port="${AIRFLOW_LOG_PORT:-28793}"

# Standalone spawns bare `airflow`, and SparkSubmitOperator bare `spark-submit`:
# both must be on the PATH every child inherits.
export PATH="$venv/bin:$PATH"
export AIRFLOW__CORE__DAGS_FOLDER="$repo/dags"
if ((checkout)); then
    # The glue package, importable before the next `make install` registers it.
    export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
    export AIRFLOW__CORE__PLUGINS_FOLDER="$repo/plugins"
else
    # Not this package's plugins/ (a module there would register the plugin a second
    # time): a folder of this AIRFLOW_HOME, Airflow's default.
    export AIRFLOW__CORE__PLUGINS_FOLDER="$AIRFLOW_HOME/plugins"
fi
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__PARALLELISM=4
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="${AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION:-False}"
export AIRFLOW__API__HOST=127.0.0.1
export AIRFLOW__API__PORT="$port"
export AIRFLOW__API__BASE_URL="http://127.0.0.1:$port"
# The log servers bind every interface (host hard-coded in Airflow): at least
# move them off the default ports other installations use.
export AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT="$log_port"
export AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT="$((log_port + 1))"
# A task's first call to the execution API ("run") is not idempotent: if it times out
# (default 5 s, easily exceeded on a loaded 2-core machine), the retry gets 400 and the
# task fails although the server started it. Wait longer instead.
export AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT="${AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT:-60}"
export AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="${AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL:-20}"
# How long the scheduler naps when a loop found nothing to do (Airflow's default: 1 s).
# An approval answered, or a task ended, waits for the next loop: shorter naps take
# seconds off every gated run, for a few percent of a core while Airflow is idle.
export AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME="${AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME:-0.2}"
export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-admin:admin,alice:op,bob:op,carol:viewer}"

# Known passwords for the demo users; the api-server keeps the ones it finds.
passwords="$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
if [[ ! -f "$passwords" ]]; then
    printf '%s\n' '{"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}' \
        >"$passwords"
fi

# The cursorops installation every task works on, as the cursorops_default connection
# (cursorops/airflow/hooks/cursorops.py): the home, metadata URL and ledger root the CLI
# of this shell uses; empty ones are left out (their defaults are under the home).
if [[ -z "${AIRFLOW_CONN_CURSOROPS_DEFAULT:-}" ]]; then
    AIRFLOW_CONN_CURSOROPS_DEFAULT="$("$venv/bin/python" -c '
import json, sys
names = ("home", "metadata_url", "ledger_root")
extra = {name: value for name, value in zip(names, sys.argv[1:]) if value}
print(json.dumps({"conn_type": "cursorops", "extra": extra}))
' "$CURSOROPS_HOME" "${CURSOROPS_METADATA_URL:-}" "${CURSOROPS_LEDGER_ROOT:-}")"
fi
export AIRFLOW_CONN_CURSOROPS_DEFAULT

# JSON form on purpose: the URI `spark://local[2]` silently becomes master `yarn`.
spark_default='{"conn_type":"spark","host":"local[*]"}'
export AIRFLOW_CONN_SPARK_DEFAULT="${AIRFLOW_CONN_SPARK_DEFAULT:-$spark_default}"
export SPARK_LOCAL_IP=127.0.0.1

# Spark for every Spark task of every DAG: a Spark Connect server started with Airflow
# and stopped with it, so a task runs its job as a thin client (no JVM start, pyspark
# imported once, in the task's process). A server already listening on the port is
# reused, and then left running. spark_connect_default names it, with the home's
# token as its password: whoever reaches the port runs Python in the server, so it
# refuses clients without the token (scripts/spark-connect-up.sh). The token is made
# once per home, readable by its owner only, and kept: a server reused later, and a
# person's `cursorops --remote`, need the same one.
spark_connect_pid=""
spark_connect_warm_pid=""
spark_connect_port="${SPARK_CONNECT_PORT:-15002}"
spark_connect_token_file="$CURSOROPS_HOME/spark-connect.token"
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# The home's Spark Connect token, made on first use (mode 0600 from its creation).
spark_connect_token() {
    if [[ ! -s "$spark_connect_token_file" ]]; then
        mkdir -p "$CURSOROPS_HOME"
        (umask 077 && "$venv/bin/python" -c 'import secrets; print(secrets.token_urlsafe(32))' \
            >"$spark_connect_token_file")
    fi
    local token
    token="$(cat "$spark_connect_token_file")"
    # It goes into a URL and a JSON connection as it is.
    [[ "$token" =~ ^[A-Za-z0-9_-]+$ ]] || {
        echo "$spark_connect_token_file: a token is letters, digits, - and _ only; remove the file for a new one" >&2
        return 1
    }
    echo "$token"
}
spark_connect_start() {
    if [[ -n "${AIRFLOW_CONN_SPARK_CONNECT_DEFAULT:-}" || "${CURSOROPS_SPARK_CONNECT:-1}" == 0 ]]; then
        return 0
    fi
    local log="$AIRFLOW_HOME/spark-connect.log" token
    token="$(spark_connect_token)"
    rm -f "$AIRFLOW_HOME/spark-connect.ready"
    if port_open "$spark_connect_port"; then
        echo "Spark Connect: reusing the server on 127.0.0.1:$spark_connect_port (it must hold $spark_connect_token_file)"
        touch "$AIRFLOW_HOME/spark-connect.ready"
    else
        # A background job of this shell: it ignores SIGINT, so Ctrl-C reaches the
        # launcher's trap, which stops it after Airflow (spark_connect_stop).
        VENV="$venv" SPARK_CONNECT_PORT="$spark_connect_port" SPARK_CONNECT_AUTHENTICATE_TOKEN="$token" \
            bash "$repo/scripts/spark-connect-up.sh" >"$log" 2>&1 &
        spark_connect_pid=$!
        echo "$spark_connect_pid" >"$AIRFLOW_HOME/spark-connect.pid"
        echo "Spark Connect: starting a server on 127.0.0.1:$spark_connect_port (log $log, token in $spark_connect_token_file)"
    fi
    export AIRFLOW_CONN_SPARK_CONNECT_DEFAULT="{\"conn_type\":\"spark_connect\",\"host\":\"127.0.0.1\",\"port\":$spark_connect_port,\"password\":\"$token\"}"
}
# Wait until the server started by spark_connect_start listens, and warm it up; then
# touch $AIRFLOW_HOME/spark-connect.ready. 1 if the server exited first.
spark_connect_wait() {
    [[ -n "$spark_connect_pid" ]] || return 0
    local waited=0 started=$SECONDS
    until port_open "$spark_connect_port"; do
        if ! kill -0 "$spark_connect_pid" 2>/dev/null; then
            echo "the Spark Connect server exited: see $AIRFLOW_HOME/spark-connect.log" >&2
            return 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
    echo "Spark Connect: listening on sc://127.0.0.1:$spark_connect_port (${waited} s); warming up"
    # The first job of a fresh server pays its JVM's and Python workers' start: pay it
    # now, while Airflow starts (spark_apps/warm_up.py). In the background so that a
    # signal's trap runs at once (spark_connect_stop ends it).
    SPARK_CONNECT_AUTHENTICATE_TOKEN="$(spark_connect_token)" \
        "$venv/bin/python" -m cursorops.spark.warm_up --remote "sc://127.0.0.1:$spark_connect_port" \
        >>"$AIRFLOW_HOME/spark-connect.log" 2>&1 &
    spark_connect_warm_pid=$!
    wait "$spark_connect_warm_pid" || echo "Spark Connect: the warm-up failed (see the log)" >&2
    spark_connect_warm_pid=""
    touch "$AIRFLOW_HOME/spark-connect.ready"
    echo "Spark Connect: ready ($((SECONDS - started)) s)"
}
spark_connect_stop() {
    [[ -n "$spark_connect_pid" ]] || return 0
    [[ -z "$spark_connect_warm_pid" ]] || kill -TERM "$spark_connect_warm_pid" 2>/dev/null || true
    rm -f "$AIRFLOW_HOME/spark-connect.ready"
    kill -TERM "$spark_connect_pid" 2>/dev/null || true
    stop_within 20 "$spark_connect_pid" || true
    rm -f "$AIRFLOW_HOME/spark-connect.pid"
    spark_connect_pid=""
}

# The api-server builds its execution API's versioned routes (Cadwyn) on the first request
# that reaches it: 10 to 20 s of CPU on two loaded cores, which the first task of the first
# run paid in its "run" call. Make that request as soon as the api-server answers, in the
# background, then touch $AIRFLOW_HOME/airflow.ready (start_airflow waits for it).
airflow_warm_pid=""
airflow_warm_start() {
    rm -f "$AIRFLOW_HOME/airflow.ready"
    "$venv/bin/python" -c '
import os, pathlib, sys, time, urllib.error, urllib.request
launcher = os.getppid()
base = "http://127.0.0.1:" + sys.argv[1]
def get(path):
    try:
        with urllib.request.urlopen(base + path, timeout=600) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None
while get("/api/v2/monitor/health") != 200:
    if os.getppid() != launcher:
        sys.exit("Airflow: the launcher is gone; no warm-up")
    time.sleep(0.5)
started = time.monotonic()
status = get("/execution/health")
print(f"Airflow: execution API warmed up in {time.monotonic() - started:.0f} s ({status})")
pathlib.Path(sys.argv[2]).touch()
' "$port" "$AIRFLOW_HOME/airflow.ready" &
    airflow_warm_pid=$!
}
airflow_warm_stop() {
    [[ -z "$airflow_warm_pid" ]] || kill -TERM "$airflow_warm_pid" 2>/dev/null || true
    airflow_warm_pid=""
    rm -f "$AIRFLOW_HOME/airflow.ready"
}

# The process groups led by descendants of process $1: Airflow puts each task runner in a
# group of its own (so are Spark's Python workers under its JVM), out of reach of a signal
# to the group of the process that started it.
own_groups_under() {
    ps -e -o pid= -o ppid= -o pgid= | awk -v root="$1" '
        { parent[$1] = $2; group[$1] = $3 }
        END {
            for (pid in parent) {
                if (group[pid] != pid) continue
                for (p = parent[pid]; p > 1 && (p in parent); p = parent[p])
                    if (p == root) { print pid; break }
            }
        }'
}
# Whether a live (not zombie) process is in one of the process groups $@.
groups_alive() {
    ps -e -o pgid= -o stat= | awk -v wanted=" $* " '
        index(wanted, " " $1 " ") && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}
# Stop the tasks running under process $1 (standalone, or the scheduler) while the
# api-server still runs: stopped together, a task's supervisor retries reporting the task's
# end to the gone api-server for about a minute, and the scheduler waits for it. SIGTERM to
# each task runner's group (a Spark task on Connect interrupts its job and ends; see
# cursorops/airflow/operators/spark.py); what is still up after $2 s is killed. Then up to 10 s for the
# supervisors to report (Airflow titles a LocalExecutor worker "<idle>" once it has).
stop_tasks_under() {
    local root=$1 seconds=$2 groups waited=0
    groups=$(own_groups_under "$root" | tr '\n' ' ')
    [[ -n "${groups// /}" ]] || return 0
    echo "stopping the running tasks first"
    for group in $groups; do kill -TERM -- "-$group" 2>/dev/null || true; done
    while groups_alive $groups && ((waited < seconds * 10)); do
        sleep 0.1
        waited=$((waited + 1))
    done
    for group in $groups; do kill -KILL -- "-$group" 2>/dev/null || true; done
    waited=0
    while ((waited < 100)) && busy_workers_under "$root"; do
        sleep 0.1
        waited=$((waited + 1))
    done
}
# Whether a LocalExecutor worker under process $1 still has a task (its title is not
# "<idle>").
busy_workers_under() {
    ps -e -o pid= -o ppid= -o args= | awk -v root="$1" '
        { parent[$1] = $2; title[$1] = $0 }
        END {
            for (pid in parent) {
                if (title[pid] !~ /airflow worker -- LocalExecutor: [^<]/) continue
                for (p = parent[pid]; p > 1 && (p in parent); p = parent[p])
                    if (p == root) exit 0
            }
            exit 1
        }'
}

# Wait up to $1 seconds for process $2 (a child of this shell) to end; then SIGKILL its
# process group (or the process, when it leads none) and the groups led by its descendants
# (own_groups_under), and reap it. Fails if it had to kill.
stop_within() {
    local seconds=$1 pid=$2 waited=0 group
    while kill -0 "$pid" 2>/dev/null && ((waited < seconds * 10)); do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        group=$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ')
        echo "stopping $pid: still up after ${seconds} s, killed" >&2
        for group_under in $(own_groups_under "$pid"); do
            kill -KILL -- "-$group_under" 2>/dev/null || true
        done
        if [[ -n "$group" && "$group" == "$pid" ]]; then
            kill -KILL -- "-$group" 2>/dev/null || true
        else
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
        return 1
    fi
    wait "$pid" 2>/dev/null || true
}

# Airflow's metadata database, settled before Airflow starts (airflow_database_start):
# AIRFLOW__DATABASE__SQL_ALCHEMY_CONN when set, used as it is; else, with
# CURSOROPS_AIRFLOW_DB=postgres (what `make up` sets), a PostgreSQL of this AIRFLOW_HOME's
# own, as the topology runs Airflow: scripts/start-postgres.sh on 127.0.0.1:AIRFLOW_PG_PORT
# (default 28432), database AIRFLOW_PG_DATABASE (default "airflow"), durable, its cluster
# in AIRFLOW_PG_DIR (default $AIRFLOW_HOME/postgres; as root, whose folders the server's
# own user cannot reach,
# /var/lib/cursorops/airflow-postgres-<digest of AIRFLOW_HOME>), its data kept from one
# start to the next. A server already answering on the port is used (the database made
# if missing) and left running; the one started here is recorded in
# $AIRFLOW_HOME/postgres.dir and stopped by airflow_database_stop (Ctrl-C, SIGTERM,
# scripts/airflow-down.sh). Otherwise Airflow's default: SQLite in AIRFLOW_HOME.
airflow_pg_dir=""
airflow_pg_default_dir() {
    if (($(id -u) == 0)); then
        local digest
        digest="$(printf '%s' "$AIRFLOW_HOME" | sha256sum | cut -c1-12)"
        mkdir -p /var/lib/cursorops
        echo "/var/lib/cursorops/airflow-postgres-$digest"
    else
        echo "$AIRFLOW_HOME/postgres"
    fi
}
airflow_database_start() {
    if [[ -z "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-}" && "${CURSOROPS_AIRFLOW_DB:-sqlite}" == postgres ]]; then
        local pg_port="${AIRFLOW_PG_PORT:-28432}" pg_database="${AIRFLOW_PG_DATABASE:-airflow}" dir="" url
        if port_open "$pg_port"; then
            echo "Airflow's metadata: reusing the PostgreSQL on 127.0.0.1:$pg_port (left running)"
        else
            dir="${AIRFLOW_PG_DIR:-$(airflow_pg_default_dir)}"
            # Recorded before it starts, so that a stop during the start stops it too.
            airflow_pg_dir="$dir"
            echo "$dir" >"$AIRFLOW_HOME/postgres.dir"
            echo "Airflow's metadata: starting PostgreSQL on 127.0.0.1:$pg_port (cluster in $dir)"
        fi
        url="$(CURSOROPS_TEST_PG_DURABLE=1 bash "$repo/scripts/start-postgres.sh" \
            --port "$pg_port" --database "$pg_database" ${dir:+"$dir"})" || return 1
        export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="$url"
    fi
    case "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:-}" in
        # Airflow derives its async URL as postgresql+asyncpg, which is not installed:
        # psycopg 3 serves both.
        postgresql*)
            export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC="${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC:-$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN}"
            echo "Airflow's metadata database: $("$venv/bin/python" -c 'import sys; from sqlalchemy.engine import make_url; print(make_url(sys.argv[1]).render_as_string(hide_password=True))' "$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")"
            ;;
    esac
}
# Stop the PostgreSQL airflow_database_start started, keeping its data.
airflow_database_stop() {
    [[ -n "$airflow_pg_dir" ]] || return 0
    bash "$repo/scripts/stop-postgres.sh" --keep "$airflow_pg_dir" || true
    rm -f "$AIRFLOW_HOME/postgres.dir"
    airflow_pg_dir=""
}

# What a person needs to log in, printed by both launchers.
print_logins() {
    echo "Airflow: http://127.0.0.1:$port   (AIRFLOW_HOME=$AIRFLOW_HOME, cursorops home $CURSOROPS_HOME)"
    "$venv/bin/python" - "$passwords" "$AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS" <<'PY'
import json, sys
passwords = json.load(open(sys.argv[1]))
print(f"Logins (passwords in {sys.argv[1]}):")
for pair in sys.argv[2].split(","):
    user, _, role = pair.partition(":")
    print(f"  {user:<6} / {passwords.get(user, '(generated: see the api-server log)'):<12} Airflow {role}")
PY
}
