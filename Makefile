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

demo: $(STAMP) system-deps
	$(VENV)/bin/tandem demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: $(STAMP) system-deps lint
	$(VENV)/bin/pytest -q -p no:cacheprovider

# The long chaos runs: every crash state with both readers (local, then on S3), then 5-minute nemeses per lock
# service and one on an S3 table.
chaos: $(STAMP) system-deps
	mkdir -p docs/chaos
	$(VENV)/bin/tandem chaos run --scenario crash-states --report docs/chaos/crash-states.json
	$(VENV)/bin/tandem chaos run --scenario crash-states --s3 --report docs/chaos/crash-states-s3.json
	$(VENV)/bin/tandem chaos run --scenario lost-lock --report docs/chaos/lost-lock.json
	$(VENV)/bin/tandem chaos run --scenario mdt-corruption --report docs/chaos/mdt-corruption.json
	$(VENV)/bin/tandem chaos nemesis --lock-service zookeeper --duration 300 --report docs/chaos/nemesis-zookeeper.json
	$(VENV)/bin/tandem chaos nemesis --lock-service dynamodb --duration 300 --report docs/chaos/nemesis-dynamodb.json
	$(VENV)/bin/tandem chaos nemesis --lock-service dynamodb --s3 --duration 300 --report docs/chaos/nemesis-dynamodb-s3.json

bench: $(STAMP)
	$(PY) -m bench.locks
	$(PY) -m bench.listing
	$(PY) -m bench.commit
	$(PY) -m bench.spark_write
