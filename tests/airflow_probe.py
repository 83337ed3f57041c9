"""Runs inside the Airflow environment (.venv-airflow): loads the DAG folder the way the DAG
processor does (no scheduler, no database) and writes its structure as JSON to OUT, with each
Spark task's spark-submit command as the provider's hook builds it for one date.

usage: python tests/airflow_probe.py DAG_FOLDER DATE OUT.json   (Airflow logs to stdout)
"""

from __future__ import annotations

import json
import sys


def main(folder: str, ds: str, dest: str) -> int:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    bag = DagBag(dag_folder=folder, safe_mode=False)
    out: dict = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": {}}
    for dag_id, dag in bag.dags.items():
        tasks = {}
        for task in dag.tasks:
            info = {"operator": type(task).__name__, "upstream": sorted(task.upstream_task_ids),
                    "retries": task.retries}
            if isinstance(task, SparkSubmitOperator):
                for name in task.template_fields:  # as the worker renders them for ``ds``
                    setattr(task, name, task.render_template(getattr(task, name), {"ds": ds}))
                hook = task._get_hook()  # the hook execute() would use
                info.update(application=task.application, conn_id=task._conn_id,
                            command=hook._build_spark_submit_command(task.application),
                            env_vars=task.env_vars)
            else:
                info["bash_command"] = getattr(task, "bash_command", None)
                info["env"] = getattr(task, "env", None)
            tasks[task.task_id] = info
        out["dags"][dag_id] = {
            "schedule": str(dag.timetable), "catchup": dag.catchup,
            "max_active_runs": dag.max_active_runs, "tags": sorted(dag.tags), "tasks": tasks}
    with open(dest, "w") as fh:
        json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
