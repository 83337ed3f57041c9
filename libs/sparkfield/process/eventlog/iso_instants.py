"""Strict ISO-8601 times with an offset (``2011-10-01T00:38:44.546+02:00``, ``...Z``) read as
instants in the Python worker that reads them, with Arrow and numpy: no Python step per
value. An XES log writes its times this way, and Spark's own string-to-timestamp cast resolves
the offset's zone for every row; a value read here skips that cast.

Only the strictest form is read: a four-digit year from 0001, ``T``, seconds, at most six
fraction digits, ``Z`` or ``+hh:mm``/``-hh:mm`` up to 14 hours, every field in its range.
Anything else (other layouts, naive times, a leap second, a day the month lacks) is null here
and left to Spark's parse, which keeps its rules for it: the instant of every value read here
is the one Spark's cast gives."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

INSTANT_TYPE = pa.timestamp("us", tz="UTC")
_STRICT = r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})\z"
_HEAD = 19  # yyyy-mm-ddThh:mm:ss
_MAX_OFFSET_MINUTES = 14 * 60
_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])


def iso_instants(times: pa.Array) -> pa.Array:
    """The instant (microseconds, UTC) of each value of a string array in the strict form
    (see the module); null for every other value."""
    if len(times) == 0:
        return pa.array([], INSTANT_TYPE)
    if pa.types.is_large_string(times.type):
        times = times.cast(pa.string())
    strict = pc.fill_null(pc.match_substring_regex(times, _STRICT), False)
    rows = np.flatnonzero(strict.to_numpy(zero_copy_only=False))
    micros = np.zeros(len(times), dtype=np.int64)
    valid = np.zeros(len(times), dtype=bool)
    if len(rows):
        # values of one length and zone kind share one layout: each field at fixed places
        offsets = np.frombuffer(times.buffers()[1], np.int32)[times.offset:]
        data = np.frombuffer(times.buffers()[2], np.uint8)
        start = offsets[rows].astype(np.int64)
        length = offsets[rows + 1].astype(np.int64) - start
        zulu = data[start + length - 1] == ord("Z")
        for n in np.unique(length):
            for z in (True, False):
                pick = (length == n) & (zulu == z)
                if pick.any():
                    at = rows[pick]
                    micros[at], valid[at] = _layout(data, start[pick], int(n), z)
    return pa.array(micros, INSTANT_TYPE, mask=~valid)


def _layout(data: np.ndarray, start: np.ndarray, n: int, zulu: bool
            ) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds since the epoch of the values of one length ``n`` and zone kind (UTF-8
    bytes ``data``, each value from its ``start``), and whether each one's fields are in
    range."""
    def number(first: int, digits: int) -> np.ndarray:
        value = np.zeros(len(start), dtype=np.int64)
        for i in range(first, first + digits):
            value = value * 10 + (data[start + i].astype(np.int64) - 48)
        return value

    year, month, day = number(0, 4), number(5, 2), number(8, 2)
    hour, minute, second = number(11, 2), number(14, 2), number(17, 2)
    zone = 1 if zulu else 6
    digits = n - _HEAD - zone - 1  # after the dot; -1: no fraction
    fraction = number(_HEAD + 1, digits) * 10 ** (6 - digits) if digits > 0 else 0
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    last_day = _DAYS_IN_MONTH[np.clip(month, 0, 12)] + ((month == 2) & leap)
    ok = ((year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= last_day)
          & (hour < 24) & (minute < 60) & (second < 60))
    offset = np.zeros(len(start), dtype=np.int64)  # minutes east of UTC
    if not zulu:
        sign = np.where(data[start + n - 6] == ord("-"), -1, 1)
        oh, om = number(n - 5, 2), number(n - 2, 2)
        offset = sign * (oh * 60 + om)
        ok &= (om < 60) & (oh * 60 + om <= _MAX_OFFSET_MINUTES)
    seconds = (_days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60
               + second - offset * 60)
    return seconds * 1_000_000 + fraction, ok


def _days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (the calendar Spark and java.time
    use), by H. Hinnant's ``days_from_civil``."""
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468
