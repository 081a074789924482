"""Line noise in bounded space: protocol errors aggregated per device.

Every ``A5 5A`` in line noise is a possible frame start, so 10 KB of noise can make
thousands of framing errors in under a second at 115,200 baud. Logged one by one, each
would be an fsynced audit input and an engine step (issue 8 measured 9,994 inputs, a
9.4 MB log and 4.7 s of engine time for 10 KB). A :class:`NoiseThrottle` lets the
first error of each kind in a burst through at once (the inspector sees the first sign
at once, with its detail), then counts the rest per kind and lets through at most one
aggregate per ``window`` seconds, and one summary when the line has been quiet for a
``window``. So noise costs at most one input per kind and about one per window per
device, whatever its rate, and the counts are exact.

The throttle is pure: time comes in as ``now`` (the driver's monotonic clock).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

WINDOW = 1.0
"""Seconds: at most one aggregate per device per window; a window of quiet ends a burst."""

MAX_KINDS = 16
"""Distinct kinds counted by name in one aggregate; any others are counted as ``other``."""


@dataclass(frozen=True, slots=True)
class NoiseReport:
    """What the throttle lets through: ``kind`` is the original kind (the first error of
    that kind in a burst) or ``line_noise`` (an aggregate) or ``line_noise_ended`` (the summary);
    ``count`` the errors it stands for, ``total`` the device's running count."""

    kind: str
    count: int
    total: int
    detail: str


@dataclass
class NoiseThrottle:
    window: float = WINDOW
    total: int = 0
    _burst_start: float | None = None
    _last_seen: float = 0.0
    _next_report: float = 0.0
    _extra: int = 0  # errors in this burst after its first
    _pending: Counter[str] = field(default_factory=Counter)
    _burst: Counter[str] = field(default_factory=Counter)

    @property
    def in_burst(self) -> bool:
        return self._burst_start is not None

    def offer(self, kind: str, count: int, detail: str, now: float) -> list[NoiseReport]:
        """One protocol error (``count`` bytes or frames of ``kind``) at ``now``."""
        count = max(count, 1)
        out = self.tick(now)
        self.total += count
        self._last_seen = now
        if self._burst_start is None:
            self._burst_start = now
            self._next_report = now + self.window
        first_of_kind = kind not in self._burst and len(self._burst) < MAX_KINDS
        self._burst[_key(self._burst, kind)] += count
        if first_of_kind:
            out.append(NoiseReport(kind, count, self.total, detail))
            return out
        self._extra += count
        self._pending[_key(self._pending, kind)] += count
        return out + self._due(now)

    def tick(self, now: float) -> list[NoiseReport]:
        """Time passes: the aggregate that is due, or the summary after a quiet window."""
        if self._burst_start is None:
            return []
        if now - self._last_seen >= self.window:
            return self.end()
        return self._due(now)

    def end(self) -> list[NoiseReport]:
        """Close the burst (a quiet window, or the connection ended): what is pending,
        then a summary if the burst was more than its first error."""
        if self._burst_start is None:
            return []
        out = self._flush(self._last_seen)
        if self._extra:
            span = self._last_seen - self._burst_start
            out.append(NoiseReport("line_noise_ended", sum(self._burst.values()), self.total,
                                   f"burst over: {_kinds(self._burst)} in {span:.1f} s"))
        self._burst_start = None
        self._burst.clear()
        self._extra = 0
        return out

    def _due(self, now: float) -> list[NoiseReport]:
        if self._pending and now >= self._next_report:
            return self._flush(now)
        return []

    def _flush(self, now: float) -> list[NoiseReport]:
        if not self._pending:
            return []
        report = NoiseReport("line_noise", sum(self._pending.values()), self.total,
                             f"{_kinds(self._pending)} within {self.window:g} s")
        self._pending.clear()
        self._next_report = now + self.window
        return [report]


def _key(counter: Counter[str], kind: str) -> str:
    """Kinds come from the driver's own vocabulary, but bound them anyway."""
    return kind if kind in counter or len(counter) < MAX_KINDS else "other"


def _kinds(counts: Counter[str]) -> str:
    return ", ".join(f"{kind} {n:,}" for kind, n in counts.most_common())
