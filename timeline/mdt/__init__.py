"""The metadata table: file listings of the data table, merged from a base file and log files."""
