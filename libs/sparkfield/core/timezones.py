"""Time-zone names as Spark takes them, checked before any JVM starts."""

from __future__ import annotations

import difflib
import functools
import re

# What Spark takes for a time zone (DateTimeUtils.getZoneId: java.time.ZoneId.of with the
# short ids): a region of the time-zone database, a fixed offset, optionally after UTC/GMT/UT.
_SHORT_IDS = frozenset({"ACT", "AET", "AGT", "ART", "AST", "BET", "BST", "CAT", "CNT", "CST",
                        "CTT", "EAT", "ECT", "EST", "HST", "IET", "IST", "JST", "MIT", "MST",
                        "NET", "NST", "PLT", "PNT", "PRT", "PST", "SST", "VST"})
_OFFSET = re.compile(r"[+-](\d{1,2}|\d{2}:?\d{2}|\d{2}:\d{2}:\d{2}|\d{6})")


def timezone_problem(name: str) -> str | None:
    """None when Spark takes ``name`` as a time zone, else what is wrong; checked against
    :mod:`zoneinfo`'s database, so before any JVM starts."""
    # Spark reads +h:mm and +hh:m too
    text = re.sub(r"([+-])(\d):", r"\g<1>0\2:", name, count=1)
    text = re.sub(r"([+-]\d\d):(\d)$", r"\1:0\2", text, count=1)
    offset = re.sub(r"^(UTC|GMT|UT)(?=[+-]|$)", "", text)
    if text == "Z" or text in _SHORT_IDS or (offset != text and not offset):
        return None
    if offset.startswith(("+", "-")):
        if _offset_ok(offset):
            return None
        return f"{name!r} is not a valid offset (from -18:00 to +18:00, e.g. +02:00)"
    regions = _regions()
    if not regions or text in regions:  # no database here: Spark has its own
        return None
    near = [r for r in regions if r.lower() == name.lower()] or \
        difflib.get_close_matches(name, sorted(regions), n=1)
    hint = f"did you mean {near[0]!r}?" if near else \
        "a region such as America/Sao_Paulo, UTC, or an offset such as +02:00"
    return f"{name!r} is not a time zone ({hint})"


def _offset_ok(offset: str) -> bool:
    if not _OFFSET.fullmatch(offset):
        return False
    digits = offset[1:].replace(":", "")
    hours, minutes, seconds = (int(digits), 0, 0) if len(digits) <= 2 else \
        (int(digits[:2]), int(digits[2:4]), int(digits[4:6] or 0))
    return minutes < 60 and seconds < 60 and hours * 3600 + minutes * 60 + seconds <= 18 * 3600


@functools.cache
def _regions() -> frozenset[str]:
    import zoneinfo

    return frozenset(zoneinfo.available_timezones() - {"Factory", "localtime", "posixrules"})
