"""Paths as Hadoop resolves them (a path without a scheme is taken against ``fs.defaultFS``),
and the names the library gives the folders it keeps beside an output."""

from __future__ import annotations

import os
from pathlib import Path


def resolve_path(path: str, spark=None) -> tuple[str, str]:
    """(scheme, path) as Hadoop resolves ``path``: a path without a scheme is taken against
    ``fs.defaultFS`` (``hdfs:`` on a YARN cluster whose core-site.xml says so), not assumed
    local. For ``file`` the second item is the local path, else the qualified URI.

    Uses ``spark``'s Hadoop configuration when given; else, under spark-submit, the running
    JVM with the submitted settings (no SparkContext is started); else (plain Python, no JVM)
    ``fs.defaultFS`` from $HADOOP_CONF_DIR/core-site.xml, else local."""
    jvm = hconf = None
    if spark is not None:
        jvm = spark.sparkContext._jvm
        hconf = spark.sparkContext._jsc.hadoopConfiguration()
    elif "PYSPARK_GATEWAY_PORT" in os.environ:
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        jvm = SparkContext._jvm
        hconf = jvm.org.apache.spark.deploy.SparkHadoopUtil.get().newConfiguration(
            SparkConf()._jconf)
    if jvm is not None:
        jpath = jvm.org.apache.hadoop.fs.Path(path)
        fs = jpath.getFileSystem(hconf)
        uri = fs.makeQualified(jpath).toUri()
        scheme = str(uri.getScheme() or "file")
        return scheme, str(uri.getPath()) if scheme == "file" else str(uri.toString())
    if "://" in path or (path.startswith("file:") and not path.startswith("file:/")):
        scheme = path.split(":", 1)[0]
    elif path.startswith("file:"):
        scheme = "file"
    else:
        scheme = _default_fs_scheme()
    if scheme == "file":
        local = path.removeprefix("file://") if path.startswith("file://") \
            else path.removeprefix("file:")
        return scheme, os.path.abspath(local)
    return scheme, path


def _default_fs_scheme() -> str:
    import re

    conf_dir = os.environ.get("HADOOP_CONF_DIR")
    if conf_dir:
        try:
            text = (Path(conf_dir) / "core-site.xml").read_text()
        except OSError:
            text = ""
        m = re.search(r"<name>\s*fs\.defaultFS\s*</name>\s*<value>\s*([A-Za-z][\w+.-]*):",
                      text)
        if m:
            return m.group(1).lower()
    return "file"


def is_local(path: str, spark=None) -> bool:
    """Whether Hadoop resolves ``path`` to the local filesystem (see ``resolve_path``)."""
    return resolve_path(path, spark)[0] == "file"


def local_path(path: str, spark=None) -> str:
    """The local filesystem path of ``path`` (which must be local: see ``is_local``)."""
    scheme, resolved = resolve_path(path, spark)
    if scheme != "file":
        raise ValueError(f"{path} is not on the local filesystem ({scheme}:)")
    return resolved


def hidden_sibling(path: str, suffix: str) -> str:
    """``<parent>/.<name><suffix>`` for ``path``: a folder beside it that Spark's partition
    discovery and readers' globs (``OUT/run_date=*/events``) pass over, as they pass over every
    name that starts with a dot."""
    head, sep, name = path.rstrip("/").rpartition("/")
    return f"{head}{sep}.{name}{suffix}"


def driver_private_path(path: str, spark) -> str | None:
    """The driver's local path of ``path`` when the session's master is not local and Hadoop
    resolves ``path`` under the driver's temp directory (a disk of its own, which the
    executors cannot share), else None. Other local paths may be shared mounts."""
    import tempfile

    master = spark.sparkContext.master
    if master.startswith("local"):
        return None
    scheme, where = resolve_path(path, spark)
    tmp = tempfile.gettempdir().rstrip("/") + "/"
    return where if scheme == "file" and (where.rstrip("/") + "/").startswith(tmp) else None



CHECKPOINTS_SUFFIX = ".checkpoints"


def own_checkpoints_name(output_name: str) -> str:
    """The folder beside an output that holds its runs' checkpoints (hidden from Spark's
    partition discovery by the leading dot)."""
    return f".{output_name}{CHECKPOINTS_SUFFIX}"
