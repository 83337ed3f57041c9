import io
import json
from pathlib import Path

import pandas as pd
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from sparkfield.core.io import CORRUPT_COL, AtomicOutput, read_csv_strings, rejects_of


def test_atomic_output_replaces_only_on_success(spark, tmp_path):
    final = str(tmp_path / "out")
    report = '{"job": "t"}'  # an earlier output is recognised by its run report
    with AtomicOutput(spark, final) as out:
        out.write_text("a.txt", "first")
        out.write_text("run_report.json", report)
    assert (tmp_path / "out" / "a.txt").read_text() == "first"
    with pytest.raises(RuntimeError), AtomicOutput(spark, final) as out:
        out.write_text("a.txt", "second")
        out.write_parquet("rows", spark.range(10))
        raise RuntimeError("job failed half way")
    assert (tmp_path / "out" / "a.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # staging removed
    assert (tmp_path / "out" / "_SUCCESS").exists()  # the previous output is whole still
    with AtomicOutput(spark, final) as out:
        out.write_text("b.txt", "third")
        out.write_text("run_report.json", report)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "_SUCCESS", "b.txt", "run_report.json"]


def test_a_run_that_publishes_while_another_does_fails_and_leaves_the_other_whole(
        spark, tmp_path, monkeypatch):
    """Hadoop renames a folder onto an existing one by moving it inside: the other run's
    output, published between this commit's two renames, must not get this one nested in it."""
    import sparkfield.core.io as io_module

    final = tmp_path / "out"
    real = io_module.hadoop_fs

    class Racing:
        """The file system, with another run publishing as the old output is moved aside."""

        def __init__(self, fs):
            self.fs = fs

        def __getattr__(self, name):
            return getattr(self.fs, name)

        def rename(self, src, dst):
            moved = self.fs.rename(src, dst)
            if str(src.toUri().getPath()) == str(final) and ".__old-" in str(dst):
                final.mkdir()
                (final / "run_report.json").write_text('{"job": "other"}')
            return moved

    with AtomicOutput(spark, str(final)) as out:
        out.write_text("run_report.json", '{"job": "t"}')
    monkeypatch.setattr(io_module, "hadoop_fs", lambda s, p: (Racing(real(s, p)[0]),
                                                                real(s, p)[1]))
    out = AtomicOutput(spark, str(final))
    out.write_text("run_report.json", '{"job": "t", "n": 2}')
    with pytest.raises(OSError, match="another run published"):
        out.commit()
    assert sorted(p.name for p in final.iterdir()) == ["run_report.json"]
    assert json.loads((final / "run_report.json").read_text()) == {"job": "other"}
    left = [p.name for p in tmp_path.iterdir() if p.name != "out"]
    assert left == [out.staging.rsplit("/", 1)[1]]  # the old output moved aside is gone
    assert json.loads((tmp_path / left[0] / "run_report.json").read_text())["n"] == 2


def test_outputs_have_no_checksum_files_and_later_writes_of_the_session_do(spark, tmp_path):
    def crcs(folder):
        return sorted(p.name for p in folder.rglob("*.crc"))

    with AtomicOutput(spark, str(tmp_path / "out")) as out:
        out.write_parquet("rows", spark.range(10))
    assert crcs(tmp_path / "out") == []
    with pytest.raises(RuntimeError), AtomicOutput(spark, str(tmp_path / "failed")):
        raise RuntimeError("job failed")
    spark.range(3).write.parquet(str(tmp_path / "user"))  # a write of the user's own
    assert crcs(tmp_path / "user") and all(n.startswith(".part-") or n == "._SUCCESS.crc"
                                           for n in crcs(tmp_path / "user"))


def test_csv_rows_that_do_not_parse_are_kept_as_corrupt(spark, tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("a,b\n1,2\n3,4,5\n,\n6\n")
    df = read_csv_strings(spark, str(path))
    rows = [r.asDict() for r in df.collect()]
    assert len(rows) == 4
    assert rows[0] == {"a": "1", "b": "2", CORRUPT_COL: None}
    assert rows[1][CORRUPT_COL] == "3,4,5"
    assert rows[2] == {"a": None, "b": None, CORRUPT_COL: None}
    assert rows[3][CORRUPT_COL] == "6"
    rej = rejects_of(df.withColumn("reject_reason", F.when(F.col(CORRUPT_COL).isNotNull(),
                                                             "malformed row")), "t")
    expected = spark.createDataFrame(
        [("t", "malformed row", "3,4,5"), ("t", "malformed row", "6")],
        "source string, reason string, record string",
    )
    assert_df_equality(rej, expected, ignore_row_order=True, ignore_nullable=True)
    assert json.loads(rejects_of(
        df.withColumn("reject_reason", F.lit("x")), "t").first()["record"]) == {"a": "1", "b": "2"}


def test_csv_rows_with_bytes_that_are_not_utf8_are_malformed_unless_the_encoding_is_given(
        spark, tmp_path):
    # two Latin-1 ids that read alike as UTF-8 (both "caf\ufffd") must not merge
    path = tmp_path / "latin1.csv"
    path.write_bytes("id,city\ncaf\u00e9,K\u00f6ln\ncaf\u00e8,Paris\nok,Lyon\n".encode("latin-1"))
    rows = read_csv_strings(spark, str(path)).orderBy("city").collect()
    assert [r[CORRUPT_COL] is None for r in rows] == [False, True, False]
    assert rows[0][CORRUPT_COL].startswith("not UTF-8 (bytes read as U+FFFD; give the file's "
                                           "encoding: ")
    assert json.loads(rows[0][CORRUPT_COL].partition("): ")[2]) == {"id": "caf\ufffd",
                                                                     "city": "K\ufffdln"}
    for spelling in ({"encoding": "ISO-8859-1"}, {"Charset": "iso-8859-1"}):
        rows = read_csv_strings(spark, str(path), **spelling).orderBy("city").collect()
        assert [(r["id"], r[CORRUPT_COL]) for r in rows] == [
            ("caf\u00e9", None), ("ok", None), ("caf\u00e8", None)]
    assert read_csv_strings(spark, str(path), encoding="UTF-8").where(
        F.col(CORRUPT_COL).isNotNull()).count() == 2


def _spark_single_csv(df, folder) -> bytes:
    """Oracle: the file Spark writes from one partition (the rows in the same order, the
    values' white space kept as the writer keeps it)."""
    df.coalesce(1).write.option("header", "true").option("escape", '"').option(
        "ignoreLeadingWhiteSpace", "false").option("ignoreTrailingWhiteSpace", "false").csv(
        str(folder))
    (part,) = folder.glob("part-*")
    return part.read_bytes()


@pytest.mark.parametrize("partitions", [1, 7, 23])
def test_a_single_csv_from_parts_written_side_by_side_is_sparks_own_file(spark, tmp_path,
                                                                          partitions):
    names = ["case id", 'say "hi"', "a,b", "n"]
    rows = [(f"c{i:03d}", None if i % 5 == 0 else f'v "{i}",\nnext', f" x{i} " if i % 2
             else "", None if i % 7 == 0 else i) for i in range(60)]
    df = spark.createDataFrame(rows, ", ".join(f"`{n}` {t}" for n, t in zip(
        names, ["string", "string", "string", "int"], strict=True)))
    ordered = df.repartitionByRange(partitions, "case id").sortWithinPartitions("case id")
    # some partitions empty: fewer rows than partitions in a range
    with AtomicOutput(spark, str(tmp_path / "out")) as out:
        out.write_single_csv("t.csv", ordered)
        out.write_single_csv("empty.csv", ordered.limit(0))
    got = (tmp_path / "out" / "t.csv").read_bytes()
    assert got == _spark_single_csv(ordered, tmp_path / "oracle")
    assert got.startswith(b'case id,"say ""hi""","a,b",n\n')
    # every value as it was, leading and trailing white space included (Spark's writer trims
    # both unless told not to)
    back = pd.read_csv(io.BytesIO(got), dtype=str, keep_default_na=False)
    assert back["a,b"].tolist() == [r[2] for r in rows]
    assert back["a,b"][1] == " x1 "
    assert (tmp_path / "out" / "empty.csv").read_bytes() == b'case id,"say ""hi""","a,b",n\n'
    assert not list((tmp_path / "out").glob("*.__parts"))


def test_parts_join_in_partition_order_past_five_digits():
    from sparkfield.core.parts import _part_number
    names = ["part-100000-x-c000.csv", "part-99999-x-c000.csv", "part-00002-x-c000.csv"]
    got = sorted(((n, 1) for n in names), key=_part_number)
    assert [n for n, _ in got] == [names[2], names[1], names[0]]


def test_task_files_the_driver_cannot_see_are_an_error_not_an_empty_output(spark, tmp_path,
                                                                         monkeypatch):
    """On a cluster, Spark commits a ``file:`` path each executor wrote on its own disk: the
    driver finds no task files and still writes ``_SUCCESS``. Such a write is simulated here:
    the writers stop with a ConfigError and publish nothing."""
    from pyspark.sql import DataFrameWriter

    from sparkfield.core.errors import ConfigError

    def only_success(self, path, *args, **kwargs):
        target = Path(path.removeprefix("file:"))
        target.mkdir(parents=True, exist_ok=True)
        (target / "_SUCCESS").write_text("")

    df = spark.createDataFrame([("a", 1)], "k string, n int")
    for writer, write in (("parquet", lambda out: out.write_parquet("t", df)),
                          ("csv", lambda out: out.write_single_csv("t.csv", df))):
        with monkeypatch.context() as m:
            m.setattr(DataFrameWriter, writer, only_success)
            final = tmp_path / f"out_{writer}"
            with pytest.raises(ConfigError, match="as the driver sees it"), \
                    AtomicOutput(spark, str(final)) as out:
                write(out)
            assert not final.exists()
            assert not list(tmp_path.glob(f".out_{writer}.__staging-*"))


def test_a_folders_file_with_its_columns_in_another_order_is_an_error_not_a_remap(spark,
                                                                                  tmp_path):
    """Spark maps every file of a folder by position under the first file's header: a file
    whose columns come in another order would have its values read under the wrong names."""
    from sparkfield.core.errors import InputError
    from sparkfield.core.failures import raises_input_errors

    same, moved = tmp_path / "same", tmp_path / "moved"
    for folder in (same, moved):
        folder.mkdir()  # the larger file first: Spark reads a folder's largest files first
        (folder / "a.csv").write_text("case,act,ts\nc1,x,2024-01-01\nc3,z,2024-01-03\n")
    (same / "b.csv").write_text("case,act,ts\nc2,y,2024-01-02\n")
    (moved / "b.csv").write_text("ts,case,act\n2024-01-02,c2,y\n")
    rows = read_csv_strings(spark, str(same)).drop(CORRUPT_COL).collect()
    assert sorted(tuple(r) for r in rows) == [("c1", "x", "2024-01-01"), ("c2", "y", "2024-01-02"),
                                              ("c3", "z", "2024-01-03")]
    with pytest.raises(InputError, match=r"b\.csv: its header is not the first file's"):
        raises_input_errors(lambda: read_csv_strings(spark, str(moved)).collect())()
    # a header with a repeated name (renamed by Spark) is left unchecked, not refused
    dup = tmp_path / "dup"
    dup.mkdir()
    for name in ("a.csv", "b.csv"):
        (dup / name).write_text("k,k\n1,2\n")
    assert read_csv_strings(spark, str(dup)).drop(CORRUPT_COL).count() == 2
