"""HFile v3, the metadata table's base file format, written and read as Hudi 0.15 does through HBase 2.4.

Modules, bottom first: `errors`, `block` (header, checksums, compression), `cell` (KeyValue keys), `trailer`
(protobuf trailer and file info), `index` (block indexes), then `writer` and `reader`.
"""

from __future__ import annotations

from timeline.hfile.errors import HFileError
from timeline.hfile.reader import HFileReader
from timeline.hfile.writer import write_hfile

__all__ = ["HFileError", "HFileReader", "write_hfile"]
