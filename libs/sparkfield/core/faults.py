"""Fault injection for resilience drills: ``SPARKFIELD_FAIL_ONCE=<point>:<marker file>`` makes
the first task that reaches ``<point>`` fail (it creates the marker); retries then succeed.
Unset, it costs one environment lookup.

It ships with the library, not the tests, because the point that fails runs on the executors,
which see only what spark-submit sends them; operators use the same variable for drills on a
real cluster (docs/testing.md)."""

from __future__ import annotations

import os


class InjectedFailure(RuntimeError):
    pass


def maybe_fail(point: str) -> None:
    spec = os.environ.get("SPARKFIELD_FAIL_ONCE")
    if not spec:
        return
    name, _, marker = spec.partition(":")
    if name != point or not marker:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    raise InjectedFailure(f"injected failure at {point} (marker {marker})")
