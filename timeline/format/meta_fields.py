"""Hudi's five meta columns, which lead every row of every base file: the one place their names live."""

from __future__ import annotations

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
META_COLUMNS = [COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME]
META_PREFIX = "_hoodie_"  # Hudi reserves the prefix: no index is built over a column named with it
