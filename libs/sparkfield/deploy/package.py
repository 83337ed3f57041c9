"""The library as one zip for ``spark-submit --py-files`` (used by ``submit.sh``, ``make package``
and the Airflow DAG's first task).

``python -m sparkfield.deploy.package OUT.zip`` writes the ``sparkfield`` package found beside this
file (sources and resources, no bytecode) atomically: a running submit never sees half a zip.
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path


def build_zip(out: str | os.PathLike[str]) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    package = Path(__file__).resolve().parents[1]
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for base, dirs, files in os.walk(package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.endswith(".egg-info"))
            for f in sorted(files):
                if not f.endswith((".pyc", ".pyo")):
                    path = Path(base) / f
                    z.write(path, path.relative_to(package.parent))
    os.replace(tmp, out)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m sparkfield.deploy.package OUT.zip", file=sys.stderr)
        return 2
    print(build_zip(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
