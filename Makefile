PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-slow reliability lint demo bench bench-scale bi-check vendor-web clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	# dev: test and lint tools; bi and pg: the real clients the doors' tests drive
	$(BIN)/python -m pip install --quiet -e '.[dev,bi,pg,postgres,spark]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check accounting proxy tests sample_data bench tools
	$(BIN)/mypy accounting proxy sample_data

# Two pytest-xdist workers, each test file whole on one (tests/conftest.py);
# `$(BIN)/python -m pytest -q` runs the same tests in one process.
test: lint
	$(BIN)/python -m pytest -q -n 2

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# The reliability suites at full size (the CI sizes run too): load, crash and restart,
# fuzzing and escapes, privacy audit, bypass scan, access matrix. -s prints their figures;
# the long runs get a longer per-test limit than the CI default.
reliability: $(STAMP)
	$(BIN)/python -m pytest -q -s -m "slow or not slow" --timeout 7200 tests/reliability

# Apache Superset (its own venv in build/superset-venv, ~1 min to build) driven over its
# REST API against dpsql's Trino door; prints every statement Superset sent.
bi-check: $(STAMP)
	$(BIN)/python -m pytest -q -s -m slow tests/trino/test_superset.py

demo: $(STAMP)
	$(BIN)/dpsql demo

# Full run < 30 min on 2 cores; `make bench BENCH_ARGS=--quick` takes a few minutes.
# SmartNoise SQL gets its own venv (bench/out/sn-venv), created by the harness.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# The engines at scale (issue 16): DuckDB, PostgreSQL and Spark local[2] at 1M and 10M
# rows (about 20 min on 2 cores); BENCH_ARGS="--rows 100000" for a quick look.
bench-scale: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.scale $(BENCH_ARGS)

# Refresh the console's vendored front-end files from the npm registry (npm pack) and
# their manifest; serving and CI never need npm.
vendor-web: $(STAMP)
	$(BIN)/python -m tools.vendor_web

clean:
	rm -rf $(VENV) build *.egg-info
