"""A log file's raw lines for the verifier, read a run at a time (:class:`RawLines`)."""

from __future__ import annotations

import io

from controller.audit.records import Meter


class RawLines:
    """A file's raw lines as ``(raw, None)`` items, read about :data:`RUN_BYTES` at a
    time by ``readlines`` (the checks take bytes, and decode them only when they must:
    :class:`~controller.audit.linecheck.ChainState`); :meth:`run` hands the rest of what
    was read to ``ChainState.block`` as it is: one call per run, not a generator step per
    line. ``limit``: read only that many bytes (a line that crosses it is cut there);
    ``meter``: told the bytes read."""

    def __init__(self, f: io.BufferedReader, *, limit: int | None = None,
                 meter: Meter | None = None) -> None:
        self._f = f
        self._left = limit
        self._meter = meter
        self._lines: list[bytes] = []
        self._next = 0

    def _fill(self) -> bool:
        if self._left is not None and self._left <= 0:
            return False
        lines = self._f.readlines(RUN_BYTES)
        if not lines:
            return False
        size = sum(map(len, lines)) if self._left is not None or self._meter else 0
        if self._left is not None:
            if size > self._left:
                kept, left = [], self._left
                for raw in lines:
                    if left <= 0:
                        break
                    kept.append(raw[:left])
                    left -= len(raw)
                lines, size = kept, self._left
            self._left -= size
        if self._meter is not None:
            self._meter("verifying", size)
        self._lines, self._next = lines, 0
        return True

    def __iter__(self) -> RawLines:
        return self

    def __next__(self) -> tuple[bytes, None]:
        if self._next >= len(self._lines) and not self._fill():
            raise StopIteration
        raw = self._lines[self._next]
        self._next += 1
        return raw, None

    def run(self) -> list[bytes]:
        """The lines read and not yet handed out (reading more when there are none)."""
        if self._next >= len(self._lines) and not self._fill():
            return []
        lines = self._lines[self._next:] if self._next else self._lines
        self._next = len(self._lines)
        return lines


#: what :class:`RawLines` reads at a time (about 128 records of a card log)
RUN_BYTES = 48 << 10
