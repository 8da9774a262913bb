"""Log file names: `.{fileId}_{baseInstant}.log.{version}_{writeToken}`, with `.cdc` after the token for a
change-data-capture log (FSUtils.makeLogFileName, FSUtils.LOG_FILE_PATTERN, HoodieCDCUtils.CDC_LOGFILE_SUFFIX).

Parsing is Hudi's: its pattern, searched from the start of the name and not anchored at the end, with the file
id the longest prefix that still leaves `_{instant}.log.{version}`; names it accepts are accepted here. So a
Hadoop checksum file `..{log name}.crc` parses too (file id `.{fileId}`): listings must leave those out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

LOG_EXTENSION = ".log"
CDC_SUFFIX = ".cdc"
LOG_FILE_PATTERN = re.compile(r"^\.(.+)_(.*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(.cdc)?)?", re.ASCII)


@dataclass(frozen=True)
class LogFileName:
    """The parts of a log file name; `write_token` is `{task partition}-{stage}-{attempt}` or None (old files)."""

    file_id: str
    base_instant: str
    version: int
    write_token: str | None
    extension: str = LOG_EXTENSION
    suffix: str = ""

    @property
    def name(self) -> str:
        token = "" if self.write_token is None else f"_{self.write_token}{self.suffix}"
        return f".{self.file_id}_{self.base_instant}{self.extension}.{self.version}{token}"

    @property
    def order_key(self) -> tuple:
        """HoodieLogFile.LogFileComparator: base instant, then version, then write token (none first), then
        suffix; the order in which a file slice's logs are read."""
        token = (self.write_token is not None, self.write_token or "")
        return (self.base_instant, self.version, token, self.suffix)


def log_file_name(file_id: str, base_instant: str, version: int, write_token: str, *, cdc: bool = False) -> str:
    """The name Hudi gives version `version` of a file group's log for `base_instant`."""
    if version < 1:
        raise ValueError(f"log versions start at 1, not {version}")
    if not re.fullmatch(r"\d+-\d+-\d+", write_token, re.ASCII):
        raise ValueError(f"write token {write_token!r} is not {{partition}}-{{stage}}-{{attempt}}")
    name = LogFileName(file_id, base_instant, version, write_token, suffix=CDC_SUFFIX if cdc else "")
    if parse_log_name(name.name) != name:
        raise ValueError(f"{name.name!r} would not parse back to the same parts")
    return name.name


@lru_cache(maxsize=1 << 14)
def parse_log_name(name: str) -> LogFileName | None:
    """The parts of a log file name as Hudi reads them, or None when Hudi would not take it for a log file
    (remembered per name: every lookup parses the same few MDT listings)."""
    match = LOG_FILE_PATTERN.match(name)
    if match is None:
        return None
    file_id, instant, extension, version, _, token, _, _, _, suffix = match.groups()
    return LogFileName(file_id, instant, int(version), token, f".{extension}", suffix or "")
