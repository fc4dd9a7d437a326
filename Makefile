# The commands of the README: `make demo`, `make test` and its fast tier `make check`.
# All of them set up everything on a fresh machine first (virtualenv, packages).

VENV ?= .venv
PYTHON ?= python3.11
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYSPARK_VERSION := 4.3.0

.PHONY: install demo test check lint format bench up down

# The folders the gates cover, those that exist and hold Python files (a fresh checkout may
# have no dags/ or plugins/ yet). All of them pass ruff; the shipped code passes mypy --strict
# (settings and the few per-module exceptions in pyproject.toml).
present = $(foreach d,$(1),$(if $(wildcard $(d)/*.py $(d)/*/*.py),$(d)))
LINT_PATHS := $(call present,cursorops core spark_apps dags plugins tests benchmarks scripts)
TYPED_PATHS := $(call present,cursorops dags plugins)

# The Spark provider pulls pyspark-client, which overwrites files of pyspark: the last
# pip command reinstalls pyspark so one consistent Spark remains. A cursorops.egg-info in
# the checkout (left by a build in it before setup.cfg sent it to build/) is a second
# cursorops distribution on the editable path, whose plugin entry point Airflow would load
# twice: it goes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	@echo "Installing cursorops with Airflow, Spark and the test tools into $(VENV) (2 to 4 minutes on a fresh machine)"
	$(VENV)/bin/pip install --progress-bar off -e '.[airflow,spark,test]'
	rm -rf cursorops.egg-info
	$(VENV)/bin/pip install -q --force-reinstall --no-deps pyspark==$(PYSPARK_VERSION)
	$(PY) -c "import pyspark, sys; v = pyspark.__version__; sys.exit(0 if v == '$(PYSPARK_VERSION)' else 'pyspark is ' + v)"
	touch $(STAMP)

install: $(STAMP)

# The core story on the embedded home, then a real Pulsar client's poison pill through
# cursorops standalone, skipped after a second person's approval in Airflow (started once,
# and stopped, by the demo itself).
demo: $(STAMP)
	$(VENV)/bin/cursorops demo
	$(VENV)/bin/cursorops demo --protocol

# The gates first (seconds), then the suite on a throwaway PostgreSQL, which the script
# stops and removes afterwards, also when the suite fails or is interrupted. Two xdist
# workers: one runs every test on the session's Airflow, the other the rest meanwhile
# (tests/xdist_groups.py).
TEST_WORKERS ?= 2

test: lint
	bash scripts/start-postgres.sh -- $(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup

# The fast tier, for every change: the gates, then the tests that start no Airflow, no
# Spark, no CLI flow in subprocesses and take at most a few seconds, on SQLite only (the
# PostgreSQL tests need the server of `make test`). `make test` runs them all.
CHECK_MARKERS := not slow and not airflow and not spark and not e2e and not postgres

check: lint
	$(VENV)/bin/pytest -m "$(CHECK_MARKERS)"

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy --strict $(TYPED_PATHS)

# What fixes most of what `make lint` reports.
format: $(STAMP)
	$(VENV)/bin/ruff format $(LINT_PATHS)
	$(VENV)/bin/ruff check --fix $(LINT_PATHS)

# Airflow for a person, on 127.0.0.1:28080 (scripts/airflow-up.sh prints the logins), its
# metadata on PostgreSQL as in the topology: a server of its own on 127.0.0.1:28432 (one
# already there is used), started with Airflow and stopped with it, by Ctrl-C or `make
# down`, its data kept for the next `make up`. CURSOROPS_AIRFLOW_DB=sqlite: SQLite instead.
CURSOROPS_AIRFLOW_DB ?= postgres

up: $(STAMP)
	CURSOROPS_AIRFLOW_DB=$(CURSOROPS_AIRFLOW_DB) bash scripts/airflow-up.sh

down:
	bash scripts/airflow-down.sh

bench: $(STAMP)
	$(PY) -m benchmarks.run_all
