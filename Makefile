# pycanal developer entry points. `make test` and `make demo` run scripts/setup.sh first
# (idempotent: installs MariaDB and the .venv only when missing or out of date).
PY := .venv/bin/python
# Per-test timeout in seconds (pytest-timeout); override with `make test TEST_TIMEOUT=600`.
TEST_TIMEOUT ?= 300
# Test files run on this many workers (pytest-xdist): most of the suite waits on servers and JVMs,
# so 3 on 2 cores is faster (fresh clone, 2026-11-29: 2,437 passed in 1,242 s against 1,379 s on 2).
# A worker takes a file (or tests/conftest.py's lane of JVM jobs) at a time, in conftest's order
# (fresh clone, 2026-11-30: 837 s with the lane against 933 s with xdist's reordering).
TEST_WORKERS ?= 3
PYTEST_ARGS ?=

.PHONY: setup test lint format demo

setup:
	bash scripts/setup.sh

test: setup
	$(PY) -m pytest -q --timeout=$(TEST_TIMEOUT) -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

format: setup
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

demo: setup
	$(PY) -m pycanal.demo
