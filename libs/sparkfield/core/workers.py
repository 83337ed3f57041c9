"""What every function run by Spark's Python workers shares.

Before each task a Python worker calls ``importlib.invalidate_caches()`` (so that files added
with ``addPyFile`` become importable). On Python 3.11 that makes every zip importer on
``sys.path`` read its archive's whole directory again, and Spark puts ``pyspark.zip``, the py4j
zip and the spark-core jar (thousands of entries) there: about 50-100 ms of every Python task,
whatever the task does. The archives do not change while a worker lives, so
:func:`in_worker` keeps their directories, and a task costs what its work costs.
"""

from __future__ import annotations

import functools
import sys
import zipimport
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T", bound=Callable)


class _ArchiveImporter(zipimport.zipimporter):
    """A zip importer whose directory is read once: the archive is not rewritten in place."""

    def invalidate_caches(self) -> None:
        pass


def keep_archive_directories() -> int:
    """Make the zip importers of this process keep their directories; how many were changed.
    Directories on ``sys.path`` are untouched: new files there are still found."""
    changed = 0
    for finder in list(sys.path_importer_cache.values()):
        if type(finder) is zipimport.zipimporter:
            finder.__class__ = _ArchiveImporter
            changed += 1
    return changed


def in_worker(fn: T) -> T:
    """``fn`` (a ``mapInPandas`` / ``mapInArrow`` function) with the worker prepared first."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        keep_archive_directories()
        return fn(*args, **kwargs)

    return run  # type: ignore[return-value]
