"""Event logs for process mining: extraction from source tables, XES/CSV/Parquet logs, and the
views a process miner expects (directly-follows graph, variants, cases, process map)."""

from sparkfield.process.job import ProcessResult, run_event_log, run_process_mining

__all__ = ["ProcessResult", "run_event_log", "run_process_mining"]
