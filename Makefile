# The two commands of the README: `make demo` and `make test`. Both set up everything.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint chaos bench system-deps

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all,test,bench]'
	touch $(STAMP)

system-deps:
	bash scripts/install-system-deps.sh

demo: $(STAMP)
	$(VENV)/bin/tandem demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: $(STAMP) system-deps lint
	$(VENV)/bin/pytest -q -p no:cacheprovider
