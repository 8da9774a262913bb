"""Bytes parked in a local temporary file until they are written out: a large insert's bloom filters (about
5 bytes a row at the default fpp) wait there for the commit, which encodes them one log block at a time,
so a write's memory does not grow with the rows it writes."""

from __future__ import annotations

import tempfile
import threading
import zlib
from dataclasses import dataclass
from typing import IO


class SpillFile:
    """An unnamed temporary file, made on first use (gone when closed or when the process ends); thread safe.
    Bytes kept here can be read back only until it is closed."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._end = 0

    def keep(self, data: bytes) -> Spilled:
        with self._lock:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="tandem-spill-")
            self._file.seek(self._end)
            self._file.write(data)
            offset, self._end = self._end, self._end + len(data)
        return Spilled(self, offset, len(data), zlib.crc32(data))

    def read(self, offset: int, length: int) -> bytes:
        with self._lock:
            self._file.seek(offset)
            return self._file.read(length)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()


@dataclass(frozen=True)
class Spilled:
    """Where kept bytes are; `len` is theirs, `load` reads them back checked against their CRC-32."""

    file: SpillFile
    offset: int
    length: int
    crc: int

    def __len__(self) -> int:
        return self.length

    def load(self) -> bytes:
        data = self.file.read(self.offset, self.length)
        if len(data) != self.length or zlib.crc32(data) != self.crc:
            raise OSError(f"spilled bytes at {self.offset} (+{self.length}) read back damaged")
        return data


def loaded(record: dict) -> dict:
    """`record` with every spilled value read back (the record itself when none is)."""
    if not any(isinstance(v, Spilled) for v in record.values()):
        return record
    return {k: v.load() if isinstance(v, Spilled) else v for k, v in record.items()}
