# The two commands a newcomer needs: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint setup clean i18n

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/codemojex demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q

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

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
