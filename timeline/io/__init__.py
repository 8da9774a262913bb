"""Storage I/O: the one storage API over local disks and S3, its create-if-absent fence, and read memos."""

from timeline.io.read_once import reuse_reads
from timeline.io.storage import FileEntry, Storage
from timeline.io.store_probe import require_fencing

__all__ = ["FileEntry", "Storage", "require_fencing", "reuse_reads"]
