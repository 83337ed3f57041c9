# Quick start: `make run` (coffee-shop job on the bundled data) and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Airflow lives in its own environment (its pins are not the jobs'); the DAG test uses it
AIRFLOW_VENV  ?= .venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed
# the newest Python the library supports, in a venv of its own, for the fast subset
PY313_VENV  ?= .venv-py313
PY313_STAMP := $(PY313_VENV)/.installed

.PHONY: run test test-heavy test-py313 lint bench clean venv system-deps pack-env package param-tables jar

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v java >/dev/null 2>&1 || { echo "Java 17 is required (see README: 'Java')"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(AIRFLOW_STAMP): deploy/airflow/requirements.txt
	test -x $(AIRFLOW_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/python -m pip install -q --upgrade pip
	$(AIRFLOW_VENV)/bin/python -m pip install -q -r deploy/airflow/requirements.txt
	touch $(AIRFLOW_STAMP)

$(PY313_STAMP): pyproject.toml
	test -x $(PY313_VENV)/bin/python || "$$(./scripts/find_python.sh 3.13)" -m venv $(PY313_VENV)
	$(PY313_VENV)/bin/python -m pip install -q --upgrade pip
	$(PY313_VENV)/bin/python -m pip install -q -e '.[geo,process,text,connect,test]'
	touch $(PY313_STAMP)

run: $(STAMP)
	./submit.sh coffee_shops --profile local --output out/coffee_shops

system-deps:
	./scripts/system_deps.sh

test: $(STAMP) $(AIRFLOW_STAMP) system-deps
	$(PY) -m ruff check libs jobs tests benchmarks deploy
	$(PY) -m pytest tests -m "not heavy" --durations=60
	$(MAKE) test-py313

# the longest runs, left out of `make test` to keep it within CI's time (see docs/testing.md)
test-heavy: $(STAMP) system-deps
	$(PY) -m pytest tests -m heavy --durations=60

# the fast subset on Python 3.13 (without the nlp extra: torch's pinned CPU build is 3.11's)
PY313_TESTS ?= tests/core tests/geo/test_lattice.py tests/geo/test_crs.py \
	tests/geo/test_inputs.py tests/process/test_discover.py tests/process/test_xes_split.py \
	tests/text/test_normalise.py
test-py313: $(PY313_STAMP)
	$(PY313_VENV)/bin/python -m pytest -q -p no:cacheprovider -m "not slow and not cluster" \
	  -k "not embed_environment" $(PY313_TESTS)

# the library zip that spark-submit ships with --py-files (submit.sh rebuilds it every submit)
package:
	PYTHONPATH=libs $(PYTHON) -m sparkfield.deploy.package build/sparkfield.zip

# third-party packages for the executors, shipped with --archives (see conf/cluster.yaml);
# `make pack-env EXTRAS=nlp` for the embed job
EXTRAS   ?= geo,process,text
PACK_ENV ?= build/sparkfield-env.tar.gz
pack-env:
	./scripts/pack_env.sh --extras '$(EXTRAS)' --output '$(PACK_ENV)' $(PACK_ARGS)

# the library's jar (Java functions under libs/jvm), kept in the repository: run after changing them
jar: $(STAMP)
	PY=$(PY) ./scripts/build_jar.sh

# the parameter tables of the job manuals (docs/jobs/), generated from the job schemas (libs/sparkfield/*/params.py)
param-tables:
	PYTHONPATH=libs $(PY) scripts/param_tables.py

# a script that exits 77 has said why this machine cannot run it (no GPU, no JDK tool): the
# others still run; any other failure stops the loop
bench: $(STAMP)
	for b in benchmarks/*.py; do [ $$b = benchmarks/scale.py ] && continue; \
	  echo "### $$b"; $(PY) $$b; rc=$$?; [ $$rc = 0 ] || [ $$rc = 77 ] || exit $$rc; \
	done  # scale.py: hours; run it on its own

clean:
	rm -rf out build dist .pytest_cache .ruff_cache
