"""What the Spark UI shows about a run, read from the monitoring REST API of the running
application: skew (per stage, the max and median task time and input size) and the task
attempts that failed and were retried."""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

from pyspark.sql import SparkSession

log = logging.getLogger("sparkfield")


def _get(url: str, timeout: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - the driver's own UI
        return json.loads(r.read().decode("utf-8"))


def _submitted(stage: dict[str, Any]) -> str:
    # the REST API writes e.g. "2026-11-22T01:53:10.123GMT"; as text it sorts chronologically
    return str(stage.get("submissionTime", "")).replace("GMT", "")


class _Unavailable(Exception):
    """The monitoring REST API cannot be read; the message says why."""


def _completed_stages(spark: SparkSession, since: str | None = None
                      ) -> tuple[str, list[dict[str, Any]]]:
    """The application's REST base URL and its completed stages (those submitted at or after
    ``since``, an ISO time, when given)."""
    ui = spark.sparkContext.uiWebUrl
    if not ui:
        raise _Unavailable("spark.ui.enabled is false")
    base = f"{ui.rstrip('/')}/api/v1/applications/{spark.sparkContext.applicationId}"
    try:
        stages = _get(f"{base}/stages?status=complete")
    except OSError as exc:
        raise _Unavailable(f"REST API unreachable: {exc}") from None
    if since:
        stages = [st for st in stages if _submitted(st) >= since[:19]]
    return base, stages


def active_stage_inputs(spark: SparkSession) -> dict[int, tuple[int, int]]:
    """Bytes and records read so far by each active stage (input files plus shuffle reads);
    empty when the monitoring REST API cannot be read."""
    ui = spark.sparkContext.uiWebUrl
    if not ui:
        return {}
    base = f"{ui.rstrip('/')}/api/v1/applications/{spark.sparkContext.applicationId}"
    try:
        stages = _get(f"{base}/stages?status=active", timeout=2.0)
    except (OSError, ValueError):
        return {}
    return {int(st["stageId"]): (int(st.get("inputBytes", 0)) + int(st.get("shuffleReadBytes", 0)),
                                 int(st.get("inputRecords", 0))
                                 + int(st.get("shuffleReadRecords", 0)))
            for st in stages}


def stage_skew(spark: SparkSession, ratio: float = 4.0, min_task_ms: float = 500.0,
               limit: int = 200, since: str | None = None) -> dict[str, Any]:
    """Completed stages with their task-time and input-size distributions (median, max) and
    the names of those whose max/median task time passes ``ratio`` (ignoring stages whose
    slowest task is under ``min_task_ms``). Empty when the UI is disabled."""
    try:
        base, stages = _completed_stages(spark, since)
    except _Unavailable as exc:
        return {"available": False, "reason": str(exc)}
    rows, skewed = [], []
    for st in stages[:limit]:
        sid, attempt = st["stageId"], st["attemptId"]
        if st.get("numTasks", 0) < 2:
            continue
        try:
            summary = _get(f"{base}/stages/{sid}/{attempt}/taskSummary?quantiles=0.5,1.0")
        except OSError:
            continue
        run_ms = summary.get("executorRunTime") or [0, 0]
        read = (summary.get("inputMetrics") or {}).get("bytesRead") or [0, 0]
        shuffle = ((summary.get("shuffleReadMetrics") or {}).get("readBytes") or [0, 0])
        med, mx = float(run_ms[0]), float(run_ms[1])
        row = {"stage": sid, "name": st.get("name", "")[:120], "tasks": st.get("numTasks"),
               "task_ms_median": med, "task_ms_max": mx,
               "input_bytes_median": float(read[0]) + float(shuffle[0]),
               "input_bytes_max": float(read[1]) + float(shuffle[1]),
               "ratio": round(mx / med, 2) if med > 0 else None}
        rows.append(row)
        if mx >= min_task_ms and (med == 0 or mx / med > ratio):
            skewed.append(f"stage {sid} ({row['name']}): max/median task time "
                          f"{row['ratio'] if row['ratio'] is not None else 'inf'}")
    return {"available": True, "threshold": ratio, "stages": rows, "skewed": skewed}


def _error_line(message: str) -> str:
    """The line that names the error: a Python traceback's last line, else the first line;
    the JVM stack that follows the message is left out."""
    head = message.split("\n\tat ", 1)[0]
    lines = [ln.strip() for ln in head.splitlines() if ln.strip()]
    if not lines:
        return "(no message)"
    return lines[-1] if "Traceback (most recent call last)" in head else lines[0]


def retried_tasks(spark: SparkSession, since: str | None = None, limit: int = 5
                  ) -> dict[str, Any]:
    """Failed task attempts in stages that then completed (Spark retried them): how many, and
    for up to ``limit`` of them the stage, task, executor and error line."""
    try:
        base, stages = _completed_stages(spark, since)
    except _Unavailable as exc:
        return {"available": False, "reason": str(exc)}
    failed = [st for st in stages if st.get("numFailedTasks", 0) > 0]
    attempts: list[dict[str, Any]] = []
    for st in failed:
        if len(attempts) >= limit:
            break
        sid, attempt = st["stageId"], st["attemptId"]
        try:
            tasks = _get(f"{base}/stages/{sid}/{attempt}/taskList?status=FAILED&length={limit}")
        except OSError:
            continue
        attempts += [{"stage": sid, "task": t.get("index"), "attempt": t.get("attempt"),
                      "executor": t.get("executorId"),
                      "error": _error_line(t.get("errorMessage") or "")} for t in tasks]
    return {"available": True,
            "failed_attempts": sum(int(st["numFailedTasks"]) for st in failed),
            "examples": attempts[:limit]}


def add_retried_tasks(spark: SparkSession, report) -> None:
    """Count the run's retried task attempts in ``report`` and warn with their errors: a run
    that succeeded after retries says so, and why the attempts failed."""
    try:
        view = retried_tasks(spark, since=report.started_at)
    except Exception:  # monitoring must never fail a job
        return
    n = view.get("failed_attempts", 0)
    if not n:
        return
    report.counts["failed_task_attempts_retried"] = n
    for a in view["examples"]:
        text = (f"task attempt failed and was retried: stage {a['stage']} task {a['task']} "
                f"attempt {a['attempt']} on executor {a['executor']}: {a['error']}")
        report.notes.append(text)
        log.warning(text)


def add_stage_skew(spark: SparkSession, report, ratio: float = 4.0) -> None:
    """Record the stage view in ``report.skew['stages']`` and log the skewed ones."""
    try:
        view = stage_skew(spark, ratio, since=report.started_at)
    except Exception as exc:  # monitoring must never fail a job
        view = {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
    report.skew["stages"] = view
    for line in view.get("skewed", []):
        log.warning("skew: %s", line)


def publish(spark: SparkSession, out, report, skew_ratio: float,
            max_reject_fraction: float | None = None) -> None:
    """A job's last step: set the run's status (``ok``, or ``too_many_rejects`` past
    ``max_reject_fraction``) and, when it writes an output, add the stage view, write
    run_report.json and swap the output into place."""
    with report.step("task_retries"):  # reads the status store: longer in a long session
        add_retried_tasks(spark, report)
    report.finish(max_reject_fraction)
    if out is None:
        return
    add_stage_skew(spark, report, skew_ratio)
    out.write_text("run_report.json", report.to_json())
    out.commit()
