"""Read a write job's input file (.parquet, .csv, .jsonl) as a stream of Arrow batches."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from timeline.errors import BadInputError

BATCH_ROWS = 128 * 1024


def read_input(path: str) -> pa.RecordBatchReader:
    """The rows of `path`, batch by batch (a parquet or CSV file of any size is never read whole; JSON lines
    are: pyarrow has no streaming JSON reader before version 19). A missing path, a folder, an unknown
    format or a file that is not what its name says is bad input, also when found part way through."""
    if os.path.isdir(path):
        raise BadInputError(f"input {path} is a directory, not a .parquet/.csv/.jsonl file")
    if not os.path.isfile(path):
        raise BadInputError(f"input file {path} does not exist")
    suffix = os.path.splitext(path)[1].lower()
    kind = suffix[1:]
    try:
        if suffix == ".parquet":
            parquet = pq.ParquetFile(path)
            reader = pa.RecordBatchReader.from_batches(parquet.schema_arrow, parquet.iter_batches(BATCH_ROWS))
        elif suffix == ".csv":
            reader = pacsv.open_csv(path)
        elif suffix in (".jsonl", ".json"):
            reader = pajson.read_json(path).to_reader(BATCH_ROWS)
        else:
            raise BadInputError(
                f"input file {path}: unsupported format {suffix or '(none)'} (use .parquet, .csv or .jsonl)"
            )
    except (pa.ArrowInvalid, OSError) as err:
        raise BadInputError(f"input file {path} cannot be read as {kind}: {err}") from err
    return pa.RecordBatchReader.from_batches(reader.schema, _checked(reader, path, kind))


def _checked(reader: pa.RecordBatchReader, path: str, kind: str) -> Iterator[pa.RecordBatch]:
    """The reader's batches; a read that fails part way is bad input (the write that reads it is undone)."""
    try:
        yield from reader
    except (pa.ArrowInvalid, OSError) as err:
        raise BadInputError(f"input file {path} cannot be read as {kind}: {err}") from err
