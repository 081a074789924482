"""Repairing a broken file: the table's true records taken in again from its own log.

A ``CHAIN_BREAK`` marks a table's file broken in the index (``log_files.broken``): the
floor keeps the records up to the break and takes nothing more of that file. Over NATS the
break is most often a record forged into the stream under the table's next message id;
the stream then de-duplicates the table's own record of that id, so the true records can
never arrive that way. The table's log file still holds them. After the investigation an
operator repairs the file from it (``shoewarden floor repair``):

- only a file marked broken is repaired;
- the log must agree with what the floor committed — up to the committed offset it verifies
  to the committed head (seq and hash) — and continue it: the records after it verify
  against that head with the same check the floor applies to every run
  (:func:`controller.audit.verify.verify_run`, through :meth:`Floor.ingest`), the first
  one's ``prev`` the committed hash; otherwise nothing changes and the refusal says where
  the log differs;
- who repaired it and why goes into the floor's own hash-chained log first (``kind:
  "repair"``), then the records, the file's new head and the cleared break are committed in
  one transaction. The ``CHAIN_BREAK`` alert and its acknowledgement stay as they were; a
  ``CHAIN_REPAIRED`` alert (warning) names who repaired what, until someone acknowledges it.

The repair runs as a floor of its own on the same index (it folds, raises the alerts of the
repaired records' deviations, signs nothing); a floor consuming NATS on a shared index takes
the new head from the database when the file's next record arrives (``Floor.catch_up``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import orjson

from controller.audit import AuditLogError
from controller.audit.files import parse_log_name
from controller.audit.verify import ChainStart, VerifyResult, verify_run
from floor.alerts import CHAIN_BREAK, CHAIN_REPAIRED, FLOOR_RULE, LOG_REWRITTEN, AlertDraft
from floor.core import Floor, file_order, utc_now
from floor.follow import Chunk, LogFile
from floor.store import FilePosition, HeldError

#: the floor's own log: a repair about to be committed, and one whose commit failed
REPAIR_KIND = "repair"
REPAIR_FAILED_KIND = "repair_failed"


class RepairError(Exception):
    """A repair not made. ``refused``: the floor or the log does not allow it (exit 1);
    otherwise the request itself is wrong (exit 2)."""

    def __init__(self, message: str, *, refused: bool = True) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True)
class Repair:
    """What a repair committed: the file's head before and after, from which log."""

    table: str
    file: str
    source: str
    from_seq: int
    from_hash: str
    to_seq: int
    to_hash: str
    records: int
    log_seq: int  # the repair's record in the floor's own log


def log_path(roots: list[Path], table: str, file: str) -> Path:
    """The table's log file under the first of ``roots`` that has it (the layout ``bench``
    and ``run`` write: ``<root>/<table>/<file>``)."""
    name = parse_log_name(file)
    if name is None or not file.startswith(f"{table}-"):
        raise RepairError(f"--file {file!r}: not a log file name of table {table} "
                          f"({table}-YYYY-MM-DD[.N].jsonl)", refused=False)
    for root in roots:
        path = root / table / file
        if path.is_file():
            return path
    raise RepairError(f"--file {file}: not found under {', '.join(str(r / table) for r in roots)}",
                      refused=False)


def _where(result: VerifyResult, before: int) -> str:
    """A failed check of the log's lines after the first ``before`` lines, in the file's
    own line numbers."""
    line = (result.first_bad_line or 0) + before
    seq = "" if result.first_bad_seq is None else f" (seq {result.first_bad_seq})"
    problem = f" [{result.problem}: {result.detail}]" if result.detail else \
        f" [{result.problem}]" if result.problem else ""
    return f"line {line}{seq}: {result.reason}{problem}"


def _broken_position(floor: Floor, table: str, file: str) -> FilePosition:
    """The file's position, as the index holds it now (called under the repair's hold:
    another repair that committed before it took the hold has cleared the break)."""
    if floor.store.shared:
        floor.catch_up(table)  # what the floors committed, not what this one last saw
    with floor.lock:
        watch = floor.tables.get(table)
        pos = watch.files.get(file) if watch is not None else None
        known = sorted(watch.files) if watch is not None else []
    # an index no other floor writes (SQLite) was read when this floor started: read again
    stored = None if floor.store.shared else next(
        (p for p in floor.store.positions_of(table) if p.file == file), None)
    if pos is not None and stored is not None and (stored.seq, stored.hash, stored.broken) \
            != (pos.seq, pos.hash, pos.broken):
        raise RepairError(f"table {table}: {file} changed in the index since this floor read "
                          f"it (now to seq {stored.seq}, "
                          f"{'broken' if stored.broken else 'not broken'}): another floor or "
                          "repair wrote it; nothing was changed — run the repair again")
    if pos is None:
        held = f"its files: {', '.join(known)}" if known else "no file of that table"
        raise RepairError(f"the floor holds no file {file} of table {table} ({held})",
                          refused=False)
    if not pos.broken:
        raise RepairError(f"table {table}: {file} is not marked broken (the floor holds it to "
                          f"seq {pos.seq}): there is nothing to repair")
    return pos


def _check_log(pos: FilePosition, source: Path) -> tuple[list[bytes], VerifyResult]:
    """The log's whole lines after the committed head, verified against it; raises with
    where the log differs from what the floor committed."""
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise RepairError(f"{source}: {exc.strerror or exc}", refused=False) from None
    data = data[:data.rfind(b"\n") + 1]  # whole lines only (a record being written waits)
    committed = f"seq {pos.seq} {pos.hash[:12]}…"
    if len(data) < pos.offset:
        raise RepairError(f"{source} is shorter ({len(data)} bytes of whole lines) than the "
                          f"{pos.offset} bytes the floor committed of it (to {committed}): "
                          "it does not hold the floor's records")
    before = data[:pos.offset].splitlines(keepends=True)
    if before:
        head = verify_run(before, start=None, chain=False, source=str(source))
        if not head.ok:
            raise RepairError(f"{source} does not verify up to the floor's head ({committed}): "
                              f"{_where(head, 0)}")
        if (head.head_seq, head.head) != (pos.seq, pos.hash):
            raise RepairError(f"{source} differs from what the floor committed: its first "
                              f"{pos.offset} bytes end at seq {head.head_seq} "
                              f"{head.head[:12]}…, the floor committed {committed}")
    after = data[pos.offset:].splitlines(keepends=True)
    if not after:
        raise RepairError(f"{source} holds no record after the floor's head ({committed}) "
                          "yet: repair once the table has written past it")
    if before:
        try:
            link = orjson.loads(after[0]).get("prev")
        except (orjson.JSONDecodeError, AttributeError):
            link = None  # the chain check below says what is wrong with the line
        if isinstance(link, str) and link != pos.hash:
            raise RepairError(f"{source} does not continue the floor's head: its record at "
                              f"line {len(before) + 1} has prev {link[:12]}…, the floor "
                              f"committed {committed}; nothing was changed")
        chain = orjson.loads(pos.chain) if pos.chain else None
        result = verify_run(after, start=ChainStart(pos.seq, pos.hash, pos.mac), chain=chain,
                            source=str(source))
    else:  # broken at the file's first record: the whole file, as the floor checks one
        result = verify_run(after, start=None, chain=False, source=str(source))
    if not result.ok:
        raise RepairError(f"{source} does not continue the floor's head ({committed}) as a "
                          f"chain: {_where(result, len(before))}; nothing was changed")
    return after, result


def repair_file(floor: Floor, table: str, file: str, source: Path, *, by: str,
                note: str) -> Repair:
    """Take the true records of ``table``'s broken ``file`` in from the table's log at
    ``source`` (see the module's doc). Raises :class:`RepairError` with what is wrong."""
    if not by.strip():
        raise RepairError("--by must name the person repairing (a non-empty text)",
                          refused=False)
    if floor.audit_dir is None:
        raise RepairError("a repair needs the floor's own log (--log DIR)", refused=False)
    try:
        with floor.store.hold(hold_name(table, file)):
            return _repair_held(floor, table, file, source, by=by, note=note)
    except HeldError as exc:
        raise RepairError(f"{exc}: one repair of a file at a time; nothing was changed"
                          ) from None


def hold_name(table: str, file: str) -> str:
    """What a repair holds in the index (:meth:`floor.store.SqlIndex.hold`)."""
    return f"the repair of table {table} file {file}"


def _repair_held(floor: Floor, table: str, file: str, source: Path, *, by: str,
                 note: str) -> Repair:
    """:func:`repair_file`, the file held against every other repair of it: two operators
    repairing one file at once (from two machines, on a shared index) would both find it
    broken, both take the same records in and both record a repair. Now the second is
    refused while the first runs, and finds the break cleared once it has committed."""
    pos = _broken_position(floor, table, file)
    from_seq, from_hash = pos.seq, pos.hash  # (the ingest moves ``pos`` on)
    lines, result = _check_log(pos, source)
    breaks = [a for a in floor.alerts_of_file(table, file)
              if a.code in (CHAIN_BREAK, LOG_REWRITTEN)]
    taken = b"".join(lines)
    try:
        record = floor.write_own(
            REPAIR_KIND, by=by.strip(), note=note, repaired={
                "table": table, "file": file, "source": str(source), "broken": pos.broken,
                "from": {"seq": from_seq, "hash": from_hash},
                "to": {"seq": result.head_seq, "hash": result.head}, "records": len(lines),
                "sha256": hashlib.sha256(taken).hexdigest()},
            alerts=[{"id": a.id, "seq": a.seq, "code": a.code, "acked_by": a.acked_by}
                    for a in breaks])
    except AuditLogError as exc:
        raise RepairError(f"the floor's log (--log {floor.audit_dir}): {exc}; nothing was "
                          "changed (a running floor holds its log open: give the repair a "
                          "--log DIR of its own)", refused=False) from None
    name = parse_log_name(file)
    assert name is not None  # (log_path checked it)
    chunk = Chunk(LogFile(table, name, Path(pos.path)), pos.offset, pos.offset + len(taken),
                  lines)
    with floor.lock:
        watch = floor.tables[table]
        mine = watch.files[file]
        was = mine.broken
        mine.broken = None  # the run the repair commits carries the cleared break
        newer = watch.last_file is not None and file_order(watch.last_file) > file_order(file)
    try:
        with floor.pipelined():
            took = floor.ingest(table, chunk, late=True)
    except Exception as exc:
        with floor.lock:
            mine.broken = was
        said = "the floor's log records it as failed"
        try:
            floor.write_own(REPAIR_FAILED_KIND, repaired={"table": table, "file": file},
                            repair_seq=record["seq"], reason=str(exc) or type(exc).__name__)
        except (AuditLogError, OSError) as again:
            said = f"the floor's log could not record it as failed either: {again}"
        raise RepairError(f"the repair of {table} {file} was not committed: {exc}; "
                          f"{said}", refused=False) from None
    if took != len(lines) or mine.broken:  # checked just before: cannot differ
        raise RepairError(f"the repair of {table} {file} was committed but took {took} of "
                          f"{len(lines)} record(s): {mine.broken}", refused=False)
    if newer:  # an older file repaired: the table's live state is its newest file's
        floor.refold(table)
    # on every floor's pages until someone acknowledges it: a file repaired is a thing an
    # inspector looks at, whoever did it
    floor.raise_alerts([AlertDraft(
        table, file, result.head_seq, CHAIN_REPAIRED, "warning",
        f"{file} repaired from the table's log by {by.strip()}: seq {from_seq + 1} to "
        f"{result.head_seq} taken in ({len(lines)} record(s); the floor's log seq "
        f"{record['seq']})" + (f": {note}" if note else ""), FLOOR_RULE, utc_now())])
    return Repair(table, file, str(source), from_seq, from_hash, result.head_seq,
                  result.head, took, int(record["seq"]))
