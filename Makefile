# Quick start: `make run` (coffee-shop job on the bundled data) and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench clean venv system-deps pack-env

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v java >/dev/null 2>&1 || { echo "Java 17 is required (see README: 'Java')"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	./submit.sh coffee_shops --profile local --output out/coffee_shops

system-deps:
	./scripts/system_deps.sh

test: $(STAMP) system-deps
	$(PY) -m ruff check libs jobs tests benchmarks
	$(PY) -m pytest tests

# third-party packages for the executors, shipped with --archives (see conf/cluster.yaml)
pack-env:
	./scripts/pack_env.sh --extras $(or $(EXTRAS),geo,process,text) --output build/sparkfield-env.tar.gz

bench: $(STAMP)
	for b in benchmarks/*.py; do echo "### $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf out build dist .pytest_cache .ruff_cache
