"""Folders the driver has and the executors need (a model), shipped with the application.

Off a local master the executors may run on machines that cannot see the driver's files.
``ship_dir`` zips a driver-local folder once (cached by content hash in the driver's temp
directory) and adds it to the application as an archive: Spark fetches it to every executor
and unpacks it there. On an executor ``shipped_dir`` maps the driver's path to that copy.
Paths every node already reaches (hdfs://, s3a://, ...) are left alone.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession


def alias_of(path: str | os.PathLike[str], version: str | None = None) -> str:
    """The archive name of a driver folder: derived from its path and the ``version`` of its
    contents the driver names, so an executor finds it, and a folder changed in place within
    one application is shipped again under a new name (Spark refuses a second archive of one
    name)."""
    key = str(path) if version is None else f"{path}\0{version}"
    return "sparkfield-dir-" + hashlib.sha1(key.encode()).hexdigest()[:16] + ".zip"


def content_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(folder)).encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def zip_dir(folder: Path, name: str) -> Path:
    """``folder`` as a zip named ``name`` (stored, not compressed: weights do not compress),
    built once per content and written atomically."""
    folder = folder.resolve()
    target = Path(tempfile.gettempdir()) / "sparkfield-ship" / content_hash(folder) / name
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            z.write(f, f.relative_to(folder))
    os.replace(tmp, target)
    return target


def ship_dir(spark: SparkSession, folder: str | os.PathLike[str],
             version: str | None = None) -> bool:
    """Ship a driver-local ``folder`` (its contents' ``version``, see :func:`alias_of`) to the
    executors when the master is not local. Returns whether it was shipped (executors then
    read it through ``shipped_dir`` with the same version)."""
    sc = spark.sparkContext
    if sc.master.startswith("local") or "://" in str(folder):
        return False
    archive = zip_dir(Path(folder), alias_of(folder, version))
    if str(archive) not in {str(a).split("#")[0].removeprefix("file:")
                            for a in sc.listArchives}:
        sc.addArchive(str(archive))
    return True


def shipped_dir(folder: str | os.PathLike[str], version: str | None = None) -> Path:
    """On an executor: the unpacked copy of a folder shipped by ``ship_dir`` when there is one,
    else ``folder`` itself (local mode, or a path every node sees)."""
    path = Path(folder)
    name = alias_of(folder, version)
    candidates = [Path.cwd() / name]
    try:
        from pyspark import SparkFiles

        candidates.insert(0, Path(SparkFiles.get(name)))
    except Exception:  # no SparkFiles root outside a Spark worker
        pass
    for cand in candidates:
        if cand.is_dir():
            return cand
    return path
