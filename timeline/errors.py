"""Errors with the exit codes of the command-line contract (DESIGN §10)."""

from __future__ import annotations


class TandemError(Exception):
    """Base error; `exit_code` is what the CLI exits with."""

    exit_code = 1


class BadInputError(TandemError):
    """Usage errors, paths that are not tables, unsupported tables, bad files."""

    exit_code = 2


class NotATableError(BadInputError):
    """The path holds no `.hoodie/hoodie.properties`."""


class UnsupportedTableError(BadInputError):
    """A table version, type or base format Tandem does not write."""


class CorruptInstantError(BadInputError):
    """An instant file that cannot be parsed; nothing is changed on disk."""


class UnreadableDataFileError(BadInputError):
    """A data file whose Parquet footer or key column cannot be read: nothing derived from it can be built."""


class PathEscapeError(BadInputError):
    """A relative path that would leave the table base."""


class ConflictError(TandemError):
    """Optimistic concurrency: the write overlaps a commit made since it began."""

    exit_code = 3


class LockError(TandemError):
    """The lock could not be acquired (or was lost) within the configured bound."""

    exit_code = 4


class FencedError(LockError):
    """Storage refused a step only the lock holder takes: another process acted while this one's lock lapsed."""


class MetadataFallbackWarning(UserWarning):
    """A read listed storage because the metadata table is unhealthy."""


class RefusedDeleteWarning(UserWarning):
    """A plan or marker proposed deleting files that Tandem cannot prove belong to what it undoes or cleans."""


class DamagedInstantWarning(UserWarning):
    """A read went on without one completed instant's metadata, which is unreadable or impossible."""
