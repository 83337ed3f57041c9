"""Turns a conf profile into a spark-submit invocation (used by ``submit.sh`` and the Airflow DAG).

``python -m sparkfield.deploy.submit --job coffee_shops --profile cluster [--master URL]
[--python-env build/sparkfield-env.tar.gz] [--driver-python PATH]`` prints one argument per
line: ``--master``, ``--name``, ``--deploy-mode``, ``--conf key=value`` for every Spark setting of
the profile, ``--files`` with the conf files the job reads and, with a packed Python environment,
``--archives ENV#environment``.

A packed environment (``scripts/pack_env.sh``, built with venv-pack) carries the third-party
packages, native ones included, to the executors: Spark unpacks it as ``./environment`` in each
executor's working directory and ``spark.pyspark.python`` points there. In client mode the driver
keeps the local interpreter (``spark.pyspark.driver.python``); in cluster mode it uses the packed
one too.

A profile whose ``submit.small_input_below_mb`` is set (the local one) gives a run whose job
arguments (``--job-args ...``, last) name less input than that
(:func:`sparkfield.deploy.input_size.input_bytes`) the Spark settings of
``submit.small_input_conf`` over the profile's: such a run spends its time planning, not
computing. The local profile's are C1 only for the driver JVM (``-XX:TieredStopAtLevel=1``, as
the ``quick`` profile does), and no adaptive execution over two shuffle partitions: adaptive
execution runs every shuffle of a plan as a job of its own and plans the rest again after
each, which costs more than it saves on a few MB. A larger input, or one whose size cannot be
told here, keeps the profile's settings. ``submit.tiny_input_below_mb`` and
``submit.tiny_input_conf`` are a second tier over the first, for inputs so small that
compiling Spark's generated code costs more than running without it (the local profile:
interpreted expressions, no whole-stage code generation, under 4 MiB). Java options join
those of the profile; driver Java options on the command line (``--own-driver-java``)
replace the small input's.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sparkfield.core.conf import find_conf_dir, job_file_path, load_config, profile_names
from sparkfield.core.errors import ConfigError
from sparkfield.deploy.input_size import input_bytes

ENV_ALIAS = "environment"
ENV_PYTHON = f"./{ENV_ALIAS}/bin/python"
# the tiers of small inputs, each with <tier>_below_mb and <tier>_conf, applied in this order
INPUT_TIERS = ("small_input", "tiny_input")
SUBMIT_KEYS = ("python_env",
               *(f"{t}_{k}" for t in INPUT_TIERS for k in ("below_mb", "conf")))
DRIVER_JAVA = "spark.driver.extraJavaOptions"
JAVA_OPTIONS = (DRIVER_JAVA, "spark.executor.extraJavaOptions")


@dataclass
class SubmitSpec:
    """Everything spark-submit needs besides the application and its arguments."""

    name: str
    master: str | None
    deploy_mode: str
    conf: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    archives: list[str] = field(default_factory=list)

    def args(self) -> list[str]:
        out: list[str] = []
        if self.master:
            out += ["--master", self.master]
        out += ["--name", self.name, "--deploy-mode", self.deploy_mode]
        for key, value in self.conf.items():
            out += ["--conf", f"{key}={value}"]
        if self.files:
            out += ["--files", ",".join(self.files)]
        if self.archives:
            out += ["--archives", ",".join(self.archives)]
        return out


def _is_uri(path: str) -> bool:
    return "://" in path


def submit_spec(job: str, profile: str = "local", conf_dir: str | Path | None = None,
                master: str | None = None, python_env: str | None = None,
                driver_python: str | None = None, job_args: list[str] | None = None,
                own_driver_java: bool = False) -> SubmitSpec:
    """The spark-submit settings of ``job`` under ``profile``.

    ``python_env`` (else the profile's ``submit.python_env``) is a venv-pack archive: a local
    path, relative to the project root, or a URI the cluster can read (hdfs://, s3a://, ...).
    ``job_args``: the job's own arguments, when known, for the size of its input;
    ``own_driver_java``: the command line gives the driver's Java options (a small input's
    are left out)."""
    cfg = load_config(job, profile, conf_dir)
    submit = _submit_section(cfg.raw.get("submit"))
    root = find_conf_dir(conf_dir)
    conf = dict(cfg.spark.conf)
    deploy_mode = conf.pop("spark.submit.deployMode", "client")
    if deploy_mode not in ("client", "cluster"):
        raise ConfigError(f"spark.submit.deployMode must be client or cluster, not {deploy_mode!r}")
    files = [root / "base.yaml", *(root / f"{n}.yaml" for n in profile_names(profile))]
    job_file = job_file_path(root, job)
    if job_file:
        files.append(job_file)
    spec = SubmitSpec(name=f"{cfg.spark.app_name}-{job}", master=master or cfg.spark.master,
                      deploy_mode=deploy_mode, conf=conf,
                      files=[str(f.resolve()) for f in files])
    limits = {t: submit.get(f"{t}_below_mb") for t in INPUT_TIERS}
    if job_args is not None and any(v is not None for v in limits.values()):
        size = input_bytes(job_args)
        for tier, limit in limits.items():
            if size is not None and limit is not None and size < float(limit) * 2**20:
                settings = dict(submit.get(f"{tier}_conf") or {})
                if own_driver_java:
                    settings.pop(DRIVER_JAVA, None)
                _overlay(spec.conf, settings)
    env = python_env or submit.get("python_env")
    if env:
        if not _is_uri(env):
            path = Path(env)
            if not path.is_absolute():
                path = root.resolve().parent / path
            if not path.is_file():
                raise ConfigError(f"packed Python environment {path} not found: build it with "
                                  "`make pack-env` (scripts/pack_env.sh)")
            env = str(path)
        spec.archives.append(f"{env}#{ENV_ALIAS}")
        spec.conf["spark.pyspark.python"] = ENV_PYTHON
        if deploy_mode == "client" and driver_python:
            spec.conf["spark.pyspark.driver.python"] = driver_python
    return spec


def _overlay(conf: dict[str, str], settings: dict[str, str]) -> None:
    """``settings`` over ``conf``; Java options are added to the ones already there."""
    for key, value in settings.items():
        if key in JAVA_OPTIONS and conf.get(key):
            have = conf[key].split()
            value = " ".join([*have, *(o for o in value.split() if o not in have)])
        conf[key] = value


def _submit_section(section: object) -> dict:
    """The profile's ``submit`` keys, checked: an unknown key is an error."""
    section = section or {}
    if not isinstance(section, dict):
        raise ConfigError("submit: expected a mapping of " + ", ".join(SUBMIT_KEYS))
    for key in section:
        if key == "quick_jit_below_mb":  # its earlier name, when it chose the JIT alone
            raise ConfigError("submit.quick_jit_below_mb is now submit.small_input_below_mb "
                              "(with submit.small_input_conf: what a small input gets)")
        if key not in SUBMIT_KEYS:
            raise ConfigError(f"unknown key 'submit.{key}' (keys: {', '.join(SUBMIT_KEYS)})")
    for tier in INPUT_TIERS:
        limit = section.get(f"{tier}_below_mb")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | float)
                                  or limit < 0):
            raise ConfigError(f"submit.{tier}_below_mb: expected a number of MiB, got {limit!r}")
        settings = section.get(f"{tier}_conf")
        if settings is not None:
            if not isinstance(settings, dict) or not all(
                    isinstance(v, str | int | float) for v in settings.values()):
                raise ConfigError(f"submit.{tier}_conf: expected Spark settings (key: value)")
            section = {**section, f"{tier}_conf": {
                str(k): str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in settings.items()}}
    return section


def remote_conflict() -> str | None:
    """Why spark-submit cannot run here, or None: with ``SPARK_REMOTE`` set it refuses a
    master (a Java exception), and a job given a master must never go to a Connect server
    instead."""
    remote = os.environ.get("SPARK_REMOTE")
    if not remote:
        return None
    from sparkfield.core.cli import CONNECT_UNSUPPORTED

    return (CONNECT_UNSUPPORTED.format(where=f"SPARK_REMOTE={remote}") + "; unset "
            "SPARK_REMOTE (env -u SPARK_REMOTE ./submit.sh JOB ...) to submit to the profile's "
            "master")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--job", required=True)
    p.add_argument("--profile", default="local")
    p.add_argument("--conf-dir")
    p.add_argument("--master")
    p.add_argument("--python-env", help="venv-pack archive shipped to the executors")
    p.add_argument("--driver-python", help="the local interpreter (client mode)")
    p.add_argument("--own-driver-java", action="store_true",
                   help="the command line gives the driver's Java options")
    p.add_argument("--job-args", nargs=argparse.REMAINDER,
                   help="the job's own arguments (last): the size of its input")
    a = p.parse_args(argv)
    conflict = remote_conflict()
    if conflict:
        print(f"error: {conflict}", file=sys.stderr)
        return 2
    try:
        spec = submit_spec(a.job, a.profile, a.conf_dir, a.master, a.python_env,
                           a.driver_python, a.job_args, a.own_driver_java)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(spec.args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
