"""Progress bars for long work on a terminal: ``bench`` with many shoes, ``audit verify``
and ``audit report`` on large logs.

A 393k-record log took 12.8 s to verify and 41.7 s to report in silence; a bench day of
many shoes runs for minutes. On a terminal (stderr is a tty and ``TERM`` is not ``dumb``)
these commands show a rich progress bar on stderr, which disappears when the work is done
(``transient``), so what stays on the screen is the result. In a pipe, a file, CI or a
cron job they stay quiet: no bar, no control codes, stdout byte for byte what it was.
``--no-progress`` turns the bar off on a terminal too.

The work itself knows nothing of the bar: the audit layer reports bytes read through a
:data:`~controller.audit.records.Meter` callback, the bench polls its step counter.
rich is the tool for this (a maintained library that handles terminal width, refresh
rate and output printed while the bar is live); nothing here draws by hand.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from types import TracebackType
from typing import IO, Any

#: the phases of the audit tools, as the bar labels them
PHASE_LABELS = {"verifying": "verifying the chain", "reading": "reading the records"}


def wanted(no_progress: bool = False, stream: IO[str] | None = None) -> bool:
    """Whether to draw a bar: on a terminal, unless told not to."""
    if no_progress:
        return False
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False
    return tty and os.environ.get("TERM", "") != "dumb"


class ProgressBar:
    """One or more bars on stderr while a ``with`` block runs; a no-op when disabled.

    ``meter(phase, n)`` advances the bar of ``phase`` by ``n`` (created on first use with
    ``total``); ``update(completed)`` sets the single bar of :meth:`task`."""

    def __init__(self, *, enabled: bool, total: float | None = None,
                 unit: str = "bytes", stream: IO[str] | None = None) -> None:
        self.enabled = enabled
        self.total = total
        self.unit = unit
        self._stream = stream if stream is not None else sys.stderr
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> ProgressBar:
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )

        amount = DownloadColumn() if self.unit == "bytes" else MofNCompleteColumn()
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), amount,
            TimeRemainingColumn(), console=Console(file=self._stream), transient=True,
            redirect_stdout=False, redirect_stderr=False)
        self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    # ------------------------------------------------------------------ phases (audit)

    def meter(self, phase: str, n: int) -> None:
        if self._progress is None:
            return
        task = self._tasks.get(phase)
        if task is None:
            task = self._tasks[phase] = self._progress.add_task(
                PHASE_LABELS.get(phase, phase), total=self.total)
        self._progress.advance(task, n)

    # ------------------------------------------------------------------ one task (bench)

    def task(self, description: str) -> None:
        if self._progress is not None and "" not in self._tasks:
            self._tasks[""] = self._progress.add_task(description, total=self.total)

    def update(self, completed: float) -> None:
        if self._progress is not None and "" in self._tasks:
            self._progress.update(self._tasks[""], completed=completed)

    def printer(self, out: IO[str]) -> IO[str]:
        """``out`` as it is, or — while a bar is live and ``out`` is a terminal too — a
        stream whose lines rich prints above the bar (on the bar's terminal) instead of
        through it. Redirected output (``bench > day.txt``) is never touched."""
        try:
            tty = out.isatty()
        except (AttributeError, ValueError):
            tty = False
        if self._progress is None or not tty:
            return out
        from rich.file_proxy import FileProxy
        return FileProxy(self._progress.console, out)  # type: ignore[return-value]


def total_bytes(paths: Iterable[str | os.PathLike[str]]) -> int:
    """The size of the files that exist among ``paths`` (what the audit tools will read)."""
    total = 0
    for p in paths:
        try:
            total += os.path.getsize(p)
        except OSError:
            continue
    return total
