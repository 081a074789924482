"""One writer per table: a table's log directory is held by one process at a time.

Two controllers writing one table's log would interleave two chains (the second one
refused as "does not verify", then offered a new chain that forks the log while the first
goes on writing). So whatever writes a table's log — ``run``, ``bench``, ``audit recover`` —
first holds the table: an exclusive ``flock`` on ``<table dir>/.shoewarden.lock``, which the
kernel releases when the process ends, however it ends (no stale lock after a crash). The
holder writes its PID and command line there, so the next one can say who holds it.

Holding is re-entrant within a process (recovery and the day's log open both hold it).
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
from pathlib import Path

from controller.audit.modes import make_dirs, open_file

LOCK_NAME = ".shoewarden.lock"

_held: dict[str, list[int]] = {}  # realpath of the lock file -> [fd, holds]
_guard = threading.Lock()


class LogInUseError(Exception):
    """The table's log is held by another process (``pid``, ``command``: who, when known)."""

    def __init__(self, directory: str, pid: int | None, command: str) -> None:
        self.directory, self.pid, self.command = directory, pid, command
        who = f"process {pid}" if pid else "another process"
        super().__init__(f"{directory}: the table's log is in use by {who}"
                         + (f" ({command})" if command else "")
                         + "; one controller per table: stop it first (nothing was changed)")


class TableHold:
    """A hold on a table's log directory; :meth:`release` (or leaving the ``with``)."""

    def __init__(self, key: str) -> None:
        self._key: str | None = key

    def release(self) -> None:
        with _guard:
            if self._key is None:
                return
            entry = _held[self._key]
            entry[1] -= 1
            if entry[1] == 0:
                os.close(entry[0])  # releases the flock
                del _held[self._key]
            self._key = None

    def __enter__(self) -> TableHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def hold_table(directory: str | os.PathLike[str]) -> TableHold:
    """Hold the table whose log files are in ``directory`` (created 0750 if missing), or
    raise :class:`LogInUseError` naming the process that holds it."""
    path = Path(directory)
    make_dirs(path)
    lock = path / LOCK_NAME
    key = os.path.realpath(lock)
    with _guard:
        if key in _held:
            _held[key][1] += 1
            return TableHold(key)
        fd = open_file(lock, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
            os.close(fd)
            pid, command = _holder(text)
            raise LogInUseError(str(path), pid, command) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        command = " ".join([_program(), *sys.argv[1:]])[:200].replace("\n", " ")
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode("utf-8", "replace"), 0)
        _held[key] = [fd, 1]
        return TableHold(key)


def _program() -> str:
    """``shoewarden`` for the console script and ``python -m controller``; else argv[0]."""
    first = sys.argv[0] if sys.argv else ""
    if first.endswith(("shoewarden", os.path.join("controller", "__main__.py"))):
        return "shoewarden"
    return os.path.basename(first) or "python"


def _holder(text: str) -> tuple[int | None, str]:
    first, _, command = text.strip().partition(" ")
    return (int(first) if first.isdigit() else None), command.strip()
