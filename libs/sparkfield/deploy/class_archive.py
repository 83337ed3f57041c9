"""A class archive for the driver JVM that ``submit.sh`` starts (Java's dynamic CDS).

Before it runs a line of a job, the driver JVM loads and verifies some ten thousand classes of
Spark's jars, which takes seconds, every run. The first run of ``submit.sh`` on a Spark and Java
install writes the classes it loaded to an archive as the JVM exits
(``-XX:ArchiveClassesAtExit``); later runs map that archive (``-XX:SharedArchiveFile``) and
start a few seconds sooner. The archive is a cache: ``build/jvm/<fingerprint>.jsa``, keyed by
the Java binary and Spark's jars, written under a temporary name and renamed by ``submit.sh``
once the run succeeded. A JVM that finds the archive does not match its class path ignores it
(``-Xshare:auto``, Java's default), so a stale archive costs nothing but the gain.

Java refuses to write an archive while a non-empty directory is on the class path, and stops
with an error. Spark's launcher puts ``SPARK_CONF_DIR`` (else ``$SPARK_HOME/conf``),
``HADOOP_CONF_DIR``, ``YARN_CONF_DIR``, ``SPARK_DIST_CLASSPATH`` and the driver's extra class
path there, so no archive is used or written when any of them may hold one: the run goes on
as before. ``SPARKFIELD_CLASS_ARCHIVE=0`` turns the archive off.

``python -m sparkfield.deploy.class_archive --spark-home H --dir D --tag T`` prints the driver
JVM's options (one line, empty when there are none); with a write due it also says so on
stderr, and the archive appears as ``D/<fingerprint>.jsa.T.partial``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")  # Java's notes on classes it leaves out
CLASS_PATH_ENV = ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH", "SPARK_CLASSPATH")


def java_binary(env: Mapping[str, str]) -> Path | None:
    """The ``java`` that Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = env.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java",
                                                                       path=env.get("PATH"))
    return Path(found).resolve() if found and Path(found).is_file() else None


def _empty_or_missing(path: str) -> bool:
    p = Path(path)
    return not p.exists() or (p.is_dir() and not any(p.iterdir()))


def why_not(spark_home: str, env: Mapping[str, str], class_path_given: bool) -> str | None:
    """Why no archive can be used or written here; None when one can."""
    if env.get("SPARKFIELD_CLASS_ARCHIVE", "1") == "0":
        return "SPARKFIELD_CLASS_ARCHIVE=0"
    if class_path_given:
        return "a driver class path is given"
    conf_dir = env.get("SPARK_CONF_DIR") or str(Path(spark_home) / "conf")
    if not _empty_or_missing(conf_dir):
        return f"the Spark conf directory {conf_dir} is on the class path and not empty"
    for name in CLASS_PATH_ENV:
        if env.get(name):
            return f"{name} is set"
    if java_binary(env) is None:
        return "no java found"
    return None


def fingerprint(spark_home: str, env: Mapping[str, str]) -> str:
    """Changes when the JVM, Spark's jars or the class path's conf directory change."""
    h = hashlib.sha256()
    java = java_binary(env)
    assert java is not None
    h.update(str(java).encode())
    for lib in sorted(java.parent.parent.glob("lib/server/libjvm.*")):
        st = lib.stat()
        h.update(f"{lib}:{st.st_size}:{st.st_mtime_ns}".encode())
    jars = Path(spark_home) / "jars"
    h.update(str(jars.resolve()).encode())
    for jar in sorted(jars.glob("*.jar")):
        st = jar.stat()
        h.update(f"{jar.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    h.update((env.get("SPARK_CONF_DIR") or "").encode())
    return h.hexdigest()[:16]


def options(spark_home: str, folder: Path, tag: str, env: Mapping[str, str],
            class_path_given: bool = False) -> tuple[list[str], Path | None]:
    """(JVM options, the partial archive this run writes or None)."""
    if why_not(spark_home, env, class_path_given):
        return [], None
    archive = folder / f"{fingerprint(spark_home, env)}.jsa"
    if archive.is_file() and archive.stat().st_size:
        return [f"-XX:SharedArchiveFile={archive}", *QUIET], None
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.jsa"):  # another install's archive: replaced by this one
        old.unlink(missing_ok=True)
    partial = folder / f"{archive.name}.{tag}.partial"
    return [f"-XX:ArchiveClassesAtExit={partial}", *QUIET], partial


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spark-home", required=True)
    p.add_argument("--dir", required=True, type=Path)
    p.add_argument("--tag", required=True, help="names this run's partial archive")
    p.add_argument("--class-path-given", action="store_true")
    a = p.parse_args(argv)
    opts, partial = options(a.spark_home, a.dir, a.tag, os.environ, a.class_path_given)
    if partial is not None:
        print(f"sparkfield: the driver JVM writes its class archive ({partial.parent}) as it "
              "exits, once per Spark and Java install; later runs start sooner",
              file=sys.stderr)
    print(" ".join(opts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
