"""Bootstrap (RFC-12): an existing parquet dataset brought under the table's timeline without rewriting it."""
