"""Turning failures that are really bad input into one clear line, and making sure that line
reaches stderr: an unreachable master, a source Spark could not read, and spark-submit's
habit of sending the driver's stderr to stdout."""

from __future__ import annotations

import functools
import importlib
import os
import re
import socket
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from sparkfield.core.conf import Config
from sparkfield.core.io import InputError

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


def executor_input_error(exc: BaseException) -> InputError | None:
    """The :class:`InputError` that code running in an executor raised (a reader that parses
    there), rebuilt on the driver, or None."""
    for module, name, message in _RAISED.findall(str(exc)):
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if isinstance(cls, type) and issubclass(cls, InputError):
            return cls(message.strip())
    return None


Fn = TypeVar("Fn", bound=Callable[..., Any])


def raises_input_errors(fn: Fn) -> Fn:
    """``fn`` raising :class:`InputError` for bad input found by the executors too: their
    own input errors come back as themselves, a source Spark could not read as one line."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError:
            raise
        except Exception as exc:
            rebuilt = executor_input_error(exc)
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
    rebuilt = executor_input_error(exc)
    if rebuilt is not None:
        return str(rebuilt)
    return _read_failure(exc)


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
    last = chain[-1].split(": ", 1)[-1] if chain else ""
    detail = f" ({last.strip()})" if last and last != "None" and len(last) < 200 else ""
    return f"cannot read {path}: {why}{detail}"


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
