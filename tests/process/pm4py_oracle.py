"""pm4py (AGPL) as an independent oracle: used by tests and benchmarks only, never by the
library."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

import pandas as pd


def load(path: Path) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pm4py

        if path.name.endswith((".xes", ".xes.gz")):
            return pm4py.read_xes(str(path), show_progress_bar=False)
        df = pd.read_csv(path)
        df["time:timestamp"] = pd.to_datetime(df["time:timestamp"], utc=True, format="mixed")
        return pm4py.format_dataframe(df, case_id="case:concept:name",
                                      activity_key="concept:name",
                                      timestamp_key="time:timestamp")


def figures(log: pd.DataFrame) -> dict:
    import pm4py

    dfg, start, end = pm4py.discover_dfg(log)
    variants = pm4py.get_variants(log)
    return {
        "dfg": {k: int(v) for k, v in dfg.items()},
        "start": {k: int(v) for k, v in start.items()},
        "end": {k: int(v) for k, v in end.items()},
        "variants": Counter({tuple(k): int(v if not isinstance(v, list) else len(v))
                             for k, v in variants.items()}),
        "durations": sorted(float(d) for d in pm4py.get_all_case_durations(log)),
    }
