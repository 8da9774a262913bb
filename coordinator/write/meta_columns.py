"""Hudi's meta columns of a file being written: fresh ones for new rows, carried-over rows keep theirs
(a record's commit time and sequence number say when it was last written, not when its file was)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from coordinator.write.rows import KEY, PARTITION
from timeline.format.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, META_COLUMNS

GENERATED = (COMMIT_TIME, COMMIT_SEQNO, FILE_NAME)  # meta columns a write makes, not derives


def with_meta(
    rows: pa.Table, name: str, instant: str, task: int, populate_meta_fields: bool, first_seqno: int = 0
) -> pa.Table:
    """Fill meta columns of new rows (null commit time); carried-over rows keep theirs.

    Row i of `rows` gets sequence number `first_seqno + i`: a file written in several
    parts numbers its rows on from the part before.

    A merge puts its carried rows first, so the new rows are usually a suffix: their
    meta values are built for that suffix alone and appended to the carried rows'
    columns, rather than built for every row and chosen row by row. Without meta
    fields the file holds the data columns alone.
    """
    n = rows.num_rows
    data_cols = [c for c in rows.column_names if c not in META_COLUMNS and c not in (KEY, PARTITION)]
    data = rows.select(data_cols)
    if not populate_meta_fields:
        return data
    commit_time = rows.column(COMMIT_TIME) if COMMIT_TIME in rows.column_names else None
    carried = 0 if commit_time is None else n - commit_time.null_count
    suffix = carried == 0 or (  # the new rows follow the carried ones, whose generated columns are strings
        commit_time.slice(0, carried).null_count == 0 and all(rows.column(c).type == pa.string() for c in GENERATED)
    )
    first = carried if suffix else 0
    fresh = {
        COMMIT_TIME: pa.repeat(pa.scalar(instant, pa.string()), n - first),
        COMMIT_SEQNO: seqnos(instant, task, first_seqno + first, n - first),
        KEY: rows.column(KEY).slice(first),
        PARTITION: rows.column(PARTITION).slice(first),
        FILE_NAME: pa.repeat(pa.scalar(name, pa.string()), n - first),
    }
    if not carried:
        meta = [fresh[c] for c in META_COLUMNS]
    elif suffix:
        meta = [pa.chunked_array(rows.column(c).slice(0, carried).chunks + _chunks(fresh[c])) for c in META_COLUMNS]
    else:
        is_new = pc.is_null(commit_time)  # row by row; if_else also unifies string with large_string
        meta = [pc.if_else(is_new, fresh[c], rows.column(c)) for c in META_COLUMNS]
    return pa.Table.from_arrays(meta + list(data.columns), names=META_COLUMNS + data_cols)


def seqnos(instant: str, task: int, start: int, count: int) -> pa.Array:
    """Hudi's `instant_task_index` sequence numbers for indexes start..start+count-1, built by Arrow kernels."""
    numbers = pc.cast(pa.array(np.arange(start, start + count, dtype=np.int64)), pa.string())
    return pc.binary_join_element_wise(pa.scalar(f"{instant}_{task}"), numbers, "_")


def _chunks(column: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]
