"""Small results brought to the driver: several independent actions at once."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
from pyspark.sql import DataFrame


def collect_small(frames: Mapping[str, DataFrame | pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Small frames (aggregates, a few rows each) collected to pandas at once, each action
    from a thread of its own, in the order given; pandas frames are kept as they are. A small
    action leaves most of the cores idle while it is planned, scheduled and fetched, so
    independent ones run side by side."""
    todo = {name: df for name, df in frames.items() if not isinstance(df, pd.DataFrame)}
    if len(todo) < 2:
        got = {name: df.toPandas() for name, df in todo.items()}
    else:
        with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="collect") as pool:
            futures = {name: pool.submit(df.toPandas) for name, df in todo.items()}
            got = {name: f.result() for name, f in futures.items()}
    return {name: got.get(name, df) for name, df in frames.items()}
