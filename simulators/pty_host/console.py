"""The dealer console channel: a FIFO carrying the simulated dealer's console as JSON Lines.

The host writes one line per console step (and notes: faults, link changes, the end);
the bench's console reader reads them. Writes never block the host's loop: lines wait
in a buffer until the FIFO takes them, and a reader that is not there yet (or went away)
is simply waited for.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from pathlib import Path
from typing import Any


class ConsoleChannel:
    """The console FIFO's writing end; :attr:`lines` keeps every line written (tests)."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.path: str | None = None
        self._buf = bytearray()
        self._fd: int | None = None

    def create(self, path: Path) -> str:
        """Make the FIFO at ``path`` (replacing a stale one); returns its path."""
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.mkfifo(path)
        self.path = str(path)
        return self.path

    @property
    def connected(self) -> bool:
        """Whether a reader has opened the FIFO (the day waits for one)."""
        return self._fd is not None

    def pending_fd(self) -> int | None:
        """The FIFO's fd when lines are waiting for it (to ``select()`` on), else None."""
        return self._fd if self._buf and self._fd is not None else None

    def write(self, line: dict[str, Any]) -> None:
        self.lines.append(line)
        self._buf += json.dumps(line, separators=(",", ":")).encode() + b"\n"

    def flush(self) -> None:
        """Write what the FIFO takes now; open it first if a reader has come."""
        if self._fd is None:
            assert self.path is not None, "the console FIFO was not created"
            try:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno not in (errno.ENXIO, errno.ENOENT):
                    raise
                return
        while self._buf:
            try:
                n = os.write(self._fd, self._buf)
            except BlockingIOError:
                return
            except BrokenPipeError:
                os.close(self._fd)
                self._fd = None
                return
            del self._buf[:n]

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
