"""The library's Java functions (sources in ``libs/jvm``, built by ``make jar`` into the jar
installed with the package) registered in a session as SQL functions.

The jar is added to the session where it is first needed: ``ADD JAR`` in classic Spark, which
also ships it to every executor of a cluster; ``addArtifacts`` over Spark Connect. Where the
session cannot load the class (the jar left out of an install, a Connect server that refuses
artifacts), :func:`java_function` says so and the caller takes its Python path: the results are
the same, only slower."""

from __future__ import annotations

import hashlib
import logging
import os
import pkgutil
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from sparkfield.core.connect import is_connect

log = logging.getLogger("sparkfield.core")

JAR = Path(__file__).resolve().parents[1] / "resources" / "jvm" / "sparkfield-jvm.jar"
# the Java sources in a checkout (an installed wheel carries the jar only)
SOURCES = Path(__file__).resolve().parents[2] / "jvm"
DIGEST_KEY = "Sparkfield-Source-SHA256"


def java_function(spark: SparkSession, name: str, class_name: str, return_type: str) -> bool:
    """Registers ``class_name`` (a ``UDF1``…``UDF22`` of the jar) as the SQL function ``name``
    returning ``return_type`` (DDL); False where the session cannot load it."""
    if _register(spark, name, class_name, return_type):
        return True
    jar = jar_file()
    if jar is None:
        log.info("%s not installed: %s is read by its Python path", JAR.name, name)
        return False
    try:
        if is_connect(spark):
            spark.addArtifacts(str(jar))
        else:
            spark.sql(f"ADD JAR '{jar}'")
    except Exception as exc:  # a server that refuses artifacts, a path with a quote
        log.info("cannot add %s to the session (%s): %s is read by its Python path", jar,
                 str(exc).strip().splitlines()[0][:200], name)
        return False
    return _register(spark, name, class_name, return_type)


def jar_file() -> Path | None:
    """The jar as a file: the installed one, or where the library is imported from a zip
    (``spark-submit --py-files``) a copy in the temporary folder, named by its digest."""
    if JAR.is_file():
        return JAR
    try:
        data = pkgutil.get_data("sparkfield", f"resources/jvm/{JAR.name}")
    except OSError:
        return None
    if data is None:
        return None
    digest = hashlib.sha256(data).hexdigest()[:16]
    copy = Path(tempfile.gettempdir()) / f"sparkfield-jvm-{digest}.jar"
    if not copy.is_file():
        part = copy.with_name(f"{copy.name}.{os.getpid()}.part")
        part.write_bytes(data)
        os.replace(part, copy)  # whole or absent: another process may copy it at once
    return copy


def _register(spark: SparkSession, name: str, class_name: str, return_type: str) -> bool:
    try:
        spark.udf.registerJavaFunction(name, class_name, return_type)
    except Exception:  # the class is not on the session's class path (yet)
        return False
    return True


def source_digest(root: Path = SOURCES) -> str:
    """SHA-256 over the Java sources' paths and bytes, in path order."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.java"), key=lambda p: p.relative_to(root).as_posix()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()
