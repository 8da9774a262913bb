"""The read side and the format: what a Hudi table is on storage and how to read it.

Sub-packages, bottom first: `io` (storage), `format` (the Hudi format), `index` (column statistics and bloom
filters), `mdt` (the metadata table's layout and reader), then `table` (one opened table) and `query` (the scan
planner and reader). This face stays empty so that `import timeline.errors` costs nothing; import from the
sub-packages.
"""
