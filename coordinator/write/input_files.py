"""Read a write job's input file (.parquet, .csv, .jsonl) into Arrow."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from timeline.errors import BadInputError


def read_input(path: str) -> pa.Table:
    """The rows of `path`; a missing path, a folder or an unknown format is bad input."""
    if os.path.isdir(path):
        raise BadInputError(f"input {path} is a directory, not a .parquet/.csv/.jsonl file")
    if not os.path.isfile(path):
        raise BadInputError(f"input file {path} does not exist")
    suffix = os.path.splitext(path)[1].lower()
    try:
        if suffix == ".parquet":
            return pq.read_table(path)
        if suffix == ".csv":
            return pacsv.read_csv(path)
        if suffix in (".jsonl", ".json"):
            return pajson.read_json(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise BadInputError(f"input file {path} cannot be read as {suffix[1:]}: {err}") from err
    raise BadInputError(f"input file {path}: unsupported format {suffix or '(none)'} (use .parquet, .csv or .jsonl)")
