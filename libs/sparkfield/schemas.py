"""Every job's parameter schema by job name (for the README tables and the tests that check
conf files, flags and README against them)."""

from __future__ import annotations

from sparkfield.core.params import JobSchema
from sparkfield.geo.params import SCHEMA as COFFEE_SHOPS

SCHEMAS: dict[str, JobSchema] = {s.job: s for s in (COFFEE_SHOPS,)}
