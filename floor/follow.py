"""Follow audit log directories as the tables write them: new whole lines, file by file.

The layout is the one ``bench`` and ``run`` write (:mod:`controller.audit.files`):
``<root>/<table>/<table>-<date>[.<part>].jsonl``. A follower keeps, per file, the byte
offset up to which it has handed out lines; it hands out only whole lines (ending in
``\\n``), so a record the table is writing at that moment is read at the next poll, whole.
It reads, it never writes, and it never holds a table's lock: the table writes its log
exactly as it would with no floor.

Why polling and not inotify: the standard library has no inotify, a poll of a few files'
sizes every 20 ms costs microseconds, and it works the same on a network file system.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from controller.audit.files import LogName, parse_log_name

#: at most this many bytes are read from one file in one poll (a day's log is caught up in
#: slices, so the floor publishes as it goes rather than after the whole backlog)
READ_SLICE = 4 << 20


@dataclass(frozen=True)
class LogFile:
    """One table log file under a followed root."""

    table: str
    name: LogName
    path: Path

    @property
    def file(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class Chunk:
    """Whole lines read from ``log`` at byte offset ``offset`` (``end`` is the next offset)."""

    log: LogFile
    offset: int
    end: int
    lines: list[bytes]


def scan(roots: list[Path], skip: frozenset[str] = frozenset()) -> dict[str, list[LogFile]]:
    """Every table's log files under ``roots``, oldest first (by date, then part).

    A table id found under two roots is followed under the first only: one table, one chain.
    ``skip``: table ids not to follow (the floor's own log).
    """
    tables: dict[str, list[LogFile]] = {}
    for root in roots:
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.name in skip or entry.name in tables:
                continue
            if not entry.is_dir():
                continue
            files = []
            try:
                inner = list(os.scandir(entry.path))
            except OSError:
                continue
            for f in inner:
                parsed = parse_log_name(f.name)
                if parsed is not None and parsed.table == entry.name and f.is_file():
                    files.append(LogFile(entry.name, parsed, Path(f.path)))
            if files:
                tables[entry.name] = sorted(files, key=lambda lf: lf.name)
    return tables


def read_new(log: LogFile, offset: int, limit: int = READ_SLICE) -> Chunk | None:
    """The whole lines of ``log`` after ``offset`` (at most about ``limit`` bytes), or None
    when there are none yet. A line still being written stays for the next call."""
    try:
        size = os.path.getsize(log.path)
    except OSError:
        return None
    if size <= offset:
        return None
    with open(log.path, "rb") as f:
        f.seek(offset)
        data = f.read(min(size - offset, limit))
    cut = data.rfind(b"\n")
    if cut < 0:
        if len(data) >= limit:  # one line longer than a slice: read it whole
            with open(log.path, "rb") as f:
                f.seek(offset)
                line = f.readline()
            if line.endswith(b"\n"):
                return Chunk(log, offset, offset + len(line), [line])
        return None
    data = data[:cut + 1]
    return Chunk(log, offset, offset + len(data), data.splitlines(keepends=True))


def file_size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1


def lines_of(path: Path, end: int) -> Iterator[bytes]:
    """The lines of the first ``end`` bytes of ``path`` (a restart's check of what it read)."""
    with open(path, "rb") as f:
        pos = 0
        for raw in f:
            if pos >= end:
                return
            pos += len(raw)
            yield raw
