"""Where logs live: one file per table per day, a chain kept across the files of a table.

Layout: ``<root>/<table>/<table>-<YYYY-MM-DD>.jsonl``. A second file for the
same day (only when the day's file is broken and a new one is started with a
recorded reason) is ``<table>-<YYYY-MM-DD>.2.jsonl``, then ``.3`` …. Files are
created with mode 0640, directories 0750.

Rotation keeps one chain per table: the first record of a new day's file
continues the previous file's chain (its ``seq`` is the previous last ``seq``
+ 1, its ``prev`` the previous last ``hash``) and says so in its ``chain``
field: ``{"continues": {"file", "seq", "hash"[, "mac"]}}``. A new chain
(``seq`` 1, ``prev`` ``GENESIS``) after an earlier file is started only with a
recorded reason: ``{"new_chain": {"reason", "previous": {"file", "seq",
"hash", "problem"}}}``.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.audit.anchors import AnchorSink
from controller.audit.modes import make_dirs
from controller.audit.verify import ChainStart, VerifyResult, verify_file
from controller.audit.writer import AuditLog, AuditLogError, Clock

LOG_SUFFIX = ".jsonl"
_NAME = re.compile(r"^(?P<table>.+)-(?P<date>\d{4}-\d{2}-\d{2})(?:\.(?P<part>\d+))?\.jsonl$")
_TABLE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True, order=True)
class LogName:
    """The parts of a log file name: ``<table>-<date>[.<part>].jsonl``."""

    date: dt.date
    part: int
    table: str

    @property
    def name(self) -> str:
        suffix = "" if self.part == 1 else f".{self.part}"
        return f"{self.table}-{self.date.isoformat()}{suffix}{LOG_SUFFIX}"


def check_table_id(table: str) -> str:
    """A table id safe as a directory and file name (letters, digits, ``.``, ``_``, ``-``)."""
    if not isinstance(table, str) or not _TABLE_ID.match(table):
        raise ValueError(f"table id {table!r} cannot name a log file: use letters, digits, "
                         "'.', '_' and '-' (at most 64, not starting with a '.' or '-')")
    return table


def parse_log_name(name: str | os.PathLike[str]) -> LogName | None:
    """The table, date and part of a log file name, or None if it is not one."""
    match = _NAME.match(os.path.basename(os.fspath(name)))
    if not match:
        return None
    try:
        date = dt.date.fromisoformat(match["date"])
    except ValueError:
        return None
    return LogName(date, int(match["part"] or 1), match["table"])


def log_path(root: str | os.PathLike[str], table: str, date: dt.date, part: int = 1) -> Path:
    check_table_id(table)
    return Path(root) / table / LogName(date, part, table).name


def table_files(root: str | os.PathLike[str], table: str) -> list[Path]:
    """The table's log files under ``root``, oldest first (by date, then part)."""
    directory = Path(root) / check_table_id(table)
    if not directory.is_dir():
        return []
    named = []
    for path in directory.iterdir():
        parsed = parse_log_name(path.name)
        if parsed is not None and parsed.table == table and path.is_file():
            named.append((parsed, path))
    return [path for _, path in sorted(named)]


def _head_record(path: Path, result: VerifyResult, problem: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"file": path.name, "seq": result.head_seq, "hash": result.head}
    if problem is not None:
        out["problem"] = problem
    return out


def open_table_log(
    root: str | os.PathLike[str],
    table: str,
    date: dt.date | None = None,
    *,
    key: bytes | None = None,
    durability: str = "input",
    clock: Clock | None = None,
    anchors: AnchorSink | None = None,
    new_log_reason: str | None = None,
) -> AuditLog:
    """Open the table's log for ``date`` (default: today, UTC), continuing the table's chain.

    - The day's file exists: it is verified and continued.
    - It does not: a new file continues the chain of the table's latest earlier
      file, which must verify.
    - Whichever file must verify does not: :class:`AuditLogError`, unless
      ``new_log_reason`` is given; then a new file (the next part of the day)
      starts a new chain, and its first record holds the reason and the head
      of the broken file as far as it verified.
    """
    check_table_id(table)
    if date is None:
        date = (clock() if clock else dt.datetime.now(dt.UTC)).astimezone(dt.UTC).date()
    directory = Path(root) / table
    make_dirs(directory)
    files = table_files(root, table)
    same_day = [p for p in files if parse_log_name(p.name).date == date]  # type: ignore[union-attr]
    common: dict[str, Any] = {"durability": durability, "clock": clock, "key": key,
                              "anchors": anchors, "table": table}
    if same_day:
        path = same_day[-1]
        try:
            return AuditLog.open(path, **common)
        except AuditLogError as exc:
            if not new_log_reason:
                raise
            return _new_chain(root, table, date, path, str(exc), new_log_reason, key, common)
    earlier = [p for p in files if parse_log_name(p.name).date < date]  # type: ignore[union-attr]
    if not earlier:
        return AuditLog.open(log_path(root, table, date), **common)
    previous = earlier[-1]
    result = verify_file(previous, key=key)
    if not result.ok or (result.keyed and key is None):
        why = (str(result) if not result.ok else
               f"{previous}: the log is keyed: continue its chain with its key")
        if not new_log_reason:
            raise AuditLogError(
                f"the previous log does not verify ({why}); recover it, or start a new chain "
                "with a recorded reason", path=str(previous), line=result.first_bad_line)
        return _new_chain(root, table, date, previous, why, new_log_reason, key, common,
                          result=result, part=1)
    cont: dict[str, Any] = {"file": previous.name, "seq": result.head_seq, "hash": result.head}
    mac = GENESIS_MAC
    if result.keyed and key is not None:
        cont["mac"] = mac = result.mac_head
    return AuditLog.open(log_path(root, table, date), start=ChainStart(result.head_seq,
                         result.head, mac), chain={"continues": cont}, **common)


GENESIS_MAC = ChainStart().mac


def _new_chain(root: str | os.PathLike[str], table: str, date: dt.date, broken: Path,
               problem: str, reason: str, key: bytes | None, common: dict[str, Any], *,
               result: VerifyResult | None = None, part: int | None = None) -> AuditLog:
    if result is None:
        try:
            result = verify_file(broken, key=key)
        except OSError as exc:
            raise AuditLogError(f"cannot read the broken log: {exc}", path=str(broken)) from exc
    if part is None:
        parsed = parse_log_name(broken.name)
        part = (parsed.part if parsed else 1) + 1
    path = log_path(root, table, date, part)
    while path.exists():
        part += 1
        path = log_path(root, table, date, part)
    chain = {"new_chain": {"reason": reason, "previous": _head_record(broken, result, problem)}}
    return AuditLog.open(path, chain=chain, **common)
