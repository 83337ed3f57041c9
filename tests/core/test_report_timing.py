"""The run report accounts for the wall time: steps nested in other steps are not counted
twice, a cache's fill is a step of its own, total is the wall clock, and the steps of a real
run cover at least 95 % of it."""

from __future__ import annotations

import gc
import json
import threading
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


def test_steps_side_by_side_overlap_within_their_step_and_are_counted_once():
    report = RunReport("t")
    seen: dict[str, str | None] = {}
    both = threading.Barrier(2, timeout=10)  # each waits for the other: they overlap

    def part(name: str):
        def work():
            with report.step(f"{name} inner"):
                both.wait()
                seen[name] = current_step()
                time.sleep(0.1)
        return work

    with report.step("run"):
        report.side_by_side("write", {"a": part("a"), "b": part("b")})
        assert current_step() == "run"
    assert current_step() is None
    steps = {s["step"]: s for s in report.steps}
    assert {n: steps[n].get("within") for n in steps} == {
        "a inner": "a", "b inner": "b", "a": "write", "b": "write", "write": "run",
        "run": None}
    assert seen == {"a": "a inner + b inner", "b": "a inner + b inner"}
    # overlapping: the step around them lasts about as long as the longer, not their sum
    assert steps["write"]["seconds"] < steps["a"]["seconds"] + steps["b"]["seconds"]
    assert counted_seconds(report.steps) == steps["run"]["seconds"]


def test_an_error_side_by_side_is_raised_once_every_part_has_ended():
    report = Stats()
    ended = []

    def slow():
        time.sleep(0.2)
        ended.append("slow")

    def broken():
        raise ValueError("no disk")

    with pytest.raises(ValueError, match="no disk"):
        report.side_by_side("write", {"broken": broken, "slow": slow})
    assert ended == ["slow"] and current_step() is None
    assert [s["step"] for s in report.steps] == ["broken", "slow", "write"]


def test_an_interrupt_side_by_side_goes_on_once_every_part_has_ended():
    """Ctrl-C while parts write: the caller deletes the output's staging directory next, so no
    part may still be writing there."""
    import signal

    report = Stats()
    ended = []

    def slow():
        time.sleep(1.0)
        ended.append("slow")

    main = threading.main_thread().ident
    threading.Timer(0.2, lambda: signal.pthread_kill(main, signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        report.side_by_side("write", {"slow": slow, "quick": lambda: None})
    assert ended == ["slow"]


def test_an_aborted_output_makes_no_file_a_late_part_asks_for(spark, tmp_path):
    from sparkfield.core.io import AtomicOutput

    out = AtomicOutput(spark, str(tmp_path / "out"))
    out.write_text("a.txt", "a")
    out.abort()
    with pytest.raises(OSError, match="aborted; b.txt not written"):
        out.write_text("b.txt", "b")
    assert list(tmp_path.iterdir()) == []


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
