"""The Hadoop FileSystem behind a path: one API for local disk, HDFS and object stores."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def hadoop_fs(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """(Hadoop FileSystem, Path) for ``path``: one API for local disk, HDFS and object stores."""
    jvm = spark.sparkContext._jvm
    jpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return fs, jpath
