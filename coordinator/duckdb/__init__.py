"""DuckDB over Tandem tables: views of exactly the planned files, and `tandem query`."""
