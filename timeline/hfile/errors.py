"""The one error every HFile check raises."""

from __future__ import annotations


class HFileError(ValueError):
    """A damaged or foreign HFile: bad magic, checksum mismatch, truncation, an inconsistent trailer or index.

    Raised instead of answering, so a reader never returns cells from bytes it could not verify."""
