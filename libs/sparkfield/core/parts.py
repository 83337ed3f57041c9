"""Spark's ``part-*`` files joined into one file, in partition order, by the JVM: how a
table or log written by all executors side by side becomes the single file a user opens."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession

from sparkfield.core.errors import ConfigError
from sparkfield.core.filesystem import hadoop_fs

# Spark's CSV writer options for the parts: no header (one is written before them), quotes
# doubled, and every value's leading and trailing white space kept (Spark's writer trims both
# by default, which changed ids and names such as " Approve" without a word; Spark's reader,
# pandas and Python's csv all keep them)
CSV_PART_OPTIONS = {"header": "false", "escape": '"', "ignoreLeadingWhiteSpace": "false",
                    "ignoreTrailingWhiteSpace": "false"}


def append_parts(spark: SparkSession, parts_dir: str, out: Any, skip: int = 0) -> None:
    """Spark's ``part-*`` files under ``parts_dir``, in order, copied onto the open Hadoop
    output stream ``out`` by the JVM (the bytes never pass through Python), less the first
    ``skip`` bytes of the first file that has any; the folder is then deleted."""
    jvm = spark.sparkContext._jvm
    fs, jparts = hadoop_fs(spark, parts_dir)
    parts = sorted(written_parts(spark, parts_dir), key=_part_number)
    for name, size in parts:
        if not size:
            continue
        stream = fs.open(jvm.org.apache.hadoop.fs.Path(f"{parts_dir}/{name}"))
        try:
            if skip:
                jvm.org.apache.hadoop.io.IOUtils.skipFully(stream, skip)
                skip = 0
            jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, out, 1 << 20, False)
        finally:
            stream.close()
    fs.delete(jparts, True)


def written_parts(spark: SparkSession, folder: str) -> list[tuple[str, int]]:
    """(name, size) of the ``part-*`` files Spark's writer left in ``folder``, which holds at
    least one (the first task writes its file even when every partition is empty). None there
    means the executors wrote on disks the driver does not see, which Spark's commit of a
    ``file:`` path on a cluster lets pass: that is a ConfigError, not an empty result."""
    fs, jfolder = hadoop_fs(spark, folder)
    found = [(s.getPath().getName(), s.getLen()) for s in fs.listStatus(jfolder)
             if s.getPath().getName().startswith("part-")]
    if not found:
        raise ConfigError(
            f"the files the executors wrote are not in {folder} as the driver sees it: the "
            "output must be on storage every node shares (hdfs://, s3a://, a shared mount), "
            "not a disk of the driver's own")
    return found


def _part_number(part: tuple[str, int]) -> tuple[int, str]:
    """A part file's partition (``part-00012-...``): past 99,999 partitions the names no
    longer sort in their order."""
    number = part[0][len("part-"):].split("-", 1)[0].split(".", 1)[0]
    return (int(number) if number.isdigit() else -1), part[0]


def csv_header_line(columns: Sequence[str]) -> str:
    """The header line Spark's CSV writer gives ``columns`` (quoted where a name needs it)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(columns)
    return buf.getvalue()
