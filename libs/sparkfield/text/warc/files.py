"""The files of a ``--warc`` path, listed once on the driver: a file, a folder read recursively
or a glob, on any filesystem ``pyarrow.fs`` opens from a URI."""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import Any

from sparkfield.core.connect import is_connect
from sparkfield.core.errors import InputError
from sparkfield.core.paths import resolve_path
from sparkfield.text.pages.listing import walk_local

_GLOB = set("*?[")
# what makes a path a URI: a scheme and ://, or file: (a local file or folder of that very
# name aside)
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://|file:", re.IGNORECASE)


@dataclass(frozen=True)
class Listing:
    """The files of a ``--warc`` path: the URI their filesystem is opened from, (path on that
    filesystem, size) of each, the files that cannot be read (path -> why: a broken link, an
    unreadable folder) and the directory links not followed (to a folder listed already)."""

    fs_uri: str
    files: list[tuple[str, int]]
    unreadable: dict[str, str] = field(default_factory=dict)
    revisits: int = 0


def on_default_fs(spark: Any, path: str) -> str:
    """``path`` as Spark's inputs take it: one without a scheme on a cluster whose
    ``fs.defaultFS`` is not local is on that filesystem, and becomes its URI
    (``/data/crawl`` -> ``hdfs://nn:8020/data/crawl``); a URI, or a path where the default is
    local, stays as written."""
    if _URI.match(path):
        return path
    try:
        scheme, where = resolve_path(path, None if is_connect(spark) else spark)
    except Exception:  # a name Hadoop takes for a URI ("crawl:2024"): a local path
        return path
    return path if scheme == "file" else where


def open_filesystem(uri: str) -> tuple[Any, str]:
    """The filesystem of ``uri`` and the path on it; InputError when it cannot be opened."""
    from pyarrow import fs

    try:
        return fs.FileSystem.from_uri(uri)
    except Exception as exc:  # an unknown scheme, a missing driver (libhdfs), bad credentials
        raise InputError(f"WARC input {uri}: cannot open its filesystem ({exc})") from None


def _open(path: str) -> tuple[Any, str, str]:
    """The filesystem of ``path``, the URI the executors open it from again, and ``path`` on
    it. A URI's filesystem is opened from the part before any wildcard (and its query after
    ``?``); anything else is a local path, ``:`` in it or not."""
    from pyarrow import fs

    uri = _URI.match(path)
    if uri is None or os.path.lexists(path):
        return fs.LocalFileSystem(), "/", os.path.abspath(path)
    rest, q, query = path[uri.end():].partition("?")
    parts = rest.split("/")
    k = next((i for i, part in enumerate(parts) if _GLOB & set(part)), len(parts))
    fs_uri = uri.group() + "/".join(parts[:k]) + q + query
    filesystem, base = open_filesystem(fs_uri)
    return filesystem, fs_uri, "/".join([base.rstrip("/"), *parts[k:]]) if k < len(parts) \
        else base


def _glob_base(filesystem: Any, full: str) -> tuple[str, str] | None:
    """The deepest folder of the glob ``full`` that exists as written and the pattern below
    it; None when there is none."""
    from pyarrow import fs

    parts = full.split("/")
    first = next(i for i, part in enumerate(parts) if _GLOB & set(part))
    for i in range(len(parts) - 1, first - 1, -1):
        pattern = "/".join(parts[i:])
        if _GLOB & set(pattern):
            base = "/".join(parts[:i]) or "/"
            if filesystem.get_file_info(base).type == fs.FileType.Directory:
                return base, pattern
    return None


def _hidden(path: str, base: str) -> bool:
    rel = path[len(base):].lstrip("/")
    return any(part.startswith((".", "_")) for part in rel.split("/"))


def list_warc_files(path: str) -> Listing:
    """The files of ``path``: a file, a folder read recursively (names starting with . or _
    left out; each folder once, however many links lead to it) or a glob. A path that exists
    is taken as written; one that does not and holds ``*``, ``?`` or ``[`` is a glob, matched
    below its deepest folder that exists. InputError when there are none or the filesystem
    cannot be opened or listed."""
    filesystem, fs_uri, full = _open(path)
    try:
        listing = _list(filesystem, fs_uri, full, path)
    except OSError as exc:  # a store that cannot be reached, a folder that cannot be read
        raise InputError(f"WARC input {path}: cannot list it ({exc})") from None
    if not listing.files:
        broken = "".join(f" ({f}: {why})" for f, why in list(listing.unreadable.items())[:1])
        raise InputError(f"no WARC files in {path}{broken}")
    return listing


def _list(filesystem: Any, fs_uri: str, full: str, path: str) -> Listing:
    from pyarrow import fs

    info = filesystem.get_file_info(full)
    if info.type == fs.FileType.File:
        return Listing(fs_uri, [(full, info.size)])
    found = (full, None) if info.type == fs.FileType.Directory else \
        _glob_base(filesystem, full) if _GLOB & set(full) else None
    if found is None:
        raise InputError(f"WARC input not found: {path}")
    base, pattern = found
    if filesystem.type_name == "local":  # directory links followed once (no loop)
        walked = walk_local(base, base.rstrip("/"), path, what="WARC input")
        files, unreadable, revisits = walked.files, walked.unreadable, walked.revisits
    else:
        selector = fs.FileSelector(base, recursive=True)
        files = {f.path: f.size for f in filesystem.get_file_info(selector)
                 if f.type == fs.FileType.File}
        unreadable, revisits = {}, 0

    def wanted(f: str) -> bool:
        return not _hidden(f, base) and (
            pattern is None or fnmatch.fnmatchcase(f[len(base):].lstrip("/"), pattern))

    return Listing(fs_uri, sorted((f, s) for f, s in files.items() if wanted(f)),
                   {f: why for f, why in sorted(unreadable.items()) if wanted(f)}, revisits)
