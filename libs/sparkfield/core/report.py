"""Run report: what a job read, rejected, produced and how long each step took.

Written as ``run_report.json`` into the job's output and summarised on the console.

Time is accounted for against the wall clock: ``total_seconds`` is the time from the start of
the job's Spark session (or from the report's creation, for a session the job did not start)
to the report's completion, and the steps say how much of it they cover. Spark is lazy, so a
step times the actions it triggers; the work that fills a cache is timed as its own step
(``cache <name>``, see :func:`sparkfield.core.practices.cached_rows`). A step opened inside
another (in any :class:`Stats`) is listed with ``within`` and not counted twice; so are steps
run side by side (:meth:`Stats.side_by_side`) inside the step that runs them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("sparkfield")

# the steps open now in each thread, outermost first: a step opened inside another is nested
# in the timeline even when the two belong to different Stats (a compute's and its run's)
_OPEN_STEPS: dict[int, list[str]] = {}
# when this process last started a Spark session for a job, and how long that took
_SESSION_START: dict[str, float] = {}


def session_started(t0: float, seconds: float) -> None:
    """Record that a job's Spark session started at ``t0`` (``time.perf_counter()``) and took
    ``seconds``: the next :class:`RunReport` counts its time from there, as its first step."""
    _SESSION_START.update(t0=t0, seconds=seconds)


def _open_steps() -> list[str]:
    """The steps open in this thread (a new thread starts with none)."""
    return _OPEN_STEPS.setdefault(threading.get_ident(), [])


def current_step() -> str | None:
    """The innermost step open now (for progress lines): of the thread deepest in steps;
    steps side by side are named together."""
    stacks = [s for s in list(_OPEN_STEPS.values()) if s]
    if not stacks:
        return None
    depth = max(len(s) for s in stacks)
    return " + ".join(dict.fromkeys(s[-1] for s in stacks if len(s) == depth))


def counted_seconds(steps: list[dict[str, Any]]) -> float:
    """The seconds of the steps that are not inside another step."""
    return sum(s["seconds"] for s in steps if "within" not in s)


class RenderUnavailable(RuntimeError):
    """An optional rendering (a picture of results already written) cannot be made here, for
    example because its tool is not installed. The run goes on without it."""


def _missing_optional_module(exc: BaseException) -> bool:
    """A plotting library the job can do without is not installed."""
    return isinstance(exc, ImportError) and (getattr(exc, "name", "") or "").split(".")[0] in (
        "matplotlib",)


def _stages_line(view: dict[str, Any]) -> str:
    """The stage view of ``core.stages`` in words: how many stages, which are skewed."""
    if not view.get("available"):
        return f"not available ({view.get('reason', 'no reason given')})"
    rows = view.get("stages", [])
    ratios = [r["ratio"] for r in rows if r.get("ratio") is not None]
    worst = f", worst max/median task time {max(ratios)}" if ratios else ""
    skewed = view.get("skewed", [])
    return (f"{len(rows)} stages of 2+ tasks{worst}; {len(skewed)} over "
            f"{view.get('threshold')}" + (f": {'; '.join(skewed[:3])}" if skewed else ""))


def _skew_line(s: dict[str, Any]) -> str:
    """One skew entry in words: the stage view, or sizes over partitions (max/median)."""
    if "available" in s:  # the view of the run's completed stages
        return _stages_line(s)
    if s.get("partitions"):
        ratio = s.get("ratio")
        spread = f"max/median {ratio}" if ratio is not None else "max/median n/a (median 0)"
        return f"{spread} over {s['partitions']} partitions (max {s.get('max')}, median " \
               f"{s.get('median')})"
    if "partitions" in s:
        return "no partitions"
    return ", ".join(f"{k}={v}" for k, v in s.items() if not isinstance(v, dict | list))


@dataclass(kw_only=True)
class Stats:
    """What a step of work measured, in the sections of the run report: counts, rejects, skew,
    the frames it cached (name, storage level, rows), step timings and notes.

    A job's pure ``compute`` fills one and returns it; ``run`` copies it into its
    :class:`RunReport` with :meth:`RunReport.merge`."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    inputs: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, int] = field(default_factory=dict)
    rejects: dict[str, dict[str, int]] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    skew: dict[str, dict[str, Any]] = field(default_factory=dict)
    cached: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block as the step ``name`` (nested in the step open around it in this
        thread, if any)."""
        stack = _open_steps()
        outer = stack[-1] if stack else None
        stack.append(name)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            seconds = round(time.perf_counter() - t0, 3)
            stack.pop()
            if not stack:
                _OPEN_STEPS.pop(threading.get_ident(), None)
            entry: dict[str, Any] = {"step": name, "seconds": seconds}
            if outer is not None:
                entry["within"] = outer
            self.steps.append(entry)
            log.info("step %s: %.2fs", name, seconds)

    def side_by_side(self, name: str, parts: Mapping[str, Callable[[], object]]) -> None:
        """Run ``parts`` (independent work, such as writing different outputs) at once, each
        from a thread of its own and timed as its own step within the step ``name``, which
        lasts until the last is done. Each Spark action leaves most of the cores idle while
        the driver plans and schedules it, so independent ones overlap. The first error, in
        the order given, is raised once every part has ended (none is left writing)."""
        with self.step(name):
            if len(parts) < 2:
                for part, work in parts.items():
                    with self.step(part):
                        work()
                return
            outer = list(_open_steps())

            def timed(part: str, work: Callable[[], object]) -> None:
                _OPEN_STEPS[threading.get_ident()] = list(outer)
                try:
                    with self.step(part):
                        work()
                finally:
                    _OPEN_STEPS.pop(threading.get_ident(), None)

            pool = ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="sparkfield-step")
            futures = [pool.submit(timed, part, work) for part, work in parts.items()]
            try:
                wait(futures)
            except BaseException:
                # an interrupt (Ctrl-C also cancels the Spark jobs): the parts end before it
                # goes on, so none writes after the caller deleted the staging directory
                _wait_out(futures)
                raise
            finally:
                pool.shutdown(wait=False)
            for f in futures:
                f.result()

    def add_rejects(self, source: str, by_reason: dict[str, int]) -> None:
        slot = self.rejects.setdefault(source, {})
        for reason, n in by_reason.items():
            slot[reason] = slot.get(reason, 0) + int(n)

    @property
    def total_rejects(self) -> int:
        return sum(sum(v.values()) for v in self.rejects.values())

    def note(self, text: str) -> None:
        self.notes.append(text)
        log.info(text)

    @contextmanager
    def optional(self, output: str) -> Iterator[None]:
        """Make an optional rendering called ``output``. When it cannot be made here
        (:class:`RenderUnavailable`, a missing plotting library) the run keeps every other
        output and says in its notes, on the console too, what was not written and why."""
        try:
            yield
        except Exception as exc:
            if not (isinstance(exc, RenderUnavailable) or _missing_optional_module(exc)):
                raise
            text = f"{output} not written: {exc}"
            self.notes.append(text)
            log.warning(text)

    def merge(self, other: Stats) -> None:
        """Add what ``other`` measured (its notes were logged when they were made)."""
        self.steps.extend(other.steps)
        self.inputs.update(other.inputs)
        self.outputs.update(other.outputs)
        for source, by_reason in other.rejects.items():
            self.add_rejects(source, by_reason)
        self.counts.update(other.counts)
        self.skew.update(other.skew)
        self.cached.extend(other.cached)
        self.notes.extend(other.notes)


@dataclass
class RunReport(Stats):
    """A job's :class:`Stats` with its name, parameters, start time and final status."""

    job: str
    params: dict[str, Any] = field(default_factory=dict)
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    status: str = "running"
    wall_seconds: float | None = None  # set by finish()

    def __post_init__(self) -> None:
        self._t0 = time.perf_counter()
        if _SESSION_START:  # this run's session was started for it: its time counts too
            self._t0 = _SESSION_START["t0"]
            self.steps.append({"step": "start_session",
                               "seconds": round(_SESSION_START["seconds"], 3)})
            _SESSION_START.clear()

    def elapsed(self) -> float:
        """Wall seconds since the run (or its session) started; fixed once finished."""
        if self.wall_seconds is not None:
            return self.wall_seconds
        return round(time.perf_counter() - self._t0, 3)

    def reject_fraction(self) -> tuple[int, float]:
        """(input rows, rejected rows / input rows)."""
        rows = sum(v for v in self.inputs.values() if isinstance(v, int))
        return rows, (self.total_rejects / rows if rows else 0.0)

    def finish(self, max_reject_fraction: float | None = None) -> None:
        """The final status: ``ok``, or ``too_many_rejects`` when the rejected fraction passes
        the limit (the job then exits 3 with its outputs written). The wall time stops here."""
        self.wall_seconds = round(time.perf_counter() - self._t0, 3)
        self.status = "ok"
        if max_reject_fraction is not None:
            rows, fraction = self.reject_fraction()
            if fraction > float(max_reject_fraction):
                self.status = "too_many_rejects"
                self.notes.append(f"{self.total_rejects} of {rows} input rows rejected "
                                  f"({fraction:.1%} > {float(max_reject_fraction):.1%})")

    def to_dict(self) -> dict[str, Any]:
        total, counted = self.elapsed(), counted_seconds(self.steps)
        return {
            "job": self.job,
            "status": self.status,
            "started_at": self.started_at,
            "params": self.params,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "rejects": self.rejects,
            "total_rejects": self.total_rejects,
            "counts": self.counts,
            "skew": self.skew,
            "cached": self.cached,
            "steps": self.steps,
            "total_seconds": total,
            "steps_seconds": round(counted, 3),
            "steps_cover": round(counted / total, 3) if total > 0 else None,
            "notes": self.notes,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=str) + "\n"

    def summary(self) -> str:
        d = self.to_dict()
        cover = d["steps_cover"]
        lines = [f"[{self.job}] status={self.status} total={d['total_seconds']}s"
                 + (f" (steps cover {cover:.0%})" if cover is not None else "")]
        if self.inputs:
            lines.append("  inputs:  " + ", ".join(f"{k}={v}" for k, v in self.inputs.items()))
        if self.outputs:
            lines.append("  outputs: " + ", ".join(f"{k}={v}" for k, v in self.outputs.items()))
        if self.rejects:
            for source, reasons in self.rejects.items():
                if not reasons:
                    continue
                parts = ", ".join(f"{r}={n}" for r, n in reasons.items())
                lines.append(f"  rejects[{source}]: {parts}")
        lines.extend(f"  skew[{name}]: {_skew_line(s)}" for name, s in self.skew.items())
        lines.append("  steps:   " + ", ".join(
            f"{s['step']}={s['seconds']}s" + (f" (in {s['within']})" if "within" in s else "")
            for s in self.steps))
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


def _wait_out(futures: list[Future], limit_s: float = 120.0) -> None:
    """Wait for ``futures`` through further interrupts, at most ``limit_s`` seconds."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            if not wait(futures, timeout=max(0.0, end - time.monotonic())).not_done:
                return
        except KeyboardInterrupt:
            continue
