"""The run report accounts for the wall time: steps nested in other steps are not counted
twice, a cache's fill is a step of its own, total is the wall clock, and the steps of a real
run cover at least 95 % of it."""

from __future__ import annotations

import gc
import json
import time

import pytest

from sparkfield.core import report as report_module
from sparkfield.core.practices import cached_rows
from sparkfield.core.report import RunReport, Stats, counted_seconds, current_step


def test_nested_steps_are_listed_within_their_step_and_counted_once():
    report = RunReport("t")
    inner = Stats()
    with report.step("outer"):
        assert current_step() == "outer"
        with inner.step("inner"):  # another Stats (a compute's) inside the run's step
            assert current_step() == "inner"
            time.sleep(0.05)
    assert current_step() is None
    assert inner.steps == [{"step": "inner", "seconds": inner.steps[0]["seconds"],
                            "within": "outer"}]
    report.merge(inner)
    outer = report.steps[0]["seconds"]
    assert outer >= 0.05 and counted_seconds(report.steps) == outer
    assert "inner=" in report.summary() and "(in outer)" in report.summary()


def test_total_is_the_wall_time_and_says_what_the_steps_cover():
    report = RunReport("t")
    with report.step("work"):
        time.sleep(0.2)
    time.sleep(0.2)  # outside any step
    report.finish()
    d = report.to_dict()
    assert d["total_seconds"] >= 0.4 > d["steps_seconds"] >= 0.2
    assert d["steps_cover"] == pytest.approx(d["steps_seconds"] / d["total_seconds"], abs=1e-3)
    assert report.summary().splitlines()[0].endswith(f"(steps cover {d['steps_cover']:.0%})")
    time.sleep(0.05)
    assert report.to_dict()["total_seconds"] == d["total_seconds"]  # fixed once finished


def test_a_session_started_for_the_run_is_its_first_step():
    t0 = time.perf_counter() - 2.0
    report_module.session_started(t0, 1.5)
    report = RunReport("t")
    assert report.steps == [{"step": "start_session", "seconds": 1.5}]
    assert report.elapsed() >= 2.0
    assert RunReport("u").steps == []  # used once


def test_filling_a_cache_is_a_step(spark):
    stats = Stats()
    with cached_rows(spark.range(1000), "numbers", report=stats) as (_, rows):
        assert rows == 1000
    assert [s["step"] for s in stats.steps] == ["cache numbers"]
    assert stats.cached[0]["rows"] == 1000


@pytest.mark.slow
def test_the_steps_of_a_job_cover_its_wall_time(spark, tmp_path):
    from tests.conftest import job_module

    out = tmp_path / "out"
    # the objects of every test before this one are frozen out of the garbage collector: a
    # full collection over them pauses this process at random, in a step or between two
    gc.collect()
    gc.freeze()
    try:
        code = job_module("coffee_shops").main(["--grid-step-m", "50", "--output", str(out)])
    finally:
        gc.unfreeze()
    assert code == 0
    rep = json.loads((out / "run_report.json").read_text())
    assert rep["steps_cover"] >= 0.95, rep["steps"]
    assert rep["total_seconds"] >= rep["steps_seconds"]
    assert {s["step"] for s in rep["steps"]} >= {"cache crimes", "cache crime_rows"}
