"""The writer's time stamps: ISO-8601 UTC with milliseconds and ``Z``.

Every record carries the time it was written (``ts``). Formatting a ``datetime`` cost a
tenth of a record's whole cost, so the default clock formats from ``time.time_ns()``
and keeps the text of the current second: one ``strftime`` a second, not one a record.
An injected clock (tests, replays with a fixed time) returns ``datetime`` values and is
formatted with :func:`format_ts`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def format_ts(when: dt.datetime) -> str:
    """``when`` as ISO-8601 UTC, milliseconds, ``Z``: ``2026-11-21T10:15:30.123Z``."""
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(f"audit clock returned a naive datetime {when!r}; it must be tz-aware")
    utc = when.astimezone(dt.UTC)
    if utc.year >= 1000:  # isoformat is C and several times faster than strftime
        return utc.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


class SystemStamp:
    """``ts`` from the system clock: the second's text cached, the milliseconds appended.

    Not thread-safe on its own: the writer calls it under its lock."""

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""
        self._milli = -1
        self._text = ""

    def __call__(self) -> str:
        now = time.time_ns() // 1_000_000
        if now == self._milli:  # records come several to a millisecond in bulk
            return self._text
        second, milli = divmod(now, 1000)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        self._milli = now
        self._text = f"{self._prefix}.{milli:03d}Z"
        return self._text


def stamp_for(clock: Clock | None) -> Callable[[], str]:
    """The ``ts`` maker of a writer: the fast system stamp, or ``format_ts(clock())``."""
    if clock is None:
        return SystemStamp()
    return lambda: format_ts(clock())
