"""The Python workers' set-up: archives on sys.path keep their directories between tasks."""

import importlib
import sys
import zipfile
import zipimport

import pyarrow as pa

from sparkfield.core.workers import in_worker, keep_archive_directories


def test_archive_importers_keep_their_directory_and_directories_still_see_new_files(
        tmp_path, monkeypatch):
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped_mod_a.py", "VALUE = 1\n")
    folder = tmp_path / "src"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.syspath_prepend(str(archive))
    importlib.invalidate_caches()
    assert importlib.import_module("zipped_mod_a").VALUE == 1
    assert type(sys.path_importer_cache[str(archive)]) is zipimport.zipimporter

    assert keep_archive_directories() >= 1
    finder = sys.path_importer_cache[str(archive)]
    assert isinstance(finder, zipimport.zipimporter)
    assert type(finder) is not zipimport.zipimporter
    assert keep_archive_directories() == 0  # nothing left to change

    # the directory of the archive is not read again ...
    read = []
    monkeypatch.setattr(zipimport, "_read_directory", lambda path: read.append(path) or {})
    importlib.invalidate_caches()
    assert read == []
    # ... while a file added to a folder on sys.path is still found
    (folder / "late_mod_b.py").write_text("VALUE = 2\n")
    importlib.invalidate_caches()
    assert importlib.import_module("late_mod_b").VALUE == 2
    for name in ("zipped_mod_a", "late_mod_b"):
        sys.modules.pop(name, None)


def test_in_worker_prepares_every_python_worker(spark):
    def plain_zip_importers(batches):
        for b in batches:
            left = sum(type(f) is zipimport.zipimporter for f in sys.path_importer_cache.values())
            yield pa.RecordBatch.from_pylist([{"left": left}] * b.num_rows)

    df = spark.range(0, 40, 1, 4)
    assert {r["left"] for r in df.mapInArrow(in_worker(plain_zip_importers), "left long")
            .collect()} == {0}
