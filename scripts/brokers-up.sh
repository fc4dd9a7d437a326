#!/usr/bin/env bash
# Several `cursorops standalone` brokers on one machine, sharing one metadata store
# and one ledger root: what docker-compose.yml's broker-1 and broker-2 are, as local
# processes. scripts/topology-up.sh runs it; it also runs on its own.
#
#   CURSOROPS_METADATA_URL=postgresql+psycopg://user@host/cursorops \
#   CURSOROPS_HOME=/srv/cursorops CURSOROPS_BROKERS=2 scripts/brokers-up.sh
#
# Reads CURSOROPS_BROKERS (default 1), CURSOROPS_BROKER_PORT (default 6650) and
# CURSOROPS_WEB_PORT (default 8080): broker i (from 1) serves the binary protocol on
# CURSOROPS_BROKER_PORT + i - 1 and the admin REST on CURSOROPS_WEB_PORT + i - 1, on
# 127.0.0.1 (CURSOROPS_BIND). CURSOROPS_METADATA_URL (default the home's SQLite file)
# and CURSOROPS_LEDGER_ROOT (default $CURSOROPS_HOME/ledgers) are the stores every
# broker shares, the ones the CLI of this shell uses; it brings the store's schema up
# to date first (`cursorops db migrate`). Each broker has a home of its own,
# $CURSOROPS_HOME/broker-<i> (its log, broker.log, is there): a home is served by one
# standalone per machine. Once every broker answers its health check, it prints the
# multi-host service URL a client takes (pulsar://127.0.0.1:P1,127.0.0.1:P2) and writes
# it to $CURSOROPS_HOME/brokers-url. Stop it with SIGINT or SIGTERM: it stops every
# broker and waits for each. A broker that dies once all answered is reported and the
# others carry on serving (what a cluster is for); when the last is gone it exits 1.
# One that dies before all answered stops the rest (exit 1).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${VENV:-$repo/.venv}"
# The checkout's code, as the other launchers run it (scripts/airflow-env.sh).
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
home="$(mkdir -p "${CURSOROPS_HOME:-$HOME/.cursorops}" && cd "${CURSOROPS_HOME:-$HOME/.cursorops}" && pwd)"
count="${CURSOROPS_BROKERS:-1}"
broker_port="${CURSOROPS_BROKER_PORT:-6650}"
web_port="${CURSOROPS_WEB_PORT:-8080}"
for name in CURSOROPS_BROKERS CURSOROPS_BROKER_PORT CURSOROPS_WEB_PORT; do
    value="${!name:-1}"
    if [[ ! "$value" =~ ^[1-9][0-9]{0,4}$ ]]; then
        echo "Invalid $name ${!name@Q}: expected a positive integer" >&2
        exit 2
    fi
done
if ((broker_port + count - 1 > 65535 || web_port + count - 1 > 65535)); then
    echo "$count brokers from ports $broker_port and $web_port run past port 65535" >&2
    exit 2
fi
# Every broker on the same stores: the defaults are the shared home's, not each broker's.
export CURSOROPS_METADATA_URL="${CURSOROPS_METADATA_URL:-sqlite:///$home/metadata.db}"
export CURSOROPS_LEDGER_ROOT="${CURSOROPS_LEDGER_ROOT:-$home/ledgers}"
rm -f "$home/brokers-url"
"$venv/bin/cursorops" db migrate

pids=()
stop() {
    trap - INT TERM
    local pid
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}
trap 'stop; echo "cursorops brokers stopped (${#pids[@]} of them)"; exit 0' INT TERM

hosts=()
for ((i = 1; i <= count; i++)); do
    port=$((broker_port + i - 1))
    broker_home="$home/broker-$i"
    mkdir -p "$broker_home"
    CURSOROPS_HOME="$broker_home" "$venv/bin/cursorops" standalone \
        --broker-port "$port" --web-port $((web_port + i - 1)) \
        >"$broker_home/broker.log" 2>&1 &
    pids+=($!)
    hosts+=("127.0.0.1:$port")
done

ready=0
waited=0
while ((ready < count)); do
    if ((waited++ >= 240)); then
        echo "the brokers did not all answer within 2 minutes: see $home/broker-*/broker.log" >&2
        stop
        exit 1
    fi
    ready=0
    for ((i = 1; i <= count; i++)); do
        if ! kill -0 "${pids[$((i - 1))]}" 2>/dev/null; then
            echo "broker-$i exited: see $home/broker-$i/broker.log" >&2
            tail -n 5 "$home/broker-$i/broker.log" >&2 || true
            stop
            exit 1
        fi
        if "$venv/bin/python" - "$((web_port + i - 1))" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{sys.argv[1]}/admin/v2/brokers/health", timeout=5
    ) as answer:
        sys.exit(0 if answer.read() == b"ok" else 1)
except OSError:
    sys.exit(1)
PY
        then
            ready=$((ready + 1))
        fi
    done
    ((ready == count)) || sleep 0.5
done
url="pulsar://$(IFS=,; echo "${hosts[*]}")"
echo "$url" >"$home/brokers-url"
echo "cursorops brokers ready: $url (admin on ports $web_port..$((web_port + count - 1)))"

set +e
alive=("${pids[@]}")
while ((${#alive[@]} > 0)); do
    gone=""
    wait -n -p gone "${alive[@]}"
    status=$?
    [[ -n "$gone" ]] || continue
    rest=()
    for pid in "${alive[@]}"; do
        [[ "$pid" == "$gone" ]] || rest+=("$pid")
    done
    alive=("${rest[@]}")
    for ((i = 1; i <= count; i++)); do
        if [[ "${pids[$((i - 1))]}" == "$gone" ]]; then
            echo "broker-$i exited ($status): ${#alive[@]} still serve; see $home/broker-$i/broker.log" >&2
        fi
    done
done
echo "every broker exited" >&2
exit 1
