"""What the event_log and process_mining runs return, in either form of the log."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame

from sparkfield.core.report import RunReport


@dataclass
class ProcessResult:
    events: DataFrame
    views: dict[str, pd.DataFrame]
    report: RunReport
    rejects: int = 0
    output: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
