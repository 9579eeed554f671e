# The two commands a newcomer needs: `make demo` and `make test`.
# Every install is pinned by constraints.txt (all extras, any Python >= 3.11); `make lock`
# refreshes it after a change to pyproject.toml's dependencies.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK := constraints.txt
# The runtime and the demo extra (make demo); the runtime, demo and dev extras (make test).
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.9

.PHONY: demo test lint setup lock clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(DEMO_STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/pip install -q -c $(LOCK) -e '.[demo]'
	touch $@

$(STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/pip install -q -c $(LOCK) -e '.[dev]'
	touch $@ $(DEMO_STAMP)

setup: $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/codemojex demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q

# Resolve every dependency (runtime and all extras) for every platform and Python >= 3.11.
lock: | $(BIN)/python
	$(BIN)/pip install -q 'uv==$(UV_VERSION)'
	$(BIN)/uv pip compile --quiet --universal --python-version 3.11 --all-extras \
		--custom-compile-command 'make lock' pyproject.toml -o $(LOCK)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
