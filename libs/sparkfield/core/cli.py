"""What every job's entry point shares: common flags, config loading and exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from sparkfield.core.batch import (
    LockHeld,
    OutputLock,
    is_local,
    partition_path,
    recover_output,
)
from sparkfield.core.conf import Config, ConfigError, load_config
from sparkfield.core.io import InputError

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_REJECTED = 3  # finished, but rejected more input than the job allows
EXIT_LOCKED = 4  # another run of the same job and output is in progress


def base_parser(job: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"submit.sh {job}", description=description)
    parser.add_argument("--profile", default="local",
                        help="conf overlay: local, cluster, yarn, k8s, gpu")
    parser.add_argument("--conf-dir", default=None,
                        help="directory with base.yaml (default: ./conf)")
    parser.add_argument("--output", default=None, help="output directory (replaced atomically)")
    parser.add_argument("--sample", type=float, default=None,
                        help="fraction of the input to use (seeded), e.g. 0.01 for a first look")
    parser.add_argument("--run-date", default=None,
                        help="YYYY-MM-DD: write into OUTPUT/run_date=... (a re-run replaces "
                        "only that date)")
    parser.add_argument("--max-reject-fraction", type=float, default=None,
                        help="exit 3 when rejected rows / input rows exceeds this")
    parser.add_argument("--log-level", default="INFO")
    return parser


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError("must be in (0, 1]")
    return value


def key_values(text: str) -> dict[str, float]:
    """``theft=50,mischief=100`` -> {"theft": 50.0, "mischief": 100.0}."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"expected NAME=METRES, got {part!r}")
        try:
            out[key.strip()] = float(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not a number in {part!r}") from exc
    return out


def main(
    job: str,
    parser: argparse.ArgumentParser,
    overrides: Callable[[argparse.Namespace], dict[str, Any]],
    run: Callable[[Any, Config], Any],
    describe: Callable[[Any], str] | None = None,
    argv: Sequence[str] | None = None,
) -> int:
    """Parse flags, load conf, take the output lock, build the session, run, and map the
    outcome to exit codes: 0 ok, 1 internal failure, 2 bad input or flags, 3 more rejects than
    ``--max-reject-fraction`` allows (outputs written), 4 another run holds the lock."""
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        cfg = load_config(job, args.profile, args.conf_dir, overrides(args))
        output = cfg.job.get("output")
        if args.run_date:
            if not output:
                raise ConfigError("--run-date needs an output")
            cfg.raw["job"]["output"] = output = partition_path(output, args.run_date)
            cfg.raw["job"]["run_date"] = args.run_date
        limit = args.max_reject_fraction
        if limit is None:
            limit = cfg.job.get("max_reject_fraction")
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    lock = OutputLock(output, job) if output and is_local(output) else None
    try:
        if lock is not None:
            lock.acquire()
            for line in recover_output(output):
                logging.getLogger("sparkfield").warning("previous run was interrupted: %s",
                                                        line)
    except LockHeld as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    from sparkfield.core.session import build_session

    try:
        spark = build_session(cfg)
        try:
            result = run(spark, cfg)
            if describe is not None:
                print(describe(result))
            return _check_rejects(result, limit)
        except (InputError, ConfigError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except Exception:
            logging.getLogger("sparkfield").exception("job %s failed", job)
            return EXIT_INTERNAL
        finally:
            spark.stop()
    finally:
        if lock is not None:
            lock.release()


def _check_rejects(result: Any, limit: float | None) -> int:
    report = getattr(result, "report", None)
    if limit is None or report is None:
        return EXIT_OK
    rows = sum(v for v in report.inputs.values() if isinstance(v, int))
    fraction = report.total_rejects / rows if rows else 0.0
    if fraction > limit:
        print(f"error: {report.total_rejects} of {rows} input rows rejected "
              f"({fraction:.1%} > {limit:.1%}); outputs were written, see rejects/",
              file=sys.stderr)
        return EXIT_REJECTED
    return EXIT_OK
