"""Index contents: a file's column ranges and its record-key bloom filter, as the metadata table stores them."""

from timeline.index.bloom import BloomFilter
from timeline.index.column_stats import ColumnRange

__all__ = ["BloomFilter", "ColumnRange"]
