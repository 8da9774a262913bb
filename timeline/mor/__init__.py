"""Merge-on-read file slices (their logs: `timeline.format.data_logs`): pending compactions (`pending`),
and the rows a reader sees once the logs are merged over the base (`slice_merge`)."""
