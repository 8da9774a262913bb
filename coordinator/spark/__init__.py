"""Tandem on PySpark: executors write an instant's files, the driver commits it; reads list files from the MDT."""
