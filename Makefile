# her_wrap: every target sets up .venv/ first when it is missing, so a fresh machine needs nothing installed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# make test runs the test files on this many processes (pytest-xdist; "auto": one per core), each file's
# tests on one of them so that a file's module fixtures are made once. TEST_WORKERS=0 runs them in turn.
TEST_WORKERS ?= auto

.PHONY: setup demo test test-slow lint format bench docs docs-serve clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt torch==2.13.0
	$(PIP) install -q -c constraints.txt -e ".[dev,robotics,postgres,bench,zoo,docs,jax]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(PY) scripts/demo.py

test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check her_wrap tests scripts lab
	$(VENV)/bin/ruff format --check her_wrap tests scripts lab
	$(VENV)/bin/mypy her_wrap

format: $(STAMP)
	$(VENV)/bin/ruff format her_wrap tests scripts lab
	$(VENV)/bin/ruff check --fix her_wrap tests scripts lab

bench: $(STAMP)
	$(PY) scripts/bench_replay.py

# The documentation site (mkdocs.yml, pages in docs/) into site/; strict: any warning fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache .mypy_cache .ruff_cache
