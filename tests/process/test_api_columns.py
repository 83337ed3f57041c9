"""Every public process function that takes a DataFrame names its columns ``*_col`` and refuses
a column the frame lacks with a ColumnError that names it, before any Spark job runs."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime

import pytest

import sparkfield.process as sp
from sparkfield.core.errors import ColumnError

# the arguments each function needs besides its frame and its columns
REQUIRED: dict[str, dict[str, object]] = {
    "filter_time_range": {"start": "2024-01-01", "end": "2024-02-01"},
    "filter_variants_top_k": {"k": 1},
    "filter_variants_by_coverage_percentage": {"min_coverage_percentage": 0.1},
    "filter_case_performance": {"min_performance": 0, "max_performance": 10},
    "filter_case_size": {"min_size": 1},
    "filter_start_activities": {"activities": ["a"]},
    "filter_end_activities": {"activities": ["a"]},
    "filter_event_attribute_values": {"attribute_col": "attr", "values": ["x"]},
    "filter_directly_follows_relation": {"pairs": [("a", "b")]},
    "filter_eventually_follows_relation": {"pairs": [("a", "b")]},
    "filter_activities_rework": {"activity_name": "a"},
}
COLUMNS = ["case_id", "activity", "timestamp", "org:resource", "start", "end", "duration_s",
           "attr", "n"]
MISSING = "no such column"


def _frame_functions() -> dict[str, Callable]:
    """The public functions whose first argument is a DataFrame."""
    out = {}
    for name in sp.__all__:
        fn = getattr(sp, name)
        if inspect.isfunction(fn):
            first = next(iter(inspect.signature(fn).parameters.values()))
            if first.annotation in ("DataFrame", "pyspark.sql.DataFrame"):
                out[name] = fn
    return out


FUNCTIONS = _frame_functions()
CALLS = [(name, arg) for name, fn in FUNCTIONS.items()
         for arg in inspect.signature(fn).parameters if arg.endswith("_col")]


def test_every_column_argument_says_it_is_one():
    assert len(FUNCTIONS) >= 30
    old = {"case", "activity", "timestamp", "order", "resource", "duration", "attribute"}
    for name, fn in FUNCTIONS.items():
        assert not old & set(inspect.signature(fn).parameters), name
    assert ("active_cases_from_cases", "start_col") in CALLS
    assert ("case_duration_summary", "duration_col") in CALLS


@pytest.fixture(scope="module")
def events(spark):
    row = ("c1", "a", datetime(2024, 1, 5), "ann", datetime(2024, 1, 5), datetime(2024, 1, 6),
           1.0, "x", 1)
    return spark.createDataFrame([row], "case_id string, activity string, timestamp timestamp, "
                                        "`org:resource` string, start timestamp, end timestamp, "
                                        "duration_s double, attr string, n long")


@pytest.mark.parametrize(("name", "arg"), CALLS)
def test_a_missing_column_is_named_before_any_job(spark, events, name, arg):
    assert events.columns == COLUMNS
    call = FUNCTIONS[name]
    kwargs = {**REQUIRED.get(name, {}), arg: MISSING}
    if type(spark).__module__.startswith("pyspark.sql.connect"):  # no job tracker to ask
        with pytest.raises(ColumnError, match=f"no column '{MISSING}'"):
            call(events, **kwargs)
        return
    context, group = spark.sparkContext, f"columns {name} {arg}"
    context.setJobGroup(group, group)
    try:
        with pytest.raises(ColumnError, match=f"no column '{MISSING}'"):
            call(events, **kwargs)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert list(context.statusTracker().getJobIdsForGroup(group)) == []


def test_the_job_tracker_sees_a_job(spark, events):
    """The check above would notice a job: a count is one."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        pytest.skip("no job tracker over Spark Connect")
    context = spark.sparkContext
    context.setJobGroup("columns count", "columns count")
    try:
        assert events.count() == 1
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert list(context.statusTracker().getJobIdsForGroup("columns count")) != []
