# The two commands of the README: `make demo` and `make test`. Both set up everything.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint chaos bench system-deps hudi-reference trino

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all,test,bench]'
	touch $(STAMP)

system-deps:
	bash scripts/install-system-deps.sh

# Apache Hudi's own Spark readers, the judges of tests/interop/test_java_hudi_reads.py: cached outside the repo
# (~/.cache/tandem/hudi-ref), so a second run, or another clone on this machine, downloads nothing.
hudi-reference: system-deps
	bash scripts/install-hudi-reference.sh

# A real Trino (its Hudi connector) for the RFC-40 tests, cached outside the repo (~/.cache/tandem/trino).
trino:
	bash scripts/install-trino.sh

demo: $(STAMP) system-deps
	$(VENV)/bin/tandem demo

# ruff, then the import layering: production never imports chaos, tests or bench, and no module import cycle.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/check_imports.py

test: $(STAMP) system-deps hudi-reference trino lint
	$(VENV)/bin/pytest -q -p no:cacheprovider --durations=40
	$(MAKE) test-lowest

# The suite's core on the lowest versions pyproject.toml accepts (a venv cached outside the repo).
.PHONY: test-lowest
test-lowest:
	bash scripts/test-lowest-deps.sh

# The long chaos runs: every crash state with both readers (local, then on S3), lost locks, MDT corruption,
# generated junk and random MDT damage, then 5-minute nemeses per lock service and one on an S3 table; then
# 500 random histories read by Java Hudi, and Java and Tandem writing at once under each lock service.
chaos: $(STAMP) system-deps hudi-reference
	mkdir -p docs/chaos
	$(VENV)/bin/tandem chaos run --scenario crash-states --report docs/chaos/crash-states.json
	$(VENV)/bin/tandem chaos run --scenario crash-states --s3 --report docs/chaos/crash-states-s3.json
	$(VENV)/bin/tandem chaos run --scenario lost-lock --report docs/chaos/lost-lock.json
	$(VENV)/bin/tandem chaos run --scenario mdt-corruption --report docs/chaos/mdt-corruption.json
	$(VENV)/bin/tandem chaos run --scenario junk --seeds 300 --report docs/chaos/junk.json
	$(VENV)/bin/tandem chaos run --scenario mdt-fuzz --seeds 2000 --report docs/chaos/mdt-fuzz.json
	$(VENV)/bin/tandem chaos nemesis --lock-service zookeeper --duration 300 --report docs/chaos/nemesis-zookeeper.json
	$(VENV)/bin/tandem chaos nemesis --lock-service dynamodb --duration 300 --report docs/chaos/nemesis-dynamodb.json
	$(VENV)/bin/tandem chaos nemesis --lock-service dynamodb --s3 --duration 300 --report docs/chaos/nemesis-dynamodb-s3.json
	$(PY) -m tests.java_hudi_long --sequences 500
	TANDEM_INTEROP_ALL_LOCKS=1 $(VENV)/bin/pytest -q -p no:cacheprovider tests/interop/test_java_concurrent_writers.py

bench: $(STAMP)
	$(PY) -m bench.locks
	$(PY) -m bench.listing
	$(PY) -m bench.listing_format
	$(PY) -m bench.commit
	$(PY) -m bench.commit_format
	$(PY) -m bench.spark_write
	$(PY) -m bench.bootstrap
