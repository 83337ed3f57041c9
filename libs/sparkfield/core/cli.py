"""What every job's entry point shares: common flags, config loading and exit codes."""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from sparkfield.core.batch import LockHeld, OutputLock, partition_path, recover_output
from sparkfield.core.conf import Config, load_config
from sparkfield.core.errors import ConfigError, InputError, UserError
from sparkfield.core.failures import (
    MODULE_PACKAGES,
    check_master,
    disk_full_error,
    missing_module,
    missing_module_error,
    route_stderr,
    spark_input_error,
)
from sparkfield.core.io import local_output_problem
from sparkfield.core.param_flags import HelpFormatter
from sparkfield.core.params import JobSchema
from sparkfield.core.paths import is_local, local_path
from sparkfield.core.report import session_started
from sparkfield.core.timezones import timezone_problem

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2  # also what the environment refuses: an unreachable master, a full disk
EXIT_REJECTED = 3  # finished, but rejected more input than the job allows
EXIT_LOCKED = 4  # another run of the same job and output is in progress


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class _Once(argparse.Action):
    """Store the value, refusing a second occurrence of the flag (which would silently win)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, f"_seen_{self.dest}", False):
            parser.error(f"{option_string} given more than once")
        setattr(namespace, f"_seen_{self.dest}", True)
        setattr(namespace, self.dest, values)


def _run_date(text: str) -> str:
    try:
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected YYYY-MM-DD, got {text!r}") from exc


def _log_level(text: str) -> str:
    level = text.upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return level


def doc_summary(doc: str | None) -> str:
    """A job module's docstring as the parser's description (never cut mid-sentence)."""
    return " ".join((doc or "").split())


def base_parser(job: str, description: str,
                schema: JobSchema | None = None) -> argparse.ArgumentParser:
    """The flags every job shares, then one flag per flagged parameter of ``schema`` (the job's
    parameters; without one, only the common ones)."""
    schema = schema or JobSchema(job, [])
    parser = argparse.ArgumentParser(prog=f"submit.sh {job}", description=description,
                                     formatter_class=HelpFormatter)
    parser.add_argument("--profile", default="local", action=_Once,
                        help="conf overlays applied in order, comma-separated: local, cluster, "
                        "yarn, k8s, gpu (e.g. cluster,gpu)")
    parser.add_argument("--conf-dir", default=None, action=_Once,
                        help="directory with base.yaml (default: $SPARKFIELD_CONF_DIR, else "
                        "./conf); a directory without base.yaml is an error")
    parser.add_argument("--run-date", default=None, type=_run_date, action=_Once,
                        help="YYYY-MM-DD: write into OUTPUT/run_date=... (a re-run replaces "
                        "only that date)")
    parser.add_argument("--log-level", default="INFO", type=_log_level, action=_Once,
                        metavar="{" + ",".join(LOG_LEVELS) + "}",
                        help="console log level (default INFO)")
    parser.add_argument("--remote", default=None, action=_Once, metavar="sc://HOST:PORT",
                        help="Spark Connect: the jobs need classic Spark and exit 2 saying "
                        "why; use the library's functions from a Connect session instead")
    schema.add_flags(parser, action=_Once)
    parser.set_defaults(_schema=schema)
    return parser


CONNECT_UNSUPPORTED = (
    "the jobs run on classic Spark (spark-submit, submit.sh), not over Spark Connect ({where}): "
    "a job reads Spark's stage metrics for its run report, lists, renames and locks its "
    "output through the Hadoop file system, and ships the library, conf files and models to "
    "the executors, none of which a Connect client can do. Over Spark Connect, call the "
    "library's functions and stages from your own session (docs/architecture.md)")


def connect_requested(args: argparse.Namespace) -> str | None:
    """Where a Spark Connect session was asked for (the flag or ``SPARK_REMOTE``), or None."""
    if getattr(args, "remote", None):
        return f"--remote {args.remote}"
    if os.environ.get("SPARK_REMOTE"):
        return f"SPARK_REMOTE={os.environ['SPARK_REMOTE']}"
    return None


def job_config(job: str, args: argparse.Namespace,
               overrides: Callable[[argparse.Namespace], dict[str, Any]] | None = None) -> Config:
    """The run's configuration from parsed flags, checked before any JVM starts: conf files
    and profiles merged, flags on top (an append flag's entry after the conf's entries), every
    job key validated by the job's schema, then the job's own environment checks (a GPU, a
    model folder, ...)."""
    schema: JobSchema | None = getattr(args, "_schema", None)
    given = overrides(args) if overrides is not None else \
        schema.overrides(args) if schema is not None else {}
    cfg = load_config(job, args.profile, args.conf_dir, given)
    if schema is not None:  # entries of repeatable flags, after the conf files' own
        schema.append_entries(cfg.raw.setdefault("job", {}), args)
    if args.run_date:
        output = cfg.job.get("output")
        if not output:
            raise ConfigError("--run-date needs an output")
        cfg.raw["job"]["output"] = partition_path(output, args.run_date)
        cfg.raw["job"]["run_date"] = args.run_date
    cfg.practices  # noqa: B018 (unknown practices keys are errors)
    zone = cfg.spark.conf.get("spark.sql.session.timeZone")
    problem = timezone_problem(str(zone)) if zone else None
    if problem:
        raise ConfigError(f"spark.sql.session.timeZone: {problem}")
    if schema is not None:
        values = schema.validate(cfg.job)
        if schema.preflight is not None:
            schema.preflight(values, cfg)
    return cfg


def main(
    job: str,
    parser: argparse.ArgumentParser,
    overrides: Callable[[argparse.Namespace], dict[str, Any]] | None,
    run: Callable[[Any, Config], Any],
    describe: Callable[[Any], str] | None = None,
    argv: Sequence[str] | None = None,
) -> int:
    """Parse flags, load conf, take the output lock, build the session, run, and map the
    outcome to exit codes: 0 ok, 1 internal failure, 2 bad input, flags or environment (an
    unreachable master, a full disk, a missing package), 3 more rejects than
    ``--max-reject-fraction`` allows (outputs written), 4 another run holds the lock."""
    route_stderr()  # before logging binds sys.stderr
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    where = connect_requested(args)
    if where:
        return _fail(CONNECT_UNSUPPORTED.format(where=where), EXIT_BAD_INPUT)
    try:
        cfg = job_config(job, args, overrides)
        output = cfg.job.get("output")
        limit = cfg.job.get("max_reject_fraction")
    except (UserError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ModuleNotFoundError as exc:  # a job's checks of its environment import its extra
        return _fail(missing_extra_error(exc, job, _area(run)) or missing_module_error(exc),
                     EXIT_BAD_INPUT)
    return run_job(job, cfg, output, limit, run, describe)


def run_job(job: str, cfg: Config, output: str | None, limit: float | None,
            run: Callable[[Any, Config], Any], describe: Callable[[Any], str] | None) -> int:
    """Check the output, take its lock, build the session, run, and map the outcome to an exit
    code. Bad input (a message naming what to fix) and a full disk are one ``error:`` line
    on stderr; the output's staging is gone by then and the previous output is kept."""
    log = logging.getLogger("sparkfield")
    if limit is not None:
        cfg.raw["job"]["max_reject_fraction"] = limit  # the run report's status uses it
    if output and is_local(output):
        problem = local_output_problem(output, job)
        if problem:
            return _fail(problem, EXIT_BAD_INPUT)
    lock = OutputLock(local_path(output), job) if output and is_local(output) else None
    try:
        if lock is not None:
            lock.acquire()
    except LockHeld as exc:
        return _fail(str(exc), EXIT_LOCKED)
    except OSError as exc:
        return _fail(f"cannot take the lock beside --output {output}: {exc}", EXIT_BAD_INPUT)
    if lock is not None:
        try:
            for line in recover_output(output):
                log.warning("previous run was interrupted: %s", line)
        except OSError as exc:  # the lock is not kept for a run that never started
            lock.release()
            return _fail(f"cannot clean up after an interrupted run beside --output {output}: "
                         f"{exc}", EXIT_BAD_INPUT)
    from pyspark.sql import SparkSession

    from sparkfield.core.progress import progress_lines
    from sparkfield.core.session import build_session, end_session

    try:
        try:
            check_master(cfg)
        except InputError as exc:
            return _fail(str(exc), EXIT_BAD_INPUT)
        joined = SparkSession.getActiveSession()  # a caller's session is not ours to stop
        t0 = time.perf_counter()
        try:
            spark = build_session(cfg)
        except ConfigError as exc:
            return _fail(str(exc), EXIT_BAD_INPUT)
        if joined is None:  # the run report counts the session's start as its first step
            session_started(t0, time.perf_counter() - t0)
        try:
            with progress_lines(spark, cfg.practices.progress_interval_s):
                result = run(spark, cfg)
            if describe is not None:
                print(describe(result))
            return _check_rejects(result, limit)
        except UserError as exc:
            return _fail(str(exc), EXIT_BAD_INPUT)
        except Exception as exc:
            reason = (disk_full_error(exc, output)
                      or missing_extra_error(exc, job, _area(run), executors_run_this_python(spark))
                      or missing_module_error(exc) or spark_input_error(exc))
            if reason:
                return _fail(reason, EXIT_BAD_INPUT)
            log.exception("job %s failed", job)
            return EXIT_INTERNAL
        finally:
            if joined is None:
                end_session(spark)
    finally:
        if lock is not None:
            lock.release()


def missing_extra_error(exc: BaseException, job: str, area: str | None = None,
                        executors_here: bool = False) -> str | None:
    """One line naming the extra to install when a module one of the library's extras
    provides is missing from this Python (or from local executors that run this Python,
    ``executors_here``), or None. ``area`` (geo, process, text, nlp: the extras' names) picks
    the extra when several provide the module."""
    found = missing_module(exc)
    if found is None:
        return None
    module, where = found
    if where != "the driver" and not executors_here:
        return None  # executors with an environment of their own: missing_module_error says
    package, extras = MODULE_PACKAGES.get(module.split(".")[0], (None, ()))
    if not extras:
        return None
    extra = area if area in extras else extras[0]
    place = "" if where == "the driver" else "; the local executors run this Python"
    return (f"Python module {module!r} is not installed (package {package}{place}): the {job} "
            f"job needs the {extra!r} extra: pip install 'sparkfield[{extra}]'")


def executors_run_this_python(spark: Any) -> bool:
    """True when the session's executors are local and start this very interpreter, so that
    what is missing here is missing there. False when the session cannot say (stopped, say):
    this runs while a failure is reported, and must not hide it."""
    try:
        sc = spark.sparkContext
        master, python = str(sc.master), str(sc.pythonExec)
    except Exception:  # noqa: BLE001 - the failure being reported is the one that matters
        return False
    if not master.startswith("local"):
        return False
    return os.path.abspath(shutil.which(python) or python) == os.path.abspath(sys.executable)


def _area(run: Callable[..., Any]) -> str | None:
    """The library area (``sparkfield.<area>``) a job's ``run`` comes from."""
    parts = getattr(run, "__module__", "").split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "sparkfield" else None


def _fail(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return code


def _check_rejects(result: Any, limit: float | None) -> int:
    report = getattr(result, "report", None)
    if limit is None or report is None:
        return EXIT_OK
    rows, fraction = report.reject_fraction()
    if fraction > limit:
        return _fail(f"{report.total_rejects} of {rows} input rows rejected "
                     f"({fraction:.1%} > {limit:.1%}); outputs were written, see rejects/",
                     EXIT_REJECTED)
    return EXIT_OK
