PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-slow reliability lint demo bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m pip install --quiet -e '.[pg]'  # real PostgreSQL clients for tests/pgwire
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check accounting proxy tests sample_data bench
	$(BIN)/mypy accounting proxy sample_data

test: lint
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# The reliability suites at full size (the CI sizes run too): load, crash and restart,
# fuzzing and escapes, privacy audit, bypass scan, access matrix. -s prints their figures;
# the long runs get a longer per-test limit than the CI default.
reliability: $(STAMP)
	$(BIN)/python -m pytest -q -s -m "slow or not slow" --timeout 7200 tests/reliability

demo: $(STAMP)
	$(BIN)/dpsql demo

# Full run < 30 min on 2 cores; `make bench BENCH_ARGS=--quick` takes a few minutes.
# SmartNoise SQL gets its own venv (bench/out/sn-venv), created by the harness.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
