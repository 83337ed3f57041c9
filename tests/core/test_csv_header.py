"""CSV headers read by Python name the columns as Spark's own reader does (the oracle), and
whatever Python does not read plainly is left to Spark."""

from __future__ import annotations

import pytest

from sparkfield.core.csv_header import column_names, local_header, local_path, safe_names
from sparkfield.core.io import csv_options, read_csv_strings

# header text -> does Python read it (else Spark does)
HEADERS = {
    "a,b,c\n1,2,3\n": True,
    "a,b,c\r\n1,2,3\r\n": True,
    "a,b,c": True,  # the header alone, no line end
    '"order id","x, y","say ""hi"""\n1,2,3\n': True,
    '"multi\nline",b\n1,2\n': True,  # a quoted line break (multiLine, the default)
    "id,ID,name,id\n1,2,3,4\n": True,  # names given twice, ignoring case
    "a,,c,\n1,2,3,4\n": True,  # empty names
    ' lead,trail ,inner space\n1,2,3\n': True,
    "naïve,日本,ü\n1,2,3\n": True,
    "solo\n1\n": True,
    'a,"",c\n1,2,3\n': True,
    "": True,  # an empty file: no columns
    "\ufeffa,b\n1,2\n": False,  # a byte-order mark
    "\na,b\n1,2\n": False,  # a blank first line
    'a"b,c\n1,2\n': False,  # a quote inside a bare name
    '"a"b,c\n1,2\n': False,  # text after a closing quote
    "a\rb,c\n1,2\n": False,  # a lone carriage return
}


def _spark_names(spark, path: str, **options: str) -> list[str]:
    return spark.read.options(header="true", inferSchema="false", **csv_options(**options)) \
        .csv(path).columns


@pytest.mark.parametrize("text", list(HEADERS), ids=range(len(HEADERS)))
def test_python_names_the_columns_as_spark_does(spark, tmp_path, text):
    path = tmp_path / "t.csv"
    path.write_bytes(text.encode("utf-8"))
    mine = local_header(str(path), csv_options(), case_sensitive=False)
    assert (mine is not None) == HEADERS[text]
    if mine is not None:
        assert mine == _spark_names(spark, str(path))
        if mine:  # and the whole read: the same columns, and the data rows under them
            df = read_csv_strings(spark, str(path))
            assert df.columns[:-1] == mine


def test_other_separators_files_and_options(spark, tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a;b;b\n1;2;3\n", encoding="utf-8")
    assert local_header(str(path), csv_options(sep=";"), False) == \
        _spark_names(spark, str(path), sep=";") == ["a", "b1", "b2"]
    assert local_header(str(path), csv_options(multiLine="false"), False) == ["a;b;b"]
    assert column_names(spark, f"file://{path}", csv_options()) == ["a;b;b"]
    # the file Spark reads: a URI's, or one on Hadoop's default file system (local here)
    assert local_path(spark, f"file://{path}") == str(path)
    assert local_path(spark, "hdfs://nn:8020/t.csv") is None
    # left to Spark: a folder, a glob, a compressed file, another encoding or option
    (tmp_path / "t.csv.gz").write_bytes(b"")
    for p, opts in ((tmp_path, {}), (tmp_path / "*.csv", {}), (tmp_path / "t.csv.gz", {}),
                    (path, {"encoding": "latin1"}), (path, {"comment": "#"}),
                    (path, {"header": "false"}), (path, {"sep": "ab"})):
        assert local_header(str(p), csv_options(**opts), False) is None, (p, opts)


def test_names_given_twice_follow_the_case_setting():
    assert safe_names(["id", "ID", "x", ""], case_sensitive=False) == ["id0", "ID1", "x", "_c3"]
    assert safe_names(["id", "ID", "x", "x"], case_sensitive=True) == ["id", "ID", "x2", "x3"]
