"""The event-log model and its files: the canonical schema, raw rows to events (timestamps,
reasons, sampling), and logs read and written as XES, CSV or Parquet."""
