"""The library's jar: built from the Java sources in the repository, installed with the
package, and found as a file where the library is imported from the zip spark-submit ships."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sparkfield.core.java_functions import DIGEST_KEY, JAR, source_digest
from sparkfield.deploy.package import build_zip
from tests.conftest import ROOT


def _manifest(jar) -> dict[str, str]:
    with zipfile.ZipFile(jar) as z:
        text = z.read("META-INF/MANIFEST.MF").decode()
    lines: list[str] = []
    for line in text.splitlines():  # a line starting with a space continues the one before
        if line.startswith(" ") and lines:
            lines[-1] += line[1:]
        elif line:
            lines.append(line)
    return dict(line.split(": ", 1) for line in lines)


def test_the_jar_is_built_from_the_sources_in_the_repository():
    assert JAR.is_file(), "run `make jar`"
    assert _manifest(JAR)[DIGEST_KEY] == source_digest(), "the Java sources changed: `make jar`"
    with zipfile.ZipFile(JAR) as z:
        assert "sparkfield/xes/TraceEvents.class" in z.namelist()


def test_the_jar_is_a_file_where_the_library_is_imported_from_its_zip(tmp_path):
    zipped = build_zip(tmp_path / "sparkfield.zip")
    code = ("import sparkfield.core.java_functions as j; "
            "print(j.__file__); print(j.jar_file())")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(zipped), "TMPDIR": str(tmp_path)}, check=True)
    where, copy = res.stdout.split()
    assert where.startswith(str(zipped))
    assert copy.startswith(str(tmp_path)) and copy.endswith(".jar")
    assert Path(copy).read_bytes() == JAR.read_bytes()


@pytest.mark.slow
def test_make_jar_builds_the_jar_from_the_sources(tmp_path):
    """`make jar` as the docs give it, in a copy of the checkout: a jar of the same classes,
    its manifest naming the sources' digest."""
    for name in ("Makefile", "pyproject.toml", "scripts/build_jar.sh"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "libs" / "jvm", tmp_path / "libs" / "jvm")
    shutil.copytree(ROOT / "libs" / "sparkfield", tmp_path / "libs" / "sparkfield",
                    ignore=shutil.ignore_patterns("__pycache__", "resources"))
    # a venv make takes as made (its stamp newer than pyproject.toml), whose python is this
    # one: make builds the jar only and never installs into this venv
    os.utime(tmp_path / "pyproject.toml", (0, 0))
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (venv_bin / "python").chmod(0o755)
    (tmp_path / ".venv" / ".installed").touch()
    res = subprocess.run(["make", "jar"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    built = tmp_path / "libs" / "sparkfield" / "resources" / "jvm" / JAR.name
    assert _manifest(built)[DIGEST_KEY] == _manifest(JAR)[DIGEST_KEY]
    with zipfile.ZipFile(built) as new, zipfile.ZipFile(JAR) as kept:
        assert sorted(new.namelist()) == sorted(kept.namelist())
