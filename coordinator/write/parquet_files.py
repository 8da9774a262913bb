"""The one place Tandem opens a data file's parquet writer (its leaves named by `timeline.index.parquet_leaves`)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from timeline.index.parquet_leaves import leaf_columns


def open_parquet(out: pa.NativeFile, schema: pa.Schema) -> pq.ParquetWriter:
    """A writer of one data file; its row groups are written as parts of the rows arrive.

    Float and double columns (nested ones too) get neither min/max statistics nor
    dictionary pages. pyarrow's statistics leave NaN out and tell -0.0 from 0.0,
    and a dictionary holds -0.0 and 0.0 as different values, so a reader that
    skips row groups by them (Spark's pushdown: `f > 5` drops a NaN, `f = 0`
    drops a -0.0) would lose rows SQL says match.
    """
    exact = [path for path, dtype in leaf_columns(schema) if not pa.types.is_floating(dtype)]
    return pq.ParquetWriter(out, schema, write_statistics=exact, use_dictionary=exact)
