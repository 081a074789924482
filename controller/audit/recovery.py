"""Crash recovery: make a log whole again and rebuild the table's session from it.

:func:`recover` is what a controller calls on start, before it writes to a log
that a killed process may have left behind:

1. The log is opened for appending with its torn last line (a write cut by
   the crash: no ``\\n``) cut back to the end of the last whole record. The
   rest of the chain must verify; a log that does not is refused
   (:class:`~controller.audit.writer.AuditLogError`): that is not a crash but
   damage, and only a new file with a recorded reason may follow it
   (:func:`controller.audit.files.open_table_log`).
2. The session is rebuilt by replaying the log's inputs (from its last
   header, with that header's profile and settings) into a fresh engine:
   table, shoe cycle, round, card accounting, open faults and the tally.
3. A ``recovery`` record says what happened: what was cut (line, offset,
   length in bytes and SHA-256 of the bytes; never the bytes), how many inputs
   were replayed, and how many outputs were restored.
4. Outputs of the last input that the crash kept from the log (under the
   default durability only inputs are fsynced) are recomputed by the engine
   and written after the recovery record, so the log replays identically.
5. The head is anchored (reason ``recovery``) when there is an anchor sink.

The chain continues unbroken: the recovery record's ``prev`` is the hash of
the last whole record. A torn *input* was never acted on (the session writes
an input before the engine sees it); it is gone, and the recovery record
holds its length and hash.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller import jsontext
from controller.audit.anchors import AnchorSink
from controller.audit.files import parse_log_name, table_files
from controller.audit.opening import check_verified, count_newlines
from controller.audit.records import LogReader
from controller.audit.replay import Difference, Replayer
from controller.audit.sets import RECORD_KEYS
from controller.audit.verify import ChainStart, verify_file
from controller.audit.writer import AuditLog, AuditLogError, Clock, TornCut, find_torn_tail
from controller.jsontext import JsonTextError
from controller.session import TableSession

DEFAULT_REASON = "restart after an unclean stop"


@dataclass
class RecoveryResult:
    path: Path
    cut: TornCut | None
    record: dict[str, Any]
    restored_outputs: int
    inputs_replayed: int
    log: AuditLog
    session: TableSession | None  # None when the log has no header yet
    differences: list[Difference] = field(default_factory=list)

    def summary(self) -> str:
        cut = ("nothing cut" if self.cut is None else
               f"cut a torn line {self.cut.line} ({self.cut.bytes} bytes, sha256 "
               f"{self.cut.sha256[:16]}…)")
        ctx = self.session.engine.context() if self.session else {}
        differs = (f"; the log does not replay as the engine decides it: "
                   f"{len(self.differences)} difference(s) (audit replay names them)"
                   if self.differences else "")
        return (f"{self.path}: recovered: {cut}; {self.inputs_replayed} input(s) replayed, "
                f"{self.restored_outputs} output(s) restored; recovery record seq "
                f"{self.record['seq']}; state {ctx.get('state')}, shoe {ctx.get('shoe')}, "
                f"round {ctx.get('round')}{differs}")


def _has_whole_line(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.readline().endswith(b"\n")
    except FileNotFoundError:
        return False


def _continuation(path: Path, key: bytes | None) -> tuple[ChainStart | None, dict[str, Any] | None]:
    """Where a day file that the cut leaves empty must start: after the table's previous file."""
    parsed = parse_log_name(path.name)
    if parsed is None:
        return None, None
    root = path.parent.parent
    earlier = [p for p in table_files(root, parsed.table)
               if parse_log_name(p.name) < parsed and p.resolve() != path.resolve()]  # type: ignore[operator]
    if not earlier:
        return None, None
    result = verify_file(earlier[-1], key=key)
    if not result.ok:
        raise AuditLogError(f"the previous log does not verify ({result})", path=str(earlier[-1]),
                            line=result.first_bad_line)
    cont: dict[str, Any] = {"file": earlier[-1].name, "seq": result.head_seq, "hash": result.head}
    mac = ChainStart().mac
    if result.keyed and key is not None:
        cont["mac"] = mac = result.mac_head
    return ChainStart(result.head_seq, result.head, mac), {"continues": cont}


def _later_file(path: Path) -> Path | None:
    """A file of the same table after this one (a later day, or a later chain of the day)
    beside it: only the newest file of a set can have been cut by a crash. Looked for in
    the file's own directory, whatever its name (an auditor's copy of a set in a
    directory not named after the table was recovered file by file, each a "torn last
    file", and the chain the later files link to rewritten: a review)."""
    parsed = parse_log_name(path.name)
    if parsed is None:
        return None
    later = sorted((other, p) for p in path.parent.iterdir()
                   if (other := parse_log_name(p.name)) is not None
                   and other.table == parsed.table and other > parsed and p.is_file()
                   and p.resolve() != path.resolve())
    return later[0][1] if later else None


def recover(
    path: str | os.PathLike[str],
    *,
    key: bytes | None = None,
    durability: str = "input",
    clock: Clock | None = None,
    anchors: AnchorSink | None = None,
    reason: str = DEFAULT_REASON,
    whole: bool = False,
) -> RecoveryResult:
    """Recover the log at ``path`` and return the rebuilt session, logging to it, ready to go on.

    Raises :class:`AuditLogError` when the log is damaged beyond a torn last
    line, and :class:`~controller.audit.replay.ReplayError` or
    :class:`~controller.audit.records.LogReadError` when its header cannot be
    used to rebuild the session.

    Before anything is cut the records are verified: the log's last window (as a
    controller reopening it checks, in bounded time), or with ``whole`` every record
    before the torn line (``audit recover``: an auditor's command, not a restart's).
    """
    file = Path(path)
    later = _later_file(file)
    if later is not None:
        raise AuditLogError(
            f"{later.name} follows this file in the table's set: a later file was begun, so "
            "this one's end was once whole — damage, not a crash; nothing was cut",
            path=str(file))
    snapshot = _tail_snapshot(file)
    if snapshot is not None and snapshot[1]:
        why = _not_cut_short(snapshot[1])
        if why is not None:
            raise AuditLogError(
                f"the last line (line {_lines_before(file, snapshot[0]) + 1}) has no newline, "
                f"but it is no record cut short by a crash: {why} — another program's file, "
                "or damage; nothing was cut", path=str(file))
    if whole and snapshot is not None and snapshot[0]:
        checked = verify_file(file, key=key, end=snapshot[0])
        last = not snapshot[1] and checked.first_bad_line == checked.lines
        check_verified(checked, str(file), key, where=(
            " (nothing was cut: the last line ends with its newline, so it was written "
            "whole — damage, not a crash)" if last else
            " (nothing was cut: damage before the last line is no crash)"))
    try:
        return _recover(file, key=key, durability=durability, clock=clock, anchors=anchors,
                        reason=reason)
    except BaseException as exc:
        if snapshot is None or _restore(file, *snapshot) != "restored":
            raise  # refused before anything changed (or the file cannot even be put back)
        if isinstance(exc, AuditLogError | OSError):
            torn = snapshot[1]
            kept = (f"the torn last line ({len(torn)} bytes, sha256 "
                    f"{hashlib.sha256(torn).hexdigest()}) is still there" if torn
                    else "the log is as it was")
            raise AuditLogError(f"the recovery could not be written ({exc}); nothing was "
                                f"changed: {kept}", path=str(file)) from exc
        raise


def _not_cut_short(torn: bytes) -> str | None:
    """Why a last line without its newline cannot be a record whose write a crash cut
    short, or None when it can be: such a line is the start of a canonical record (``{``
    and UTF-8, but for a character cut in two at its end), or a whole record that lost
    only its newline. A review's one-line text notes and binary files were "recovered" —
    cut, and the file replaced by a recovery record."""
    if not torn.strip(b"\0"):  # (a power cut can leave the blocks of a write zero-filled)
        return None
    if not torn.startswith(b"{"):
        return "it does not begin as a record does (with '{')"
    try:
        torn.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(torn) - 3:  # (more than a character cut at the end)
            return f"it is not UTF-8 text (byte {exc.start + 1})"
    try:
        whole = jsontext.loads(torn)
    except JsonTextError:
        return None  # cut short
    if not isinstance(whole, dict) or not any(k in whole for k in RECORD_KEYS):
        return "it is a whole JSON value, but no record (no seq, hash or kind)"
    return None


def _lines_before(file: Path, offset: int) -> int:
    fd = os.open(file, os.O_RDONLY)
    try:
        return count_newlines(fd, offset)
    finally:
        os.close(fd)


def _tail_snapshot(file: Path) -> tuple[int, bytes] | None:
    """Where the last whole line ends, and the bytes after it (a torn line, or nothing):
    what :func:`_restore` puts back if the recovery cannot be written whole."""
    try:
        fd = os.open(file, os.O_RDONLY)
    except OSError:
        return None
    try:
        found = find_torn_tail(fd)
        return found if found is not None else (os.fstat(fd).st_size, b"")
    finally:
        os.close(fd)


def _restore(file: Path, offset: int, torn: bytes) -> str:
    """Put the log back as it was before the recovery began: cut what the recovery wrote,
    and write the torn line back (its blocks were just freed by the cut). Returns
    ``unchanged`` (nothing had been written), ``restored`` or ``failed``."""
    try:
        fd = os.open(file, os.O_RDWR)
    except OSError:
        return "failed"
    try:
        size = os.fstat(fd).st_size
        if size == offset + len(torn) and os.pread(fd, len(torn), offset) == torn:
            return "unchanged"
        os.ftruncate(fd, offset)
        if torn and os.pwrite(fd, torn, offset) != len(torn):
            return "failed"
        os.fsync(fd)
        return "restored"
    except OSError:
        return "failed"
    finally:
        os.close(fd)


def _recover(file: Path, *, key: bytes | None, durability: str, clock: Clock | None,
             anchors: AnchorSink | None, reason: str) -> RecoveryResult:
    start = chain = None
    if not _has_whole_line(file):
        start, chain = _continuation(file, key)
    log = AuditLog.open(file, key=key, durability=durability, clock=clock, anchors=anchors,
                        start=start, chain=chain, repair_torn=True)
    try:
        replayer = Replayer()
        for rec in LogReader([file]):
            replayer.feed(rec)
        missing = replayer.take_missing_tail()
        replayer.finish()
        session = replayer.session
        context = session.engine.context() if session else {}
        cut = log.writer.torn_cut
        record = log.write(
            "recovery", context,
            reason=reason,
            cut=None if cut is None else cut.to_record(),
            inputs_replayed=replayer.inputs,
            restored_outputs=len(missing),
            replay_differences=len(replayer.differences),
        )
        for output in missing:
            log.output(output, context=context)
        log.anchor("recovery")
    except BaseException:
        log.close()
        raise
    if session is not None:
        session.audit = log
    return RecoveryResult(file, cut, record, len(missing), replayer.inputs, log, session,
                          replayer.differences)
