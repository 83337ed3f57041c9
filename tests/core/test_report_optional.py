"""An optional rendering that cannot be made here is a note; any other failure is not hidden."""

import pytest

from sparkfield.core.report import RenderUnavailable, RunReport


def test_missing_tools_are_notes_and_other_failures_propagate(caplog):
    report = RunReport("coffee_shops")
    with report.optional("map.svg"):
        raise RenderUnavailable("Graphviz 'dot' is not installed")
    with report.optional("map.png"):
        raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
    assert report.notes == ["map.svg not written: Graphviz 'dot' is not installed",
                            "map.png not written: No module named 'matplotlib'"]
    assert "note: map.png not written" in report.summary()
    assert [r.levelname for r in caplog.records if "not written" in r.message] == [
        "WARNING", "WARNING"]
    with pytest.raises(ModuleNotFoundError), report.optional("map.png"):
        raise ModuleNotFoundError("No module named 'pandas'", name="pandas")
    with pytest.raises(ValueError), report.optional("map.png"):
        raise ValueError("a bug in the drawing code")
    assert len(report.notes) == 2


def test_the_stage_view_reads_as_words_on_the_console():
    report = RunReport("process_mining")
    report.skew["events"] = {"ratio": 1.5, "partitions": 4}
    report.skew["stages"] = {"available": True, "threshold": 4.0, "skewed": [
        "stage 7 (collect): max/median task time 9.1"], "stages": [
        {"stage": 3, "ratio": 1.2}, {"stage": 7, "ratio": 9.1}, {"stage": 8, "ratio": None}]}
    lines = report.summary().splitlines()
    assert "  skew[events]: max/median 1.5 over 4 partitions (max None, median None)" in lines
    assert ("  skew[stages]: 3 stages of 2+ tasks, worst max/median task time 9.1; 1 over 4.0: "
            "stage 7 (collect): max/median task time 9.1") in lines
    report.skew["empty"] = {"partitions": 0, "max": 0, "median": 0, "ratio": None}
    report.skew["idle"] = {"partitions": 3, "max": 0, "median": 0, "ratio": None}
    lines = report.summary().splitlines()
    assert "  skew[empty]: no partitions" in lines
    assert "  skew[idle]: max/median n/a (median 0) over 3 partitions (max 0, median 0)" in lines
    assert not [ln for ln in lines if "None over None" in ln]
    report.skew["stages"] = {"available": False, "reason": "spark.ui.enabled is false"}
    assert "  skew[stages]: not available (spark.ui.enabled is false)" in report.summary()
