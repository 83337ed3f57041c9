"""Shared building blocks: configuration, session, I/O, Spark practices and run reports."""
