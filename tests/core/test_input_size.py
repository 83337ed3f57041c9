"""The size of a job's input, told from its arguments before Spark starts."""

from __future__ import annotations

from pathlib import Path

from sparkfield.deploy.input_size import input_bytes


def _file(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


def test_files_and_folders_named_by_arguments(tmp_path):
    _file(tmp_path / "a.csv", 100)
    _file(tmp_path / "pages" / "p1.html", 30)
    _file(tmp_path / "pages" / "sub" / "p2.html", 20)
    _file(tmp_path / "log.xes.gz", 7)  # compressed: 10x
    got = input_bytes(["--crimes", "a.csv", "--html-dir=pages", "--log", "log.xes.gz",
                       "--top", "3", "--grid-step-m", "50"], tmp_path)
    assert got == 100 + 50 + 70


def test_columnar_files_count_at_three_times_their_size(tmp_path):
    _file(tmp_path / "pages" / "part-00000-1.snappy.parquet", 40)
    _file(tmp_path / "pages" / "part-00001-1.snappy.parquet", 20)
    _file(tmp_path / "pages" / "_SUCCESS", 0)
    _file(tmp_path / "table.orc", 5)
    assert input_bytes(["--pages", "pages"], tmp_path) == 3 * 60
    assert input_bytes(["--input", "table.orc"], tmp_path) == 15


def test_outputs_and_caches_are_not_inputs(tmp_path):
    _file(tmp_path / "out" / "big.parquet", 10_000)
    _file(tmp_path / "onnx" / "model.onnx", 10_000)
    assert input_bytes(["--output", "out", "--onnx-dir=onnx"], tmp_path) == 0
    assert input_bytes([], tmp_path) == 0  # the job's bundled defaults


def test_a_mapping_counts_the_files_it_names(tmp_path, monkeypatch):
    _file(tmp_path / "data" / "orders.csv", 400)
    _file(tmp_path / "data" / "parts" / "items-1.csv", 50)
    _file(tmp_path / "data" / "parts" / "items-2.csv", 50)
    _file(tmp_path / "elsewhere" / "sellers.csv", 5)
    monkeypatch.setenv("SHOP_DATA", str(tmp_path / "elsewhere"))
    mapping = tmp_path / "maps" / "shop.yaml"
    mapping.parent.mkdir()
    mapping.write_text(
        "sources:\n"
        "  orders: {format: csv, path: ../data/orders.csv}\n"
        "  items: {format: csv, path: \"../data/parts/items-*.csv\"}\n"
        "  sellers: {format: csv, path: \"${SHOP_DATA}/sellers.csv\"}\n"
        "  again: {format: csv, path: ../data/orders.csv}\n"
        "activities:\n  - {name: Place order, source: orders, case: id, timestamp: ts}\n")
    size = mapping.stat().st_size
    assert input_bytes(["--mapping", str(mapping)], tmp_path) == size + 400 + 100 + 5


def test_uris_databases_and_url_lists_are_unknown(tmp_path):
    mapping = _file(tmp_path / "m.yaml", 0)
    mapping.write_text("sources:\n  orders: {format: jdbc, url: \"jdbc:postgresql://db/shop\"}\n")
    assert input_bytes(["--mapping", str(mapping)], tmp_path) is None
    assert input_bytes(["--log", "s3a://bucket/log.xes"], tmp_path) is None
    _file(tmp_path / "urls.txt", 10)
    assert input_bytes(["--urls", "urls.txt"], tmp_path) is None
    assert input_bytes(["--urls=urls.txt"], tmp_path) is None
    # a local file URI is a path
    _file(tmp_path / "a.csv", 9)
    assert input_bytes([f"--crimes=file://{tmp_path / 'a.csv'}"], tmp_path) == 9


def test_an_input_that_cannot_be_read_is_unknown_not_an_error(tmp_path, monkeypatch):
    import sparkfield.deploy.input_size as size

    _file(tmp_path / "a.csv", 9)

    def refused(path: Path) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(size, "path_bytes", refused)
    assert input_bytes(["--crimes", "a.csv"], tmp_path) is None
