# latencyboard — `make run` starts everything, `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Test processes: each starts its own PostgreSQL and Redis, so they share nothing. A module's
# tests that share a module-scoped fixture stay in one process (tests/conftest.py), and tests
# are handed out in the order tests/browser/conftest.py sets (browser tests last).
TEST_PROCESSES ?= 3

.PHONY: run test lint bench-ingest bench-percentiles bench-soak bench-detector bench-compare-coverage bench-capacity bench-retention bench-fairness clean

# The virtualenv is (re)built whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -qq -e '.[local,dev]'
	touch $@

run: $(VENV)/.installed
	$(PY) -m latencyboard.local $(ARGS)

test: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadgroup --no-loadscope-reorder $(ARGS)

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

bench-ingest: $(VENV)/.installed
	$(PY) benchmarks/bench_ingest.py $(ARGS)

bench-percentiles: $(VENV)/.installed
	$(PY) benchmarks/bench_percentiles.py $(ARGS)

bench-soak: $(VENV)/.installed
	$(PY) benchmarks/bench_soak.py $(ARGS)

# The regression detector's false-alarm, detection and mix-shift figures (~5-10 min).
bench-detector: $(VENV)/.installed
	$(PY) benchmarks/bench_detector.py $(ARGS)
	$(PY) benchmarks/bench_detector_production.py

# Compare's intervals: coverage and power on samples of known distributions.
bench-compare-coverage: $(VENV)/.installed
	$(PY) benchmarks/bench_compare_coverage.py $(ARGS)

# Per-span CPU, disk and WAL in one run, and the hosts and disk they give (docs/capacity.md).
bench-capacity: $(VENV)/.installed
	$(PY) benchmarks/bench_capacity.py $(ARGS)

# Disk with tiered retention against keeping every span, over 30 simulated demo days at the
# demo's rates (~2 h on 2 cores; ARGS="--days 7 --requests-per-s 0.05" for a quick look).
bench-retention: $(VENV)/.installed
	$(PY) benchmarks/bench_retention.py $(ARGS)

# Team B attacks (slow channels, silent gRPC streams, declared huge bodies, expensive queries,
# many service names) while team A exports and browses; A's figures per attack (~12 min).
bench-fairness: $(VENV)/.installed
	$(PY) benchmarks/bench_fairness.py $(ARGS)

clean:
	rm -rf $(VENV) var/log var/test
