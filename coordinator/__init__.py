"""The write side: the commit protocol, the metadata table's writer, the table services, the writers, the
engines (Spark, DuckDB) and the command line. This face stays empty so that `tandem --help` imports nothing
heavy; the library's everyday face is the `tandem` package."""
