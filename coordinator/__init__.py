"""The commit coordinator: transactions, writers, table services and the CLI."""
