"""Sparkfield's nightly batch as an Airflow DAG (Airflow 3, apache-airflow-providers-apache-spark).

Every job is a ``SparkSubmitOperator`` built from the same conf profile ``submit.sh`` uses
(``sparkfield.deploy.submit.submit_spec``): the same Spark settings, conf files, library zip and,
when ``SPARKFIELD_PYTHON_ENV`` names one, the same packed virtual environment. Each run writes
the ``run_date={{ ds }}`` partition of its outputs, so a re-run or a backfill of a date replaces
exactly that date.

Deployment (on the Airflow workers):
- the project checked out at ``SPARKFIELD_HOME`` (default /opt/sparkfield) and installed in
  Airflow's environment (``pip install /opt/sparkfield``); ``spark-submit`` on the PATH (the
  provider only runs spark-submit, spark2-submit or spark3-submit, which is why the operator is
  fed from the profile rather than pointed at submit.sh);
- an Airflow connection ``spark_sparkfield`` whose host is the cluster's master, e.g.
  ``AIRFLOW_CONN_SPARK_SPARKFIELD='spark://spark-master:7077'``, ``yarn``, or a
  ``k8s://https://...`` URL; the profile (``SPARKFIELD_PROFILE``, default cluster) gives
  everything else;
- ``SPARKFIELD_DATA`` where outputs live (HDFS/S3 on a cluster) and the inputs below.

Job exit codes: 0 done, 1 internal failure, 2 bad input or flags, 3 too many rejects, 4 another
run holds the output's lock. The operator fails the task on any non-zero code and Airflow
retries it: a retry after 4 waits for the other run; after 2 or 3 the run's report
(``run_report.json``) and ``rejects/`` say what to fix.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

from sparkfield.deploy.submit import submit_spec

PROJECT = Path(os.environ.get("SPARKFIELD_HOME", "/opt/sparkfield"))
PROFILE = os.environ.get("SPARKFIELD_PROFILE", "cluster")
DATA = os.environ.get("SPARKFIELD_DATA", "/data/sparkfield").rstrip("/")
PYTHON_ENV = os.environ.get("SPARKFIELD_PYTHON_ENV") or None
CONN_ID = "spark_sparkfield"
LIBRARY_ZIP = PROJECT / "build" / "sparkfield.zip"
RUN_DATE = "{{ ds }}"


def spark_job(job: str, *args: str) -> SparkSubmitOperator:
    """``job`` submitted as ``submit.sh`` would under ``PROFILE``, for the run's date."""
    spec = submit_spec(job, PROFILE, PROJECT / "conf", python_env=PYTHON_ENV)
    return SparkSubmitOperator(
        task_id=job,
        conn_id=CONN_ID,
        application=str(PROJECT / "jobs" / f"{job}.py"),
        application_args=["--profile", PROFILE, *args, "--run-date", RUN_DATE],
        name=f"{spec.name}-{RUN_DATE}",
        deploy_mode=spec.deploy_mode,
        conf=spec.conf,
        files=",".join(spec.files),
        py_files=str(LIBRARY_ZIP),
        archives=",".join(spec.archives) or None,
        env_vars={"SPARKFIELD_CONF_DIR": str(PROJECT / "conf")},
    )


with DAG(
    dag_id="sparkfield_nightly",
    description="Sparkfield jobs, one date partition per night",
    schedule="10 2 * * *",  # 02:10 UTC, yesterday's data interval
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,  # backfill explicitly: `airflow backfill create --dag-id ... --from-date ...`
    max_active_runs=1,  # the jobs' output locks would make overlapping runs wait anyway
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10),
                  "execution_timeout": timedelta(hours=4)},
    tags=["sparkfield", "spark"],
) as dag:
    package = BashOperator(
        task_id="package",
        bash_command=f"python -m sparkfield.deploy.package {LIBRARY_ZIP}",
        env={"PYTHONPATH": str(PROJECT / "libs")},  # the checked-out code the jobs run
        append_env=True,
        doc_md="The library zip shipped with --py-files, rebuilt from the deployed code.",
    )
    coffee_shops = spark_job("coffee_shops", "--output", f"{DATA}/coffee_shops")
    event_log = spark_job(
        "event_log", "--mapping", str(PROJECT / "conf" / "event_logs" / "olist_orders.yaml"),
        "--output", f"{DATA}/olist_event_log", "--max-reject-fraction", "0.01")
    process_mining = spark_job(
        "process_mining", "--log", f"{DATA}/olist_event_log/run_date={RUN_DATE}/events",
        "--output", f"{DATA}/olist_process_views")
    bag_of_words = spark_job(
        "bag_of_words", "--urls", f"{DATA}/bag_of_words/urls.txt", "--output",
        f"{DATA}/bag_of_words", "--vector", "tfidf", "--stopwords", "english")
    embed = spark_job(
        "embed", "--input", f"{DATA}/bag_of_words/run_date={RUN_DATE}/sentences",
        "--output", f"{DATA}/embeddings")

    package >> [coffee_shops, event_log, bag_of_words]
    event_log >> process_mining
    bag_of_words >> embed
