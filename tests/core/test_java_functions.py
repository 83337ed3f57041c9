"""The library's jar: built from the Java sources in the repository, installed with the
package, and found as a file where the library is imported from the zip spark-submit ships."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from sparkfield.core.java_functions import DIGEST_KEY, JAR, source_digest
from sparkfield.deploy.package import build_zip


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
