"""Hudi-format tables: storage, timeline, table config, file-system view, reader."""
