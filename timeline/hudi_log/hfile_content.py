"""HFile data-block content: an HFile's bytes, as Hudi 0.15 makes them for a log block
(HoodieHFileDataBlock.serializeRecords -> HFileUtils.serializeRecordsToLogBlock):

- one cell per record: row = the record key's UTF-8 bytes (family and qualifier empty), value = the Avro binary
  of the record under the block's schema; cells in record-key order (a TreeMap);
- HFile block size 1 MiB (DEFAULT_BLOCK_SIZE_FOR_LOG_FILE), GZ compression unless
  `hoodie.hfile.compression.algorithm` says otherwise, cells compared by HoodieHBaseKVComparator;
- file info `schema` = Avro's rendering (Schema.toString) of the block's schema, which is the SCHEMA header
  itself as Java writes it; Tandem copies the header, so a header in another JSON layout reads the same but
  gives other bytes than Java's.

Java empties the record's key field in the value when the schema has one (truncateRecordKey, "key" for the
metadata table) and its reader puts the cell's row back into an empty or null key field
(HoodieAvroHFileReaderImplBase.deserialize); both forms read the same through Java. The HFile itself is
`timeline.hfile`'s: for the same cells and schema its bytes are Java's.
"""

from __future__ import annotations

from collections.abc import Iterable

from timeline.hfile import HFileError, HFileReader, write_hfile
from timeline.hudi_log.framing import HudiLogError

LOG_HFILE_BLOCK_SIZE = 1024 * 1024
SCHEMA_FILE_INFO_KEY = b"schema"


def encode_hfile_content(records: Iterable[tuple[str, bytes]], schema: str, *, compression: str = "gz") -> bytes:
    """The HFile of (record key, Avro value) records, sorted by key as Java's TreeMap orders them.

    Java's String order is UTF-16's; the HFile's own cell order is the UTF-8 bytes'. They differ only between
    a character above U+FFFF and one in U+E000-U+FFFF, a pair Java's writer rejects; this sorts by the bytes
    the HFile requires. Keys must be distinct (Java would keep duplicates, which the metadata table never has):
    ValueError otherwise."""
    cells = sorted(((key.encode(), value) for key, value in records), key=lambda cell: cell[0])
    file_info = {SCHEMA_FILE_INFO_KEY: schema.encode()}
    return write_hfile(cells, file_info, block_size=LOG_HFILE_BLOCK_SIZE, compression=compression)


def decode_hfile_content(content: bytes) -> tuple[list[tuple[str, bytes]], str | None]:
    """The (record key, Avro value) cells of an HFile data block's content, in file order, and the schema in
    its file info; HudiLogError when the HFile is damaged."""
    try:
        reader = HFileReader(content)
        cells = [(bytes(key).decode(), bytes(value)) for key, value in reader.items()]
        schema = reader.file_info.get(SCHEMA_FILE_INFO_KEY)
    except (HFileError, UnicodeDecodeError) as err:
        raise HudiLogError(f"HFile data block content is damaged: {err}") from None
    return cells, None if schema is None else bytes(schema).decode()
