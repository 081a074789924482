"""The floor's index: SQLite (stdlib ``sqlite3``), one transaction per run of records read.

Holds every record the floor accepted (``audit_records``, the schema the database floor of
issue 12 keeps in PostgreSQL), how far each log file was read and where its chain stands
(``log_files``), and the alerts with their acknowledgements (``alerts``). A run of records,
the file's new position and the alerts they made are committed together, so a floor killed
at any moment restarts where its index says, with nothing lost and nothing twice. WAL mode:
the web thread reads (round look-ups) while the follower writes.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from floor.alerts import Alert, AlertDraft

SCHEMA = """
CREATE TABLE IF NOT EXISTS audit_records (
    table_id TEXT NOT NULL, file TEXT NOT NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL,
    record BLOB NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS audit_records_key ON audit_records (table_id, file, seq);
CREATE TABLE IF NOT EXISTS log_files (
    table_id TEXT NOT NULL, file TEXT NOT NULL, path TEXT NOT NULL, offset INTEGER NOT NULL,
    seq INTEGER NOT NULL, hash TEXT NOT NULL, mac TEXT NOT NULL, chain TEXT,
    broken TEXT, PRIMARY KEY (table_id, file));
CREATE TABLE IF NOT EXISTS alerts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, table_id TEXT NOT NULL, file TEXT NOT NULL,
    seq INTEGER NOT NULL, code TEXT NOT NULL, severity TEXT NOT NULL, message TEXT NOT NULL,
    rule TEXT NOT NULL, ts TEXT NOT NULL, acked_by TEXT, acked_at TEXT, note TEXT,
    UNIQUE (table_id, file, seq, code));
"""


class StoreError(Exception):
    """The index cannot be opened (bad URL, unreadable file): a clear message, exit 2."""


def sqlite_path(url: str) -> str:
    """``sqlite:///abs/path`` or ``sqlite:relative`` → the file path (``:memory:`` too)."""
    if url.startswith("sqlite:///"):
        return url[len("sqlite://"):]
    if url.startswith("sqlite:"):
        return url[len("sqlite:"):]
    raise StoreError(f"--db {url!r}: only sqlite:///PATH is supported on one machine "
                     "(PostgreSQL is the database floor's, docs/floor.md)")


@dataclass
class FilePosition:
    """How far the floor read one log file, and the chain's head there."""

    table: str
    file: str
    path: str
    offset: int
    seq: int
    hash: str
    mac: str
    chain: str | None  # the file's first record's ``chain`` field, as JSON text
    broken: str | None = None


class FloorStore:
    def __init__(self, path: str) -> None:
        self.path = path
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the floor's index {path}: {exc}") from None
        self.lock = threading.RLock()

    def close(self) -> None:
        with self.lock:
            self.db.close()

    # ------------------------------------------------------------------ reading back

    def positions(self) -> list[FilePosition]:
        with self.lock:
            rows = self.db.execute(
                "SELECT table_id, file, path, offset, seq, hash, mac, chain, broken "
                "FROM log_files").fetchall()
        return [FilePosition(*row) for row in rows]

    def alerts(self) -> list[Alert]:
        with self.lock:
            rows = self.db.execute(
                "SELECT id, table_id, file, seq, code, severity, message, rule, ts, acked_by, "
                "acked_at, note FROM alerts ORDER BY id").fetchall()
        return [Alert(*row) for row in rows]

    def records(self, table: str, files: Iterable[str] | None = None
                ) -> Iterator[tuple[str, bytes]]:
        """(file, record line) of a table, each file in seq order (a fresh connection: the
        caller may be another thread, and WAL lets it read while the follower writes)."""
        db = sqlite3.connect(self.path) if self.path != ":memory:" else self.db
        try:
            names = list(files) if files is not None else [r[0] for r in db.execute(
                "SELECT DISTINCT file FROM audit_records WHERE table_id = ?", (table,))]
            for name in names:
                for (line,) in db.execute(
                        "SELECT record FROM audit_records WHERE table_id = ? AND file = ? "
                        "ORDER BY seq", (table, name)):
                    yield name, line
        finally:
            if db is not self.db:
                db.close()

    def files_of(self, table: str) -> list[str]:
        with self.lock:
            return [r[0] for r in self.db.execute(
                "SELECT file FROM log_files WHERE table_id = ?", (table,))]

    # ------------------------------------------------------------------ writing

    def commit_run(self, pos: FilePosition, rows: list[tuple[int, str, bytes]],
                   drafts: list[AlertDraft]) -> list[Alert]:
        """One run of records (seq, hash, line) of one file, its new position and the alerts
        they made, in one transaction. Returns the alerts that are new (not already known)."""
        with self.lock:
            db = self.db
            db.execute("BEGIN")
            try:
                db.executemany(
                    "INSERT OR IGNORE INTO audit_records VALUES (?, ?, ?, ?, ?)",
                    [(pos.table, pos.file, seq, h, line) for seq, h, line in rows])
                db.execute(
                    "INSERT OR REPLACE INTO log_files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (pos.table, pos.file, pos.path, pos.offset, pos.seq, pos.hash, pos.mac,
                     pos.chain, pos.broken))
                made = self._insert_alerts(drafts)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return made

    def add_alerts(self, drafts: list[AlertDraft]) -> list[Alert]:
        with self.lock:
            self.db.execute("BEGIN")
            try:
                made = self._insert_alerts(drafts)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return made

    def _insert_alerts(self, drafts: list[AlertDraft]) -> list[Alert]:
        made = []
        for d in drafts:
            cur = self.db.execute(
                "INSERT OR IGNORE INTO alerts (table_id, file, seq, code, severity, message, "
                "rule, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (d.table, d.file, d.seq, d.code, d.severity, d.message, d.rule, d.ts))
            if cur.rowcount:
                made.append(Alert(int(cur.lastrowid or 0), d.table, d.file, d.seq, d.code,
                                  d.severity, d.message, d.rule, d.ts))
        return made

    def ack(self, alert_id: int, by: str, at: str, note: str) -> None:
        with self.lock:
            self.db.execute("UPDATE alerts SET acked_by = ?, acked_at = ?, note = ? "
                            "WHERE id = ? AND acked_by IS NULL", (by, at, note, alert_id))

    def mark_broken(self, table: str, file: str, why: str) -> None:
        with self.lock:
            self.db.execute("UPDATE log_files SET broken = ? WHERE table_id = ? AND file = ?",
                            (why, table, file))

    def stats(self) -> dict[str, Any]:
        with self.lock:
            (n,) = self.db.execute("SELECT count(*) FROM audit_records").fetchone()
        return {"records": n}
