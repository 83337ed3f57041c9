"""``python -m sparkfield JOB [flags]`` (or the ``sparkfield`` command of an installed wheel):
run a job in this Python process, with the job's own flags, conf and exit codes.

The jobs are the modules of ``jobs/``, which an installed wheel carries as ``sparkfield.jobs``
(the default conf as ``sparkfield.conf``). ``submit.sh`` runs the same modules through
spark-submit; use it for a cluster."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_REPO_JOBS = Path(__file__).resolve().parents[2] / "jobs"  # a checkout run with PYTHONPATH=libs


def _jobs_dir() -> Path:
    spec = importlib.util.find_spec("sparkfield.jobs")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return _REPO_JOBS


def job_names() -> dict[str, str]:
    """Every job and the first line of its docstring."""
    out = {}
    for path in sorted(_jobs_dir().glob("*.py")):
        if path.stem.startswith("_"):
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        out[path.stem] = doc.splitlines()[0] if doc else ""
    return out


def _job_file(name: str) -> Path:
    return _jobs_dir() / f"{name}.py"


def _job_area(name: str) -> str | None:
    """The library area (``sparkfield.<area>``) the job imports: the name of its extra."""
    for node in ast.walk(ast.parse(_job_file(name).read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sparkfield."):
            area = node.module.split(".")[1]
            if area != "core":
                return area
    return None


def _job_module(name: str) -> ModuleType:
    if importlib.util.find_spec("sparkfield.jobs") is not None:
        return importlib.import_module(f"sparkfield.jobs.{name}")
    path = _REPO_JOBS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"sparkfield_job_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _usage() -> str:
    lines = ["usage: python -m sparkfield JOB [flags]   (JOB --help: the job's flags)", "jobs:"]
    lines += [f"  {name:<18} {doc}" for name, doc in job_names().items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "--list"):
        print(_usage())
        return 0
    name, rest = args[0], args[1:]
    if name not in job_names():
        print(f"error: unknown job {name!r}\n{_usage()}", file=sys.stderr)
        return 2
    try:
        module = _job_module(name)
    except ModuleNotFoundError as exc:  # an extra the job needs is not installed
        from sparkfield.core.cli import missing_extra_error
        from sparkfield.core.failures import missing_module_error

        reason = missing_extra_error(exc, name, _job_area(name)) or missing_module_error(exc)
        print(f"error: {reason}", file=sys.stderr)
        return 2
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main())
