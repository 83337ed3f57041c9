"""Turns a conf profile into spark-submit arguments (used by ``submit.sh``).

``python -m sparkfield.core.submit --job coffee_shops --profile cluster [--master URL]``
prints one argument per line: ``--master``, then ``--conf key=value`` for every Spark setting
of the profile, then ``--files`` with the conf files the job reads.
"""

from __future__ import annotations

import argparse
import sys

from sparkfield.core.conf import ConfigError, find_conf_dir, job_file_path, load_config


def submit_args(job: str, profile: str, conf_dir: str | None, master: str | None) -> list[str]:
    cfg = load_config(job, profile, conf_dir)
    root = find_conf_dir(conf_dir)
    args: list[str] = []
    chosen = master or cfg.spark.master
    if chosen:
        args += ["--master", chosen]
    args += ["--name", f"{cfg.spark.app_name}-{job}"]
    for key, value in cfg.spark.conf.items():
        args += ["--conf", f"{key}={value}"]
    files = [root / "base.yaml", root / f"{profile}.yaml"]
    job_file = job_file_path(root, job)
    if job_file:
        files.append(job_file)
    args += ["--files", ",".join(str(f.resolve()) for f in files)]
    return args


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--job", required=True)
    p.add_argument("--profile", default="local")
    p.add_argument("--conf-dir")
    p.add_argument("--master")
    a = p.parse_args(argv)
    try:
        print("\n".join(submit_args(a.job, a.profile, a.conf_dir, a.master)))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
