"""The jobs of one local write, one module each; `coordinator/write/writer.py` (LocalWriter) runs them in order.

rows: key columns and row kernels; table_schema: the schema before and after a write; base_reads: the base
files a write reads (index and merge share them); tagging: which file group each record goes to;
file_groups: merging and sizing the files of a write; meta_columns: Hudi's meta columns of a written file;
parquet_files: the parquet writer; pool: the shared I/O thread pool; bloom_index: which files may hold a batch's
keys; column_names, input_files: the input's column names and files.
"""

from coordinator.write.writer import LocalWriter, WriteOptions, WriteResult

__all__ = ["LocalWriter", "WriteOptions", "WriteResult"]
