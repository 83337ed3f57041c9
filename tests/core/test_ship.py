"""Folders shipped to the executors: the archive's name follows the folder and its version, so
an executor finds the copy the driver shipped, and a folder changed in place goes again."""

from __future__ import annotations

from sparkfield.core.ship import alias_of, shipped_dir


def test_the_archive_name_follows_the_folder_and_its_version():
    assert alias_of("/models/m") == alias_of("/models/m")
    assert alias_of("/models/m", "v1") != alias_of("/models/m", "v2")
    assert alias_of("/models/m", "v1") != alias_of("/models/m")
    assert alias_of("/models/m", "v1") != alias_of("/models/n", "v1")
    assert alias_of("/models/m", "v1").startswith("sparkfield-dir-")


def test_an_executor_finds_the_copy_of_the_version_it_was_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where Spark unpacks an application's archives
    (tmp_path / alias_of("/models/m", "v2")).mkdir()
    assert shipped_dir("/models/m", "v2") == tmp_path / alias_of("/models/m", "v2")
    # no copy of that version here: the folder itself (a path every node sees, or local)
    assert str(shipped_dir("/models/m", "v1")) == "/models/m"
