"""The files of a folder of saved pages (or of web archives), listed once on the driver.

A local folder is walked here (:func:`walk_local`) rather than by Hadoop's, Spark's or
pyarrow's recursive listing, which follow a directory link back up the tree for ever
(``a/up -> ..``): a directory link is followed only to a folder not listed yet, and past
``MAX_FILES`` files the listing stops with one error. Other file systems (HDFS, object stores)
are listed by Hadoop, with the same limit.

What is hidden follows Spark's file sources: names starting with ``.`` and everything in a
folder starting with ``.`` or ``_``; a ``_name`` file in a listed folder is a page to us.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from sparkfield.core.errors import InputError
from sparkfield.core.io import hadoop_fs

MAX_FILES = 1_000_000  # files of every kind, hidden ones included


@dataclass
class Listing:
    files: dict[str, int] = field(default_factory=dict)  # qualified path -> bytes
    unreadable: dict[str, str] = field(default_factory=dict)  # qualified path -> why
    hidden: int = 0
    links: int = 0  # directory links followed
    revisits: int = 0  # directory links to a folder listed already: not followed

    @property
    def plain(self) -> bool:
        """Whether Spark's own listing of the folder finds the same files (no directory link,
        nothing unreadable)."""
        return not self.links and not self.revisits and not self.unreadable


def list_files(spark: SparkSession, path: str, max_files: int | None = None) -> Listing:
    """Every file under ``path`` (``MAX_FILES`` at most, else InputError)."""
    limit = MAX_FILES if max_files is None else max_files
    fs, root = hadoop_fs(spark, path)
    base = fs.makeQualified(root)
    uri = base.toString().rstrip("/")
    if fs.getScheme() == "file":
        return walk_local(base.toUri().getPath(), uri, path, limit)
    return _walk_hadoop(fs, root, uri, path, limit)


def _too_many(path: str, limit: int, what: str = "HTML directory") -> InputError:
    return InputError(f"more than {limit:,} files under the {what} {path}: give a "
                      "folder with fewer files (or split it and run once per part)")


def walk_local(root: str, uri: str, path: str, limit: int = MAX_FILES,
               what: str = "HTML directory") -> Listing:
    """Every file under the local folder ``root`` (or ``root`` itself, a file), named
    ``uri`` + its path below ``root``; each folder is listed once, however many links lead
    to it. ``path`` and ``what`` name the input in the error past ``limit`` files."""
    out = Listing()
    if not os.path.isdir(root):
        out.files[uri] = os.path.getsize(root)
        return out
    st = os.stat(root)
    seen = {(st.st_dev, st.st_ino)}
    todo: list[tuple[str, str, bool]] = [(root, uri, False)]  # folder, its URI, hidden
    n = 0
    while todo:
        folder, folder_uri, hidden = todo.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            out.unreadable[folder_uri] = f"unreadable folder: {exc.strerror or exc}"
            continue
        for e in entries:
            child = f"{folder_uri}/{e.name}"
            try:
                is_dir, is_file = e.is_dir(), e.is_file()  # both follow links
            except OSError:
                is_dir = is_file = False
            if is_dir:
                key = (e.stat().st_dev, e.stat().st_ino)
                if key in seen:  # a link to a folder listed already (a loop, say)
                    out.revisits += 1
                    continue
                seen.add(key)
                out.links += e.is_symlink()
                todo.append((e.path, child, hidden or e.name.startswith(("_", "."))))
                continue
            n += 1
            if n > limit:
                raise _too_many(path, limit, what)
            if hidden or e.name.startswith("."):
                out.hidden += 1
            elif not is_file:
                out.unreadable[child] = "a broken link" if e.is_symlink() \
                    else "not a regular file"
            elif not os.access(e.path, os.R_OK):
                out.unreadable[child] = "permission denied"
            else:
                out.files[child] = e.stat().st_size
    return out


def _walk_hadoop(fs, root, uri: str, path: str, limit: int) -> Listing:
    out = Listing()
    files = fs.listFiles(root, True)
    n = 0
    while files.hasNext():
        status = files.next()
        n += 1
        if n > limit:
            raise _too_many(path, limit)
        full = status.getPath().toString()
        parts = full[len(uri):].lstrip("/").split("/")
        if any(p.startswith(("_", ".")) for p in parts[:-1]) or parts[-1].startswith("."):
            out.hidden += 1
        else:
            out.files[full] = int(status.getLen())
    return out
