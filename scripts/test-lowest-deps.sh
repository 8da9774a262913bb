#!/usr/bin/env bash
# The core of the suite on the LOWEST versions pyproject.toml accepts (every direct dependency at its floor),
# so a floor that no longer works shows up here rather than on a user's machine.
#
# The venv lives outside the repository, keyed by a hash of pyproject.toml (and the Python version), and is
# reused while they are unchanged: ${XDG_CACHE_HOME:-$HOME/.cache}/tandem/lowest-venv-<hash>. It holds the
# dependencies only; the tests import Tandem from this checkout. `uv pip install --resolution lowest-direct`
# picks the floors; without uv (and no way to install it) pip installs every `>=floor` pinned `==floor`.
#
# Core subset (no Spark, no lock servers): the local writer and its kernel edges, tables, record identity,
# timeline format, metadata table and bad input, less the crash-point tests. Arguments go to pytest.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/tandem"
EXTRAS=(test s3 dynamodb zookeeper duckdb) # every extra but spark (and bench)
TESTS=(
    tests/coordinator/test_writer_steps.py
    tests/timeline/test_kernel_edges.py
    tests/timeline/test_tables.py
    tests/coordinator/test_record_identity.py
    tests/timeline/test_timeline_format.py
    tests/coordinator/test_metadata_table.py
    tests/coordinator/test_bad_input.py
    tests/timeline/test_hfile.py         # protobuf and google-crc32c at their floors
    tests/timeline/test_hudi_records.py  # xxhash and fastavro's schemaless records at their floors
)
SKIP="not killed" # the crash-point tests run a CLI process per step (a minute here); the full suite has them
KEY="$({ cat "$REPO/pyproject.toml"; "$PYTHON" -c 'import sys; print(sys.version_info[:2])'; } | sha256sum | cut -c1-12)"
VENV="$CACHE/lowest-venv-$KEY"
mkdir -p "$CACHE"

# uv from PyPI, in a venv of its own beside the cached ones, unless one is on PATH.
find_uv() {
    if command -v uv >/dev/null; then
        command -v uv
        return
    fi
    if [ ! -x "$CACHE/uv-venv/bin/uv" ]; then
        { "$PYTHON" -m venv "$CACHE/uv-venv" && "$CACHE/uv-venv/bin/pip" install -q uv; } >&2 || return 1
    fi
    echo "$CACHE/uv-venv/bin/uv"
}

# The dependencies and the extras used, each `>=floor` pinned `==floor` (the highest, where extras differ):
# pip's way to the floors.
pinned() {
    "$PYTHON" - "$REPO/pyproject.toml" "${EXTRAS[@]}" <<'PY'
import re, sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
specs = project["dependencies"] + [s for extra in sys.argv[2:] for s in project["optional-dependencies"][extra]]
floors, extras = {}, {}
number = lambda version: [int(n) for n in re.findall(r"\d+", version)]
for spec in specs:
    found = re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[([^]]*)\])?\s*>=\s*([^,;\s]+)", spec)
    if not found:
        print(spec)
        continue
    name, extra, floor = found.groups()
    if name not in floors or number(floor) > number(floors[name]):
        floors[name] = floor
    extras.setdefault(name, set()).update(e.strip() for e in (extra or "").split(",") if e.strip())
for name, floor in floors.items():
    print(f"{name}[{','.join(sorted(extras[name]))}]=={floor}" if extras[name] else f"{name}=={floor}")
PY
}

build() {
    rm -rf "$VENV"
    local uv extra extras=()
    for extra in "${EXTRAS[@]}"; do extras+=(--extra "$extra"); done
    if uv="$(find_uv)"; then
        "$uv" venv -q -p "$PYTHON" "$VENV"
        "$uv" pip install -q -p "$VENV/bin/python" --resolution lowest-direct -r "$REPO/pyproject.toml" "${extras[@]}"
    else
        echo "test-lowest: no uv; pip installs the floors pinned" >&2
        "$PYTHON" -m venv "$VENV"
        pinned >"$VENV/pinned.txt"
        "$VENV/bin/pip" install -q -r "$VENV/pinned.txt"
    fi
    touch "$VENV/.complete"
}

(
    ! command -v flock >/dev/null || flock 9 # one build at a time; a second run waits, then reuses it
    [ -f "$VENV/.complete" ] || build
) 9>"$CACHE/lowest-venv.lock"

"$VENV/bin/python" -c 'import importlib.metadata as m
names = "pyarrow numpy fastavro tenacity click rich mmh3 sqlglot duckdb hudi moto boto3 kazoo hypothesis pytest"
print("test-lowest:", ", ".join(f"{d} {m.version(d)}" for d in names.split()))'
cd "$REPO"
PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -k "$SKIP" "${TESTS[@]}" "$@"
