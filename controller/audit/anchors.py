"""Anchors: the head of a log (seq, hash) published somewhere the log's writer cannot rewrite.

A hash chain proves integrity only relative to a head known from elsewhere:
whoever can rewrite the log file can recompute every hash after an edit, or
cut records off its end. :class:`AnchorSink` writes the head to a separate
anchor file (JSON Lines, one canonical object per line, fsynced) and to syslog
where the platform has it. :class:`~controller.audit.writer.AuditLog` anchors
at open, at every shoe end (a transition into ``shoe_complete``), at table
close (into ``closed``) and at close. ``shoewarden audit verify --anchors FILE``
checks a log against them (:mod:`controller.audit.sets`).

An anchor line::

    {"file":"BJ-3-2026-11-21.jsonl","hash":"…","reason":"shoe_end","seq":812,
     "table":"BJ-3","ts":"2026-11-21T11:02:13.120Z"}

``file`` is the log's file name (no directory: logs may be archived elsewhere);
``reason`` is ``open``, ``shoe_end``, ``table_close``, ``close``, ``recovery`` or
one a caller chose. Keep the anchor file on another disk, host or owner than
the logs (or rely on a remote syslog): an anchor the forger can rewrite proves
nothing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller import jsontext
from controller.audit.canonical import canonical_bytes
from controller.audit.modes import open_file
from controller.inputfiles import file_problem, open_pipe
from controller.jsontext import JsonTextError

try:  # not on every platform
    import syslog as _syslog
except ImportError:  # pragma: no cover - e.g. Windows
    _syslog = None  # type: ignore[assignment]

SYSLOG_TAG = "shoewarden-audit-anchor"


class AnchorFileError(ValueError):
    """An anchor file that cannot be read (``path``, ``line``)."""

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        self.path, self.line = path, line
        super().__init__(f"{path}: " + (f"line {line}: " if line else "") + message)


@dataclass(frozen=True)
class Anchor:
    table: str | None
    file: str
    seq: int
    hash: str
    ts: str
    reason: str
    line: int = 0  # line in the anchor file (0 when not read from one)
    #: what the line is, for messages: an ``anchor``, or a witness ``checkpoint``
    kind: str = "anchor"

    @property
    def made(self) -> str:
        """How it came to be, for messages: an anchor is written, a checkpoint signed."""
        return "signed" if self.kind == "checkpoint" else "written"

    def to_record(self) -> dict[str, Any]:
        return {"table": self.table, "file": self.file, "seq": self.seq, "hash": self.hash,
                "ts": self.ts, "reason": self.reason}


class AnchorSink:
    """Writes anchors to a file (append, fsync) and/or syslog. Thread-safe.

    ``syslog``: also send each anchor to the system log (facility ``authpriv``
    where it exists, so only root can read it back and no user can remove it),
    if the platform has the ``syslog`` module; errors there are ignored, since
    syslog is the second copy.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, syslog: bool = True,
                 fsync: bool = True) -> None:
        self.path = None if path is None else os.fspath(path)
        self.use_syslog = syslog and _syslog is not None
        self.fsync = fsync
        self._lock = threading.Lock()
        self.written: list[Anchor] = []

    def write(self, *, table: str | None, file: str, seq: int, hash: str, reason: str,
              ts: str) -> dict[str, Any]:
        anchor = Anchor(table, os.path.basename(file), seq, hash, ts, reason)
        record = anchor.to_record()
        line = canonical_bytes(record) + b"\n"
        with self._lock:
            if self.path is not None:
                _append_whole(self.path, line, fsync=self.fsync)
            if self.use_syslog:
                _send_syslog(line[:-1].decode("utf-8"))
            self.written.append(anchor)
        return record

    def recorded(self, name: str) -> list[Anchor]:
        """The anchors the anchor file holds for the log file ``name`` (its base name), in
        file order: what a writer about to continue that file checks it against
        (:func:`controller.audit.opening.check_anchored`). Only the lines that name it are
        decoded (an anchor file shared by many files and days stays cheap to read). No
        file, or one that is no regular file or that this account may not read: none. A torn
        last line is skipped, as by :func:`read_anchors`; a bad line naming this file:
        :class:`AnchorFileError`."""
        if self.path is None or not os.path.isfile(self.path) \
                or not os.access(self.path, os.R_OK):
            # (none yet; or a target anchors are only written to — a write-once printer, a
            # file this account may append to but not read: nothing to check against here,
            # and not a failure — the anchors are being written; a review)
            return []
        try:
            data = Path(self.path).read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise AnchorFileError(f"cannot read the anchor file: {exc.strerror or exc}",
                                  path=self.path) from None
        base = os.path.basename(name)
        needle = base.encode("utf-8", "surrogateescape")
        lines = data.split(b"\n")
        last = len(lines) if data.endswith(b"\n") else len(lines) - 1  # (torn: skipped)
        out: list[Anchor] = []
        for n in range(last):
            line = lines[n]
            if needle in line:
                out.extend(a for a in _parse(line, self.path, first_line=n + 1)
                           if a.file == base)
        return out


def anchor_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why anchors cannot be appended at ``path`` (None: they can, as far as one can tell
    before writing). Asked before a command starts: a directory, or a file under one that
    does not exist, left ``audit recover`` without its anchor and without a word, and
    ``bench`` raising ANCHOR_WRITE_FAILED only after the whole day (a review)."""
    p = Path(path)  # (a device is allowed: a write-once line printer, /dev/full in a test)
    if p.is_dir():
        return f"{p}: a directory, not an anchor file"
    if p.is_fifo() and not open_pipe(p):  # (opening it blocks until someone reads it:
        # recover hung with the log already cut, a review)
        return f"{p}: a FIFO (writing to it waits for a reader), not an anchor file"
    if not p.exists() and not p.parent.is_dir():
        return f"{p}: its directory {p.parent} does not exist"
    if not os.access(p if p.exists() else p.parent, os.W_OK):
        return f"{p}: not writable"
    return None


def _append_whole(path: str, line: bytes, *, fsync: bool) -> None:
    """Append ``line`` whole, or not at all: under an exclusive lock (several writers may
    share an anchor file), a short or failed write (a full disk) is cut back to where the
    file ended, so no half line is ever left behind; then :class:`OSError`."""
    fd = open_file(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        end = os.fstat(fd).st_size
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(line)} bytes)")
            if fsync:
                os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, end)
                os.fsync(fd)
            raise
    finally:
        os.close(fd)  # releases the lock


def _send_syslog(text: str) -> None:
    assert _syslog is not None
    facility = getattr(_syslog, "LOG_AUTHPRIV", _syslog.LOG_USER)
    # no syslog daemon: the anchor file still has it
    with contextlib.suppress(OSError, ValueError):
        _syslog.syslog(facility | _syslog.LOG_NOTICE, f"{SYSLOG_TAG} {text}")


def read_anchors(path: str | os.PathLike[str], notes: list[str] | None = None) -> list[Anchor]:
    """Every anchor in an anchor file, in file order; :class:`AnchorFileError` if unreadable.

    Lines from syslog (``… shoewarden-audit-anchor {json}``) are accepted too,
    so a syslog extract can be given as the anchor file. A last line without its newline
    that does not read is a write cut short (a crash, a full disk before anchors were
    written whole): it is skipped, and said in ``notes`` (when given).
    """
    name = os.fspath(path)
    why = file_problem(name)  # (a FIFO blocked the reader: a review)
    if why is not None and why != "no such file":
        raise AnchorFileError(f"cannot read the anchor file: {why}", path=name)
    try:
        data = Path(name).read_bytes()
    except FileNotFoundError:
        raise AnchorFileError("no such anchor file", path=name) from None
    except OSError as exc:
        raise AnchorFileError(f"cannot read the anchor file: {exc}", path=name) from None
    # line by line, as bytes: a bad byte costs its line's name, not the file's (and only
    # "\n" ends a line: U+2028 inside a string is text)
    torn = bool(data) and not data.endswith(b"\n")
    if torn:
        body, _, last = data.rpartition(b"\n")
        last_line = data.count(b"\n") + 1
        try:
            tail = list(_parse(last, name, first_line=last_line))
        except AnchorFileError:
            if notes is not None:
                notes.append(f"{name}: line {last_line}: torn last anchor line "
                             "(a write cut short) ignored")
            return list(_parse(body, name))
        return [*_parse(body, name), *tail]
    return list(_parse(data, name))


def _parse(data: bytes, name: str, first_line: int = 1) -> Iterator[Anchor]:
    tag = SYSLOG_TAG.encode()
    for n, line in enumerate(data.split(b"\n"), start=first_line):
        if not line.strip():
            continue
        if tag in line:
            line = line.split(tag, 1)[1]
        try:
            obj = jsontext.loads(line)
        except JsonTextError as exc:
            raise AnchorFileError(f"not JSON ({exc})", path=name, line=n) from None
        if not isinstance(obj, dict):
            raise AnchorFileError("not a JSON object", path=name, line=n)
        seq, h, file = obj.get("seq"), obj.get("hash"), obj.get("file")
        if type(seq) is not int or seq < 0 or not isinstance(h, str) or not isinstance(file, str):
            raise AnchorFileError("an anchor needs file (string), seq (int) and hash (string)",
                                  path=name, line=n)
        table = obj.get("table")
        yield Anchor(table if isinstance(table, str) else None, os.path.basename(file), seq, h,
                     str(obj.get("ts", "")), str(obj.get("reason", "")), n)
