"""The floor's index: SQLite (one machine) or PostgreSQL (the database floor), one
transaction per run of records read.

Holds every record the floor accepted (``audit_records``, the schema the database floor of
issue 12 keeps in PostgreSQL), how far each log file was read and where its chain stands
(``log_files``), and the alerts with their acknowledgements (``alerts``). A run of records,
the file's new position and the alerts they made are committed together, so a floor killed
at any moment restarts where its index says, with nothing lost and nothing twice.

All the logic is :class:`SqlIndex`, written once in the SQL both databases speak
(``ON CONFLICT``, ``RETURNING``); a backend supplies only the transport: its connection,
its transactions, how a batch of records goes in (``executemany`` into SQLite, a
``COPY`` into PostgreSQL, streamed ahead of the commit while the floor checks the next
run) and its schema, as versioned plain SQL files
(``floor/migrations/<backend>/NNNN_name.sql``, applied in order on open and recorded in
``schema_version``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import os
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.audit.files import parse_log_name
from controller.audit.witness import Checkpoint
from floor.alerts import Alert, AlertDraft

#: the versioned schema steps, one directory per backend
MIGRATIONS = Path(__file__).with_name("migrations")

class StoreError(Exception):
    """The index cannot be opened (bad URL, unreadable file): a clear message, exit 2."""


def sqlite_path(url: str) -> str:
    """``sqlite:///abs/path`` or ``sqlite:relative`` → the file path (``:memory:`` too)."""
    if url.startswith("sqlite:///"):
        return url[len("sqlite://"):]
    if url.startswith("sqlite:"):
        return url[len("sqlite:"):]
    raise StoreError(f"--db {url!r}: use sqlite:///PATH or postgresql://…")


class HeldError(StoreError):
    """Another process holds what :meth:`SqlIndex.hold` asked for."""


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


@dataclass(frozen=True)
class RunCommit:
    """One run of a file's records for the index, with what commits with it: the file's
    new position, the alerts the run made and the checkpoints signed for it. ``pos`` is the
    run's own copy (the floor reads on while the run waits for its commit)."""

    pos: FilePosition
    rows: list[tuple[int, str, bytes]]  # (seq, hash, the record's line without its newline)
    drafts: list[AlertDraft]
    checkpoints: Sequence[Checkpoint] = ()


def live_file_key(file: str) -> str:
    """A log file's place in its table's chain as text that sorts as the files do (date,
    then part; a name that is no log name first)."""
    parsed = parse_log_name(file)
    return f"{parsed.date.isoformat()}.{parsed.part:06d}" if parsed else "0000"


#: a table's live state is replaced by a later file's, or the same file's at a later seq
#: (a NULL key: a row written before the key was kept)
LIVE_NEWER = ("(table_state.file_key IS NULL OR table_state.file_key < excluded.file_key "
              "OR (table_state.file_key = excluded.file_key "
              "AND table_state.seq <= excluded.seq))")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations(backend: str) -> list[Migration]:
    """The backend's schema steps, in order: ``NNNN_name.sql`` under its directory."""
    out = []
    for path in sorted((MIGRATIONS / backend).glob("*.sql")):
        number, _, name = path.stem.partition("_")
        out.append(Migration(int(number), name, path.read_text(encoding="utf-8")))
    return out


SCHEMA_VERSION = ("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                  "name TEXT NOT NULL, applied_at TEXT NOT NULL)")
POSITION_COLUMNS = 'table_id, file, path, "offset", seq, hash, mac, chain, broken'
CHECKPOINT_COLUMNS = "table_id, file, seq, hash, ts, key, sig"
ALERT_COLUMNS = ("id, table_id, file, seq, code, severity, message, rule, ts, acked_by, "
                 "acked_at, note")
#: a statement's rows, read when asked (:meth:`SqlIndex._later`)
Rows = Callable[[], list[tuple[Any, ...]]]
#: a table's live state as :meth:`SqlIndex.save_live` takes it: table, file, seq, ts, the
#: summary (JSON), the rounds touched (shoe, round, start seq, end seq, ts, result)
LiveRow = tuple[str, str, int, str | None, bytes,
                Sequence[tuple[int, int, int, int | None, str, str | None]]]


class SqlIndex(ABC):
    """The floor's index, past the transport: every query is here, once.

    A backend sets :attr:`param` (its placeholder) and implements :meth:`_run`,
    :meth:`_transaction`, :meth:`_insert_records`, :meth:`_read` and :meth:`_migrate`.
    """

    param = "?"
    backend = ""

    def __init__(self) -> None:
        self.lock = threading.RLock()

    # ------------------------------------------------------------------ the transport

    @abstractmethod
    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement on the writing connection; its rows (none for a plain write)."""

    @abstractmethod
    def _transaction(self) -> contextlib.AbstractContextManager[None]:
        """(each backend)"""

    @abstractmethod
    def _insert_records(self, pos: FilePosition, rows: list[tuple[int, str, bytes]]) -> None:
        """(each backend)"""

    @abstractmethod
    def _read(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """A query from another thread (the web's round look-ups) while the follower writes."""

    @abstractmethod
    def close(self) -> None:
        """(each backend)"""

    def q(self, sql: str) -> str:
        return sql if self.param == "?" else sql.replace("?", self.param)

    def _apply_migrations(self, applied: set[int]) -> list[Migration]:
        return [m for m in migrations(self.backend) if m.version not in applied]

    def _record_migration(self, m: Migration) -> None:
        self._run(self.q("INSERT INTO schema_version (version, name, applied_at) "
                         "VALUES (?, ?, ?)"),
                  (m.version, m.name, dt.datetime.now(dt.UTC).isoformat()))

    def schema_version(self) -> int:
        with self.lock:
            rows = self._run("SELECT max(version) FROM schema_version")
        return int(rows[0][0] or 0)

    # ------------------------------------------------------------------ reading back

    def positions(self) -> list[FilePosition]:
        with self.lock:
            rows = self._run(f"SELECT {POSITION_COLUMNS} FROM log_files")
        return [FilePosition(*row) for row in rows]

    def alerts(self) -> list[Alert]:
        with self.lock:
            rows = self._run(f"SELECT {ALERT_COLUMNS} FROM alerts ORDER BY id")
        return [Alert(*row) for row in rows]

    def records(self, table: str, files: Iterable[str] | None = None
                ) -> Iterator[tuple[str, bytes]]:
        """(file, record line) of a table, each file in seq order."""
        names = list(files) if files is not None else [r[0] for r in self._read(
            self.q("SELECT DISTINCT file FROM audit_records WHERE table_id = ?"), (table,))]
        for name in names:
            for (line,) in self._read(self.q(
                    f"SELECT {self.record_text} FROM audit_records WHERE table_id = ? "
                    "AND file = ? ORDER BY seq"), (table, name)):
                yield name, line if isinstance(line, bytes) else line.encode()

    record_text = "record"

    def checkpoints(self, table: str | None = None) -> list[Checkpoint]:
        """The witness checkpoints signed so far (of one table, or all), by table, file and
        seq; readable from the web thread while the follower writes."""
        where = " WHERE table_id = ?" if table is not None else ""
        rows = self._read(self.q(f"SELECT {CHECKPOINT_COLUMNS} FROM witness_checkpoints"
                                 f"{where} ORDER BY table_id, file, seq"),
                          (table,) if table is not None else ())
        return [Checkpoint(str(t), str(f), int(s), str(h), str(ts), str(k), str(sig), n)
                for n, (t, f, s, h, ts, k, sig) in enumerate(rows, start=1)]

    def files_of(self, table: str) -> list[str]:
        with self.lock:
            return [r[0] for r in self._run(
                self.q("SELECT file FROM log_files WHERE table_id = ?"), (table,))]

    def stats(self) -> dict[str, Any]:
        with self.lock:
            ((n,),) = self._run("SELECT count(*) FROM audit_records")
        return {"records": int(n)}

    # ------------------------------------------------------------------ shared by floors

    @abstractmethod
    def hold(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Hold ``name`` (one file's repair) against every other process using this index,
        for the block; raises :class:`HeldError` at once when another holds it. PostgreSQL
        holds it on the server (a session advisory lock), SQLite on a lock file beside the
        database (``flock``); either is released however the holder ends."""


    #: True when several floor processes may write this index at once (PostgreSQL): a
    #: floor then takes each table's chain head from here, not from its memory alone
    shared = False

    def positions_of(self, table: str) -> list[FilePosition]:
        """A table's files as the index holds them (what every floor committed; read on
        the reading connection: a group being streamed is left alone)."""
        rows = self._read(self.q(f"SELECT {POSITION_COLUMNS} FROM log_files "
                                 "WHERE table_id = ?"), (table,))
        return [FilePosition(*row) for row in rows]

    def records_between(self, table: str, file: str, after: int, upto: int) -> list[bytes]:
        """The record lines of a file with ``after < seq <= upto``, in seq order (what
        another floor committed since this one last looked)."""
        rows = self._read(self.q(
            f"SELECT {self.record_text} FROM audit_records WHERE table_id = ? AND "
            "file = ? AND seq > ? AND seq <= ? ORDER BY seq"), (table, file, after, upto))
        return [r[0] if isinstance(r[0], bytes) else r[0].encode() for r in rows]

    def alerts_of(self, table: str | None = None) -> list[Alert]:
        """The alerts (one table's, or all) with their acknowledgements, as committed by any
        floor."""
        where = " WHERE table_id = ?" if table is not None else ""
        rows = self._read(self.q(f"SELECT {ALERT_COLUMNS} FROM alerts{where} ORDER BY id"),
                          (table,) if table is not None else ())
        return [Alert(*row) for row in rows]

    def save_live(self, table: str, file: str, seq: int, ts: str | None, summary: bytes,
                  rounds: Sequence[tuple[int, int, int, int | None, str, str | None]]) -> None:
        """A table's live state (``summary``: the ``/api/tables`` row, JSON) and the rounds
        its last runs touched (shoe, round, start seq, end seq, ts, the round note's text),
        for any floor process to serve; written just after the runs' commit."""
        with self.lock, self._transaction():
            self._run(self.q(
                "INSERT INTO table_state (table_id, file, seq, ts, summary, file_key) VALUES "
                "(?, ?, ?, ?, ?, ?) ON CONFLICT (table_id) DO UPDATE SET file = excluded.file, "
                "seq = excluded.seq, ts = excluded.ts, summary = excluded.summary, "
                f"file_key = excluded.file_key WHERE {LIVE_NEWER}"),
                (table, file, seq, ts, summary.decode(), live_file_key(file)))
            for r in rounds:
                self._run(self.q(
                    "INSERT INTO rounds (table_id, file, shoe, round, start_seq, end_seq, ts, "
                    "result) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (table_id, file, "
                    "shoe, round) DO UPDATE SET end_seq = coalesce(excluded.end_seq, "
                    "rounds.end_seq), result = coalesce(excluded.result, rounds.result)"),
                    (table, file, *r))  # a round once ended stays ended (a slower floor)

    def save_lives(self, rows: Sequence[LiveRow]) -> None:
        """Several :meth:`save_live` at once, as a commit leaves them (PostgreSQL: one round
        trip, :meth:`_batched`). A failure leaves the rest unsaved too: the live state is
        derived from the committed records, and the table's next run writes it again."""
        with self.lock, self._batched():
            for row in rows:
                self.save_live(*row)

    def live_state(self, table: str | None = None) -> list[tuple[str, str, int, dict[str, Any]]]:
        """(table, file, seq, summary) of every table (or one) as the floors committed it."""
        import orjson

        where = " WHERE table_id = ?" if table is not None else ""
        rows = self._read(self.q(f"SELECT table_id, file, seq, {self.json_text} FROM "
                                 f"table_state{where} ORDER BY table_id"),
                          (table,) if table is not None else ())
        return [(str(t), str(f), int(s), orjson.loads(j)) for t, f, s, j in rows]

    json_text = "summary"

    def rounds_of(self, table: str, shoe: int | None = None, round_: int | None = None
                  ) -> list[tuple[str, int, int, int, int | None, str | None]]:
        """(file, shoe, round, start seq, end seq, result) of a table's rounds, in order."""
        sql = ("SELECT file, shoe, round, start_seq, end_seq, result FROM rounds "
               "WHERE table_id = ?")
        params: list[Any] = [table]
        if shoe is not None:
            sql, params = sql + " AND shoe = ?", [*params, shoe]
        if round_ is not None:
            sql, params = sql + " AND round = ?", [*params, round_]
        rows = self._read(self.q(sql + " ORDER BY file, start_seq"), params)
        return [(str(f), int(sh), int(r), int(a), None if b is None else int(b),
                 None if t is None else str(t)) for f, sh, r, a, b, t in rows]

    # ------------------------------------------------------------------ writing

    def commit_run(self, pos: FilePosition, rows: list[tuple[int, str, bytes]],
                   drafts: list[AlertDraft], checkpoints: Sequence[Checkpoint] = ()
                   ) -> list[Alert]:
        """One run of records (seq, hash, line) of one file, its new position, the alerts
        they made and the witness checkpoints signed for it, in one transaction. Returns the
        alerts that are new (not already known)."""
        return self.commit_runs([RunCommit(pos, rows, drafts, tuple(checkpoints))])[0]

    def commit_runs(self, runs: Sequence[RunCommit]) -> list[list[Alert]]:
        """Several runs (of any files) in one transaction, each as :meth:`commit_run`; the
        new alerts of each run, in order. Rows sent ahead by :meth:`stage` are not sent
        again."""
        with self.lock, self._transaction():
            self._insert_runs([run for run in runs if run.rows])
            pending = []
            with self._batched():  # PostgreSQL: every statement below in one round trip
                for run in runs:
                    pending.append(self._send_run(run))
            return [self._alerts_made(alerts) for alerts in pending]

    def _send_run(self, run: RunCommit) -> list[tuple[AlertDraft, Rows]]:
        """A run's checkpoints and position sent, and its alerts: each draft with its
        statement's rows (read after the batch)."""
        pos = run.pos
        for cp in run.checkpoints:
            self._later(self.q(
                f"INSERT INTO witness_checkpoints ({CHECKPOINT_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"),
                (cp.table, cp.file, cp.seq, cp.hash, cp.ts, cp.key, cp.sig))
        self._later(self.q(
            f"INSERT INTO log_files ({POSITION_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            'ON CONFLICT (table_id, file) DO UPDATE SET path = excluded.path, '
            '"offset" = excluded."offset", seq = excluded.seq, hash = excluded.hash, '
            "mac = excluded.mac, chain = excluded.chain, broken = excluded.broken "
            # several floors: one that took a shorter run of the same records (a
            # redelivery raced) never moves the head back
            "WHERE log_files.seq <= excluded.seq"),
            (pos.table, pos.file, pos.path, pos.offset, pos.seq, pos.hash, pos.mac,
             pos.chain, pos.broken))
        return self._alerts_sent(run.drafts)

    def stage(self, run: RunCommit) -> None:
        """Send a run's records to the database ahead of its :meth:`commit_runs`, where a
        backend can take them while the floor checks the next run (PostgreSQL streams them
        into an open ``COPY``); nothing is committed before ``commit_runs``. Default:
        nothing (SQLite works in the floor's own thread: there is nothing to overlap)."""
        return None

    def _insert_runs(self, runs: list[RunCommit]) -> None:
        for run in runs:
            self._insert_records(run.pos, run.rows)

    def add_alerts(self, drafts: list[AlertDraft]) -> list[Alert]:
        with self.lock, self._transaction():
            return self._insert_alerts(drafts)

    def _insert_alerts(self, drafts: list[AlertDraft]) -> list[Alert]:
        return self._alerts_made(self._alerts_sent(drafts))

    def _alerts_sent(self, drafts: list[AlertDraft]) -> list[tuple[AlertDraft, Rows]]:
        return [(d, self._later(self.q(
            "INSERT INTO alerts (table_id, file, seq, code, severity, message, rule, ts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (table_id, file, seq, code) DO NOTHING RETURNING id"),
            (d.table, d.file, d.seq, d.code, d.severity, d.message, d.rule, d.ts)))
            for d in drafts]

    @staticmethod
    def _alerts_made(sent: list[tuple[AlertDraft, Rows]]) -> list[Alert]:
        """The alerts that are new (an alert the index held already returns no id)."""
        made = []
        for d, rows in sent:
            got = rows()
            if got:
                made.append(Alert(int(got[0][0]), d.table, d.file, d.seq, d.code,
                                  d.severity, d.message, d.rule, d.ts))
        return made

    def _batched(self) -> contextlib.AbstractContextManager[None]:
        """Statements sent with :meth:`_later` in this block may go to the server
        together: their rows are read after it. Default: each runs at once."""
        return contextlib.nullcontext()

    def _later(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        """One statement on the writing connection, its rows read when asked (after the
        :meth:`_batched` block it was sent in). Default: :meth:`_run`, at once."""
        rows = self._run(sql, params)
        return lambda: rows

    def ack(self, alert_id: int, by: str, at: str, note: str) -> bool:
        """False when the alert was acknowledged already (by another floor process)."""
        with self.lock:
            return bool(self._run(self.q(
                "UPDATE alerts SET acked_by = ?, acked_at = ?, note = ? "
                "WHERE id = ? AND acked_by IS NULL RETURNING id"), (by, at, note, alert_id)))

    def mark_broken(self, table: str, file: str, why: str) -> None:
        with self.lock:
            self._run(self.q("UPDATE log_files SET broken = ? WHERE table_id = ? AND file = ?"),
                      (why, table, file))


class FloorStore(SqlIndex):
    """SQLite (stdlib ``sqlite3``), WAL: the web thread reads while the follower writes."""

    backend = "sqlite"

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute(SCHEMA_VERSION)
            applied = {r[0] for r in self.db.execute("SELECT version FROM schema_version")}
            for m in self._apply_migrations(applied):
                with self._transaction():
                    for statement in m.sql.split(";"):
                        if statement.strip():
                            self.db.execute(statement)
                    self._record_migration(m)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the floor's index {path}: {exc}") from None

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.db.execute(sql, params)
        return cur.fetchall() if cur.description is not None else []

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _insert_records(self, pos: FilePosition, rows: list[tuple[int, str, bytes]]) -> None:
        self.db.executemany(
            "INSERT OR IGNORE INTO audit_records (table_id, file, seq, hash, record) "
            "VALUES (?, ?, ?, ?, ?)",
            [(pos.table, pos.file, seq, h, line) for seq, h, line in rows])

    @contextlib.contextmanager
    def hold(self, name: str) -> Iterator[None]:
        if self.path == ":memory:":  # (one process: the index dies with it)
            yield
            return
        key = hashlib.sha256(name.encode()).hexdigest()[:16]
        lock = Path(f"{self.path}.{key}.lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o640)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise HeldError(f"{name}: under way in another process ({lock} is held)"
                                ) from None
            yield
        finally:
            os.close(fd)  # (releases the flock)

    def _read(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        if self.path == ":memory:":
            with self.lock:
                return self.db.execute(sql, params).fetchall()
        db = sqlite3.connect(self.path)
        try:
            return db.execute(sql, params).fetchall()
        finally:
            db.close()

    def close(self) -> None:
        with self.lock:
            self.db.close()


#: Records go in by ``COPY`` (text format: each row's line is the record's own bytes, only
#: backslashes doubled; no per-value work in Python), straight into ``audit_records`` under
#: a savepoint (the backlog's case: no row there yet), or, when a row is already there (a
#: redelivery, another floor), again into this per-connection scratch table (emptied at
#: every commit) and on by ``INSERT … SELECT … ON CONFLICT DO NOTHING``: ``COPY`` has no
#: conflict clause, and the row stored first must stay.
STAGING_TABLE = ("CREATE TEMP TABLE IF NOT EXISTS audit_staging (table_id text, file text, "
                 "seq bigint, hash text, record jsonb) ON COMMIT DELETE ROWS")
DIRECT_COPY = b"COPY audit_records (table_id, file, seq, hash, record) FROM STDIN"
STAGING_COPY = b"COPY audit_staging (table_id, file, seq, hash, record) FROM STDIN"
STAGED_INSERT = (b"INSERT INTO audit_records (table_id, file, seq, hash, record) "
                 b"SELECT table_id, file, seq, hash, record FROM audit_staging "
                 b"ON CONFLICT DO NOTHING")


def copy_rows(run: RunCommit) -> bytes:
    """A run's rows in ``COPY``'s text format. A record line is canonical JSON: no tab, no
    newline, no carriage return in it (inside a string they are escapes), so doubling its
    backslashes is all the escaping it needs; table ids and file names hold none."""
    key = f"{run.pos.table}\t{run.pos.file}\t".encode()
    return b"".join([b"%s%d\t%s\t%s\n" % (key, seq, h.encode(), line)
                     for seq, h, line in run.rows]).replace(b"\\", b"\\\\")


class _Stream:
    """A group of runs being sent ahead (:meth:`PostgresStore.stage`): its transaction on
    the stream connection, the ``COPY`` open in it and what that ``COPY`` carries."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.thread = threading.get_ident()
        self.copy_cm: Any = None  # the open COPY's context manager, and the COPY
        self.copy: Any = None
        self.payloads: list[bytes] = []  # what the open COPY carries (to stage again)
        self.sent: set[int] = set()  # id() of the rows lists sent ahead


#: the first key of :meth:`PostgresStore.hold`'s advisory locks (the migrations' lock is
#: the one-key 7301203)
HOLD_CLASS = 7301204


class PostgresStore(SqlIndex):
    """PostgreSQL (psycopg 3): the database floor's index, shared by every floor process.

    ``record`` is ``jsonb`` (the issue's schema): the floor folds it back parsed, never
    re-verifies its bytes from the database (the chain is checked before the row is
    written, and ``hash`` keeps the table's hash of it). A run of records goes in by one
    ``COPY`` (see :data:`DIRECT_COPY`): the ``unnest`` of text arrays it replaced spent
    three quarters of a backlog's time escaping the arrays in Python.

    A group of runs (the floor's :meth:`~floor.core.Floor.pipelined`) is streamed into one
    ``COPY`` on a connection of its own as each run is checked (:meth:`stage`), so the
    server parses and indexes run *k* on the other core while the floor checks run *k + 1*;
    :meth:`commit_runs` ends the ``COPY`` and commits the group, positions and alerts with
    it. While a thread streams, whatever else it writes joins the group's transaction; other
    threads (an acknowledgement from the web) write on the main connection as always.
    """

    backend = "postgresql"
    param = "%s"
    record_text = "record::text"
    shared = True
    json_text = "summary::text"

    def save_live(self, table: str, file: str, seq: int, ts: str | None, summary: bytes,
                  rounds: Sequence[tuple[int, int, int, int | None, str, str | None]]) -> None:
        """One statement, one round trip (the rounds as arrays), on the main connection."""
        with self.lock:
            self.db.execute(
                b"WITH state AS (INSERT INTO table_state (table_id, file, seq, ts, summary, "
                b"file_key) VALUES (%s, %s, %s, %s, %s::jsonb, %s) ON CONFLICT (table_id) DO "
                b"UPDATE SET file = excluded.file, seq = excluded.seq, ts = excluded.ts, "
                b"summary = excluded.summary, file_key = excluded.file_key WHERE "
                + LIVE_NEWER.encode() + b") "
                b"INSERT INTO rounds (table_id, file, shoe, round, start_seq, end_seq, ts, "
                b"result) SELECT %s, %s, sh, r, a, b, t, x FROM unnest(%s::int[], %s::int[], "
                b"%s::bigint[], %s::bigint[], %s::text[], %s::text[]) AS u(sh, r, a, b, t, x) "
                b"ON CONFLICT (table_id, file, shoe, round) DO UPDATE SET "
                b"end_seq = coalesce(excluded.end_seq, rounds.end_seq), "
                b"result = coalesce(excluded.result, rounds.result)",
                (table, file, seq, ts, summary.decode(), live_file_key(file), table, file,
                 *([list(col) for col in zip(*rounds, strict=True)] if rounds
                   else [[]] * 6)))

    def __init__(self, url: str) -> None:
        super().__init__()
        import psycopg

        self.url = url
        self._stream_db: Any = None  # the connection groups are streamed on (made on use)
        self._stream: _Stream | None = None
        try:
            self.db = psycopg.connect(url, autocommit=True)
            with self.db.transaction():
                # several floors may start at once: one applies the migrations, the others wait
                self.db.execute("SELECT pg_advisory_xact_lock(7301203)")
                self.db.execute(SCHEMA_VERSION)
                applied = {r[0] for r in self.db.execute("SELECT version FROM schema_version")}
                for m in self._apply_migrations(applied):
                    self.db.execute(m.sql.encode())
                    self._record_migration(m)
            self.db.execute(STAGING_TABLE)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open the floor's database {redact(url)}: "
                             f"{str(exc).strip()}") from None
        self._reader: Any = None
        self._read_lock = threading.Lock()

    def _streaming_here(self) -> _Stream | None:
        s = self._stream
        return s if s is not None and s.thread == threading.get_ident() else None

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        s = self._streaming_here()
        if s is not None:
            self._end_copy(s)  # the statement joins the group's transaction
        cur = (s.conn if s is not None else self.db).execute(sql.encode(), params)
        return cur.fetchall() if cur.description is not None else []

    @contextlib.contextmanager
    def _batched(self) -> Iterator[None]:
        """psycopg's pipeline mode: the statements go out without waiting for each one's
        result, and the block ends on one round trip. A commit of runs from 40 tables at
        once was 80 statements, each a round trip to a server that shares two busy cores
        with the tables' broker: 40–60 ms, the records behind them waiting (the floor's
        alert latency). A failed statement fails the block, as it failed the transaction."""
        s = self._streaming_here()
        if s is not None:
            self._end_copy(s)  # the statements join the group's transaction
        with (s.conn if s is not None else self.db).pipeline():
            yield

    def _later(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        s = self._streaming_here()
        if s is not None:
            self._end_copy(s)  # (ended already in a _batched block)
        cur = (s.conn if s is not None else self.db).execute(sql.encode(), params)
        return lambda: cur.fetchall() if cur.description is not None else []

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        if self._streaming_here() is not None:
            yield  # inside the group's transaction: commit_runs commits it
            return
        with self.db.transaction():
            yield

    # ------------------------------------------------------------------ records in

    def stage(self, run: RunCommit) -> None:
        if not run.rows:
            return
        import psycopg

        with self.lock:
            s = self._streaming_here()
            if s is None:
                if self._stream is not None:
                    raise RuntimeError("the floor's index: two threads stream at once")
                if self._stream_db is None or self._stream_db.closed:
                    self._stream_db = psycopg.connect(self.url, autocommit=True)
                    self._stream_db.execute(STAGING_TABLE)
                self._stream_db.execute("BEGIN")
                s = self._stream = _Stream(self._stream_db)
            try:
                self._send(s, copy_rows(run))
            except BaseException:
                self._abort(s)
                raise
            s.sent.add(id(run.rows))

    def commit_runs(self, runs: Sequence[RunCommit]) -> list[list[Alert]]:
        with self.lock:
            s = self._streaming_here()
            if s is None:
                return super().commit_runs(runs)
            try:
                made = super().commit_runs(runs)
                self._end_copy(s)
                s.conn.execute("COMMIT")
            except BaseException:
                self._abort(s)
                raise
            self._stream = None
            return made

    def _insert_runs(self, runs: list[RunCommit]) -> None:
        s = self._streaming_here()
        if s is not None:
            rest = [run for run in runs if id(run.rows) not in s.sent]
            if rest:
                self._send(s, b"".join(copy_rows(run) for run in rest))
            self._end_copy(s)
            return
        if runs:  # not sent ahead: one COPY now, in the transaction commit_runs opened
            s = _Stream(self.db)
            try:
                self._send(s, b"".join(copy_rows(run) for run in runs))
                self._end_copy(s)
            except BaseException:
                self._abort(s)  # the COPY ended; commit_runs' transaction rolls back
                raise

    def _send(self, s: _Stream, payload: bytes) -> None:
        if s.copy is None:
            s.conn.execute("SAVEPOINT audit_copy")
            s.copy_cm = s.conn.cursor().copy(DIRECT_COPY)
            s.copy = s.copy_cm.__enter__()
        s.copy.write(payload)
        s.payloads.append(payload)

    def _end_copy(self, s: _Stream) -> None:
        """The open ``COPY`` done: its rows are in the transaction (not committed). When a
        row was there already, the savepoint goes back and the same rows go in through the
        scratch table, the stored ones left as they are."""
        import psycopg

        if s.copy is None:
            return
        cm, s.copy, s.copy_cm = s.copy_cm, None, None
        payloads, s.payloads = s.payloads, []
        try:
            cm.__exit__(None, None, None)
        except psycopg.errors.UniqueViolation:
            s.conn.execute("ROLLBACK TO SAVEPOINT audit_copy")
            with s.conn.cursor() as cur:
                with cur.copy(STAGING_COPY) as copy:
                    for payload in payloads:
                        copy.write(payload)
                cur.execute(STAGED_INSERT)
        s.conn.execute("RELEASE SAVEPOINT audit_copy")

    def _abort(self, s: _Stream) -> None:
        """A failed group: nothing of it stays (its transaction rolled back, or the
        connection dropped for a new one at the next group)."""
        import psycopg

        if self._stream is s:
            self._stream = None
        try:
            if s.copy is not None:
                s.copy_cm.__exit__(RuntimeError, RuntimeError("aborted"), None)
            s.copy = s.copy_cm = None
            if s.conn is not self.db:
                s.conn.execute("ROLLBACK")
        except psycopg.Error:
            s.conn.close()

    def _insert_records(self, pos: FilePosition, rows: list[tuple[int, str, bytes]]) -> None:
        self._insert_runs([RunCommit(pos, rows, [])])

    def _read(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        import psycopg

        with self._read_lock:
            if self._reader is None or self._reader.closed:
                self._reader = psycopg.connect(self.url, autocommit=True)
            return list(self._reader.execute(sql.encode(), params).fetchall())

    @contextlib.contextmanager
    def hold(self, name: str) -> Iterator[None]:
        """A session advisory lock on the main connection (the class's key and a hash of
        ``name``: :data:`HOLD_CLASS`): the server drops it when the holder's session ends."""
        with self.lock:
            ((got,),) = self.db.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                                        (HOLD_CLASS, name)).fetchall()
        if not got:
            raise HeldError(f"{name}: under way in another process (the database "
                            f"{redact(self.url)} holds its lock)")
        try:
            yield
        finally:
            with self.lock:
                if not self.db.closed:
                    self.db.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))",
                                    (HOLD_CLASS, name))

    def close(self) -> None:
        with self.lock:
            self.db.close()
            if self._stream_db is not None:
                self._stream_db.close()
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()


def redact(url: str) -> str:
    """A database URL without its password (for messages)."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        cred, host = rest.rsplit("@", 1)
        return f"{scheme}://{cred.split(':', 1)[0]}@{host}"
    return url


def open_store(url: str) -> SqlIndex:
    """``--db``: ``sqlite:///PATH`` or ``postgresql://…`` (``postgres://`` too)."""
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url)
    return FloorStore(sqlite_path(url))
