# The two commands of the README: `make demo` and `make test`.
# Both set up everything on a fresh machine first (virtualenv, packages).

VENV ?= .venv
PYTHON ?= python3.11
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYSPARK_VERSION := 4.3.0

.PHONY: install demo test lint bench up

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[airflow,spark,test]'
	# The Spark provider pulls pyspark-client, which overwrites files of pyspark:
	# reinstall pyspark last so one consistent Spark remains.
	$(VENV)/bin/pip install -q --force-reinstall --no-deps pyspark==$(PYSPARK_VERSION)
	$(PY) -c "import pyspark, sys; v = pyspark.__version__; sys.exit(0 if v == '$(PYSPARK_VERSION)' else 'pyspark is ' + v)"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/cursorops demo

test: $(STAMP)
	CURSOROPS_TEST_PG_URL="$$(bash scripts/start-postgres.sh)" $(VENV)/bin/pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check core cli spark_apps dags plugins tests benchmarks
	$(VENV)/bin/mypy core

# Airflow for a person, on 127.0.0.1:28080 (scripts/airflow-up.sh prints the logins).
up: $(STAMP)
	bash scripts/airflow-up.sh

bench: $(STAMP)
	$(PY) -m benchmarks.run_all
