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
