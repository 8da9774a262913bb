"""Catalog sync: the table, its schema and its partitions registered where engines look for tables (AWS Glue),
as Hudi's meta sync registers them (docs/hudi-catalog-sync-format.md)."""
